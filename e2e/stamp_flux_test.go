//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
)

// The objects each namespace of TestFluxObjectsBornOnTheirShard creates
// at once, and the HelmCharts helm-controller makes of its HelmReleases
// (<namespace>-<release>).
var (
	bornObjects = []fluxObject{
		{fluxGitRepositories, "repo"}, {fluxKustomizations, "ks"}, {fluxHelmRepositories, "charts"},
		{helmReleases, "hr-1"}, {helmReleases, "hr-2"},
	}
	bornReleases = []string{"hr-1", "hr-2"}
)

// TestFluxObjectsBornOnTheirShard: with the chart's MutatingAdmissionPolicy
// and the real Flux controllers, the Flux objects of a burst are labelled
// with their namespace's shard in their create requests, so that no main
// (unsharded) controller ever sees one: none of their versions lacks the
// label, no main controller logs them, and each is reconciled by its
// shard's controllers alone. A control namespace out of placement's scope,
// created in the same burst, is not stamped, and the same check catches
// the main controllers that take its objects: it can fail.
func TestFluxObjectsBornOnTheirShard(t *testing.T) {
	began := time.Now()
	t.Cleanup(func() { t.Logf("TestFluxObjectsBornOnTheirShard took %s", time.Since(began).Round(time.Second)) })
	fs := newFluxScenario(t, "stampflux")
	fs.chartArgs = []string{"--api-versions", mapAPIVersion}
	var namespaces []string
	for i := range 4 {
		namespaces = append(namespaces, fmt.Sprintf("stampflux-t%d", i))
	}
	control := "stampflux-control"
	fs.testNamespaces(append(slices.Clone(namespaces), control)...)
	fs.gitURL, fs.helmURL = serveGit(t), serveHelmRepository(t)
	fs.installStampPolicies()
	fs.createConfigMap("a,b")
	fs.daemon = startDaemon(t, fs.fluxArgs("--allow-placement", "--stamp")...)
	fs.kubelet = startFluxKubelet(t, fs.fluxNS)
	// The threshold is above the whole burst's load (5 objects and 2
	// HelmCharts a namespace, 28 in all), so that no round moves a
	// namespace, wherever the policy put it: each object stays on the
	// shard it was born on, and only that shard's controllers ever serve
	// it.
	fs.setPlacement("a,b", fmt.Sprintf("namespaces: [%s]\ninterval: 2s\nthreshold: 30\n", strings.Join(namespaces, ", ")))
	fs.waitFluxShards("a", "b")
	versions := watchVersions(t, append(slices.Clone(namespaces), control), fluxGitRepositories, fluxHelmRepositories, fluxHelmCharts, fluxKustomizations, helmReleases)

	// Two waves, each a burst of 2 namespaces' objects at once; the
	// control namespace's objects come in the first. Between them, the
	// daemon records the first wave's namespaces on the shards they were
	// born on, so the second is stamped from the records of a round and
	// the first from the records of none.
	// Each kind is probed: the API server refuses with 503 the create of a
	// custom resource a mutating policy matches until its 5-second poll of
	// /openapi/v3 has seen the kind's group version
	// (k8s.io/apiserver pkg/admission/plugin/policy/mutating/patch/typeconverter.go).
	for _, gvr := range []schema.GroupVersionResource{fluxGitRepositories, fluxKustomizations, fluxHelmRepositories, helmReleases} {
		fs.waitStamping(gvr, fs.bornObject(fluxObject{gvr, "probe"}, namespaces[0]), fluxLabel)
	}
	born := fs.bornBurst(append(slices.Clone(namespaces[:2]), control))
	shardOf := fs.namespaceShards(born, namespaces[:2])
	fs.waitStampRecords(shardOf)
	second := fs.bornBurst(namespaces[2:])
	maps.Copy(shardOf, fs.namespaceShards(second, namespaces[2:]))
	maps.Copy(born, second)
	t.Logf("burst of %d objects, namespaces on shards %v", len(born), shardOf)

	t.Run("born with their shard", func(t *testing.T) {
		fs.t = t
		assert.Len(t, born, (len(namespaces)+1)*len(bornObjects))
		for ref, shard := range born {
			ns, _, _ := strings.Cut(ref, "/")
			if ns == control {
				assert.Empty(t, shard, "%s, out of placement's scope, is not stamped", ref)
				continue
			}
			assert.Contains(t, []string{"a", "b"}, shard, "%s born on a listed, Available shard", ref)
		}
	})

	t.Run("reconciled by their shard alone", func(t *testing.T) {
		fs.t = t
		for _, ns := range namespaces {
			fs.assertServedFromBirth(versions, ns, shardOf[ns])
		}
		moved, _ := fs.moved()
		assert.Empty(t, moved, "placement moved nothing: every object was born on its shard, and stayed")
	})

	t.Run("the check catches a main controller", func(t *testing.T) {
		fs.t = t
		for _, o := range bornObjects {
			fs.waitReady(o.gvr, control, o.name)
		}
		var marks []string
		var want []string
		for _, c := range fluxControllers {
			want = append(want, c+" logged ")
		}
		for _, o := range bornObjects {
			want = append(want, o.String()+" got finalizers ", o.String()+" had its status written ")
		}
		eventually(t, fluxReconcileTimeout, "the main controllers' marks on "+control, func() error {
			marks = fs.mainControllerMarks(versions, control)
			for _, w := range want {
				if !slices.ContainsFunc(marks, func(m string) bool { return strings.HasPrefix(m, w) }) {
					return fmt.Errorf("no mark %q: %v", w, marks)
				}
			}
			return nil
		})
		t.Logf("marks of the main controllers on the unstamped namespace %s:\n%s", control, strings.Join(marks, "\n"))
	})
}

