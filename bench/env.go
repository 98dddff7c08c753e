package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
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
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// The users of the measured clients, each with a static token of its own
// and in system:masters. The audit policy records their requests and nobody
// else's: every controller that convergence compares pays the API server's
// audit logging alike, and its writes can be counted.
const (
	// DaemonUser is the daemon's.
	DaemonUser = "shardkeeper-daemon"
	// IdealUser is the ideal controller's (bench/ideal).
	IdealUser = "bench-ideal"
	// InformerUser is the informer reference's (bench/ideal --informer).
	InformerUser = "bench-informer"
	// FloorUser is the floor's, the bare parallel client.
	FloorUser = "bench-floor"
)

// auditedUsers are the users the audit log records.
var auditedUsers = []string{DaemonUser, IdealUser, InformerUser, FloorUser}

const (
	fleetNS   = "bench-fleet"
	fluxNS    = "bench-flux"
	cmName    = "shardkeeper"
	objNSBase = "bench-objs-"
	objNSs    = 10
)

// env is the control plane the benchmark runs on: the cluster package's
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
// The API server writes an audit log of the requests of the daemon, the
// ideal controller, the informer reference and the floor, and of nobody
// else's: each authenticates as a user of its own (auditedUsers),
// everything else (the benchmark's other clients, the reference, the
// control plane's own components) as other users.
type env struct {
	cluster  *cluster.Cluster
	workDir  string
	host     string
	token    string // admin
	auditLog string

	cfg  *rest.Config // admin
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// watchKube watches, in protobuf, without a client timeout.
	watchKube kubernetes.Interface
	// rewatches counts the measurement watches the API server closed and
	// that were resumed.
	rewatches int64

	daemonKubeconfig   string
	idealKubeconfig    string
	informerKubeconfig string
	adminKubeconfig    string
	// floorCfg is FloorUser's.
	floorCfg *rest.Config
}

func startEnv(ctx context.Context, binDir, workDir string, logf func(string, ...any)) (*env, error) {
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, WorkDir: filepath.Join(workDir, "cluster"), Workloads: true,
		Users: auditedUsers, AuditPolicy: cluster.UserAuditPolicy(auditedUsers...), Profiling: true, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	e := &env{cluster: c, workDir: c.WorkDir(), auditLog: c.AuditLogPath()}
	if err := e.connect(); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

// connect builds the benchmark's admin clients, with client limits that
// never hold its writers back, the kubeconfigs of the daemon, the ideal
// controller and the informer reference, and the floor's config, each as
// its own audited user; the reference uses the cluster's admin kubeconfig.
func (e *env) connect() error {
	e.cfg = e.cluster.Config()
	e.cfg.QPS, e.cfg.Burst, e.cfg.Timeout = 1000, 2000, 60*time.Second
	e.host, e.token = e.cfg.Host, e.cfg.BearerToken
	var err error
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
	e.adminKubeconfig = e.cluster.KubeconfigPath()
	e.daemonKubeconfig = filepath.Join(e.workDir, "daemon.kubeconfig")
	e.idealKubeconfig = filepath.Join(e.workDir, "ideal.kubeconfig")
	e.informerKubeconfig = filepath.Join(e.workDir, "informer.kubeconfig")
	for _, k := range []struct{ user, path string }{{DaemonUser, e.daemonKubeconfig}, {IdealUser, e.idealKubeconfig}, {InformerUser, e.informerKubeconfig}} {
		cfg, err := e.cluster.UserConfig(k.user)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(k.path, cfg, k.user); err != nil {
			return err
		}
	}
	if e.floorCfg, err = e.cluster.UserConfig(FloorUser); err != nil {
		return err
	}
	return nil
}

func (e *env) stop() {
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
	{testfixture.GitRepos, source.FleetShardRefLabel},
	{testfixture.HelmReleases, source.FluxShardKeyLabel},
	{testfixture.Bundles, source.FleetShardRefLabel},
	{testfixture.BundleDeployments, source.FleetShardRefLabel},
}

// setup creates the namespaces, the mapped kinds' CRDs, the source
// Deployments and the shard ConfigMap (with no shards), and waits until the
// sources run.
func (e *env) setup(ctx context.Context) error {
	nss := []string{fleetNS, fluxNS}
	for i := range objNSs {
		nss = append(nss, fmt.Sprintf("%s%d", objNSBase, i))
	}
	if err := e.createNamespaces(ctx, nss...); err != nil {
		return err
	}
	for _, ns := range []string{fleetNS, fluxNS} {
		if err := poll(ctx, time.Minute, "default ServiceAccount in "+ns, func() error {
			_, err := e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	for _, gvr := range []schema.GroupVersionResource{testfixture.GitRepos, testfixture.HelmOps, testfixture.Bundles, testfixture.BundleDeployments, testfixture.HelmReleases} {
		_, err := e.dyn.Resource(testfixture.CRDs).Create(ctx, testfixture.CRD(gvr), metav1.CreateOptions{})
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

// createNamespaces creates the namespaces nss that do not exist yet.
func (e *env) createNamespaces(ctx context.Context, nss ...string) error {
	for _, ns := range nss {
		_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return nil
}

// sources are Fleet's and Flux's controllers as the fixture shapes them,
// run as the namespace's default ServiceAccount.
func sources() []*appsv1.Deployment {
	out := []*appsv1.Deployment{testfixture.FleetController(fleetNS), testfixture.Gitjob(fleetNS), testfixture.HelmOpsController(fleetNS), testfixture.HelmController(fluxNS, true)}
	for _, d := range out {
		d.Spec.Template.Spec.ServiceAccountName = ""
	}
	return out
}

// writeKubeconfig writes a kubeconfig with the server, CA and bearer token
// of rc, for user.
func writeKubeconfig(path string, rc *rest.Config, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: user}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

// freePort returns a loopback port that was free a moment ago, for a
// process to listen on.
func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
