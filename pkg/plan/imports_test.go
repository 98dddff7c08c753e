package plan_test

import (
	"errors"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/shardkeeper/shardkeeper/"

// TestPackageGraph holds the package graph one-way: the decisions read
// values, never the caches, the writers or the daemon; the shard set and
// the mover meet only through the types of pkg/placement; and the wire
// reader knows nothing of what the objects it reads mean. An edge back
// pulls client-go's informer machinery into the pure decisions, and lets a
// change of one writer ripple into the other.
func TestPackageGraph(t *testing.T) {
	forbidden := map[string][]string{
		module + "pkg/plan": {module + "pkg/mapped", module + "pkg/mover", module + "pkg/shardset", module + "pkg/daemon",
			"k8s.io/client-go/tools/cache", "k8s.io/client-go/informers"},
		module + "pkg/shardset":  {module + "pkg/mover", module + "pkg/mapped", module + "pkg/daemon"},
		module + "pkg/mover":     {module + "pkg/shardset", module + "pkg/daemon"},
		module + "pkg/placement": {module + "pkg/plan", module + "pkg/mapped", module + "pkg/mover", module + "pkg/shardset", "k8s.io/client-go"},
		// How objects come off the wire knows nothing of what they mean.
		module + "pkg/wire": {module + "pkg/mapped", module + "pkg/crossref", module + "pkg/source", module + "pkg/plan",
			module + "pkg/shardset", module + "pkg/mover", module + "pkg/daemon"},
	}
	deps := goListDeps(t, slices.Sorted(maps.Keys(forbidden)))
	for pkg, bad := range forbidden {
		require.Contains(t, deps, pkg, "go list lists the package")
		var found []string
		for _, b := range bad {
			if slices.ContainsFunc(deps[pkg], func(d string) bool { return d == b || strings.HasPrefix(d, b+"/") }) {
				found = append(found, b)
			}
		}
		assert.Empty(t, found, "%s depends on them", pkg)
	}
}

// goListDeps returns, per package, the import paths it depends on
// directly or not, as the go command resolves them (go test puts it on
// PATH).
func goListDeps(t *testing.T, pkgs []string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, pkgs...)
	out, err := exec.CommandContext(t.Context(), "go", args...).Output()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err, "go %s", strings.Join(args, " "))
	deps := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if fields := strings.Fields(line); len(fields) > 0 {
			deps[fields[0]] = fields[1:]
		}
	}
	return deps
}
