package shardset

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// setForce sends a JSON merge patch that carries the resourceVersion of the
// ConfigMap the decision read, so that the API server refuses it when the
// ConfigMap was edited in between, and that sets (or removes, with null)
// the force-delete annotation and nothing else.
func TestSetForcePatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		force shardconfig.Force
		want  string
	}{
		{"entries left", shardconfig.Force{IDs: []string{"c", "d"}},
			`{"metadata":{"resourceVersion":"42","annotations":{"shardkeeper.io/force-delete":"c,d"}}}`},
		{"all and an entry", shardconfig.Force{All: true, IDs: []string{"c"}},
			`{"metadata":{"resourceVersion":"42","annotations":{"shardkeeper.io/force-delete":"*,c"}}}`},
		{"nothing left removes the annotation", shardconfig.Force{},
			`{"metadata":{"resourceVersion":"42","annotations":{"shardkeeper.io/force-delete":null}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{}, nil, nil)
			require.NoError(t, e.c.setForce(shardConfigMapObject("a", "b,c,d"), tc.force))

			require.Len(t, e.configMaps.patches, 1)
			p := e.configMaps.patches[0]
			assert.Equal(t, shardCM.String(), p.Key)
			assert.Equal(t, types.MergePatchType, p.Type)
			assert.JSONEq(t, tc.want, string(p.Data))
		})
	}
}

func TestSetForceError(t *testing.T) {
	e := newEnv(t, Options{}, nil, nil)
	refused := errors.New("the object has been modified")
	e.configMaps.patchErr = refused

	err := e.c.setForce(shardConfigMapObject("a", "b"), shardconfig.Force{})

	require.ErrorIs(t, err, refused)
	assert.ErrorContains(t, err, "updating annotation "+shardconfig.ForceDeleteAnnotation)
}