// namespaceShards returns the shard the objects of each of namespaces
// were born on, as born (bornBurst) says, and fails the test unless all
// the objects of a namespace were born on one shard: a namespace is one
// group, and the policy stamps a new group's objects alike.
func (fs *fluxScenario) namespaceShards(born map[string]string, namespaces []string) map[string]string {
	fs.t.Helper()
	out := map[string]string{}
	for ref, shard := range born {
		ns, _, _ := strings.Cut(ref, "/")
		if !slices.Contains(namespaces, ns) {
			continue
		}
		if prev, ok := out[ns]; ok && prev != shard {
			fs.t.Fatalf("namespace %s born on shards %q and %q: %v", ns, prev, shard, born)
		}
		out[ns] = shard
	}
	require.Len(fs.t, out, len(namespaces))
	return out
}

// waitStampRecords waits until the daemon records each namespace of
// shards on its shard.
func (fs *fluxScenario) waitStampRecords(shards map[string]string) {
	fs.t.Helper()
	eventually(fs.t, time.Minute, fmt.Sprintf("namespaces recorded on their shards %v", shards), func() error {
		cm, err := kube.CoreV1().ConfigMaps(fs.fleetNS).Get(fs.ctx, stamp.Name(fs.cmName), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for ns, shard := range shards {
			if got := cm.Data["namespace."+ns]; got != shard {
				return fmt.Errorf("%s recorded on %q: %v", ns, got, cm.Data)
			}
		}
		return nil
	})
}

// bornObject is obj in ns as a user writes it, without a shard label:
// bornObjects' GitRepository and HelmRepository serve the test's Git and
// Helm repositories, its Kustomization applies the Git repository, and
// its HelmReleases install the Helm repository's chart.
func (fs *fluxScenario) bornObject(obj fluxObject, ns string) *unstructured.Unstructured {
	var spec map[string]any
	switch obj.gvr {
	case fluxGitRepositories:
		spec = map[string]any{"interval": "1m", "url": fs.gitURL, "ref": map[string]any{"branch": gitBranch}}
	case fluxKustomizations:
		spec = map[string]any{
			"interval": "1m", "path": "./", "prune": true, "targetNamespace": ns,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "repo"},
		}
	case fluxHelmRepositories:
		spec = map[string]any{"interval": "1m", "url": fs.helmURL}
	case helmReleases:
		spec = map[string]any{"interval": "1m", "chart": map[string]any{"spec": map[string]any{
			"chart": chartName, "version": chartVersion, "interval": "1m",
			"sourceRef": map[string]any{"kind": "HelmRepository", "name": "charts"},
		}}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.gvr.GroupVersion().String(), "kind": fluxKinds[obj.gvr],
		"metadata": map[string]any{"name": obj.name, "namespace": ns},
		"spec":     spec,
	}}
}

