package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// FakeNodeName is the name of the Node that kwok simulates when
// Options.Workloads is set.
const FakeNodeName = "kwok-node-0"

// Controllers is the --controllers list given to kube-controller-manager.
const Controllers = "deployment,replicaset,garbagecollector,namespace,serviceaccount,serviceaccount-token"

// kwokStages are the stage files expected in <BinDir>/kwok-stages/.
var kwokStages = []string{"node-initialize.yaml", "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"}

// kwokStageFiles returns the paths of the kwok stage files, checking that
// they exist.
func kwokStageFiles(binDir string) ([]string, error) {
	paths := make([]string, 0, len(kwokStages))
	for _, name := range kwokStages {
		p := filepath.Join(binDir, "kwok-stages", name)
		if _, err := os.Stat(p); err != nil { //nolint:gosec // G703: the caller's own bin directory, by design
			return nil, fmt.Errorf("kwok stage file: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// startWorkloads starts kube-controller-manager, kube-scheduler and kwok,
// creates the fake Node and waits until workloads can run.
func (c *Cluster) startWorkloads(ctx context.Context, saKey, certDir string, kcmPort, schedPort, kwokPort int) error {
	stages, err := kwokStageFiles(c.binDir)
	if err != nil {
		return err
	}
	kcm := c.newControllerManager(saKey, certDir, kcmPort)
	sched := c.newScheduler(schedPort)
	kwok := c.newKwok(kwokPort, stages)
	procs := []*process{kcm, sched, kwok}
	for _, p := range procs {
		c.logf("cluster: starting %s", p.name)
		if err := c.launch(ctx, p); err != nil {
			return err
		}
	}

	client, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return fmt.Errorf("build client: %w", err)
	}
	if err := createFakeNode(ctx, client); err != nil {
		return err
	}

	// Any of the three dying is fatal; watch the one most likely to fail
	// for each condition and check the others on the way.
	alive := func() error { return firstExited(procs) }
	if err := c.waitFakeNodeReady(ctx, client, kwok, alive); err != nil {
		return err
	}
	return c.waitDefaultServiceAccount(ctx, client, kcm, alive)
}

// newControllerManager describes kube-controller-manager running only
// Controllers, so that Deployments get ReplicaSets and Pods and every
// namespace gets its default ServiceAccount; it signs those accounts'
// tokens with the API server's key saKey.
func (c *Cluster) newControllerManager(saKey, certDir string, port int) *process {
	return newProcess("kube-controller-manager", filepath.Join(c.binDir, "kube-controller-manager"), c.workDir, []string{
		"--kubeconfig=" + c.kubeconfigPath,
		"--controllers=" + Controllers,
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + filepath.Join(certDir, "apiserver.crt"),
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.workDir, "kcm-certs"),
		"--profiling=false",
	})
}

// newScheduler describes kube-scheduler, so that Pods get bound to the
// fake Node.
func (c *Cluster) newScheduler(port int) *process {
	return newProcess("kube-scheduler", filepath.Join(c.binDir, "kube-scheduler"), c.workDir, []string{
		"--kubeconfig=" + c.kubeconfigPath,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(c.workDir, "scheduler-certs"),
		"--profiling=false",
	})
}

// newKwok describes kwok managing only the Node annotated as fake, with
// the given stage files, so that the Pods bound to it become Ready without
// a kubelet or a container runtime.
func (c *Cluster) newKwok(port int, stages []string) *process {
	return newProcess("kwok", filepath.Join(c.binDir, "kwok"), c.workDir, []string{
		"--kubeconfig=" + c.kubeconfigPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16",
		"--node-ip=10.240.0.1",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--config=" + strings.Join(stages, ","),
	})
}

// firstExited returns the exit error of the first of procs that has ended,
// or nil, so that a wait fails at once when any workload component dies
// rather than only when the one it watches does.
func firstExited(procs []*process) error {
	for _, p := range procs {
		if done, _ := p.exited(); done {
			return p.exitError()
		}
	}
	return nil
}

// waitFakeNodeReady waits until the fake Node is Ready and has stayed
// untainted for a few polls, because the scheduler does not place Pods on a
// tainted Node. It watches kwok, which makes the Node Ready, and calls
// alive to check the other components.
func (c *Cluster) waitFakeNodeReady(ctx context.Context, client kubernetes.Interface, kwok *process, alive func() error) error {
	c.logf("cluster: waiting for node %s to become Ready", FakeNodeName)
	stableChecks := 0
	return waitFor(ctx, workloadsReadyTimeout, "fake node Ready and untainted", kwok, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		ok, err := nodeReadyUntainted(ctx, client)
		if !ok {
			stableChecks = 0
			return false, err
		}
		// Require the node to stay untainted for a few polls, in case
		// something re-adds a taint.
		stableChecks++
		return stableChecks >= 3, nil
	})
}

// waitDefaultServiceAccount waits until the controller-manager has created
// the ServiceAccount default/default, because the API server rejects Pods
// in the default namespace until it exists. It watches kcm, which creates
// it, and calls alive to check the other components.
func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, client kubernetes.Interface, kcm *process, alive func() error) error {
	c.logf("cluster: waiting for the default ServiceAccount")
	return waitFor(ctx, workloadsReadyTimeout, "ServiceAccount default/default", kcm, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, fmt.Errorf("get ServiceAccount default/default: %w", err)
		}
		return true, nil
	})
}

// createFakeNode creates the Node that kwok manages.
func createFakeNode(ctx context.Context, client kubernetes.Interface) error {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(32, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(256<<30, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: FakeNodeName,
			Annotations: map[string]string{
				"kwok.x-k8s.io/node": "fake",
			},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": FakeNodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources.DeepCopy(),
		},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", FakeNodeName, err)
	}
	return nil
}

// nodeReadyUntainted reports whether the fake Node is Ready and has no
// taints, removing the taints once it is Ready. The API server adds a
// node.kubernetes.io/not-ready taint on creation that only the node
// lifecycle controller would remove, and that controller is not run.
func nodeReadyUntainted(ctx context.Context, client kubernetes.Interface) (bool, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("get node %s: %w", FakeNodeName, err)
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return false, fmt.Errorf("node %s is not Ready yet", FakeNodeName)
	}
	if len(node.Spec.Taints) == 0 {
		return true, nil
	}
	patch := []byte(`{"spec":{"taints":null}}`)
	if _, err := client.CoreV1().Nodes().Patch(ctx, FakeNodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("remove taints of node %s: %w", FakeNodeName, err)
	}
	return false, fmt.Errorf("node %s still had taints %v", FakeNodeName, node.Spec.Taints)
}
