//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// uiFixtureDir holds what the Rancher extension's tests read as the
// daemon's output, relative to this package.
const uiFixtureDir = "../ui/pkg/shardkeeper-extension/fixtures"

// updateUIFixtureEnv, set to 1, rewrites the fixtures from the live run
// instead of checking them.
const updateUIFixtureEnv = "SHARDKEEPER_UPDATE_UI_FIXTURE"

// uiAdmission is what the API server answered the extension's two kinds
// of save: the refusal's error message and the removal's warning.
type uiAdmission struct {
	Refusal string `json:"refusal"`
	Warning string `json:"warning"`
}

// TestUIFixture runs the scenario the Rancher extension's page is tested
// on: a shard Active, one Blocked with objects, one whose git Jobs cannot
// be placed, objects on a shard that does not exist, and the admission
// policy refusing one edit and warning on another. It checks that the live
// status ConfigMap and the admission answers have the shape of the
// committed fixtures (so the page's tests cannot drift from what the
// daemon writes), or rewrites them with SHARDKEEPER_UPDATE_UI_FIXTURE=1.
func TestUIFixture(t *testing.T) {
	s := newScenario(t, "uifixture", true)
	s.createConfigMap("- shard0\n- shard1\n- id: gpu\n  nodeSelector: {type: kwok}\n" +
		"  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n")
	s.installAdmissionPolicies()
	require.NoError(t, installCRD(s.ctx, helmReleases))
	s.start()
	s.waitShards("shard0", "shard1", "gpu")
	s.object(gitRepos, "payments", fleetLabel, "shard1")
	s.object(helmOps, "ingress", fleetLabel, "shard1")
	s.object(helmReleases, "podinfo", fluxLabel, "shard1")
	s.object(gitRepos, "api", fleetLabel, "shard0")
	s.object(gitRepos, "typo-repo", fleetLabel, "shard9")
	eventually(t, time.Minute, "the status counts the objects", func() error {
		st := s.status()
		for _, sh := range st.Shards {
			// Other tests of the run may leave objects on unknown shards
			// of their own: only shard9's is this test's.
			if sh.ID == "shard1" && sh.Mapped["gitrepos"] == 1 && sh.Mapped["helmops"] == 1 && sh.Mapped["helmreleases"] == 1 &&
				slices.ContainsFunc(st.Warnings.UnknownShards, func(u status.UnknownShard) bool { return u.ID == "shard9" }) {
				return nil
			}
		}
		return fmt.Errorf("status %+v", st)
	})

	var got uiAdmission
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config())
	cfg.WarningHandler = w
	client := kubernetes.NewForConfigOrDie(cfg)

	// The page writes the whole ConfigMap, as Rancher's store does.
	update := func(shards string, dryRun ...string) error {
		cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data["shards"] = shards
		_, err = client.CoreV1().ConfigMaps(s.fleetNS).Update(s.ctx, cm, metav1.UpdateOptions{DryRun: dryRun})
		return err
	}
	// The policy decides the plain list form (the YAML form is the daemon's
	// to reject): a bad ID there is refused with the daemon's sentence.
	err := update("shard0,Shard_1,gpu")
	require.True(t, apierrors.IsInvalid(err), "a bad ID is refused: %v", err)
	got.Refusal = err.Error()
	removed := "- shard0\n- id: gpu\n  nodeSelector: {type: kwok}\n" +
		"  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n"
	// The removal policy reads the status through the API server's informer,
	// which may lag the status: dry runs until it warns.
	eventually(t, time.Minute, "the removal policy sees shard1's objects", func() error {
		require.NoError(t, update(removed, metav1.DryRunAll))
		if len(w.take()) == 0 {
			return errors.New("no warning yet")
		}
		return nil
	})
	require.NoError(t, update(removed))
	texts := w.take()
	require.Len(t, texts, 1, "the removal of shard1 is warned about")
	got.Warning = texts[0]

	s.waitState("shard1", status.StateBlocked)
	eventually(t, time.Minute, "the git Job placement of gpu in the status", func() error {
		for _, sh := range s.status().Shards {
			if sh.ID == "gpu" && sh.JobPlacement != "" {
				return nil
			}
		}
		return fmt.Errorf("status %+v", s.status().Shards)
	})
	s.waitQuiet()

	live, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName+"-status", metav1.GetOptions{})
	require.NoError(t, err)
	fixture := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: live.Name, Namespace: live.Namespace},
		Data:       live.Data,
	}
	objects := uiObjects(t, s)
	statusPath := filepath.Join(uiFixtureDir, "status.json")
	admissionPath := filepath.Join(uiFixtureDir, "admission.json")
	objectsPath := filepath.Join(uiFixtureDir, "objects.json")
	if os.Getenv(updateUIFixtureEnv) == "1" {
		writeJSON(t, statusPath, fixture)
		writeJSON(t, admissionPath, got)
		writeJSON(t, objectsPath, objects)
		t.Logf("wrote %s, %s and %s", statusPath, admissionPath, objectsPath)
		return
	}

	var committed corev1.ConfigMap
	readJSON(t, statusPath, &committed)
	assert.Equal(t, dataShape(t, committed.Data), dataShape(t, fixture.Data),
		"the live status has another shape than %s: rerun with %s=1 and update the page", statusPath, updateUIFixtureEnv)
	assert.Equal(t, states(committed.Data), states(fixture.Data), "the shards' states")

	var committedAdmission uiAdmission
	readJSON(t, admissionPath, &committedAdmission)
	assert.Equal(t, committedAdmission, got, "the API server's answers; rerun with %s=1 to update", updateUIFixtureEnv)

	var committedObjects map[string][]uiObject
	readJSON(t, objectsPath, &committedObjects)
	assert.Equal(t, committedObjects, objects, "the GitRepos and HelmOps; rerun with %s=1 to update", updateUIFixtureEnv)
}

