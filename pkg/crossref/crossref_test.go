package crossref

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

const key = "sharding.fluxcd.io/key"

var (
	s1   = On("s1", true)
	s2   = On("s2", true)
	main = On("", false)
)

// sources is a cache of sources: "Kind namespace/name" -> shard.
type sources map[string]Shard

func (s sources) shardOf(kind, ns, name string) (Shard, bool) {
	sh, ok := s[kind+" "+ns+"/"+name]
	return sh, ok
}

// release is a HelmRelease on shard with spec.chart, whose chart labels put
// the HelmChart on chart and whose sourceRef is the HelmRepository
// apps/repo.
func release(name string, shard, chart Shard) Object {
	return Object{Kind: "helmreleases", Label: key, Namespace: "apps", Name: name, Shard: shard,
		Derived: &Derived{Path: "spec.chart.metadata.labels", Shard: chart},
		Ref:     &Ref{Field: "spec.chart.spec.sourceRef", Kind: "HelmRepository", Namespace: "apps", Name: "repo", From: chart}}
}

func objects(crossed []Crossed) []string {
	out := []string{}
	for _, c := range crossed {
		out = append(out, c.Object)
	}
	return out
}

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []Object
		sources sources
		want    []string
	}{
		{"chart labels name the release's shard", []Object{release("a", s1, s1)}, sources{"HelmRepository apps/repo": s1}, []string{}},
		{"chart labels lack the shard label", []Object{release("a", s1, main)}, sources{}, []string{"helmreleases apps/a"}},
		{"chart labels name another shard", []Object{release("a", s1, s2)}, sources{}, []string{"helmreleases apps/a"}},
		{"chart labels carry a shard, the release none", []Object{release("a", main, s1)}, sources{}, []string{"helmreleases apps/a"}},
		{"unsharded release and chart", []Object{release("a", main, main)}, sources{"HelmRepository apps/repo": main}, []string{}},
		{"repository on another shard", []Object{release("a", s1, s1)}, sources{"HelmRepository apps/repo": s2}, []string{"helmreleases apps/a"}},
		{"repository sharded, release not", []Object{release("a", main, main)}, sources{"HelmRepository apps/repo": s1}, []string{"helmreleases apps/a"}},
		{"repository not cached", []Object{release("a", s1, s1)}, sources{}, []string{}},
		{"sorted by object", []Object{release("b", s1, main), release("a", s2, main)}, sources{}, []string{"helmreleases apps/a", "helmreleases apps/b"}},
		{"HelmChart with its repository on its shard", []Object{{Kind: "helmcharts", Label: key, Namespace: "apps", Name: "c", Shard: s1,
			Ref: &Ref{Field: "spec.sourceRef", Kind: "GitRepository", Namespace: "apps", Name: "git", From: s1}}},
			sources{"GitRepository apps/git": s1}, []string{}},
		{"HelmChart with an unsharded repository", []Object{{Kind: "helmcharts", Label: key, Namespace: "apps", Name: "c", Shard: s1,
			Ref: &Ref{Field: "spec.sourceRef", Kind: "GitRepository", Namespace: "apps", Name: "git", From: s1}}},
			sources{"GitRepository apps/git": main}, []string{"helmcharts apps/c"}},
		{"HelmOp whose Bundle goes elsewhere", []Object{{Kind: "helmops", Label: "fleet.cattle.io/shard-ref", Namespace: "fleet-default", Name: "op", Shard: s1,
			Derived: &Derived{Path: "spec.labels", Shard: main}}}, sources{}, []string{"helmops fleet-default/op"}},
		{"an empty label value is a shard of its own", []Object{release("a", On("", true), main)}, sources{}, []string{"helmreleases apps/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, objects(Find(tc.objs, tc.sources.shardOf)))
		})
	}
}

func TestFindSaysWhy(t *testing.T) {
	got := Find([]Object{release("a", s1, main)}, sources{"HelmRepository apps/repo": s1}.shardOf)
	assert.Equal(t, []Crossed{{Object: "helmreleases apps/a", Reasons: []string{
		`it is on shard "s1", but spec.chart.metadata.labels puts the object derived from it on the main controllers (no shard label): set sharding.fluxcd.io/key: s1 there`,
		`spec.chart.spec.sourceRef HelmRepository apps/repo is on shard "s1", but is resolved on the main controllers (no shard label), and Flux resolves references within one shard`,
	}}}, got)

	unsharded := Find([]Object{release("a", main, s2)}, sources{}.shardOf)
	assert.Contains(t, unsharded[0].Reasons[0], ": remove sharding.fluxcd.io/key there")
}

func TestSample(t *testing.T) {
	var crossed []Crossed
	for _, n := range []string{"a", "b", "c"} {
		crossed = append(crossed, Crossed{Object: "helmops ns/" + n, Reasons: []string{"r1", "r2"}})
	}
	assert.Equal(t, []string{"helmops ns/a: r1; r2", "helmops ns/b: r1; r2"}, Sample(crossed, 2))
	assert.Len(t, Sample(crossed, 5), 3)
	assert.Empty(t, Sample(nil, 5))
}
