package shardset

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// setForce rewrites the force-delete annotation once the forced deletions
// are done, so that a later re-add and removal of the same shard is guarded
// again. The patch carries the ConfigMap's resourceVersion: an edit made in
// between wins, and the next reconcile decides again.
func (c *Controller) setForce(cm *corev1.ConfigMap, f shardconfig.Force) error {
	var value any = f.String()
	if f.Empty() {
		value = nil // remove the annotation
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": cm.ResourceVersion,
			"annotations":     map[string]any{shardconfig.ForceDeleteAnnotation: value},
		},
	})
	if err != nil {
		return fmt.Errorf("building force-delete patch: %w", err)
	}
	out, err := c.configMaps.Patch(cm.Namespace, cm.Name, types.MergePatchType, patch)
	if err != nil {
		return fmt.Errorf("updating annotation %s: %w", shardconfig.ForceDeleteAnnotation, err)
	}
	c.writes.Updated(writeKey(kindConfigMap, cm.Namespace, cm.Name), out.ResourceVersion)
	return nil
}
