//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// handOverShard is the shard that Flux's sharding guide and Flux Operator's
// sharding guide both name in their examples.
const handOverShard = "shard1"

// Flux's shard annotation, and the arguments that Flux's tools set on a
// shard's controllers.
const (
	fluxRoleAnnotation = "sharding.fluxcd.io/role"
	fluxStorageAdvFlag = "--storage-adv-addr"
	fluxSelectorFlag   = "--watch-label-selector"
	// fluxStorageAdvIndex is the position of --storage-adv-addr among
	// source-controller's arguments as `flux install` renders them, which
	// the guide's overlay and Flux Operator both patch by index.
	fluxStorageAdvIndex = 6
)

// fluxInstall is Flux installed with the shard handOverShard by one of
// Flux's own tools: the objects as that tool applies them, and what it
// takes to make the tool let go of the shard's objects.
type fluxInstall struct {
	// key is the shard label (FluxInstance.spec.sharding.key).
	key string
	// daemonArgs are the daemon's flags for key.
	daemonArgs []string
	// mains are the main controllers, mainService source-controller's Service.
	mains       []*appsv1.Deployment
	mainService *corev1.Service
	// shards are the shard's Deployments, shardService its Service.
	shards       []*appsv1.Deployment
	shardService *corev1.Service
	// pruneDisabled is the annotation with which the tool's garbage
	// collection skips an object it no longer renders.
	pruneDisabled string
	// ownerLabels are the labels by which the tool's garbage collection
	// finds its objects; the hand-over removes them.
	ownerLabels []string
}

// TestHandOverFromFlux installs Flux with a shard as Flux's sharding guide
// and as Flux Operator render it, hands the shard over to shardkeeper by
// the steps of docs/handover.md, and checks that every shard Deployment and
// Service is updated in place and never deleted, not even for a moment.
func TestHandOverFromFlux(t *testing.T) {
	t.Run("the sharding guide's bootstrap overlay", func(t *testing.T) {
		handOver(t, "fluxguide", guideInstall)
	})
	t.Run("Flux Operator's spec.sharding, with its own shard key", func(t *testing.T) {
		handOver(t, "fluxoperator", operatorInstall)
	})
}

// handOver runs the hand-over of docs/handover.md ("From Flux") on what
// install builds in the scenario's Flux namespace: the tool's objects as it
// leaves them, then shardkeeper's steps.
func handOver(t *testing.T, name string, install func(t *testing.T, ns string) fluxInstall) {
	t.Helper()
	began := time.Now()
	t.Cleanup(func() { t.Logf("%s took %s", t.Name(), time.Since(began).Round(time.Second)) })
	s := newScenario(t, name, false)
	in := install(t, s.fluxNS)
	gone := watchDeletions(s)
	installFlux(t, s, in)

	// The tool has let go (Flux's own steps): each shard object carries the
	// annotation that keeps its garbage collection from deleting it, and is
	// no longer in its inventory, so nothing applies it any more.
	objs := shardObjects(in)
	_, stderr, err := kubectl(t, append([]string{"-n", s.fluxNS, "annotate"}, append(objs, in.pruneDisabled+"=disabled")...)...)
	require.NoError(t, err, stderr)
	before := liveVersions(t, s, objs)

	// List the shard: Conflict, nothing touched.
	s.createConfigMap(handOverShard)
	fs := &fluxScenario{scenario: s}
	s.daemon = startDaemon(t, fs.fluxArgs(in.daemonArgs...)...)
	s.waitState(handOverShard, status.StateConflict)
	require.Equal(t, before, liveVersions(t, s, objs), "a shard in conflict is left alone")

	// Hand the objects to shardkeeper, without the tool's owner labels.
	label := append([]string{"-n", s.fluxNS, "label", "--overwrite"}, objs...)
	label = append(label, "app.kubernetes.io/managed-by=shardkeeper")
	for _, l := range in.ownerLabels {
		label = append(label, l+"-")
	}
	_, stderr, err = kubectl(t, label...)
	require.NoError(t, err, stderr)

	s.waitState(handOverShard, status.StateActive)
	inPlace := func() error {
		if g := gone(); len(g) > 0 {
			t.Fatalf("deleted during the hand-over: %v", g)
		}
		return handedOver(s, in, before)
	}
	eventually(t, 2*time.Minute, "the shard updated in place and rolled out", inPlace)
	followsMain(t, s, inPlace)
	holds(t, 3*time.Second, "the handed-over objects stay", inPlace)
	assert.Empty(t, gone(), "no Deployment or Service of the Flux namespace was deleted at any moment")
}

