// Package clone makes the benchmark references' shard Deployments: for
// every source one Deployment cloned from it (its controller container and
// a --shard-id flag), under a name and selector of its own that the daemon
// ignores, so that the references write what the daemon writes without
// touching its objects.
package clone

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label marks a reference's Deployments, with its prefix (less the dash).
const Label = "bench.shardkeeper.io/reference"

// The prefixes of the references' Deployments: the bare parallel client's
// (the floor), the ideal controller's and the informer reference's (the
// ideal controller with --informer).
const (
	FloorPrefix    = "floor-"
	IdealPrefix    = "ideal-"
	InformerPrefix = "informer-"
)

// Deployments returns the clones of sources for ids, named
// <prefix><source>-<id>.
func Deployments(sources []*appsv1.Deployment, prefix string, ids []string) []*appsv1.Deployment {
	out := make([]*appsv1.Deployment, 0, len(ids)*len(sources))
	for _, id := range ids {
		for _, s := range sources {
			d := s.DeepCopy()
			d.ObjectMeta = metav1.ObjectMeta{Namespace: s.Namespace, Name: prefix + s.Name + "-" + id,
				Labels: map[string]string{"app": prefix + s.Name + "-" + id, Label: strings.TrimSuffix(prefix, "-")}}
			sel := map[string]string{"bench.shardkeeper.io/clone": d.Name}
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
			d.Spec.Template.Labels = sel
			c := d.Spec.Template.Spec.Containers[0]
			c.Args = append(c.Args, "--shard-id="+id)
			d.Spec.Template.Spec.Containers = []corev1.Container{c}
			d.Status = appsv1.DeploymentStatus{}
			out = append(out, d)
		}
	}
	return out
}
