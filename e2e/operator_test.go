//go:build e2e

package e2e

// Where the operator looks: the kubectl prompt (the chart's admission
// policies, the kubectl plugin), and Prometheus and Grafana (the chart's
// alerts and dashboard).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/e2e/cluster"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

const vapAPIVersion = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"

// goodInputs are the shard ConfigMaps docs/shards.md shows, and the other forms
// the daemon accepts: the policy must let every one through.
func goodInputs() []badInput {
	force := func(v string) map[string]string { return map[string]string{shardconfig.ForceDeleteAnnotation: v} }
	return []badInput{
		{name: "commas", shards: str("shard0,shard1")},
		{name: "commas and spaces", shards: str("shard0, shard1 ,shard2")},
		{name: "spaces", shards: str("shard0 shard1")},
		{name: "newlines", shards: str("shard0\nshard1\r\n\tshard2\n")},
		{name: "one shard", shards: str("shard0")},
		{name: "29 characters, the most Fleet's names allow", shards: str(strings.Repeat("a", 29))},
		{name: "digits and dashes", shards: str("0,a-b,9-z")},
		{name: "empty list", shards: str("[]")},
		{name: "yaml flow list", shards: str("[shard0, shard1]")},
		{name: "yaml block list", shards: str("- shard0\n- shard1\n")},
		{name: "yaml with settings", shards: str("- shard0\n- id: gpu-pool\n  nodeSelector: {pool: gpu}\n" +
			"  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]\n" +
			"  resources: {requests: {cpu: 200m, memory: 256Mi}, limits: {memory: 512Mi}}\n  replicas: 2\n")},
		{name: "500 shards", shards: str(ids(500))},
		{name: "force one", shards: str("shard0"), annotations: force("shard1")},
		{name: "force all", shards: str("shard0"), annotations: force("*")},
		{name: "force list", shards: str("shard0"), annotations: force("shard1, shard2\nshard3")},
		{name: "force empty", shards: str("shard0"), annotations: force("")},
		{name: "force with yaml", shards: str("- shard0\n"), annotations: force("shard1")},
		{name: "placement", shards: str("shard0,shard1,shard2"), placement: str("namespaces: [fleet-default, apps]\n" +
			"selector: \"team in (payments,web)\"\nthreshold: 10%\nmaxMoves: 50\ninterval: 30s\ncooldown: 10m\n" +
			"objectsPerShard: 100\nminShards: 1\nmaxShards: 20\n")},
		{name: "placement defaults", shards: str("shard0"), placement: str("")},
		{name: "auto", shards: str("auto"), placement: str("")},
		{name: "auto with force", shards: str(" auto\n"), placement: str(""), annotations: force("shard-3")},
		{name: "drain", shards: str("shard0,shard1"), placement: str(""), annotations: map[string]string{shardconfig.DrainAnnotation: "shard1"}},
	}
}

func ids(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("s%d", i)
	}
	return strings.Join(out, ",")
}

// deniedByPolicy are the cases of badInputs that CEL decides exactly. The
// rest (YAML forms, text outside printable ASCII, placement, what depends
// on the cluster) are left to the daemon.
var deniedByPolicy = []string{
	"uppercase", "underscore", "dot", "leading dash", "trailing dash", "41 characters", "64 characters",
	"duplicate", "empty", "whitespace only", "separators only", "1 MiB value", "10,000 IDs",
	"force names an invalid ID", "binaryData", "missing shards key", "too long for Fleet's names",
}

