// Package cluster starts a real, local Kubernetes control plane on the
// loopback interface for end-to-end tests.
//
// It runs prebuilt binaries (etcd, kube-apiserver and, for workloads,
// kube-controller-manager, kube-scheduler and kwok) found in a bin
// directory. Every process writes its log to <WorkDir>/<name>.log and is
// started in its own process group with a parent-death signal, so nothing
// outlives the process that started it.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// BinDirEnv is the environment variable that names the directory holding
// the control-plane binaries when Options.BinDir is empty.
const BinDirEnv = "SHARDKEEPER_BIN_DIR"

// AdminUser is the name of the user that Config authenticates as; it is a
// member of the system:masters group.
const AdminUser = "shardkeeper-admin"

// Timeouts of the start-up phases. They only bound the wait: a process that
// dies early fails the start at once.
const (
	etcdReadyTimeout      = 60 * time.Second
	apiServerReadyTimeout = 120 * time.Second
	workloadsReadyTimeout = 120 * time.Second
	pollInterval          = 200 * time.Millisecond
)

// Options configures Start.
type Options struct {
	// BinDir is the directory holding etcd, kube-apiserver,
	// kube-controller-manager, kube-scheduler, kwok and kwok-stages/.
	// Empty means the value of $SHARDKEEPER_BIN_DIR.
	BinDir string
	// WorkDir holds etcd data, certificates, logs and kubeconfigs. Empty
	// means a new temporary directory, removed again by Stop.
	WorkDir string
	// Workloads also starts kube-controller-manager, kube-scheduler and
	// kwok with one fake Node, so that Deployments get Pods that become
	// Ready.
	Workloads bool
	// Users are more users, besides AdminUser, that get a static bearer
	// token of their own and, like the admin, the group system:masters. A
	// client that must be told apart from the others in the audit log (the
	// benchmark's daemon, say) authenticates as one of them: UserConfig.
	// Names must be unique, not AdminUser, and hold no comma, quote or
	// newline (the token file is CSV).
	Users []string
	// AuditPolicy, if set, is an audit policy (audit.k8s.io/v1 Policy, in
	// YAML) for kube-apiserver, which then writes the events it selects,
	// one JSON object a line and never rotated, to AuditLogPath. It is how
	// a test or the benchmark counts one client's requests:
	// apiserver_request_total has no label naming the client.
	AuditPolicy []byte
	// Profiling serves /debug/pprof on kube-apiserver (--profiling), off
	// otherwise, for the benchmark's CollectAPIServerGarbage and for a look
	// at where the API server's time goes.
	Profiling bool
	// FrontProxy gives kube-apiserver a front-proxy CA and client
	// certificate (the --requestheader-* and --proxy-client-* flags), so
	// that it can proxy to aggregated API servers, as Rancher's is.
	FrontProxy bool
	// Logf, if set, receives progress messages.
	Logf func(format string, args ...any)
}

// Cluster is a running local control plane. Its methods are safe for
// concurrent use.
type Cluster struct {
	binDir     string
	workDir    string
	ownWorkDir bool
	workloads  bool
	logf       func(format string, args ...any)
	users      []string
	// auditPolicy is Options.AuditPolicy; auditLogPath is empty without it.
	auditPolicy  []byte
	auditLogPath string
	profiling    bool
	frontProxy   bool

	adminToken     string
	apiServerPort  int
	host           string
	caData         []byte
	kubeconfigPath string
	cfg            *rest.Config
	// userTokens are the bearer tokens of Options.Users, by name.
	userTokens map[string]string

	mu      sync.Mutex
	procs   []*process
	stopped bool
	stopErr error
}

// Start starts etcd and kube-apiserver (and, with opts.Workloads, the
// components that run workloads) and returns once the API server is ready.
// With Workloads it also waits until the fake Node is Ready and untainted
// and the default ServiceAccount exists in the default namespace. ctx bounds
// the start-up only; the processes keep running until Stop. On error
// everything that was started is stopped again; a temporary work directory
// is then kept, with the logs, and named in the error.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(opts)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := c.start(ctx); err != nil {
		if c.ownWorkDir {
			// Keep the logs for a look at what went wrong.
			c.ownWorkDir = false
			err = fmt.Errorf("%w (work directory %s kept)", err, c.workDir)
		}
		if stopErr := c.Stop(); stopErr != nil {
			return nil, errors.Join(err, fmt.Errorf("stop after failed start: %w", stopErr))
		}
		return nil, err
	}
	c.logf("cluster: ready in %s (api server %s, work dir %s)", time.Since(began).Round(time.Millisecond), c.host, c.workDir)
	return c, nil
}

