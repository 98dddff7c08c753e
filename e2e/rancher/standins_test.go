//go:build rancher

package rancher

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// Pods cannot run here (no container runtime): kwok marks them Ready and
// nothing more. Where the story needs a pod's work, a stand-in on this host
// does exactly that pod's job from the same inputs, and is reached where
// the pod would be. docs/ui.md names each.

// standinPoll is how often a stand-in looks for work.
const standinPoll = time.Second

// runHelmOperations is the stand-in for Rancher's helm-operation pods
// (image rancher/shell, containers helm and proxy): for each such pod it
// runs Helm v4 with the arguments Rancher wrote in the pod's data Secret
// (operation000, ...), and then records the containers as terminated with
// Helm's exit code, which is what Rancher waits for.
func (e *env) runHelmOperations(ctx context.Context) {
	done := map[types.UID]bool{}
	for ctx.Err() == nil {
		pods, err := e.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range pods.Items {
				pod := &pods.Items[i]
				if done[pod.UID] || !strings.HasPrefix(pod.Name, "helm-operation-") || pod.DeletionTimestamp != nil {
					continue
				}
				done[pod.UID] = true
				if err := e.runHelmOperation(ctx, pod); err != nil {
					e.t.Logf("helm-operation stand-in: pod %s/%s: %v", pod.Namespace, pod.Name, err)
				}
			}
		}
		sleep(ctx, standinPoll)
	}
}

func (e *env) runHelmOperation(ctx context.Context, pod *corev1.Pod) error {
	var secret string
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if secret == "" {
		return errors.New("no data Secret among its volumes")
	}
	s, err := e.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return err
	}
	dir := filepath.Join(e.cfg.artifacts, "helm-operations", pod.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	var ops []string
	for name, data := range s.Data {
		// Rancher's arguments name files under /home/shell/helm, the
		// Secret's mount point in the pod.
		data = bytes.ReplaceAll(data, []byte("/home/shell/helm"), []byte(dir))
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
		if strings.HasPrefix(name, "operation") {
			ops = append(ops, name)
		}
	}
	slices.Sort(ops)
	log, err := os.Create(filepath.Join(dir, "helm.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	exit := 0
	for _, op := range ops {
		data, _ := os.ReadFile(filepath.Join(dir, op))
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) > 0 && (args[0] == "helm" || strings.HasSuffix(args[0], "/helm")) {
			args = args[1:]
		}
		fmt.Fprintf(log, "==== helm %q\n", args)
		cmd := exec.CommandContext(ctx, filepath.Join(e.cfg.binDir, "helm-v4", "helm"), args...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(), "KUBECONFIG="+e.c.KubeconfigPath(),
			"HELM_CACHE_HOME="+dir+"/.cache", "HELM_CONFIG_HOME="+dir+"/.config", "HELM_DATA_HOME="+dir+"/.data")
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				return err
			}
			exit = ee.ExitCode()
			break
		}
	}
	return e.terminatePod(ctx, pod, exit)
}

// terminatePod records pod's containers as ended, the helm container with
// exit, as a kubelet would once they had run.
func (e *env) terminatePod(ctx context.Context, pod *corev1.Pod, exit int) error {
	now := metav1.Now()
	phase := corev1.PodSucceeded
	if exit != 0 {
		phase = corev1.PodFailed
	}
	status := corev1.PodStatus{Phase: phase, StartTime: &now}
	for _, c := range pod.Spec.Containers {
		code := int32(0)
		if c.Name == "helm" {
			code = int32(exit)
		}
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}},
		})
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = e.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// serveExtensionFiles is the stand-in for the extension chart's file
// server (busybox httpd serving the chart's ConfigMap): for each UIPlugin
// whose endpoint is a Service in the cluster, it serves that Service's
// Deployment's ConfigMap files, mounted as the Deployment mounts them, at
// the endpoint's host name (mapped to podAddr in /etc/hosts) and port.
func (e *env) serveExtensionFiles(ctx context.Context) {
	served := map[string]bool{}
	for ctx.Err() == nil {
		plugins, err := e.dyn.Resource(uiPluginGVR).Namespace("").List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range plugins.Items {
				endpoint, _, _ := unstructured.NestedString(p.Object, "spec", "plugin", "endpoint")
				if served[endpoint] {
					continue
				}
				if err := e.serveEndpoint(ctx, endpoint); err != nil {
					e.t.Logf("extension files stand-in: %s: %v", endpoint, err)
					continue
				}
				served[endpoint] = true
			}
		}
		sleep(ctx, standinPoll)
	}
}