// installAdmissionPolicies renders the chart's admission policies for the
// scenario's ConfigMap, creates them, and waits until the API server
// enforces them; they are deleted when the test ends.
func (s *scenario) installAdmissionPolicies() {
	t := s.t
	t.Helper()
	objs := decodeObjects(t, helm(t, "template", s.fleetNS, chartDir, "--namespace", s.fleetNS,
		"--set", "configMap.name="+s.cmName, "--show-only", "templates/admissionpolicy.yaml", "--api-versions", vapAPIVersion))
	require.Len(t, objs, 4, "two policies and their bindings")
	applyObjects(t, objs)
	t.Cleanup(func() {
		for _, o := range objs {
			resource := map[string]string{"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
				"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}[o.GetKind()]
			gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: resource}
			if err := dyn.Resource(gvr).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
	// The API server loads policies from its informer: wait until a value
	// the policy denies is denied.
	eventually(t, time.Minute, "the admission policy in force", func() error {
		cm := s.configMapWith(t, badInput{shards: str("Bad_0")})
		if _, err := kube.CoreV1().ConfigMaps(s.fleetNS).Update(s.ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) {
			return notYet("not denied", err)
		}
		return nil
	})
}

// TestAdmissionPolicyAgreesWithTheDaemon sends every malformed ConfigMap
// of the bad-input corpus, and every form docs/shards.md shows, through the API
// server with the chart's policy installed: whatever the policy denies, the
// daemon rejects too, for the same reason, and it lets every good form
// through.
func TestAdmissionPolicyAgreesWithTheDaemon(t *testing.T) {
	bad, good := badInputs(), goodInputs()
	require.GreaterOrEqual(t, len(good), 20)
	s := newScenario(t, "admission", true)
	s.createConfigMap("good")
	s.installAdmissionPolicies()
	// The chart's default sources: Fleet's preset.
	sources, err := source.Build(source.Options{Presets: []string{source.PresetFleet}, FleetNamespace: s.fleetNS})
	require.NoError(t, err)
	limit := sources.IDLimit()

	var denied []string
	for _, c := range append(bad, good...) {
		cm := s.configMapWith(t, c)
		// What the daemon rejects before it decides anything: the parse,
		// then the IDs against the names the sources make of them.
		cfg, parseErr := shardconfig.Parse(cm.Data, cm.BinaryData, cm.Annotations)
		for i, sh := range cfg.Shards {
			if err := limit.Check(sh.ID); parseErr == nil && err != nil {
				parseErr = fmt.Errorf("shards[%d]: %w", i, err)
			}
		}
		_, err := kube.CoreV1().ConfigMaps(s.fleetNS).Update(s.ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			continue
		}
		denied = append(denied, c.name)
		require.True(t, apierrors.IsInvalid(err), "%s: %v", c.name, err)
		if assert.Error(t, parseErr, "%s: the policy denied what the daemon accepts: %v", c.name, err) {
			assert.Contains(t, err.Error(), "denied request: "+parseErr.Error(), c.name)
		}
	}
	assert.ElementsMatch(t, deniedByPolicy, denied)

	// Nothing was stored: the dry runs left the ConfigMap as it was.
	cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{shardconfig.ShardsKey: "good"}, cm.Data)
}

// kubectl runs bin/kubectl against the local control plane and returns its
// standard output and standard error apart.
func kubectl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return kubectlWithPath(t, os.Getenv("PATH"), args...)
}

// kubectlWithPath is kubectl with path as $PATH, where kubectl looks for
// plugins.
func kubectlWithPath(t *testing.T, path string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin := filepath.Join(os.Getenv(cluster.BinDirEnv), "kubectl")
	if _, statErr := os.Stat(bin); statErr != nil {
		t.Fatalf("kubectl not built (make $PWD/bin/kubectl): %v", statErr)
	}
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+path, "KUBECONFIG="+env.KubeconfigPath())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestAdmissionAtThePrompt is the operator at the kubectl prompt: a bad
// plain list is refused with the daemon's sentence and stored nowhere; a
// patch that removes a shard with objects is stored, with a warning that
// counts them and gives the force command; the daemon still keeps the shard.
func TestAdmissionAtThePrompt(t *testing.T) {
	s := newScenario(t, "prompt", true)
	s.createConfigMap("shard0,shard1")
	s.installAdmissionPolicies()
	patch := func(shards string) (string, string, error) {
		return kubectl(t, "-n", s.fleetNS, "patch", "configmap", s.cmName, "--type", "merge",
			"-p", fmt.Sprintf(`{"data":{"shards":%q}}`, shards))
	}

	// Before the daemon has written a status there is nothing to warn
	// about, and nothing blocks the edit.
	out, errOut, err := patch("shard0")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "configmap/"+s.cmName+" patched")
	assert.NotContains(t, errOut, "Warning")
	_, errOut, err = patch("shard0,shard1")
	require.NoError(t, err, errOut)

	require.NoError(t, installCRD(s.ctx, helmReleases))
	s.start()
	s.waitShards("shard0", "shard1")
	s.object(gitRepos, "payments", fleetLabel, "shard1")
	s.object(gitRepos, "web", fleetLabel, "shard1")
	s.object(helmReleases, "ingress", fluxLabel, "shard1")
	s.object(gitRepos, "api", fleetLabel, "shard0")
	eventually(t, time.Minute, "the status counts the shards' objects", func() error {
		counted := 0
		for _, sh := range s.status().Shards {
			if (sh.ID == "shard0" && sh.Mapped["gitrepos"] == 1) ||
				(sh.ID == "shard1" && sh.Mapped["gitrepos"] == 2 && sh.Mapped["helmreleases"] == 1) {
				counted++
			}
		}
		if counted < 2 {
			return fmt.Errorf("status %+v", s.status().Shards)
		}
		return nil
	})

	// Removing both with the YAML form of the empty list (a dry run, so
	// nothing is stored): one warning names both, with their counts.
	out, errOut, err = kubectl(t, "-n", s.fleetNS, "patch", "configmap", s.cmName, "--type", "merge", "--dry-run=server",
		"-p", `{"data":{"shards":"[]"}}`)
	require.NoError(t, err, errOut)
	t.Logf("kubectl patch (both removed):\n%s%s", out, errOut)
	assert.Contains(t, errOut, "shards shard0 (1 gitrepos), shard1 (2 gitrepos, 1 helmreleases) still have objects mapped")
	assert.Contains(t, errOut, fmt.Sprintf("kubectl -n %s annotate configmap %s shardkeeper.io/force-delete=shard0,shard1", s.fleetNS, s.cmName))

	// A bad plain list: refused with the daemon's own sentence, not stored.
	_, parseErr := shardconfig.ParseShards("shard0,Shard_1")
	require.Error(t, parseErr)
	out, errOut, err = patch("shard0,Shard_1")
	require.Error(t, err)
	t.Logf("kubectl patch (bad list):\n%s", errOut)
	assert.Empty(t, out)
	assert.NotContains(t, errOut, "Warning", "a refused edit removes nothing")
	assert.Contains(t, errOut, "denied request: "+parseErr.Error())
	cm, err := kube.CoreV1().ConfigMaps(s.fleetNS).Get(s.ctx, s.cmName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "shard0,shard1", cm.Data[shardconfig.ShardsKey])

	// Removing shard1: stored, with a warning; the daemon blocks it.
	out, errOut, err = patch("shard0")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "configmap/"+s.cmName+" patched")
	t.Logf("kubectl patch (removal):\n%s%s", out, errOut)
	force := fmt.Sprintf("kubectl -n %s annotate configmap %s shardkeeper.io/force-delete=shard1", s.fleetNS, s.cmName)
	assert.Contains(t, errOut, "Warning: ")
	assert.Contains(t, errOut, "shard shard1 still has 2 gitrepos, 1 helmreleases mapped")
	assert.Contains(t, errOut, force)
	s.waitState("shard1", status.StateBlocked)
	s.waitEvent(status.ReasonShardDeletionBlocked, force)

	// An unrelated edit while shard1 is blocked does not warn again, and
	// forcing it does not warn at all.
	_, errOut, err = kubectl(t, "-n", s.fleetNS, "label", "configmap", s.cmName, "team=platform")
	require.NoError(t, err, errOut)
	assert.NotContains(t, errOut, "Warning")
	_, errOut, err = patch("shard0,shard1")
	require.NoError(t, err, errOut)
	s.waitState("shard1", status.StateActive)
	_, errOut, err = kubectl(t, "-n", s.fleetNS, "patch", "configmap", s.cmName, "--type", "merge", "-p",
		`{"metadata":{"annotations":{"shardkeeper.io/force-delete":"shard1"}},"data":{"shards":"shard0"}}`)
	require.NoError(t, err, errOut)
	assert.NotContains(t, errOut, "Warning")
	s.waitShards("shard0")
	// The status follows the deletion at its own pace: the two reads below
	// must see the same one.
	eventually(t, time.Minute, "the status reports shard1 deleted", func() error {
		for _, sh := range s.status().Shards {
			if sh.ID == "shard1" {
				return fmt.Errorf("shard1 still reported: %+v", sh)
			}
		}
		return nil
	})

	// The binary on the PATH as kubectl-shardkeeper is `kubectl shardkeeper`.
	pluginDir := t.TempDir()
	require.NoError(t, os.Symlink(os.Getenv("SHARDKEEPER_BINARY"), filepath.Join(pluginDir, "kubectl-shardkeeper")))
	direct, err := exec.CommandContext(t.Context(), os.Getenv("SHARDKEEPER_BINARY"), "status", "--kubeconfig", env.KubeconfigPath(), "-n", s.fleetNS, "-o", "wide").Output()
	require.NoError(t, err)
	out, errOut, err = kubectlWithPath(t, pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"shardkeeper", "status", "-n", s.fleetNS, "-o", "wide")
	require.NoError(t, err, errOut)
	assert.Contains(t, out, "shard0")
	assert.Equal(t, string(direct), out)
}

