//go:build e2e

package cluster_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
)

func TestClusterRunsDeployments(t *testing.T) {
	began := time.Now()
	c := cluster.StartForTest(t, cluster.Options{Workloads: true})
	t.Logf("cluster with workloads started in %s", time.Since(began).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatalf("client: %v", err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-cluster"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}

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
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments(ns.Name).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = d
		return d.Status.AvailableReplicas == replicas, nil
	})
	if err != nil {
		if last != nil {
			t.Logf("last deployment status: %+v", last.Status)
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

	nobody, err := kubernetes.NewForConfig(c.ConfigFor("system:serviceaccount:default:nobody"))
	if err != nil {
		t.Fatalf("client for nobody: %v", err)
	}
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

	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	began := time.Now()
	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("api server restarted in %s", time.Since(began).Round(time.Millisecond))
	if _, err := client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace after restart: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second stop: %v", err)
	}
}
