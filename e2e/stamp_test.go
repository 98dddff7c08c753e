//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/stamp"
	"github.com/shardkeeper/shardkeeper/pkg/status"
	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// mapAPIVersion is what `helm template --api-versions` needs to render the
// stamping policy, as Helm reads it off a 1.36+ API server.
const mapAPIVersion = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

var mutatingPolicyResources = map[string]schema.GroupVersionResource{
	"MutatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
	"MutatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
}

// stampPolicies renders the chart's stamping policies for the scenario
// (both presets, as the scenario's daemon runs them).
func (s *scenario) stampPolicies(extra ...string) []*unstructured.Unstructured {
	s.t.Helper()
	args := append([]string{"template", s.fleetNS, chartDir, "--namespace", s.fleetNS,
		"--set", "configMap.name=" + s.cmName, "--set", "placement.enabled=true", "--set", "presets.flux.enabled=true",
		"--show-only", "templates/stamppolicy.yaml"}, extra...)
	return decodeObjects(s.t, helm(s.t, args...))
}

// installStampPolicies creates the stamping policies and deletes them when
// the test ends: they are cluster-wide. It returns them.
func (s *scenario) installStampPolicies() []*unstructured.Unstructured {
	t := s.t
	t.Helper()
	objs := s.stampPolicies("--api-versions", mapAPIVersion)
	require.Len(t, objs, 4, "a policy and a binding for each shard label key")
	applyObjects(t, objs)
	t.Cleanup(func() {
		for _, o := range objs {
			err := dyn.Resource(mutatingPolicyResources[o.GetKind()]).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
	return objs
}

// waitStamping waits until the API server labels obj, of resource gvr,
// with label in a dry-run create: the policy is loaded and the daemon
// published a shard.
func (s *scenario) waitStamping(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, label string) {
	s.t.Helper()
	eventually(s.t, time.Minute, fmt.Sprintf("new %s stamped in %s", gvr.Resource, obj.GetNamespace()), func() error {
		out, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(s.ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if out.GetLabels()[label] == "" {
			return notYet("not stamped", nil)
		}
		return nil
	})
}

// burst creates n GitRepos named prefix-<i> spread evenly over namespaces,
// 16 at a time, with the labels labelsOf(i) gives (if set), and returns
// the shard label of each in its create response, by "namespace/name"
// ("" when it had none).
func (s *scenario) burst(namespaces []string, prefix string, n int, labelsOf func(int) map[string]string) map[string]string {
	s.t.Helper()
	var mu sync.Mutex
	born := map[string]string{}
	var errs []error
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				ns := namespaces[i%len(namespaces)]
				obj := testfixture.Object(gitRepos, ns, fmt.Sprintf("%s-%03d", prefix, i), "x", "")
				if labelsOf != nil {
					obj.SetLabels(labelsOf(i))
				}
				out, err := dyn.Resource(gitRepos).Namespace(ns).Create(s.ctx, obj, metav1.CreateOptions{})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					shard := out.GetLabels()[fleetLabel]
					if shard != "" && out.GetAnnotations()[placement.AssignedShardAnnotation] != shard {
						errs = append(errs, fmt.Errorf("%s/%s: stamped %q without placement's record %v", ns, out.GetName(), shard, out.GetAnnotations()))
					}
					born[ns+"/"+out.GetName()] = shard
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	require.Empty(s.t, errs)
	return born
}

// shardsOf lists the GitRepos of namespaces: each one's shard label, by
// "namespace/name", and the shard each namespace's objects are on ("*"
// for more than one).
func (s *scenario) shardsOf(namespaces []string) (map[string]string, map[string]string) {
	s.t.Helper()
	objects, byNS := map[string]string{}, map[string]string{}
	for _, ns := range namespaces {
		list, err := dyn.Resource(gitRepos).Namespace(ns).List(s.ctx, metav1.ListOptions{})
		require.NoError(s.t, err)
		for _, o := range list.Items {
			shard := o.GetLabels()[fleetLabel]
			objects[ns+"/"+o.GetName()] = shard
			if prev, ok := byNS[ns]; ok && prev != shard {
				shard = "*"
			}
			byNS[ns] = shard
		}
	}
	return objects, byNS
}

// spread is max - min of the objects per shard over ids.
func spread(objects map[string]string, ids ...string) (int, map[string]int) {
	loads := map[string]int{}
	for _, shard := range objects {
		loads[shard]++
	}
	lo, hi := -1, 0
	for _, id := range ids {
		if lo < 0 || loads[id] < lo {
			lo = loads[id]
		}
		hi = max(hi, loads[id])
	}
	return hi - lo, loads
}

// TestBornOnTheirShard: with the chart's MutatingAdmissionPolicy on the
// real API server, a burst of 200 GitRepos created at once in 4
// namespaces is labelled in the create requests themselves, with groups
// by namespace and without: the daemon never has to assign one, each
// namespace's objects share a shard, and one placement round spreads them
// within the threshold. Objects created with generateName, which have no
// name at admission, are stamped and spread too. Groups by a label hold
// across namespaces, and an object outside placement's selector is not
// stamped.
func TestBornOnTheirShard(t *testing.T) {
	s := newScenario(t, "stamp", true)
	s.chartArgs = []string{"--api-versions", mapAPIVersion}
	var namespaces []string
	for i := range 4 {
		ns := fmt.Sprintf("%s-tenant-%d", s.fleetNS, i)
		namespaces = append(namespaces, ns)
		_, err := kube.CoreV1().Namespaces().Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, ns := range namespaces {
			if err := dyn.Resource(gitRepos).Namespace(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Errorf("deleting the GitRepos of %s: %v", ns, err)
			}
			if err := kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting namespace %s: %v", ns, err)
			}
		}
	})
	s.installStampPolicies()
	scope := fmt.Sprintf("namespaces: [%s]\nmaxMoves: 200\ninterval: 2s\ncooldown: 1m\nthreshold: 10%%\n", strings.Join(namespaces, ", "))
	s.createConfigMap("s1,s2")
	s.start("--allow-placement", "--stamp")
	s.setPlacement("s1,s2", scope+"groupBy: namespace\n")
	s.waitShards("s1", "s2")
	s.waitStamping(gitRepos, testfixture.Object(gitRepos, namespaces[0], "probe", "x", ""), fleetLabel)

	t.Run("grouped by namespace", func(t *testing.T) {
		s.t = t
		born := s.burst(namespaces, "a", 200, nil)
		assert.Len(t, born, 200)
		for ref, shard := range born {
			assert.Contains(t, []string{"s1", "s2"}, shard, "%s born on a listed, Available shard", ref)
		}
		eventually(t, 2*time.Minute, "each namespace on one shard, spread within the threshold", func() error {
			objects, byNS := s.shardsOf(namespaces)
			d, loads := spread(objects, "s1", "s2")
			if slices.Contains(slices.Collect(maps.Values(byNS)), "*") || d > 10 {
				return fmt.Errorf("namespaces %v, loads %v", byNS, loads)
			}
			return nil
		})
		moved, _ := s.moved()
		assert.Zero(t, moved["assigned"], "the daemon assigned nothing: every object was born labelled (%v)", moved)
		// A moved object cools down; born ones may move at once, so that
		// the first rounds spread a burst. No object moves twice.
		assert.LessOrEqual(t, moved["rebalanced"]+moved["moved"], 200, "%v", moved)
		t.Logf("placement rounds that moved objects: %d, moves: %v", len(s.events(status.ReasonObjectsMoved)), moved)
		s.checkBornInTheCreate(namespaces, born)
	})

	t.Run("object by object", func(t *testing.T) {
		s.t = t
		s.setPlacement("s1,s2", scope)
		eventually(t, time.Minute, "the groups withdrawn from the stamp records", func() error {
			cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, stamp.Name(s.cmName), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, ok := cm.Data[stamp.KeyGroupBy]; ok {
				return fmt.Errorf("still grouped: %v", cm.Data)
			}
			return nil
		})
		born := s.burst(namespaces, "b", 200, nil)
		for ref, shard := range born {
			assert.Contains(t, []string{"s1", "s2"}, shard, "%s born on a listed, Available shard", ref)
		}
		// The policy spreads a burst over the daemon's sequence as its
		// round would: most of it is born where it stays.
		d, bornLoads := spread(born, "s1", "s2")
		t.Logf("born: %v (spread %d)", bornLoads, d)
		assert.Less(t, d, 100, "a burst is not born on one shard: %v", bornLoads)
		eventually(t, 2*time.Minute, "spread within the threshold", func() error {
			objects, _ := s.shardsOf(namespaces)
			if d, loads := spread(objects, "s1", "s2"); d > 20 {
				return fmt.Errorf("loads %v", loads)
			}
			return nil
		})
		moved, _ := s.moved()
		assert.Zero(t, moved["assigned"], "the daemon assigned nothing (%v)", moved)
		t.Logf("moves since the first burst: %v", moved)
	})

	t.Run("with generateName", func(t *testing.T) {
		s.t = t
		// Such an object has no name at admission: the policy hashes its
		// content instead. The loads are within 20 of each other here, so
		// each shard holds at least 22 of the 64 entries of the daemon's
		// sequence; with a random part in every spec, all 64 objects land
		// on one shard by chance with a probability under (42/64)^64, about
		// 2e-12.
		token := strings.ToLower(rand.Text())
		born := map[string]string{}
		for i := range 64 {
			ns := namespaces[i%len(namespaces)]
			obj := testfixture.Object(gitRepos, ns, "", "x", "")
			obj.SetName("")
			obj.SetGenerateName("d-")
			require.NoError(t, unstructured.SetNestedField(obj.Object, fmt.Sprintf("https://example.com/%s/repo-%d", token, i), "spec", "repo"))
			out, err := dyn.Resource(gitRepos).Namespace(ns).Create(s.ctx, obj, metav1.CreateOptions{})
			require.NoError(t, err)
			shard := out.GetLabels()[fleetLabel]
			assert.Contains(t, []string{"s1", "s2"}, shard, "%s/%s born on a listed, Available shard", ns, out.GetName())
			assert.Equal(t, shard, out.GetAnnotations()[placement.AssignedShardAnnotation], "%s/%s: placement's record", ns, out.GetName())
			born[ns+"/"+out.GetName()] = shard
		}
		_, loads := spread(born, "s1", "s2")
		t.Logf("born with generateName: %v", loads)
		assert.True(t, loads["s1"] > 0 && loads["s2"] > 0, "a burst of objects with generateName is not born on one shard: %v", loads)
	})

	t.Run("grouped by a label within each namespace, within the selector", func(t *testing.T) {
		s.t = t
		s.setPlacement("s1,s2", scope+"groupBy: label\ngroupLabel: example.com/tenant\nselector: tier!=ops\n")
		eventually(t, time.Minute, "label groups in the stamp records", func() error {
			cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, stamp.Name(s.cmName), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data[stamp.KeyGroupBy] != "label" || cm.Data[stamp.KeySelector] == "" {
				return fmt.Errorf("records %v", cm.Data)
			}
			return nil
		})
		tenants := []string{"acme", "globex"}
		born := s.burst(namespaces, "c", 40, func(i int) map[string]string {
			l := map[string]string{"example.com/tenant": tenants[i%2]}
			if i == 0 {
				l["tier"] = "ops"
			}
			return l
		})
		outside := namespaces[0] + "/c-000"
		assert.Empty(t, born[outside], "outside placement's selector: not stamped")
		delete(born, outside)
		for ref, shard := range born {
			assert.Contains(t, []string{"s1", "s2"}, shard, "%s born on a listed, Available shard", ref)
		}
		eventually(t, 2*time.Minute, "each tenant of a namespace on one shard", func() error {
			byTenant := map[string]map[string]bool{}
			for _, ns := range namespaces {
				list, err := dyn.Resource(gitRepos).Namespace(ns).List(s.ctx, metav1.ListOptions{LabelSelector: "example.com/tenant,tier!=ops"})
				if err != nil {
					return err
				}
				for _, o := range list.Items {
					tn := ns + "/" + o.GetLabels()["example.com/tenant"]
					if byTenant[tn] == nil {
						byTenant[tn] = map[string]bool{}
					}
					byTenant[tn][o.GetLabels()[fleetLabel]] = true
				}
			}
			for tn, shards := range byTenant {
				if len(shards) != 1 || shards[""] {
					return fmt.Errorf("tenant %s on %v", tn, shards)
				}
			}
			return nil
		})
		o, err := dyn.Resource(gitRepos).Namespace(namespaces[0]).Get(s.ctx, "c-000", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, o.GetLabels()[fleetLabel], "the daemon leaves it alone too")
		moved, _ := s.moved()
		assert.Zero(t, moved["assigned"], "the daemon assigned nothing (%v)", moved)
	})
}

// checkBornInTheCreate checks managedFields: the API server records no
// owner for what a mutating admission policy sets, so the label of an
// object nobody relabelled since its create has no owner at all, and one
// that a round moved since (away, or away and back) has the daemon's
// relabel as its owner: there is no third writer.
func (s *scenario) checkBornInTheCreate(namespaces []string, born map[string]string) {
	s.t.Helper()
	untouched, moved := 0, 0
	for _, ns := range namespaces {
		list, err := dyn.Resource(gitRepos).Namespace(ns).List(s.ctx, metav1.ListOptions{})
		require.NoError(s.t, err)
		for _, o := range list.Items {
			ref := ns + "/" + o.GetName()
			shard, ok := born[ref]
			if !ok {
				continue
			}
			switch owners := labelOwners(o.GetManagedFields(), fleetLabel); {
			case len(owners) == 0:
				assert.Equal(s.t, shard, o.GetLabels()[fleetLabel], "%s: no relabel, yet not the label it was born with", ref)
				untouched++
			default:
				assert.Equal(s.t, []string{"shardkeeper Update"}, owners, "%s: only placement's moves relabel", ref)
				moved++
			}
		}
	}
	assert.Positive(s.t, untouched, "some objects were never relabelled")
	s.t.Logf("%d objects never relabelled since their create, %d moved by placement since", untouched, moved)
}

// labelOwners returns "<manager> <operation>" of the managedFields
// entries that own the label key.
func labelOwners(entries []metav1.ManagedFieldsEntry, key string) []string {
	var out []string
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		if strings.Contains(e.FieldsV1.GetRawString(), `"f:`+key+`"`) {
			out = append(out, e.Manager+" "+string(e.Operation))
		}
	}
	return out
}
