//go:build rancher

// Package rancher runs the user's story in a real Rancher: the chart
// installed from Apps, the extension from Extensions, the Shards page and
// the Shard column, driven by headless Chromium. `make test-rancher` builds
// what it needs and runs it inside a network namespace of its own (see
// hack/rancher-test.sh and docs/ui.md).
package rancher

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
	"github.com/shardkeeper/shardkeeper/e2e/seed"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// Where things listen, inside the test's own network namespace: fixed
// addresses are safe there, and Rancher binds some of its own (:6666) anyway.
const (
	rancherURL = "https://127.0.0.1:8443"
	// rancherHTTPPort is not 8080, which the extension's Service names.
	rancherHTTPPort = "8079"
	// repoAddr serves the project's Helm repository (dist/chart).
	repoAddr = "127.0.0.1:8879"
	// podAddr is the loopback address a stand-in for a pod listens on,
	// as the pod would on its own IP.
	podAddr = "127.0.0.2"

	adminUser     = "admin"
	adminPassword = "shardkeeper-rancher-test"

	chartNS  = "cattle-fleet-system"
	fluxNS   = "flux-system"
	objectNS = "fleet-default"
)

// config is what hack/rancher-test.sh hands the test.
type config struct {
	binDir    string // the control plane, shardkeeper, helm v4 (helm-v4/helm)
	rancher   string // the Rancher binary
	dashboard string // Rancher's dashboard (CATTLE_UI_DASHBOARD_PATH)
	chartRepo string // a Helm repository folder: index.yaml and the packages
	chromium  string
	artifacts string // screenshots and logs, kept after the run
	hosts     string // a writable file bind-mounted over /etc/hosts
}

func configFromEnv(t *testing.T) config {
	t.Helper()
	c := config{
		binDir:    os.Getenv(cluster.BinDirEnv),
		rancher:   os.Getenv("RANCHER_BINARY"),
		dashboard: os.Getenv("RANCHER_DASHBOARD"),
		chartRepo: os.Getenv("RANCHER_CHART_REPO"),
		chromium:  os.Getenv("CHROMIUM"),
		artifacts: os.Getenv("RANCHER_ARTIFACTS"),
		hosts:     os.Getenv("RANCHER_HOSTS_FILE"),
	}
	for name, v := range map[string]string{
		cluster.BinDirEnv: c.binDir, "RANCHER_BINARY": c.rancher, "RANCHER_DASHBOARD": c.dashboard,
		"RANCHER_CHART_REPO": c.chartRepo, "CHROMIUM": c.chromium, "RANCHER_ARTIFACTS": c.artifacts,
		"RANCHER_HOSTS_FILE": c.hosts,
	} {
		if v == "" {
			t.Fatalf("$%s is not set: run this test with `make test-rancher`", name)
		}
	}
	return c
}

// env is the running world of the story: the control plane, Rancher and
// the stand-ins.
type env struct {
	t    *testing.T
	cfg  config
	c    *cluster.Cluster
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

var (
	apiServiceGVR  = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	settingGVR     = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "settings"}
	uiPluginGVR    = schema.GroupVersionResource{Group: "catalog.cattle.io", Version: "v1", Resource: "uiplugins"}
	appGVR         = schema.GroupVersionResource{Group: "catalog.cattle.io", Version: "v1", Resource: "apps"}
	mgmtClusterGVR = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "clusters"}
)

// startEnv starts everything but the browser, and stops it all when the
// test ends.
func startEnv(t *testing.T) *env {
	t.Helper()
	cfg := configFromEnv(t)
	if err := os.MkdirAll(cfg.artifacts, 0o750); err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{
		BinDir:     cfg.binDir,
		WorkDir:    filepath.Join(cfg.artifacts, "cluster"),
		Workloads:  true,
		FrontProxy: true,
	})
	e := &env{t: t, cfg: cfg, c: c}
	var err error
	if e.kube, err = kubernetes.NewForConfig(c.Config()); err != nil {
		t.Fatal(err)
	}
	if e.dyn, err = dynamic.NewForConfig(c.Config()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.seed(ctx); err != nil {
		t.Fatalf("seed the cluster: %v", err)
	}
	e.serveRepo()
	e.startRancher(ctx)

	standins, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go e.runHelmOperations(standins)
	go e.serveExtensionFiles(standins)
	go e.runDaemon(standins)
	return e
}

// seed creates what Rancher and the chart find in a cluster with Fleet and
// Flux: Fleet's real CRDs (Continuous Delivery shows once GitRepos and
// HelmOps are served), Flux's, and both projects' controller Deployments,
// which shardkeeper copies per shard.
func (e *env) seed(ctx context.Context) error {
	crds, err := readYAMLObjects("testdata/fleet.cattle.io_crds.yaml")
	if err != nil {
		return err
	}
	flux, err := testfixture.FluxCRDs()
	if err != nil {
		return err
	}
	for _, crd := range append(crds, flux...) {
		if _, err := e.dyn.Resource(testfixture.CRDs).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("CRD %s: %w", crd.GetName(), err)
		}
	}
	if err := seed.Namespaces(ctx, e.kube, chartNS, fluxNS, objectNS); err != nil {
		return err
	}
	return seed.Controllers(ctx, e.kube, chartNS, fluxNS)
}