// newCluster checks opts and prepares the work directory; it starts
// nothing, so that a bad option fails before any process runs.
func newCluster(opts Options) (*Cluster, error) {
	c := &Cluster{workloads: opts.Workloads, logf: opts.Logf, auditPolicy: opts.AuditPolicy, profiling: opts.Profiling, frontProxy: opts.FrontProxy}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if err := checkUsers(opts.Users); err != nil {
		return nil, err
	}
	c.users = append([]string(nil), opts.Users...)

	binDir, err := findBinDir(opts.BinDir, opts.Workloads)
	if err != nil {
		return nil, err
	}
	c.binDir = binDir
	if c.workDir, c.ownWorkDir, err = makeWorkDir(opts.WorkDir); err != nil {
		return nil, err
	}
	if len(c.auditPolicy) > 0 {
		c.auditLogPath = filepath.Join(c.workDir, "audit.log")
	}
	return c, nil
}

// findBinDir returns the absolute path of the bin directory, dir or else
// $SHARDKEEPER_BIN_DIR, once it holds every binary the cluster runs (and,
// with workloads, kwok's stage files): a missing one then fails Start at
// once, not after etcd has started.
func findBinDir(dir string, workloads bool) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinDirEnv)
	}
	if dir == "" {
		return "", fmt.Errorf("no bin directory: set Options.BinDir or $%s", BinDirEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve bin directory %q: %w", dir, err)
	}
	needed := []string{"etcd", "kube-apiserver"}
	if workloads {
		needed = append(needed, "kube-controller-manager", "kube-scheduler", "kwok")
	}
	for _, name := range needed {
		st, err := os.Stat(filepath.Join(abs, name)) //nolint:gosec // G703: the caller's own bin directory, by design
		if err != nil {
			return "", fmt.Errorf("binary %s: %w", name, err)
		}
		if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("binary %s in %s is not an executable file", name, abs)
		}
	}
	if workloads {
		if _, err := kwokStageFiles(abs); err != nil {
			return "", err
		}
	}
	return abs, nil
}

// makeWorkDir returns the absolute path of the work directory dir, created
// if need be, or of a new temporary directory if dir is empty; own says
// that the directory is the cluster's, for Stop to remove.
func makeWorkDir(dir string) (path string, own bool, err error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "shardkeeper-cluster-")
		if err != nil {
			return "", false, fmt.Errorf("create work directory: %w", err)
		}
		return tmp, true, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("resolve work directory %q: %w", dir, err)
	}
	// The work directory holds the admin token and the service-account
	// key: no one outside the user's group may look in.
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return "", false, fmt.Errorf("create work directory: %w", err)
	}
	return abs, false, nil
}

// checkUsers rejects the Options.Users that cannot stand in the static token
// file: an empty name, AdminUser, a repeated name, a comma, quote or
// newline.
func checkUsers(users []string) error {
	seen := map[string]bool{AdminUser: true}
	for _, u := range users {
		if u == "" || strings.ContainsAny(u, ",\"\n") {
			return fmt.Errorf("user name %q: empty, or with a comma, quote or newline", u)
		}
		if seen[u] {
			return fmt.Errorf("user name %q: taken", u)
		}
		seen[u] = true
	}
	return nil
}

// start brings the processes up, in order: etcd, then kube-apiserver on
// top of it, then (with workloads) the components that need the API
// server's certificate and the admin kubeconfig.
func (c *Cluster) start(ctx context.Context) error {
	// Etcd client and peer, API server, and with workloads
	// controller-manager, scheduler and kwok.
	ports, err := freePorts(ctx, 6)
	if err != nil {
		return err
	}
	etcdPort, peerPort := ports[0], ports[1]
	c.apiServerPort = ports[2]
	c.host = "https://127.0.0.1:" + strconv.Itoa(c.apiServerPort)

	files, err := c.writeCredentials()
	if err != nil {
		return err
	}
	etcdURL, err := c.startEtcd(ctx, etcdPort, peerPort)
	if err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, etcdURL, files); err != nil {
		return err
	}
	if err := c.loadAdminConfig(files.certDir); err != nil {
		return err
	}

	if c.workloads {
		if err := c.startWorkloads(ctx, files.saKey, files.certDir, ports[3], ports[4], ports[5]); err != nil {
			return err
		}
	}
	return nil
}