// uiObject is a Fleet object as the page lists it: its name and labels.
type uiObject struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
}

// uiObjects returns the scenario's GitRepos and HelmOps by resource, the
// page's "a few of the objects" on a shard that is removed.
func uiObjects(t *testing.T, s *scenario) map[string][]uiObject {
	t.Helper()
	out := map[string][]uiObject{}
	for _, gvr := range []schema.GroupVersionResource{gitRepos, helmOps} {
		list, err := dyn.Resource(gvr).Namespace(s.fleetNS).List(s.ctx, metav1.ListOptions{})
		require.NoError(t, err)
		objs := []uiObject{}
		for _, o := range list.Items {
			var u uiObject
			u.Metadata.Name, u.Metadata.Namespace, u.Metadata.Labels = o.GetName(), o.GetNamespace(), o.GetLabels()
			objs = append(objs, u)
		}
		sort.Slice(objs, func(i, j int) bool { return objs[i].Metadata.Name < objs[j].Metadata.Name })
		out[gvr.Resource] = objs
	}
	return out
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "the fixture is written with %s=1", updateUIFixtureEnv)
	require.NoError(t, json.Unmarshal(b, v))
}

// dataShape is each data key with the shape of its YAML value: the keys of
// every object, the union over a list's items, and the type of each leaf.
// The "mapped" key is lines, not YAML: its shape is the line count.
func dataShape(t *testing.T, data map[string]string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if k == "mapped" {
			out[k] = fmt.Sprintf("%d lines", len(strings.Split(data[k], "\n")))
			continue
		}
		var v any
		require.NoError(t, yaml.Unmarshal([]byte(data[k]), &v), "data.%s", k)
		out[k] = shape(v)
	}
	return out
}

func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = shape(e)
		}
		return out
	case []any:
		union := map[string]any{}
		var leaf []string
		for _, e := range v {
			if m, ok := shape(e).(map[string]any); ok {
				maps.Copy(union, m)
			} else {
				leaf = append(leaf, fmt.Sprint(shape(e)))
			}
		}
		if len(union) > 0 {
			return []any{union}
		}
		sort.Strings(leaf)
		return slices.Compact(leaf)
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "bool"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// states is "id=state" for each shard of the status.
func states(data map[string]string) []string {
	var out []string
	for _, sh := range status.Decode(data).Shards {
		out = append(out, sh.ID+"="+sh.State)
	}
	return out
}