// serveRepo serves the project's Helm repository on loopback, as a user's
// web server or GitHub Pages would.
func (e *env) serveRepo() {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", repoAddr)
	if err != nil {
		e.t.Fatalf("listen for the Helm repository: %v", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(e.cfg.chartRepo)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	e.t.Cleanup(func() { _ = srv.Close() })
}

// startRancher runs Rancher as a local process against the control plane,
// with the settings of a fresh install whose admin has logged in once, and
// waits until its API answers.
func (e *env) startRancher(ctx context.Context) {
	e.t.Helper()
	dir := filepath.Join(e.cfg.artifacts, "rancher")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		e.t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(e.cfg.artifacts, "rancher.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	// Stopped by the test's cleanup, with SIGTERM first.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), e.cfg.rancher, "--k8s-mode=external", "--kubeconfig="+e.c.KubeconfigPath(),
		"--http-listen-port="+rancherHTTPPort, "--https-listen-port=8443", "--no-cacerts")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(),
		"CATTLE_DEV_MODE=yes",
		"CATTLE_BOOTSTRAP_PASSWORD="+adminPassword,
		"CATTLE_SERVER_URL="+rancherURL,
		"CATTLE_SERVER_VERSION=v2.15.0",
		"CATTLE_UI_DASHBOARD_PATH="+e.cfg.dashboard,
		"CATTLE_UI_OFFLINE_PREFERRED=true",
		"CATTLE_SYSTEM_CATALOG=bundled",
		// Rancher's imperative API (ext.cattle.io) is an aggregated API:
		// served here on :6666, reached through its Service (below).
		"IMPERATIVE_API_DIRECT=true",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start Rancher: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); _ = logFile.Close(); close(exited) }()
	e.t.Cleanup(func() { terminate(cmd.Process, exited) })

	client := insecureClient()
	deadline := time.Now().Add(4 * time.Minute)
	patched := false
	for {
		if !patched {
			patched = e.pointImperativeAPIAtRancher(ctx)
		}
		if patched && e.imperativeAPIAvailable(ctx) && get(ctx, client, rancherURL+"/v3-public/authProviders") == http.StatusOK {
			break
		}
		select {
		case <-exited:
			e.t.Fatalf("Rancher exited before it answered: %v (log: %s)", waitErr, logFile.Name())
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("Rancher did not answer in 4 minutes (log: %s)", logFile.Name())
		}
	}
	// A fresh install's first login asks for the EULA and a new password;
	// the story logs in as an admin who has done that.
	for name, value := range map[string]string{"first-login": "false", "eula-agreed": time.Now().UTC().Format(time.RFC3339)} {
		patch := fmt.Appendf(nil, `{"value":%q}`, value)
		if _, err := e.dyn.Resource(settingGVR).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			e.t.Fatalf("setting %s: %v", name, err)
		}
	}
}

// pointImperativeAPIAtRancher makes the Service behind Rancher's APIService
// v1.ext.cattle.io reach Rancher on this host, once Rancher has created it:
// an ExternalName of localhost, since EndpointSlices refuse loopback
// addresses. Until kube-apiserver reaches it, Rancher's /v1 answers 503,
// and after 5 minutes Rancher exits.
func (e *env) pointImperativeAPIAtRancher(ctx context.Context) bool {
	const patch = `{"spec":{"type":"ExternalName","externalName":"localhost","clusterIP":null,"clusterIPs":null,` +
		`"selector":null,"ipFamilies":null,"ipFamilyPolicy":null}}`
	_, err := e.kube.CoreV1().Services("cattle-system").Patch(ctx, "imperative-api-extension", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err == nil
}

// imperativeAPIAvailable reports whether kube-apiserver reaches Rancher's
// aggregated API: until then Rancher's /v1 answers 503, and the dashboard's
// pages with it.
func (e *env) imperativeAPIAvailable(ctx context.Context) bool {
	svc, err := e.dyn.Resource(apiServiceGVR).Get(ctx, "v1.ext.cattle.io", metav1.GetOptions{})
	if err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// terminate stops a process as Kubernetes stops a pod: SIGTERM, then
// SIGKILL after a grace period; exited is closed once it has ended.
func terminate(p *os.Process, exited <-chan struct{}) {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = p.Kill()
		<-exited
	}
}

func insecureClient() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // Rancher's self-signed certificate, on loopback
	}
}

func get(ctx context.Context, client *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// readYAMLObjects reads the objects of a multi-document YAML file.
func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// addHost maps name to the stand-ins' loopback address in the namespace's
// /etc/hosts, which Go's resolver (Rancher's too) reads again when it
// changes.
func (e *env) addHost(name string) error {
	data, err := os.ReadFile(e.cfg.hosts)
	if err != nil {
		return err
	}
	line := podAddr + " " + name
	if strings.Contains(string(data), line+"\n") {
		return nil
	}
	f, err := os.OpenFile(e.cfg.hosts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, line)
	return err
}