// credentialFiles are the paths, under the work directory, of what the API
// server and the controller-manager authenticate with.
type credentialFiles struct {
	// tokenFile is the API server's static token file with the admin token.
	tokenFile string
	// saKey is the RSA key that signs and verifies service-account tokens.
	saKey string
	// certDir is where the API server writes its self-signed serving
	// certificate.
	certDir string
}

// writeCredentials makes the admin token and the service-account key and
// writes them, and creates the certificate directory, before any process
// starts: kube-apiserver's flags name these paths, and it exits at once if
// the token file or the key is missing.
func (c *Cluster) writeCredentials() (credentialFiles, error) {
	token, err := randomToken()
	if err != nil {
		return credentialFiles{}, err
	}
	c.adminToken = token
	files := credentialFiles{
		tokenFile: filepath.Join(c.workDir, "tokens.csv"),
		saKey:     filepath.Join(c.workDir, "sa.key"),
		certDir:   filepath.Join(c.workDir, "certs"),
	}
	var lines strings.Builder
	lines.WriteString(tokenLine(token, AdminUser))
	c.userTokens = map[string]string{}
	for _, u := range c.users {
		t, err := randomToken()
		if err != nil {
			return credentialFiles{}, err
		}
		c.userTokens[u] = t
		lines.WriteString(tokenLine(t, u))
	}
	if err := os.WriteFile(files.tokenFile, []byte(lines.String()), 0o600); err != nil {
		return credentialFiles{}, fmt.Errorf("write token file: %w", err)
	}
	if err := writeRSAKey(files.saKey); err != nil {
		return credentialFiles{}, err
	}
	if err := os.MkdirAll(files.certDir, 0o750); err != nil {
		return credentialFiles{}, fmt.Errorf("create cert directory: %w", err)
	}
	return files, nil
}

// tokenLine is the static token file's line for user, in system:masters.
func tokenLine(token, user string) string {
	return fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", token, user, user)
}

// startEtcd starts a single-member etcd on the given loopback ports and
// waits until it is healthy, because kube-apiserver gives up when its
// storage is not there. It returns the client URL.
func (c *Cluster) startEtcd(ctx context.Context, port, peerPort int) (string, error) {
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(port)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcd := newProcess("etcd", filepath.Join(c.binDir, "etcd"), c.workDir, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.workDir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--quota-backend-bytes=8589934592",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	})
	c.logf("cluster: starting etcd on %s", etcdURL)
	if err := c.launch(ctx, etcd); err != nil {
		return "", err
	}
	if err := waitFor(ctx, etcdReadyTimeout, "etcd health", etcd, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, plainHTTPClient, etcdURL+"/health", "")
	}); err != nil {
		return "", err
	}
	return etcdURL, nil
}

// startAPIServer starts kube-apiserver on c.apiServerPort against the etcd
// at etcdURL and waits until it is ready, because the admin config can only
// be built from the certificate it writes on start-up.
func (c *Cluster) startAPIServer(ctx context.Context, etcdURL string, files credentialFiles) error {
	audit, err := c.auditFlags()
	if err != nil {
		return err
	}
	if c.frontProxy {
		proxy, err := frontProxyFlags(files.certDir)
		if err != nil {
			return err
		}
		audit = append(audit, proxy...)
	}
	apiServer := newProcess("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), c.workDir, append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.apiServerPort),
		"--cert-dir=" + files.certDir,
		"--token-auth-file=" + files.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + files.saKey,
		"--service-account-signing-key-file=" + files.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=" + strconv.FormatBool(c.profiling),
	}, audit...))
	c.logf("cluster: starting kube-apiserver on %s", c.host)
	if err := c.launch(ctx, apiServer); err != nil {
		return err
	}
	return c.waitAPIServer(ctx, apiServer)
}