const (
	dashboardFile = "../charts/shardkeeper/files/dashboard.json"
	alertsFile    = "../charts/shardkeeper/files/alerts.yaml"
)

// exprs returns every value under the key "expr" in the JSON or YAML file
// at path, however deep: the queries of a Grafana dashboard's panels, or
// the expressions of Prometheus rules.
func exprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc any
	require.NoError(t, yaml.Unmarshal(b, &doc), path)
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				out = append(out, e)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	require.NotEmpty(t, out, "no expressions in %s", path)
	return out
}

// dashboardExprs returns the PromQL of the chart's dashboard, with
// Grafana's variables replaced by values PromQL accepts, and the metric its
// namespace variable reads.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string            `json:"title"`
			Targets []json.RawMessage `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*")
	var out []string
	for _, e := range exprs(t, dashboardFile) {
		out = append(out, grafana.Replace(e))
	}
	// label_values(metric, label) is Grafana's, not PromQL; its metric is.
	for _, m := range regexp.MustCompile(`label_values\((\w+),`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// promtoolCheck has promtool parse every expression, as the expressions of
// recording rules.
func promtoolCheck(t *testing.T, exprs []string) {
	t.Helper()
	bin := filepath.Join(os.Getenv(cluster.BinDirEnv), "promtool")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("promtool not built (make $PWD/bin/promtool): %v", err)
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, e := range exprs {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:expr%d", i), Expr: e})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	out, err := exec.CommandContext(t.Context(), bin, "check", "rules", f).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)
}

var metricName = regexp.MustCompile(`\bshardkeeper_[a-z_]+\b`)

// TestDashboardAndAlertsReadExportedMetrics parses every query of the
// chart's dashboard and alerts, and checks that each metric they read is
// one a live daemon exports, once it has shards, mapped objects, objects on
// an unknown shard and a placement move to report.
func TestDashboardAndAlertsReadExportedMetrics(t *testing.T) {
	dashboard, alerts := dashboardExprs(t), exprs(t, alertsFile)
	promtoolCheck(t, dashboard)

	s := newScenario(t, "monitor", true)
	s.removeObjectsAtEnd(t)
	s.createConfigMap("m1")
	s.start("--allow-placement")
	s.setPlacement("m1", "namespaces: ["+s.fleetNS+"]\ninterval: 1s")
	s.waitShards("m1")
	s.unlabelled(gitRepos, "repo", 1)
	s.object(gitRepos, "stranded", fleetLabel, "gone")

	exported := map[string]bool{}
	eventually(t, time.Minute, "every metric family has a series", func() error {
		var body []byte
		if err := s.daemon.get(s.daemon.metricsPort, "/metrics", &body); err != nil {
			return err
		}
		clear(exported)
		for line := range strings.SplitSeq(string(body), "\n") {
			if name, _, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "shardkeeper_") {
				name, _, _ = strings.Cut(name, "{")
				exported[name] = true
			}
		}
		for _, name := range []string{"shardkeeper_placement_moves_total", "shardkeeper_unknown_shard_objects", "shardkeeper_mapped_objects"} {
			if !exported[name] {
				return fmt.Errorf("no %s yet", name)
			}
		}
		return nil
	})
	var read []string
	for _, e := range append(dashboard, alerts...) {
		names := metricName.FindAllString(e, -1)
		require.NotEmpty(t, names, "%q reads no shardkeeper metric", e)
		read = append(read, names...)
	}
	slices.Sort(read)
	for _, name := range slices.Compact(read) {
		assert.True(t, exported[name], "%s is read by the dashboard or an alert, but the daemon exports no such metric", name)
	}
}