// bornBurst creates bornObjects in each of namespaces, all at once, and
// returns the shard label of each in its create response, by
// "namespace/Kind name" ("" for none). A stamped object must carry
// placement's record of the shard too, and a HelmRelease the shard label
// in its chart template, for the HelmChart that helm-controller makes.
func (fs *fluxScenario) bornBurst(namespaces []string) map[string]string {
	fs.t.Helper()
	var mu sync.Mutex
	born := map[string]string{}
	var errs []error
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		for _, obj := range bornObjects {
			wg.Go(func() {
				out, err := dyn.Resource(obj.gvr).Namespace(ns).Create(fs.ctx, fs.bornObject(obj, ns), metav1.CreateOptions{})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("create %s in %s: %w", obj, ns, err))
					return
				}
				shard := out.GetLabels()[fluxLabel]
				born[ns+"/"+obj.String()] = shard
				if shard == "" {
					return
				}
				if placed := out.GetAnnotations()[placement.AssignedShardAnnotation]; placed != shard {
					errs = append(errs, fmt.Errorf("%s in %s: stamped %q, placement's record %q", obj, ns, shard, placed))
				}
				if obj.gvr == helmReleases {
					chartLabels, _, _ := unstructured.NestedStringMap(out.Object, "spec", "chart", "metadata", "labels")
					if chartLabels[fluxLabel] != shard {
						errs = append(errs, fmt.Errorf("%s in %s: stamped %q, its chart template labelled %v", obj, ns, shard, chartLabels))
					}
				}
			})
		}
	}
	wg.Wait()
	require.Empty(fs.t, errs)
	return born
}

