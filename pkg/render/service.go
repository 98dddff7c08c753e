package render

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

// RenderService returns the shard's copy of the source's metrics Service:
// the live Service's type and ports, and a selector that picks exactly the
// shard's pods. For Fleet that is what its chart renders for a shard
// (charts/fleet/templates/service.yaml): `app` plus
// `fleet.cattle.io/shard-id: <id>` in place of `shard-default`. A source
// whose pods carry no shard label of their own is selected by the labels
// shardkeeper puts on every clone's pods instead, so that the Service never
// selects the main controller's pods.
func RenderService(src source.Source, live *corev1.Service, shard shardconfig.Shard) (*corev1.Service, error) { //nolint:revive // the pair Render, RenderService says what each renders; render.Service would read as a type
	if live == nil {
		return nil, fmt.Errorf("source %s: metrics Service %s not found", src.Key(), src.ServiceKey())
	}
	if len(live.Spec.Selector) == 0 {
		return nil, fmt.Errorf("source %s: metrics Service %s has no selector to narrow to a shard", src.Key(), src.ServiceKey())
	}
	clone := map[string]string{controllerLabel: src.Name, ShardLabel: shard.ID}
	selector := shardPodLabels(src, live.Spec.Selector, shard.ID)
	if len(src.PodLabels) == 0 {
		maps.Copy(selector, clone)
	}
	spec := corev1.ServiceSpec{
		Type:                     live.Spec.Type,
		Selector:                 selector,
		SessionAffinity:          live.Spec.SessionAffinity,
		PublishNotReadyAddresses: live.Spec.PublishNotReadyAddresses,
	}
	if spec.Type == "" {
		spec.Type = corev1.ServiceTypeClusterIP
	}
	for _, p := range live.Spec.Ports {
		p.NodePort = 0 // allocated per Service; the source's is taken
		spec.Ports = append(spec.Ports, p)
	}
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        src.ServiceCloneName(shard.ID),
			Namespace:   src.Namespace,
			Labels:      cloneLabels(live.Labels, clone),
			Annotations: withAnnotations(map[string]string{sourceAnnotation: src.ServiceKey()}, src.Annotations),
		},
		Spec: spec,
	}
	hash, err := specHash(struct {
		Labels map[string]string  `json:"labels"`
		Spec   corev1.ServiceSpec `json:"spec"`
	}{svc.Labels, svc.Spec})
	if err != nil {
		return nil, fmt.Errorf("hashing %s: %w", svc.Name, err)
	}
	svc.Annotations[SpecHashAnnotation] = hash
	return svc, nil
}

// ServiceUpToDate reports whether the existing Service already matches the
// rendered one: same hash, and no field that the render sets was changed by
// hand since. Fields the API server allocates (cluster IPs, node ports) are
// ignored.
func ServiceUpToDate(rendered, existing *corev1.Service) bool {
	return metaUpToDate(rendered, existing) &&
		equality.Semantic.DeepEqual(rendered.Spec.Selector, existing.Spec.Selector) &&
		equality.Semantic.DeepDerivative(rendered.Spec, existing.Spec)
}

// UpdatedService returns existing with the rendered labels, annotations,
// type, ports and selector, keeping what the API server allocated (the
// cluster IPs and IP families, which are immutable).
func UpdatedService(rendered, existing *corev1.Service) *corev1.Service {
	out := existing.DeepCopy()
	mergeMeta(out, rendered)
	out.Spec.Type = rendered.Spec.Type
	out.Spec.Selector = rendered.Spec.Selector
	out.Spec.SessionAffinity = rendered.Spec.SessionAffinity
	out.Spec.PublishNotReadyAddresses = rendered.Spec.PublishNotReadyAddresses
	// A node port already allocated for a port of the same name is kept.
	ports := make([]corev1.ServicePort, len(rendered.Spec.Ports))
	for i, p := range rendered.Spec.Ports {
		for _, e := range existing.Spec.Ports {
			if rendered.Spec.Type != corev1.ServiceTypeClusterIP && e.Name == p.Name && e.Port == p.Port && e.Protocol == p.Protocol {
				p.NodePort = e.NodePort
			}
		}
		ports[i] = p
	}
	out.Spec.Ports = ports
	return out
}
