//go:build e2e

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
)

func TestClusterRunsDeployments(t *testing.T) {
	began := time.Now()
	c := cluster.StartForTest(t, cluster.Options{Workloads: true})
	t.Logf("cluster with workloads started in %s", time.Since(began).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client := newClient(t, c.Config())
	ns := createNamespace(ctx, t, client, "e2e-cluster")

	replicas := int32(2)
	labels := map[string]string{"app": "pause"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: ns.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(ns.Name).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}

	var last *appsv1.Deployment
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns.Name).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			lastErr = err
			return false, nil //nolint:nilerr // a failed Get is retried until the timeout, then logged
		}
		last = d
		return d.Status.AvailableReplicas == replicas, nil
	})
	if err != nil {
		if last != nil {
			t.Logf("last deployment status: %+v", last.Status)
		}
		if lastErr != nil {
			t.Logf("last error of a Get: %v", lastErr)
		}
		pods, _ := client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
		if pods != nil {
			for _, p := range pods.Items {
				t.Logf("pod %s: node=%q phase=%s conditions=%+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			}
		}
		t.Fatalf("deployment never had %d available replicas: %v", replicas, err)
	}
	t.Logf("deployment available after %s", time.Since(began).Round(time.Millisecond))

	pods, err := client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != cluster.FakeNodeName {
			t.Errorf("pod %s on node %q, want %q", p.Name, p.Spec.NodeName, cluster.FakeNodeName)
		}
	}

	nobody := newClient(t, c.ConfigFor("system:serviceaccount:default:nobody"))
	_, err = nobody.CoreV1().Secrets(ns.Name).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("listing secrets as nobody: got %v, want Forbidden", err)
	}

	// The admin can still list them.
	if _, err := client.CoreV1().Secrets(ns.Name).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing secrets as admin: %v", err)
	}
}

func TestRestartAPIServer(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client := newClient(t, c.Config())
	ns := createNamespace(ctx, t, client, "survives-restart")
	began := time.Now()
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("api server restarted in %s", time.Since(began).Round(time.Millisecond))
	if _, err := client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace after restart: %v", err)
	}
	if err := c.CollectAPIServerGarbage(ctx); err == nil {
		t.Error("CollectAPIServerGarbage without Options.Profiling: no error")
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}

// TestCollectAPIServerGarbage checks that a forced collection is one the
// API server's own metrics count.
func TestCollectAPIServerGarbage(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Profiling: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := newClient(t, c.Config())

	before := apiServerGCs(ctx, t, client)
	if err := c.CollectAPIServerGarbage(ctx); err != nil {
		t.Fatalf("CollectAPIServerGarbage: %v", err)
	}
	if after := apiServerGCs(ctx, t, client); after <= before {
		t.Errorf("go_gc_duration_seconds_count went from %d to %d across a forced collection", before, after)
	}
}

// apiServerGCs is the API server's go_gc_duration_seconds_count.
func apiServerGCs(ctx context.Context, t *testing.T, client kubernetes.Interface) int64 {
	t.Helper()
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go_gc_duration_seconds_count "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("go_gc_duration_seconds_count %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("the API server's metrics hold no go_gc_duration_seconds_count")
	return 0
}

// auditedUser is the user TestAuditPolicy's policy logs the requests of.
const auditedUser = "audited-client"

// TestAuditPolicy starts a cluster with an extra user and an audit policy
// that logs that user's requests only, and checks that a request the user
// makes, with its own token, is in the audit log and the admin's is not.
func TestAuditPolicy(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Options{Users: []string{auditedUser}, AuditPolicy: cluster.UserAuditPolicy(auditedUser)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if c.AuditLogPath() == "" {
		t.Fatal("AuditLogPath is empty with an AuditPolicy")
	}
	if _, err := c.UserConfig("nobody-declared"); err == nil {
		t.Error("UserConfig of a user not in Options.Users: no error")
	}
	cfg, err := c.UserConfig(auditedUser)
	if err != nil {
		t.Fatalf("UserConfig: %v", err)
	}
	admin := newClient(t, c.Config())
	createNamespace(ctx, t, admin, "by-admin")
	createNamespace(ctx, t, newClient(t, cfg), "by-audited-user")

	// The log is written as requests complete, not before the response.
	var events []auditEvent
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		events = readAuditLog(t, c.AuditLogPath())
		return slices.ContainsFunc(events, func(ev auditEvent) bool {
			return ev.User.Username == auditedUser && ev.Verb == "create" && ev.ObjectRef.Resource == "namespaces"
		}), nil
	})
	if err != nil {
		t.Fatalf("no create of namespaces by %s in the audit log; it holds %+v", auditedUser, events)
	}
	for _, ev := range events {
		if ev.User.Username != auditedUser {
			t.Errorf("audit log holds a request of %s, which the policy does not select: %+v", ev.User.Username, ev)
		}
	}
}

// auditEvent is what TestAuditPolicy reads of an audit event.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
}

// readAuditLog reads the JSON audit log at path, if it is there yet.
func readAuditLog(t *testing.T, path string) []auditEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("read audit log: %v", err)
	}
	var events []auditEvent
	for line := range bytes.SplitSeq(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return events
}

// newClient returns a clientset for cfg.
func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return client
}

// createNamespace creates the namespace name with client.
func createNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) *corev1.Namespace {
	t.Helper()
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return ns
}
