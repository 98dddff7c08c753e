package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
	"github.com/shardkeeper/shardkeeper/e2e/fixture"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

// DaemonUser is the user the daemon authenticates as on the audited API
// server; the audit policy records this user's requests and nobody else's.
const DaemonUser = "shardkeeper-daemon"

const (
	fleetNS   = "bench-fleet"
	fluxNS    = "bench-flux"
	cmName    = "shardkeeper"
	objNSBase = "bench-objs-"
	objNSs    = 10
)

// env is the control plane the benchmark runs on: the cluster package's
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
// plus a second kube-apiserver on the same etcd that writes an audit log of
// the daemon's requests. Everything the benchmark and the daemon do goes to
// that second API server ("the API server" below); the first one serves the
// controller-manager, the scheduler and kwok.
type env struct {
	cluster  *cluster.Cluster
	workDir  string
	apiProc  *exec.Cmd
	apiDone  chan struct{}
	host     string
	caData   []byte
	token    string // admin
	auditLog string

	cfg  *rest.Config // admin, on the audited API server
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// watchKube watches, in protobuf, without a client timeout.
	watchKube kubernetes.Interface
	// rewatches counts the measurement watches the API server closed and
	// that were resumed.
	rewatches int64

	daemonKubeconfig string
	adminKubeconfig  string
}

