package mapped

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimKeepsOnlyWhatDecisionsRead(t *testing.T) {
	now := metav1.Now()
	in := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "GitRepo"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "repo", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels:        map[string]string{"fleet.cattle.io/shard-ref": "a", "team": "x"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			Finalizers:    []string{"f"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
	}
	out, err := trim("fleet.cattle.io/shard-ref")(in)
	require.NoError(t, err)
	m := out.(*metav1.PartialObjectMetadata)
	assert.Equal(t, "repo", m.Name)
	assert.Equal(t, "ns", m.Namespace)
	assert.Equal(t, "7", m.ResourceVersion)
	assert.Equal(t, &now, m.DeletionTimestamp)
	assert.Equal(t, map[string]string{"fleet.cattle.io/shard-ref": "a"}, m.Labels)
	assert.Nil(t, m.Annotations)
	assert.Nil(t, m.ManagedFields)
	assert.Nil(t, m.Finalizers)

	// Anything else (a tombstone, say) passes through.
	tomb := "not metadata"
	passed, err := trim("x")(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, passed)
}
