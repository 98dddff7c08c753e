package placement

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

func TestObjectRef(t *testing.T) {
	o := Object{Kind: "gitrepos", Namespace: "fleet-default", Name: "apps"}
	assert.Equal(t, "gitrepos fleet-default/apps", o.Ref())
}

func TestObjectPinned(t *testing.T) {
	for name, tc := range map[string]struct {
		o    Object
		want bool
	}{
		"unlabelled":                 {o: Object{}, want: false},
		"unlabelled, record left":    {o: Object{AssignedShard: "a"}, want: false},
		"placed by placement":        {o: Object{Shard: "a", Labelled: true, AssignedShard: "a"}, want: false},
		"labelled by a person":       {o: Object{Shard: "a", Labelled: true}, want: true},
		"relabelled after placement": {o: Object{Shard: "b", Labelled: true, AssignedShard: "a"}, want: true},
		"an empty label set by hand": {o: Object{Labelled: true, AssignedShard: "a"}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.o.Pinned())
		})
	}
}

func TestObjectGroup(t *testing.T) {
	var kinds shardconfig.Placement // no setting: each kind's own unit
	o := Object{Kind: "helmreleases", Namespace: "team-a", Name: "app", Grouped: true, Labels: labels.Set{"tenant": "acme"}}
	assert.Equal(t, "namespace.team-a", o.Group(kinds))
	deleting := o
	deleting.Deleting = true
	assert.Empty(t, deleting.Group(kinds), "an object being deleted holds nothing")
	derived := o
	derived.Derived = true
	assert.Empty(t, derived.Group(kinds), "a derived object follows the one it was made from")
	gitrepo := Object{Kind: "gitrepos", Namespace: "team-a", Labels: labels.Set{"tenant": "acme"}}
	assert.Empty(t, gitrepo.Group(kinds), "a kind placed object by object")

	byNamespace := shardconfig.Placement{GroupBy: shardconfig.GroupByNamespace}
	assert.Equal(t, "namespace.team-a", gitrepo.Group(byNamespace), "the setting groups every kind")

	byLabel := shardconfig.Placement{GroupBy: shardconfig.GroupByLabel, GroupLabel: "tenant"}
	assert.Equal(t, "label.team-a.acme", gitrepo.Group(byLabel))
	assert.Equal(t, "label.team-a.acme", o.Group(byLabel), "the label wins over a kind's namespace")
	elsewhere := Object{Kind: "gitrepos", Namespace: "team-b", Labels: labels.Set{"tenant": "acme"}}
	assert.Equal(t, "label.team-b.acme", elsewhere.Group(byLabel),
		"the same value in another namespace is another unit: a tenant cannot join another's")
	assert.Empty(t, Object{Kind: "gitrepos", Namespace: "team-a"}.Group(byLabel), "no label: on its own")
	assert.Equal(t, "namespace.team-b", Object{Kind: "helmreleases", Namespace: "team-b", Grouped: true}.Group(byLabel),
		"no label: a kind placed by namespace keeps its namespace")

	assert.Equal(t, "namespace team-a", DescribeGroup(o.Group(kinds), kinds))
	assert.Equal(t, "group tenant=acme in namespace team-a", DescribeGroup(gitrepo.Group(byLabel), byLabel))
	dotted := Object{Kind: "gitrepos", Namespace: "team-a", Labels: labels.Set{"tenant": "acme.example.com"}}
	assert.Equal(t, "group tenant=acme.example.com in namespace team-a", DescribeGroup(dotted.Group(byLabel), byLabel))
}