// installFlux creates in's objects, as the tool applies them. The scenario
// starts with helm-controller as `flux install` renders it: it becomes the
// tool's.
func installFlux(t *testing.T, s *scenario, in fluxInstall) {
	t.Helper()
	for _, d := range in.mains {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := kube.AppsV1().Deployments(s.fluxNS).Get(s.ctx, d.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = kube.AppsV1().Deployments(s.fluxNS).Create(s.ctx, d, metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			update := d.DeepCopy()
			update.ResourceVersion = live.ResourceVersion
			_, err = kube.AppsV1().Deployments(s.fluxNS).Update(s.ctx, update, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err, d.Name)
	}
	for _, d := range in.shards {
		_, err := kube.AppsV1().Deployments(s.fluxNS).Create(s.ctx, d, metav1.CreateOptions{})
		require.NoError(t, err, d.Name)
	}
	for _, svc := range []*corev1.Service{in.mainService, in.shardService} {
		_, err := kube.CoreV1().Services(s.fluxNS).Create(s.ctx, svc, metav1.CreateOptions{})
		require.NoError(t, err, svc.Name)
	}
	eventually(t, time.Minute, "Flux's Deployments available", func() error {
		for _, d := range append(slices.Clone(in.mains), in.shards...) {
			if err := available(s, d.Name); err != nil {
				return err
			}
		}
		return nil
	})
}

// shardObjects are the kubectl names of the shard's objects.
func shardObjects(in fluxInstall) []string {
	var out []string
	for _, d := range in.shards {
		out = append(out, "deployment/"+d.Name)
	}
	return append(out, "service/"+in.shardService.Name)
}

// liveVersion is what a write by shardkeeper would change on an object:
// its identity, its spec's generation (a Service has none), its labels and
// annotations. The resourceVersion is no measure: the Deployment
// controller writes a Deployment's status at any time.
type liveVersion struct {
	UID         types.UID
	Generation  int64
	Labels      map[string]string
	Annotations map[string]string
}

// liveVersions returns the liveVersion of each of objs ("deployment/name"
// or "service/name") in the Flux namespace.
func liveVersions(t *testing.T, s *scenario, objs []string) map[string]liveVersion {
	t.Helper()
	out := map[string]liveVersion{}
	for _, o := range objs {
		kind, name, _ := strings.Cut(o, "/")
		var m metav1.Object
		var err error
		if kind == "deployment" {
			m, err = kube.AppsV1().Deployments(s.fluxNS).Get(s.ctx, name, metav1.GetOptions{})
		} else {
			m, err = kube.CoreV1().Services(s.fluxNS).Get(s.ctx, name, metav1.GetOptions{})
		}
		require.NoError(t, err, o)
		out[o] = liveVersion{m.GetUID(), m.GetGeneration(), m.GetLabels(), m.GetAnnotations()}
	}
	return out
}

// available fails unless the Deployment name of the Flux namespace has
// rolled out its current generation, and has a pod available.
func available(s *scenario, name string) error {
	d, err := kube.AppsV1().Deployments(s.fluxNS).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != d.Status.Replicas || d.Status.AvailableReplicas < 1 {
		return fmt.Errorf("%s not rolled out: %+v", name, d.Status)
	}
	return nil
}

// handedOver checks that each of the shard's objects is the one that was
// there before (its UID), rendered by shardkeeper from the live main
// controller, and rolled out.
func handedOver(s *scenario, in fluxInstall, before map[string]liveVersion) error {
	for _, shard := range in.shards {
		d, err := kube.AppsV1().Deployments(s.fluxNS).Get(s.ctx, shard.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if uid := before["deployment/"+d.Name].UID; d.UID != uid {
			return fmt.Errorf("deployment/%s was replaced: uid %s, was %s", d.Name, d.UID, uid)
		}
		main, err := kube.AppsV1().Deployments(s.fluxNS).Get(s.ctx, strings.TrimSuffix(d.Name, "-"+handOverShard), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := renderedShard(in, main, d); err != nil {
			return fmt.Errorf("deployment/%s: %w", d.Name, err)
		}
		if err := available(s, d.Name); err != nil {
			return err
		}
	}
	svc, err := kube.CoreV1().Services(s.fluxNS).Get(s.ctx, in.shardService.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if uid := before["service/"+svc.Name].UID; svc.UID != uid {
		return fmt.Errorf("service/%s was replaced: uid %s, was %s", svc.Name, svc.UID, uid)
	}
	if err := renderedService(in, svc); err != nil {
		return fmt.Errorf("service/%s: %w", svc.Name, err)
	}
	return nil
}

// renderedShard checks the shard Deployment d against the contract, for
// the live main controller main.
func renderedShard(in fluxInstall, main, d *appsv1.Deployment) error {
	controller, app := main.Name, main.Name+"-"+handOverShard
	if err := shardkeeperMeta(in, controller, d.ObjectMeta); err != nil {
		return err
	}
	if want := map[string]string{"app": app}; !maps.Equal(d.Spec.Selector.MatchLabels, want) || len(d.Spec.Selector.MatchExpressions) > 0 {
		return fmt.Errorf("selector %v, want exactly %v", d.Spec.Selector, want)
	}
	pod := d.Spec.Template
	if pod.Labels["app"] != app || pod.Labels["shardkeeper.io/shard"] != handOverShard || pod.Annotations[fluxRoleAnnotation] != "shard" {
		return fmt.Errorf("pod labels %v, annotations %v", pod.Labels, pod.Annotations)
	}
	if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != "manager" {
		return fmt.Errorf("containers %v, want manager alone", pod.Spec.Containers)
	}
	c, mc := pod.Spec.Containers[0], main.Spec.Template.Spec.Containers[0]
	if c.Image != mc.Image || !equality.Semantic.DeepEqual(c.Env, mc.Env) || pod.Spec.ServiceAccountName != main.Spec.Template.Spec.ServiceAccountName {
		return errors.New("image, environment or ServiceAccount differ from the main controller's")
	}
	if want := shardArgs(in, main); !slices.Equal(c.Args, want) {
		return fmt.Errorf("args %q, want %q", c.Args, want)
	}
	return nil
}

// shardArgs are the arguments a shard copy of main runs with: main's, less
// its selector and advertised address, then the shard's selector and, for
// source-controller, the address of the shard's own Service, last.
func shardArgs(in fluxInstall, main *appsv1.Deployment) []string {
	var out []string
	for _, a := range main.Spec.Template.Spec.Containers[0].Args {
		if !strings.HasPrefix(a, fluxSelectorFlag+"=") && !strings.HasPrefix(a, fluxStorageAdvFlag+"=") {
			out = append(out, a)
		}
	}
	out = append(out, fluxSelectorFlag+"="+in.key+"="+handOverShard)
	if main.Name == "source-controller" {
		out = append(out, fluxStorageAdvFlag+"=source-controller-"+handOverShard+".$(RUNTIME_NAMESPACE).svc.cluster.local.")
	}
	return out
}

// renderedService checks the shard's Service against the contract.
func renderedService(in fluxInstall, svc *corev1.Service) error {
	if err := shardkeeperMeta(in, "source-controller", svc.ObjectMeta); err != nil {
		return err
	}
	if want := map[string]string{"app": "source-controller-" + handOverShard}; !maps.Equal(svc.Spec.Selector, want) {
		return fmt.Errorf("selector %v, want %v", svc.Spec.Selector, want)
	}
	if svc.Spec.Type != in.mainService.Spec.Type || !equality.Semantic.DeepEqual(svc.Spec.Ports, in.mainService.Spec.Ports) {
		return fmt.Errorf("type %s and ports %v, want the main Service's", svc.Spec.Type, svc.Spec.Ports)
	}
	return nil
}

// shardkeeperMeta checks that a handed-over object of controller carries
// shardkeeper's labels and annotations and no longer the tool's owner
// labels, and keeps the annotation that the tool's garbage collection
// skips.
func shardkeeperMeta(in fluxInstall, controller string, m metav1.ObjectMeta) error {
	want := map[string]string{
		"app.kubernetes.io/managed-by": "shardkeeper", "shardkeeper.io/shard": handOverShard, "shardkeeper.io/controller": controller,
	}
	for k, v := range want {
		if m.Labels[k] != v {
			return fmt.Errorf("label %s=%q, want %q", k, m.Labels[k], v)
		}
	}
	for _, k := range in.ownerLabels {
		if _, ok := m.Labels[k]; ok {
			return fmt.Errorf("still labelled %s", k)
		}
	}
	if m.Annotations[fluxRoleAnnotation] != "shard" || m.Annotations["shardkeeper.io/spec-hash"] == "" ||
		m.Annotations["shardkeeper.io/source"] != m.Namespace+"/"+controller {
		return fmt.Errorf("annotations %v", m.Annotations)
	}
	if !strings.EqualFold(m.Annotations[in.pruneDisabled], "disabled") {
		return fmt.Errorf("annotation %s lost: %v", in.pruneDisabled, m.Annotations)
	}
	return nil
}

// followsMain changes the main kustomize-controller as a Flux upgrade would
// and checks that the handed-over shard follows, and that inPlace still
// holds once it has rolled out.
func followsMain(t *testing.T, s *scenario, inPlace func() error) {
	t.Helper()
	const image = "registry.k8s.io/pause:3.9"
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"manager","image":%q}]}}}}`, image)
	_, err := kube.AppsV1().Deployments(s.fluxNS).Patch(s.ctx, "kustomize-controller", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	name := "kustomize-controller-" + handOverShard
	eventually(t, time.Minute, name+" follows the main controller's new image", func() error {
		d, err := kube.AppsV1().Deployments(s.fluxNS).Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("image %s", got)
		}
		return nil
	})
	eventually(t, time.Minute, "the shard rolled out again, in place", inPlace)
}

// watchDeletions watches the Deployments and Services of ns and returns
// what has been deleted so far, as "kind/name". A watch that the API server
// ends is resumed from the last resourceVersion seen (client-go's
// RetryWatcher), so no deletion goes unseen; one that cannot be resumed
// (its version expired) is reported, since a deletion could then be missed.
func watchDeletions(s *scenario) func() []string {
	t := s.t
	t.Helper()
	var mu sync.Mutex
	var out []string
	var done bool
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	record := func(kind, rv string, watchFn cache.WatchFuncWithContext) {
		w, err := watchtools.NewRetryWatcherWithContext(s.ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFn})
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				m, ok := ev.Object.(metav1.Object)
				if ok && ev.Type == watch.Deleted {
					mu.Lock()
					out = append(out, kind+"/"+m.GetName())
					mu.Unlock()
				}
			}
			mu.Lock()
			if !done {
				out = append(out, "the watch of "+kind+"s ended early")
			}
			mu.Unlock()
		}()
	}
	deployments := kube.AppsV1().Deployments(s.fluxNS)
	dl, err := deployments.List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	record("deployment", dl.ResourceVersion, deployments.Watch)
	services := kube.CoreV1().Services(s.fluxNS)
	sl, err := services.List(s.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	record("service", sl.ResourceVersion, services.Watch)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(out)
	}
}

// fluxComponents are the Deployments of `flux install` (gotk-components.yaml,
// and the components that Flux Operator builds from), before any sharding
// patch.
func fluxComponents(ns string) []*appsv1.Deployment {
	return []*appsv1.Deployment{
		testfixture.SourceController(ns, false),
		testfixture.KustomizeController(ns, false),
		testfixture.HelmController(ns, false),
	}
}

// overlayShard is what the guide's shard overlay and Flux Operator's shard
// kustomization both do to a component: nameSuffix "-<id>", the
// commonAnnotation sharding.fluxcd.io/role: shard (which kustomize also
// puts on a Deployment's pod template), and "app: <name>-<id>" as the
// Deployment's selector and pod label. The arguments are the caller's.
func overlayShard(d *appsv1.Deployment) *appsv1.Deployment {
	app := d.Name + "-" + handOverShard
	d.Name = app
	d.Annotations = withEntry(d.Annotations, fluxRoleAnnotation, "shard")
	d.Spec.Template.Annotations = withEntry(d.Spec.Template.Annotations, fluxRoleAnnotation, "shard")
	d.Spec.Selector.MatchLabels["app"] = app
	d.Spec.Template.Labels["app"] = app
	return d
}

// overlayShardService is the shard overlay on source-controller's Service.
func overlayShardService(svc *corev1.Service) *corev1.Service {
	svc.Name += "-" + handOverShard
	svc.Annotations = withEntry(svc.Annotations, fluxRoleAnnotation, "shard")
	svc.Spec.Selector["app"] = svc.Name
	return svc
}

// shardAdvertised is the address that both tools give a source-controller
// shard.
const shardAdvertised = fluxStorageAdvFlag + "=source-controller-" + handOverShard + ".$(RUNTIME_NAMESPACE).svc.cluster.local."

// guideInstall is Flux bootstrapped with Flux's sharding guide
// (fluxcd/website content/en/flux/installation/configuration/sharding.md):
// the shard overlay shard1/kustomization.yaml over gotk-components.yaml,
// and the patch of flux-system/kustomization.yaml that puts
// --watch-label-selector=!sharding.fluxcd.io/key first among the main
// controllers' arguments. kustomize-controller applies all of it, with its
// owner labels (the Kustomization flux-system, in the Flux namespace).
func guideInstall(t *testing.T, ns string) fluxInstall {
	t.Helper()
	const key = "sharding.fluxcd.io/key"
	owner := map[string]string{"kustomize.toolkit.fluxcd.io/name": "flux-system", "kustomize.toolkit.fluxcd.io/namespace": ns}
	in := fluxInstall{
		key: key, pruneDisabled: "kustomize.toolkit.fluxcd.io/prune",
		ownerLabels: slices.Sorted(maps.Keys(owner)),
	}
	for _, d := range fluxComponents(ns) {
		main := d.DeepCopy()
		c := &main.Spec.Template.Spec.Containers[0]
		c.Args = append([]string{fluxSelectorFlag + "=!" + key}, c.Args...)
		maps.Copy(main.Labels, owner)
		in.mains = append(in.mains, main)

		shard := overlayShard(d)
		c = &shard.Spec.Template.Spec.Containers[0]
		if shard.Name == "source-controller-"+handOverShard {
			require.True(t, strings.HasPrefix(c.Args[fluxStorageAdvIndex], fluxStorageAdvFlag+"="), "the guide replaces args/6, %q", c.Args)
			c.Args[fluxStorageAdvIndex] = shardAdvertised
		}
		c.Args = append(c.Args, fluxSelectorFlag+"="+key+"="+handOverShard)
		maps.Copy(shard.Labels, owner)
		in.shards = append(in.shards, shard)
	}
	in.mainService = testfixture.SourceControllerService(ns)
	maps.Copy(in.mainService.Labels, owner)
	in.shardService = overlayShardService(in.mainService.DeepCopy())
	return in
}

// operatorShardKey is the FluxInstance's spec.sharding.key in the
// scenario: not Flux's default, to show that --flux-shard-key carries it.
const operatorShardKey = "example.com/shard"

// operatorInstall is Flux installed by Flux Operator from a FluxInstance
// "flux" with spec.sharding {key: operatorShardKey, shards: [shard1]}
// (controlplaneio-fluxcd/flux-operator internal/builder/templates.go): the
// shard kustomization over the components, which appends the shard's
// --storage-adv-addr and selector; the main controllers' exclusion
// appended last; the labels and annotations of its label and annotation
// transformers; and the owner labels of its server-side apply.
func operatorInstall(t *testing.T, ns string) fluxInstall {
	t.Helper()
	const key = operatorShardKey
	owner := map[string]string{"fluxcd.controlplane.io/name": "flux", "fluxcd.controlplane.io/namespace": ns}
	meta := func(m *metav1.ObjectMeta) {
		maps.Copy(m.Labels, owner)
		m.Labels["app.kubernetes.io/managed-by"] = "flux-operator"
		m.Annotations = withEntry(m.Annotations, "kustomize.toolkit.fluxcd.io/ssa", "Ignore")
		m.Annotations["kustomize.toolkit.fluxcd.io/prune"] = "Disabled"
	}
	in := fluxInstall{
		key: key, daemonArgs: []string{"--flux-shard-key=" + key}, pruneDisabled: "fluxcd.controlplane.io/prune",
		ownerLabels: slices.Sorted(maps.Keys(owner)),
	}
	for _, d := range fluxComponents(ns) {
		main := d.DeepCopy()
		c := &main.Spec.Template.Spec.Containers[0]
		c.Args = append(c.Args, fluxSelectorFlag+"=!"+key)
		meta(&main.ObjectMeta)
		in.mains = append(in.mains, main)

		shard := overlayShard(d)
		c = &shard.Spec.Template.Spec.Containers[0]
		if shard.Name == "source-controller-"+handOverShard {
			require.True(t, strings.HasPrefix(c.Args[fluxStorageAdvIndex], fluxStorageAdvFlag+"="), "%q", c.Args)
			c.Args = append(c.Args, shardAdvertised)
		}
		c.Args = append(c.Args, fluxSelectorFlag+"="+key+"="+handOverShard)
		meta(&shard.ObjectMeta)
		in.shards = append(in.shards, shard)
	}
	in.mainService = testfixture.SourceControllerService(ns)
	meta(&in.mainService.ObjectMeta)
	in.shardService = overlayShardService(in.mainService.DeepCopy())
	return in
}

// withEntry returns m, made if nil, with k set to v.
func withEntry(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}