// assertServedFromBirth checks that the objects of namespace ns, and the
// HelmCharts made of its HelmReleases, are reconciled (finalizer, Ready)
// by the controllers of shard alone, that every version of them carried
// the label of shard, and that no main controller left a mark on them.
func (fs *fluxScenario) assertServedFromBirth(versions *versionLog, ns, shard string) {
	t := fs.t
	t.Helper()
	objs := slices.Clone(bornObjects)
	for _, hr := range bornReleases {
		objs = append(objs, fluxObject{fluxHelmCharts, ns + "-" + hr})
	}
	for _, o := range objs {
		fs.waitReady(o.gvr, ns, o.name)
		got, err := dyn.Resource(o.gvr).Namespace(ns).Get(fs.ctx, o.name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Contains(t, got.GetFinalizers(), fluxFinalizer, "%s/%s reconciled", ns, o)
		assert.Equal(t, shard, got.GetLabels()[fluxLabel], "%s/%s on its shard", ns, o)
		if o.gvr != fluxHelmCharts {
			// The API server records no owner for what a mutating policy
			// sets: an owner would be a later relabel.
			assert.Empty(t, labelOwners(got.GetManagedFields(), fluxLabel), "%s/%s: nobody wrote the label it was born with", ns, o)
		}
		versions.waitSeen(t, o.gvr, ns, o.name, got.GetResourceVersion())
		var off []string
		for _, v := range versions.of(o.gvr, ns, o.name) {
			if v.shard != shard {
				off = append(off, fmt.Sprintf("%s labelled %q", v.rv, v.shard))
			}
		}
		assert.Empty(t, off, "%s/%s: versions off shard %s, which another shard's or a main controller's watch saw", ns, o, shard)
	}
	fs.assertArtifactFrom(fluxGitRepositories, ns, "repo", "source-controller-"+shard)
	for _, hr := range bornReleases {
		fs.assertArtifactFrom(fluxHelmCharts, ns, ns+"-"+hr, "source-controller-"+shard)
	}
	fs.assertOnlyLoggedBy(ns, fluxShardDeployments(shard)...)
	assert.Empty(t, fs.mainControllerMarks(versions, ns), "the main controllers left no mark on %s", ns)
}

// mainControllerMarks lists what shows that a main controller acted on
// the objects of namespace ns: a main controller's log that names ns
// ("<controller> logged ..."), or a version of an object that, without
// a shard label, got a finalizer or a new status ("<Kind> <name> got
// finalizers ...", "<Kind> <name> had its status written ..."): the main
// controllers watch the objects without one, and only they do.
func (fs *fluxScenario) mainControllerMarks(versions *versionLog, ns string) []string {
	fs.t.Helper()
	var marks []string
	quoted := fmt.Sprintf("%q", ns)
	for _, c := range fluxControllers {
		l, err := fs.kubelet.log(c)
		require.NoError(fs.t, err)
		for line := range strings.SplitSeq(l, "\n") {
			if strings.Contains(line, quoted) {
				marks = append(marks, c+" logged "+line[:min(len(line), 300)])
				break
			}
		}
	}
	for _, o := range versions.objects(ns) {
		var finalized, written bool
		seen := versions.of(o.gvr, ns, o.name)
		for i, v := range seen {
			if v.shard != "" {
				continue
			}
			if len(v.finalizers) > 0 && !finalized {
				finalized = true
				marks = append(marks, fmt.Sprintf("%s got finalizers %v while unlabelled (resourceVersion %s)", o, v.finalizers, v.rv))
			}
			// A status at the create is the CRD's defaults: only a
			// later change of it is a controller's write.
			if i > 0 && v.status != seen[i-1].status && !written {
				written = true
				marks = append(marks, fmt.Sprintf("%s had its status written while unlabelled (resourceVersion %s)", o, v.rv))
			}
		}
	}
	return marks
}

// seenVersion is what a version of a Flux object showed of its
// controllers.
type seenVersion struct {
	rv         string
	shard      string
	finalizers []string
	// status is the version's status as JSON.
	status string
}

// versionLog records every version of the Flux objects of some
// namespaces, as watches deliver them: a controller's every write is one.
type versionLog struct {
	mu       sync.Mutex
	versions map[string][]seenVersion
	kinds    map[string]fluxObject
	errs     []error
}

func versionKey(gvr schema.GroupVersionResource, ns, name string) string {
	return gvr.Resource + "/" + ns + "/" + name
}

// watchVersions watches gvrs in every namespace, from now until the test
// ends, and records the versions of the objects of namespaces.
func watchVersions(t *testing.T, namespaces []string, gvrs ...schema.GroupVersionResource) *versionLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	v := &versionLog{versions: map[string][]seenVersion{}, kinds: map[string]fluxObject{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, gvr := range gvrs {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		require.NoError(t, err)
		rv := list.GetResourceVersion()
		w, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		require.NoError(t, err)
		wg.Go(func() { v.follow(ctx, gvr, w, rv, namespaces) })
	}
	return v
}

// follow records the events of w, and watches again from the last
// version seen when the API server ends the watch, until ctx ends.
func (v *versionLog) follow(ctx context.Context, gvr schema.GroupVersionResource, w watch.Interface, rv string, namespaces []string) {
	for {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				v.fail(fmt.Errorf("watch %s: %w", gvr.Resource, apierrors.FromObject(ev.Object)))
				continue
			}
			o, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type == watch.Bookmark || !slices.Contains(namespaces, o.GetNamespace()) {
				continue
			}
			status, err := json.Marshal(o.Object["status"])
			if err != nil {
				v.fail(fmt.Errorf("%s %s/%s: status: %w", gvr.Resource, o.GetNamespace(), o.GetName(), err))
			}
			v.mu.Lock()
			k := versionKey(gvr, o.GetNamespace(), o.GetName())
			v.kinds[k] = fluxObject{gvr, o.GetName()}
			v.versions[k] = append(v.versions[k], seenVersion{rv: rv, shard: o.GetLabels()[fluxLabel], finalizers: o.GetFinalizers(), status: string(status)})
			v.mu.Unlock()
		}
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		var err error
		w, err = dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() == nil {
				v.fail(fmt.Errorf("watch %s again from %s: %w", gvr.Resource, rv, err))
			}
			return
		}
	}
}

func (v *versionLog) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err)
}

// of returns the versions of an object seen so far.
func (v *versionLog) of(gvr schema.GroupVersionResource, ns, name string) []seenVersion {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.versions[versionKey(gvr, ns, name)])
}

// objects returns the objects of ns seen so far, sorted.
func (v *versionLog) objects(ns string) []fluxObject {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []fluxObject
	for k, o := range v.kinds {
		if strings.HasPrefix(k, o.gvr.Resource+"/"+ns+"/") {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b fluxObject) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// waitSeen waits until the watch delivered the object's version rv: the
// versions recorded then are all it had up to rv. A watch that failed
// fails the test, since versions it missed could be any.
func (v *versionLog) waitSeen(t *testing.T, gvr schema.GroupVersionResource, ns, name, rv string) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("the watch saw %s %s/%s at %s", gvr.Resource, ns, name, rv), func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		if len(v.errs) > 0 {
			return fmt.Errorf("the watches of the Flux objects failed: %w", errors.Join(v.errs...))
		}
		if !slices.ContainsFunc(v.versions[versionKey(gvr, ns, name)], func(s seenVersion) bool { return s.rv == rv }) {
			return errors.New("not yet")
		}
		return nil
	})
}
