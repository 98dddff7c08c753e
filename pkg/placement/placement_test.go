package placement

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
	o := Object{Kind: "helmreleases", Namespace: "team-a", Name: "app", Grouped: true}
	assert.Equal(t, "team-a", o.Group())
	deleting := o
	deleting.Deleting = true
	assert.Empty(t, deleting.Group(), "an object being deleted holds nothing")
	derived := o
	derived.Derived = true
	assert.Empty(t, derived.Group(), "a derived object follows the one it was made from")
	assert.Empty(t, Object{Kind: "gitrepos", Namespace: "team-a"}.Group(), "a kind placed object by object")
}