func startEnv(ctx context.Context, binDir, workDir string, logf func(string, ...any)) (*env, error) {
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, WorkDir: filepath.Join(workDir, "cluster"), Workloads: true, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	e := &env{cluster: c, workDir: c.WorkDir()}
	if err := e.startAuditedAPIServer(ctx, binDir, logf); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// startAuditedAPIServer starts a kube-apiserver with the flags of the
// cluster's own (found in /proc), on its own port, certificates and token
// file, with an audit policy that logs the daemon user's requests.
func (e *env) startAuditedAPIServer(ctx context.Context, binDir string, logf func(string, ...any)) error {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	bin := filepath.Join(abs, "kube-apiserver")
	args, err := findArgs(bin, "--cert-dir="+filepath.Join(e.workDir, "certs"))
	if err != nil {
		return fmt.Errorf("finding the cluster's kube-apiserver: %w", err)
	}
	dir := filepath.Join(e.workDir, "audited-apiserver")
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	var tokenFile string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--token-auth-file="); ok {
			tokenFile = v
		}
	}
	tokens, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("reading the cluster's token file: %w", err)
	}
	e.token = e.cluster.Config().BearerToken
	daemonToken := randomHex(24)
	tokens = append(bytes.TrimRight(tokens, "\n"), '\n')
	tokens = fmt.Appendf(tokens, "%s,%s,%s,\"system:masters\"\n", daemonToken, DaemonUser, DaemonUser)
	newTokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(newTokenFile, tokens, 0o600); err != nil {
		return err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["`+DaemonUser+`"]
- level: None
`), 0o644); err != nil {
		return err
	}
	e.auditLog = filepath.Join(dir, "audit.log")

	var newArgs []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "--secure-port="):
			a = "--secure-port=" + strconv.Itoa(port)
		case strings.HasPrefix(a, "--cert-dir="):
			a = "--cert-dir=" + filepath.Join(dir, "certs")
		case strings.HasPrefix(a, "--token-auth-file="):
			a = "--token-auth-file=" + newTokenFile
		}
		newArgs = append(newArgs, a)
	}
	// Two API servers on one host would fight over one identity Lease.
	newArgs = append(newArgs, "--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false", "--audit-policy-file="+policy, "--audit-log-path="+e.auditLog,
		"--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-maxbackup=0")
	logFile, err := os.Create(filepath.Join(e.workDir, "kube-apiserver-audited.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, newArgs...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	logf("bench: starting the audited kube-apiserver on 127.0.0.1:%d", port)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the audited kube-apiserver: %w", err)
	}
	e.apiProc = cmd
	e.apiDone = make(chan struct{})
	go func() { _ = cmd.Wait(); close(e.apiDone) }()
	e.host = "https://127.0.0.1:" + strconv.Itoa(port)

	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback readiness probe before the certificate is read
	}}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-e.apiDone:
			return fmt.Errorf("the audited kube-apiserver exited; see %s", logFile.Name())
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		if resp, err := insecure.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return errors.New("the audited kube-apiserver did not become ready in 2 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.caData, err = os.ReadFile(filepath.Join(dir, "certs", "apiserver.crt"))
	if err != nil {
		return err
	}
	e.cfg = &rest.Config{Host: e.host, BearerToken: e.token, TLSClientConfig: rest.TLSClientConfig{CAData: e.caData},
		QPS: 1000, Burst: 2000, Timeout: 60 * time.Second}
	if e.kube, err = kubernetes.NewForConfig(e.cfg); err != nil {
		return err
	}
	if e.dyn, err = dynamic.NewForConfig(e.cfg); err != nil {
		return err
	}
	wcfg := rest.CopyConfig(e.cfg)
	wcfg.ContentType = "application/vnd.kubernetes.protobuf"
	wcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	wcfg.Timeout = 0
	if e.watchKube, err = kubernetes.NewForConfig(wcfg); err != nil {
		return err
	}
	e.daemonKubeconfig = filepath.Join(dir, "daemon.kubeconfig")
	if err := writeKubeconfig(e.daemonKubeconfig, e.host, e.caData, DaemonUser, daemonToken); err != nil {
		return err
	}
	e.adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return writeKubeconfig(e.adminKubeconfig, e.host, e.caData, cluster.AdminUser, e.token)
}

func (e *env) stop() {
	if e.apiProc != nil {
		_ = syscall.Kill(-e.apiProc.Process.Pid, syscall.SIGTERM)
		select {
		case <-e.apiDone:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-e.apiProc.Process.Pid, syscall.SIGKILL)
			<-e.apiDone
		}
	}
	if e.cluster != nil {
		_ = e.cluster.Stop()
	}
}

// config returns a copy of the admin config with the given client limits.
func (e *env) config(qps float32, burst int) *rest.Config {
	c := rest.CopyConfig(e.cfg)
	c.QPS, c.Burst = qps, burst
	return c
}

// memoryKinds are the kinds of the memory part's objects, created in turn:
// a quarter each. Fleet's Bundles and BundleDeployments are as many as the
// GitRepos here; in a real fleet there are more of them (one Bundle per
// path, one BundleDeployment per Bundle and cluster).
var memoryKinds = []struct {
	gvr   schema.GroupVersionResource
	label string
}{
	{fixture.GitRepos, source.FleetShardRefLabel},
	{fixture.HelmReleases, source.FluxShardKeyLabel},
	{fixture.Bundles, source.FleetShardRefLabel},
	{fixture.BundleDeployments, source.FleetShardRefLabel},
}

// setup creates the namespaces, the mapped kinds' CRDs, the source
// Deployments and the shard ConfigMap (with no shards), and waits until the
// sources run.
func (e *env) setup(ctx context.Context) error {
	nss := []string{fleetNS, fluxNS}
	for i := range objNSs {
		nss = append(nss, fmt.Sprintf("%s%d", objNSBase, i))
	}
	for _, ns := range nss {
		_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, ns := range []string{fleetNS, fluxNS} {
		if err := poll(ctx, time.Minute, "default ServiceAccount in "+ns, func() error {
			_, err := e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	for _, gvr := range []schema.GroupVersionResource{fixture.GitRepos, fixture.HelmOps, fixture.Bundles, fixture.BundleDeployments, fixture.HelmReleases} {
		_, err := e.dyn.Resource(fixture.CRDs).Create(ctx, fixture.CRD(gvr), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", gvr.Resource, err)
		}
		if err := poll(ctx, time.Minute, "CRD "+gvr.Resource+" served", func() error {
			_, err := e.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}); err != nil {
			return err
		}
	}
	for _, d := range sources() {
		if _, err := e.kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	_, err := e.kube.CoreV1().ConfigMaps(fleetNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName},
		Data:       map[string]string{"shards": "[]"},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return e.settle(ctx, 3*time.Minute)
}

// sources are Fleet's and Flux's controllers as the fixture shapes them,
// run as the namespace's default ServiceAccount.
func sources() []*appsv1.Deployment {
	out := []*appsv1.Deployment{fixture.FleetController(fleetNS), fixture.Gitjob(fleetNS), fixture.HelmOpsController(fleetNS), fixture.HelmController(fluxNS, true)}
	for _, d := range out {
		d.Spec.Template.Spec.ServiceAccountName = ""
	}
	return out
}

// findArgs returns the arguments of the running process started from bin
// with the argument mark.
func findArgs(bin, mark string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, ent := range entries {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if argv[0] != bin {
			continue
		}
		for _, a := range argv[1:] {
			if a == mark {
				return argv[1:], nil
			}
		}
	}
	return nil, fmt.Errorf("no process %s with %s", bin, mark)
}

func writeKubeconfig(path, host string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: user}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// poll retries cond every 200 ms until it returns nil or timeout passes.
// It bounds a wait; it never measures anything.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