func (e *env) serveEndpoint(ctx context.Context, endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	svcName, rest, _ := strings.Cut(u.Hostname(), ".")
	ns, _, _ := strings.Cut(rest, ".")
	if !strings.HasSuffix(u.Hostname(), ".svc") || ns == "" {
		return errors.New("not a Service's address")
	}
	svc, err := e.kube.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	deploys, err := e.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var files map[string][]byte
	for i := range deploys.Items {
		d := &deploys.Items[i]
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			if files, err = e.mountedFiles(ctx, d); err != nil {
				return err
			}
		}
	}
	if files == nil {
		return fmt.Errorf("no Deployment behind Service %s/%s", ns, svcName)
	}
	if err := e.addHost(u.Hostname()); err != nil {
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(podAddr, u.Port()))
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		data, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		// busybox's httpd names the type by the file's extension; Rancher
		// passes it on while it has not cached the files, and a browser
		// runs no script served as text/plain.
		if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
			w.Header().Set("Content-Type", t)
		}
		_, _ = w.Write(data)
	})}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	e.t.Logf("extension files stand-in: serving %d files of Service %s/%s at %s", len(files), ns, svcName, endpoint)
	return nil
}

// mountedFiles returns the files of the ConfigMap volumes of d's pod, by
// their path under the mount, as the pod's file system would have them.
func (e *env) mountedFiles(ctx context.Context, d *appsv1.Deployment) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, err := e.kube.CoreV1().ConfigMaps(d.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		value := func(key string) []byte {
			if b, ok := cm.BinaryData[key]; ok {
				return b
			}
			return []byte(cm.Data[key])
		}
		if len(v.ConfigMap.Items) == 0 {
			for k := range cm.Data {
				files[k] = value(k)
			}
			for k := range cm.BinaryData {
				files[k] = value(k)
			}
		}
		for _, item := range v.ConfigMap.Items {
			files[item.Path] = value(item.Key)
		}
	}
	return files, nil
}

// runDaemon is the stand-in for the daemon's pod: for the chart's
// Deployment (app.kubernetes.io/name=shardkeeper) it runs bin/shardkeeper
// with the container's arguments and environment, authenticated as the
// pod's ServiceAccount with a token of its own, so every request is
// checked against the chart's RBAC. A new pod template (an upgrade)
// restarts it, as a rollout would; a deleted Deployment stops it.
func (e *env) runDaemon(ctx context.Context) {
	var (
		running *exec.Cmd
		exited  chan struct{}
		hash    string
		gen     int
		mu      sync.Mutex
	)
	stop := func() {
		if running == nil {
			return
		}
		terminate(running.Process, exited)
		running, hash = nil, ""
	}
	defer func() { mu.Lock(); stop(); mu.Unlock() }()
	for ctx.Err() == nil {
		list, err := e.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=shardkeeper"})
		if err == nil {
			mu.Lock()
			if len(list.Items) == 0 {
				stop()
			} else if h := templateHash(&list.Items[0]); h != hash {
				stop()
				gen++
				cmd, err := e.startDaemon(ctx, &list.Items[0], gen)
				if err != nil {
					e.t.Logf("daemon stand-in: %v", err)
				} else {
					running, hash, exited = cmd, h, make(chan struct{})
					go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, exited)
				}
			}
			mu.Unlock()
		}
		sleep(ctx, standinPoll)
	}
}

func (e *env) startDaemon(ctx context.Context, d *appsv1.Deployment, gen int) (*exec.Cmd, error) {
	spec := d.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "shardkeeper" || c == nil {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		return nil, errors.New("the Deployment has no container")
	}
	kubeconfig, err := e.serviceAccountKubeconfig(ctx, d.Namespace, spec.ServiceAccountName)
	if err != nil {
		return nil, err
	}
	env := os.Environ()
	for _, v := range c.Env {
		switch {
		case v.ValueFrom == nil:
			env = append(env, v.Name+"="+v.Value)
		case v.ValueFrom.FieldRef != nil && v.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, v.Name+"="+d.Namespace)
		default:
			return nil, fmt.Errorf("env %s: only values and the pod's namespace are supported", v.Name)
		}
	}
	args := append(append([]string(nil), c.Args...), "--kubeconfig="+kubeconfig)
	log, err := os.OpenFile(filepath.Join(e.cfg.artifacts, "shardkeeper.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s: start %d, Deployment %s/%s generation %d: %q\n", time.Now().Format(time.RFC3339), gen, d.Namespace, d.Name, d.Generation, args)
	// Stopped by runDaemon, not by ctx: SIGTERM first, as a pod is.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), filepath.Join(e.cfg.binDir, "shardkeeper"), args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount with a bound token, as the pod's projected token would.
func (e *env) serviceAccountKubeconfig(ctx context.Context, ns, sa string) (string, error) {
	if sa == "" {
		sa = "default"
	}
	tr, err := e.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of ServiceAccount %s/%s: %w", ns, sa, err)
	}
	cfg := e.c.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa, Namespace: ns}
	kc.CurrentContext = "local"
	path := filepath.Join(e.cfg.artifacts, "shardkeeper.kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

func templateHash(d *appsv1.Deployment) string {
	data, _ := json.Marshal(d.Spec.Template)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
