package docs_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/shardkeeper/shardkeeper/pkg/testfixture"
)

// securityPage holds the table of the rights the chart grants, under
// rightsHeading.
const (
	securityPage  = "docs/security.md"
	rightsHeading = "### The rights it asks for"
)

// The chart as the table describes it: rendered with its defaults, and with
// every option that grants more (placement, the stamping policy, Flux).
const release = "shardkeeper"

var (
	defaultValues = []string{}
	allValues     = []string{
		"--set", "placement.enabled=true", "--set", "presets.flux.enabled=true",
		"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
	}
	backticked = regexp.MustCompile("`([^`]+)`")
)

// TestRightsTableIsTheChart checks the table of docs/security.md against the
// chart's RBAC: the rows without a condition ("only with ..." in their
// first column) grant what the chart grants with its defaults, and all rows
// together what it grants with every option on. A right is where (the
// release namespace, the source namespaces or the cluster), a resource, a
// name or none, and a verb. It needs Helm, which make builds and passes as
// $SHARDKEEPER_BIN_DIR/helm.
func TestRightsTableIsTheChart(t *testing.T) {
	helm := testfixture.Helm(t)
	always, all := rightsTable(t)
	for _, c := range []struct {
		what  string
		table []string
		args  []string
	}{
		{"the rows without a condition, against the chart's defaults", always, defaultValues},
		{"all the rows, against the chart with " + strings.Join(allValues, " "), all, allValues},
	} {
		chart := rendered(t, helm, c.args)
		assert.Empty(t, missing(chart, c.table), "%s, %s: granted by the chart, not in the table", securityPage, c.what)
		assert.Empty(t, missing(c.table, chart), "%s, %s: in the table, not granted by the chart", securityPage, c.what)
	}
}

// missing is what of want got lacks.
func missing(want, got []string) []string {
	var out []string
	for _, r := range want {
		if !slices.Contains(got, r) {
			out = append(out, r)
		}
	}
	return out
}

// rightsTable reads the table of securityPage: the rights of its rows
// without a condition, and those of all its rows. The second column of a
// row is a list of "<resources> [`<name>`...]: <verbs>" separated by "; ".
func rightsTable(t *testing.T) (always, all []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, securityPage))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(data), "\n"+rightsHeading+"\n")
	require.True(t, ok, "%s: no heading %q", securityPage, rightsHeading)
	rows := 0
	sc := bufio.NewScanner(strings.NewReader(after))
	inTable := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "|"), "|")
		require.Len(t, cells, 3, "%s: a row of the rights table has 3 columns: %s", securityPage, line)
		where, what := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if where == "where" || strings.HasPrefix(where, "---") {
			continue
		}
		rows++
		scope := scopeOf(t, where)
		for clause := range strings.SplitSeq(what, "; ") {
			head, verbs, ok := strings.Cut(clause, ": ")
			require.True(t, ok, "%s: %q is not <resources> [`<name>`]: <verbs>", securityPage, clause)
			names := []string{""}
			if m := backticked.FindAllStringSubmatch(head, -1); m != nil {
				names = nil
				for _, n := range m {
					names = append(names, n[1])
				}
				head = backticked.ReplaceAllString(head, "")
			}
			for res := range strings.SplitSeq(head, ",") {
				for _, name := range names {
					for verb := range strings.SplitSeq(verbs, ",") {
						r := right(scope, strings.TrimSpace(res), name, strings.TrimSpace(verb))
						all = append(all, r)
						if !strings.Contains(where, "only with") {
							always = append(always, r)
						}
					}
				}
			}
		}
	}
	require.NotZero(t, rows, "%s: no table under %q", securityPage, rightsHeading)
	return normal(always), normal(all)
}

// scopeOf is where a row of the table grants: its first column begins with
// it.
func scopeOf(t *testing.T, where string) string {
	t.Helper()
	for _, s := range []string{"release namespace", "each source namespace", "cluster"} {
		if strings.HasPrefix(where, s) {
			return s
		}
	}
	t.Fatalf("%s: a row's first column begins with the release namespace, each source namespace or cluster: %q", securityPage, where)
	return ""
}

// rendered is what the chart's RBAC grants with the helm template arguments
// args: the Role <release> in the release namespace, the Roles
// <release>-deployments in the source namespaces and the ClusterRole.
func rendered(t *testing.T, helm string, args []string) []string {
	t.Helper()
	out := template(t, helm, append([]string{"--show-only", "templates/rbac.yaml"}, args...))
	var rights []string
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var role rbacv1.ClusterRole // a Role has the same fields
		require.NoError(t, yaml.Unmarshal([]byte(doc), &role))
		var scope string
		switch {
		case role.Kind == "Role" && role.Name == release:
			scope = "release namespace"
		case role.Kind == "Role" && role.Name == release+"-deployments":
			scope = "each source namespace"
		case role.Kind == "ClusterRole":
			scope = "cluster"
		default:
			continue
		}
		for _, rule := range role.Rules {
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, res := range rule.Resources {
				for _, name := range names {
					for _, verb := range rule.Verbs {
						rights = append(rights, right(scope, res, name, verb))
					}
				}
			}
		}
	}
	return normal(rights)
}

// template is `helm template` of the chart with args, as make's Helm runs it.
func template(t *testing.T, helm string, args []string) string {
	t.Helper()
	return testfixture.HelmTemplate(t, helm, release, filepath.Join(root, "charts/shardkeeper"), "cattle-fleet-system", args...)
}

func right(scope, resource, name, verb string) string {
	return scope + ": " + resource + " " + name + ": " + verb
}

// normal sorts rights and drops the repeated ones.
func normal(rights []string) []string {
	slices.Sort(rights)
	return slices.Compact(rights)
}

// TestMappedKindsKeepThePresetsRights: a preset's kind listed in
// mappedKinds with the preset's label keeps what the preset grants and
// stamps (the daemon keeps its meaning too): a Bundle is counted, never
// patched or stamped, and a GitRepo is read before a move; a kind of one's
// own is placed.
func TestMappedKindsKeepThePresetsRights(t *testing.T) {
	helm := testfixture.Helm(t)
	args := []string{"--set", "placement.enabled=true", "--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
		"--set", "mappedKinds={gitrepos.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref,bundles.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref,widgets.v1.example.com=example.com/shard}"}
	rights := rendered(t, helm, args)
	assert.NotContains(t, rights, right("cluster", "bundles", "", "patch"), "a listed Bundle is never placed")
	assert.Contains(t, rights, right("cluster", "bundles", "", "watch"))
	assert.Contains(t, rights, right("cluster", "gitrepos", "", "get"), "a listed GitRepo is read before its move, as the preset's")
	assert.Contains(t, rights, right("cluster", "widgets", "", "patch"))

	policies := template(t, helm, append(args, "--show-only", "templates/stamppolicy.yaml"))
	assert.NotContains(t, policies, "bundles", "a listed Bundle is never stamped")
	assert.Contains(t, policies, `resources: ["gitrepos"]`)
	assert.Contains(t, policies, `resources: ["widgets"]`)
}
