package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// gitJobTolerations are the tolerations Fleet's gitjob gives every git Job
// before it adds fleet-controller's (newJobSpec in Fleet's
// internal/cmd/controller/gitops/reconciler/gitjob.go).
var gitJobTolerations = []corev1.Toleration{
	{Key: "cattle.io/os", Operator: corev1.TolerationOpEqual, Value: "linux", Effect: corev1.TaintEffectNoSchedule},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule},
}

// jobPlacementMismatch says why the Jobs of a shard's copy of a source would
// not be placed as the shard asks, or "" when they would. Fleet's gitjob
// starts each git Job with the tolerations and node selector of the
// unsharded fleet-controller Deployment (source.Source.JobPlacementFrom);
// the shard's node selector reaches the Job through --shard-node-selector,
// but fleet-controller's node selector is copied over it, and the shard's
// tolerations never reach the Job at all.
func jobPlacementMismatch(in Input, shard shardconfig.Shard) string {
	if len(shard.Tolerations) == 0 && len(shard.NodeSelector) == 0 {
		return ""
	}
	for _, s := range in.Sources {
		if s.Live == nil || s.Source.JobPlacementFrom == "" {
			continue
		}
		fromKey := s.Source.Namespace + "/" + s.Source.JobPlacementFrom
		from := in.Deployments[fromKey]
		if from == nil {
			continue
		}
		pod := from.Spec.Template.Spec
		var missing, overridden []string
		for _, t := range shard.Tolerations {
			if !tolerated(append(slices.Clone(gitJobTolerations), pod.Tolerations...), t) {
				missing = append(missing, formatToleration(t))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(shard.NodeSelector)) {
			if v, ok := pod.NodeSelector[k]; ok && v != shard.NodeSelector[k] {
				overridden = append(overridden, fmt.Sprintf("%s=%s (fleet-controller's %s=%s wins)", k, shard.NodeSelector[k], k, v))
			}
		}
		if len(missing)+len(overridden) == 0 {
			return ""
		}
		var why []string
		if len(missing) > 0 {
			why = append(why, fmt.Sprintf("the toleration(s) %s, which Deployment %s lacks", strings.Join(missing, ", "), fromKey))
		}
		if len(overridden) > 0 {
			why = append(why, "the node selector "+strings.Join(overridden, ", "))
		}
		return fmt.Sprintf("the git Jobs of shard %s cannot run where the shard asks: %s starts each git Job with the tolerations and node selector of the unsharded Deployment %s, so the Jobs miss %s, and would stay Pending on the shard's nodes. "+
			"Set them in Fleet's chart values tolerations and nodeSelector, which the unsharded fleet-controller carries, or remove them from the shard",
			shard.ID, s.Source.Name, fromKey, strings.Join(why, "; and "))
	}
	return ""
}

// tolerated reports whether one of have tolerates every taint that want
// tolerates.
func tolerated(have []corev1.Toleration, want corev1.Toleration) bool {
	for _, h := range have {
		if h.Effect != "" && h.Effect != want.Effect {
			continue
		}
		if h.Operator == corev1.TolerationOpExists && (h.Key == "" || h.Key == want.Key) {
			return true
		}
		if h.Key == want.Key && want.Operator != corev1.TolerationOpExists && h.Value == want.Value {
			return true
		}
	}
	return false
}

func formatToleration(t corev1.Toleration) string {
	s := t.Key
	if t.Operator != corev1.TolerationOpExists {
		s += "=" + t.Value
	}
	if t.Effect != "" {
		s += ":" + string(t.Effect)
	}
	return s
}