// auditFlags writes Options.AuditPolicy to the work directory and returns
// the kube-apiserver flags that apply it, or none without a policy. The log
// is JSON, for a reader to parse, and never rotated, so that one file holds
// every event of the cluster's life.
func (c *Cluster) auditFlags() ([]string, error) {
	if c.auditLogPath == "" {
		return nil, nil
	}
	policy := filepath.Join(c.workDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, c.auditPolicy, 0o600); err != nil {
		return nil, fmt.Errorf("write audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.auditLogPath,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
		"--audit-log-maxbackup=0",
	}, nil
}

// waitAPIServer waits until /readyz answers 200 with the admin token.
func (c *Cluster) waitAPIServer(ctx context.Context, p *process) error {
	return waitFor(ctx, apiServerReadyTimeout, "kube-apiserver /readyz", p, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, insecureHTTPClient, c.host+"/readyz", c.adminToken)
	})
}

// loadAdminConfig reads the serving certificate the API server generated,
// builds the admin rest.Config and writes the admin kubeconfig.
func (c *Cluster) loadAdminConfig(certDir string) error {
	ca, err := os.ReadFile(filepath.Join(certDir, "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("read api server certificate: %w", err)
	}
	c.caData = ca
	c.cfg = &rest.Config{
		Host:            c.host,
		BearerToken:     c.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}

	c.kubeconfigPath = filepath.Join(c.workDir, "admin.kubeconfig")
	if err := os.WriteFile(c.kubeconfigPath, kubeconfigYAML(c.host, ca, c.adminToken), 0o600); err != nil {
		return fmt.Errorf("write admin kubeconfig: %w", err)
	}
	return nil
}

// launch starts p and records it so that Stop will end it; ctx's end does
// not stop p.
func (c *Cluster) launch(ctx context.Context, p *process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("cluster is stopped")
	}
	if err := p.start(ctx); err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// Config returns a copy of the admin rest.Config; the admin user is in the
// system:masters group.
func (c *Cluster) Config() *rest.Config {
	return rest.CopyConfig(c.cfg)
}

// ConfigFor returns a copy of the admin config that impersonates user with
// the given groups. A service-account user name such as
// "system:serviceaccount:ns:name" also gets the service-account groups.
func (c *Cluster) ConfigFor(user string, groups ...string) *rest.Config {
	cfg := c.Config()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string(nil), groups...)}
	return cfg
}

// UserConfig returns a copy of the admin config that authenticates as user,
// one of Options.Users, with that user's own bearer token (no
// impersonation: the API server sees user as the one who asks).
func (c *Cluster) UserConfig(user string) (*rest.Config, error) {
	token, ok := c.userTokens[user]
	if !ok {
		return nil, fmt.Errorf("user %q is not one of Options.Users", user)
	}
	cfg := c.Config()
	cfg.BearerToken = token
	return cfg, nil
}

// UserAuditPolicy is an audit policy for Options.AuditPolicy that logs,
// at the Metadata level and once the response has started, every request
// of the given users and nobody else's: how a test or the benchmark counts
// one client's requests.
func UserAuditPolicy(users ...string) []byte {
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: [` + strings.Join(quoted, ", ") + `]
- level: None
`)
}

// AuditLogPath returns the path of the API server's audit log, or "" if
// Options.AuditPolicy was empty.
func (c *Cluster) AuditLogPath() string {
	return c.auditLogPath
}

// KubeconfigPath returns the path of the admin kubeconfig under the work
// directory.
func (c *Cluster) KubeconfigPath() string {
	return c.kubeconfigPath
}

// WorkDir returns the directory holding the cluster's state and logs.
func (c *Cluster) WorkDir() string {
	return c.workDir
}

// LogPath returns the path of the log file of the named process, such as
// "kube-apiserver".
func (c *Cluster) LogPath(name string) string {
	return filepath.Join(c.workDir, name+".log")
}

// Stop stops all processes, last started first, each with SIGTERM and then
// SIGKILL after a grace period. A temporary work directory created by Start
// is removed. Stop is idempotent: later calls return the first result.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return c.stopErr
	}
	c.stopped = true
	var errs []error
	for _, p := range slices.Backward(c.procs) {
		if err := p.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	c.procs = nil
	if c.ownWorkDir {
		if err := os.RemoveAll(c.workDir); err != nil {
			errs = append(errs, fmt.Errorf("remove work directory: %w", err))
		}
	}
	c.stopErr = errors.Join(errs...)
	c.logf("cluster: stopped")
	return c.stopErr
}

// RestartAPIServer stops kube-apiserver and starts it again with the same
// flags, port and certificates, and waits until it is ready. Clients keep
// working with the same configs afterwards.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("restart kube-apiserver: cluster is stopped")
	}
	var p *process
	for _, q := range c.procs {
		if q.name == "kube-apiserver" {
			p = q
		}
	}
	if p == nil {
		return errors.New("restart kube-apiserver: not running")
	}
	c.logf("cluster: restarting kube-apiserver")
	if err := p.stop(); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	if err := p.start(ctx); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	if err := c.waitAPIServer(ctx, p); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}

// waitFor polls cond until it returns true, the timeout passes, ctx ends or
// p exits. Errors from cond are retried; the last one is reported on
// timeout.
func waitFor(ctx context.Context, timeout time.Duration, what string, p *process, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		if p != nil {
			if done, _ := p.exited(); done {
				return fmt.Errorf("waiting for %s: %w", what, p.exitError())
			}
		}
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			msg := "waiting for " + what
			if lastErr != nil {
				msg += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			if p != nil {
				msg += fmt.Sprintf("; log %s ends with:\n%s", p.logPath, p.logTail())
			}
			return fmt.Errorf("%s: %w", msg, ctx.Err())
		case <-ticker.C:
		}
	}
}

var (
	plainHTTPClient    = &http.Client{Timeout: 5 * time.Second}
	insecureHTTPClient = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			// Only used to probe /readyz before the generated certificate
			// has been read.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback readiness probe
		},
	}
)

// httpOK reports whether a GET of url answers 200.
func httpOK(ctx context.Context, client *http.Client, url, token string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("build request: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return true, nil
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(ctx context.Context, n int) ([]int, error) {
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	var lc net.ListenConfig
	for range n {
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		listeners = append(listeners, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, fmt.Errorf("find a free port: unexpected address %v", l.Addr())
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}

// randomToken returns a random bearer token.
func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeRSAKey writes a new RSA private key in PEM form, used to sign and
// verify service-account tokens.
func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	return nil
}

// kubeconfigYAML renders a kubeconfig for the admin user.
func kubeconfigYAML(server string, ca []byte, token string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: shardkeeper-e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: shardkeeper-e2e
  context:
    cluster: shardkeeper-e2e
    user: %s
    namespace: default
current-context: shardkeeper-e2e
`, server, base64.StdEncoding.EncodeToString(ca), AdminUser, token, AdminUser)
}

// Signal sends sig to the named process ("etcd", "kube-apiserver", ...):
// SIGSTOP and SIGCONT pause and resume it, for fault tests.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	p := c.running(name)
	if p == nil {
		return fmt.Errorf("signal %s: %s is not running", sig, name)
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("signal %s to %s: %w", sig, name, err)
	}
	return nil
}

// CollectAPIServerGarbage makes kube-apiserver run a complete garbage
// collection now (pprof's heap profile with gc=1); it needs
// Options.Profiling.
//
// With 100,000 objects in its watch cache the API server's heap is
// gigabytes, and a collection that its trigger happens to put into one
// measurement slows every handler while it marks; one forced before each
// measurement makes each begin with the same heap.
func (c *Cluster) CollectAPIServerGarbage(ctx context.Context) error {
	if !c.profiling {
		return errors.New("collect the API server's garbage: the cluster was started without Options.Profiling")
	}
	// The config's 30 s timeout is too short for the collection at a
	// million objects: 20.8 s in one run of make bench-million, more than
	// 30 s in the next, which failed on it.
	cfg := rest.CopyConfig(c.cfg)
	cfg.Timeout = 0
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("collect the API server's garbage: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.Host+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return fmt.Errorf("collect the API server's garbage: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("collect the API server's garbage: %w", err)
	}
	defer resp.Body.Close()
	// The profile itself is not wanted, only the collection that precedes
	// it, which is over once the response begins.
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("collect the API server's garbage: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("collect the API server's garbage: %s", resp.Status)
	}
	return nil
}

// PID returns the process ID of the named process ("etcd",
// "kube-apiserver", ...), for readings of its CPU time.
func (c *Cluster) PID(name string) (int, error) {
	p := c.running(name)
	if p == nil {
		return 0, fmt.Errorf("%s is not running", name)
	}
	return p.Pid, nil
}

// running returns the named process's OS process, nil if it is not
// running.
func (c *Cluster) running(name string) *os.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name && p.cmd != nil && p.cmd.Process != nil {
			return p.cmd.Process
		}
	}
	return nil
}
