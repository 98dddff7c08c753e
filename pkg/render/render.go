// Package render turns a live source Deployment and a shard's settings into
// the Deployment that runs the source controller for that shard.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

// Labels and annotations that mark and describe a shard Deployment.
const (
	// ManagedByLabel with value ManagedByValue marks the Deployments that
	// shardkeeper owns. A Deployment without it is never changed.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is shardkeeper's value of ManagedByLabel.
	ManagedByValue = "shardkeeper"
	// ShardLabel holds the shard ID on a shard Deployment and its pods.
	ShardLabel = "shardkeeper.io/shard"
	// ControllerLabel holds the source's name on a shard Deployment and its
	// pods; with ShardLabel it makes every clone's selector its own.
	ControllerLabel = "shardkeeper.io/controller"
	// SourceAnnotation names the source Deployment ("namespace/name").
	SourceAnnotation = "shardkeeper.io/source"
	// SpecHashAnnotation is the hash of the rendered labels and spec, so an
	// unchanged render is recognised without comparing whole objects.
	SpecHashAnnotation = "shardkeeper.io/spec-hash"
)

// droppedLabels belong to whoever installed the source (Helm, mostly); a
// clone carrying them would look like part of that release.
var droppedLabels = []string{
	ManagedByLabel, "app.kubernetes.io/instance", "helm.sh/chart", "heritage", "release",
}

// Render returns the Deployment that runs src for shard, cloned from the
// live source Deployment.
func Render(src source.Source, live *appsv1.Deployment, shard shardconfig.Shard) (*appsv1.Deployment, error) {
	if live == nil {
		return nil, fmt.Errorf("source %s: Deployment not found", src.Key())
	}
	selector := map[string]string{ControllerLabel: src.Name, ShardLabel: shard.ID}

	labels := map[string]string{}
	for k, v := range live.Labels {
		labels[k] = v
	}
	for _, k := range droppedLabels {
		delete(labels, k)
	}
	labels[ManagedByLabel] = ManagedByValue
	for k, v := range selector {
		labels[k] = v
	}

	spec := *live.Spec.DeepCopy()
	if shard.Replicas != nil {
		r := *shard.Replicas
		spec.Replicas = &r
	}
	spec.Selector = &metav1.LabelSelector{MatchLabels: selector}

	tmpl := &spec.Template
	podLabels := map[string]string{}
	for k, v := range tmpl.Labels {
		podLabels[k] = v
	}
	for _, k := range src.DropPodLabels {
		delete(podLabels, k)
	}
	for k, v := range src.PodLabels {
		podLabels[k] = strings.ReplaceAll(v, source.Placeholder, shard.ID)
	}
	for k, v := range selector {
		podLabels[k] = v
	}
	tmpl.Labels = podLabels

	target, err := keepContainer(&tmpl.Spec, src)
	if err != nil {
		return nil, err
	}
	for _, a := range src.Args {
		target.Args = SetFlag(target.Args, strings.ReplaceAll(a, source.Placeholder, shard.ID))
	}
	if src.NodeSelectorFlag != "" {
		target.Args = RemoveFlag(target.Args, src.NodeSelectorFlag)
		if len(shard.NodeSelector) > 0 {
			js, err := json.Marshal(shard.NodeSelector)
			if err != nil {
				return nil, fmt.Errorf("shard %s: node selector: %w", shard.ID, err)
			}
			target.Args = append(target.Args, src.NodeSelectorFlag+"="+string(js))
		}
	}
	if shard.Resources != nil {
		target.Resources = *shard.Resources.DeepCopy()
	}
	if len(shard.NodeSelector) > 0 {
		ns := map[string]string{}
		for k, v := range tmpl.Spec.NodeSelector {
			ns[k] = v
		}
		for k, v := range shard.NodeSelector {
			ns[k] = v
		}
		tmpl.Spec.NodeSelector = ns
	}
	for _, t := range shard.Tolerations {
		if !hasToleration(tmpl.Spec.Tolerations, t) {
			tmpl.Spec.Tolerations = append(tmpl.Spec.Tolerations, t)
		}
	}

	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        src.CloneName(shard.ID),
			Namespace:   src.Namespace,
			Labels:      labels,
			Annotations: map[string]string{SourceAnnotation: src.Key()},
		},
		Spec: spec,
	}
	hash, err := specHash(d)
	if err != nil {
		return nil, err
	}
	d.Annotations[SpecHashAnnotation] = hash
	return d, nil
}

func keepContainer(pod *corev1.PodSpec, src source.Source) (*corev1.Container, error) {
	if len(pod.Containers) == 0 {
		return nil, fmt.Errorf("source %s has no containers", src.Key())
	}
	if src.Container == "" {
		return &pod.Containers[0], nil
	}
	for i := range pod.Containers {
		if pod.Containers[i].Name == src.Container {
			pod.Containers = []corev1.Container{pod.Containers[i]}
			return &pod.Containers[0], nil
		}
	}
	return nil, fmt.Errorf("source %s has no container %q", src.Key(), src.Container)
}

// SetFlag returns args with every earlier value of arg's flag removed and
// arg ("--flag=value") appended.
func SetFlag(args []string, arg string) []string {
	flag, _, _ := strings.Cut(arg, "=")
	return append(RemoveFlag(args, flag), arg)
}

// RemoveFlag returns args without flag, in both the "--flag=v" and the
// "--flag v" form.
func RemoveFlag(args []string, flag string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == flag {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
			continue
		}
		if strings.HasPrefix(a, flag+"=") {
			continue
		}
		out = append(out, a)
	}
	return out
}

// HasArg reports whether the container of src in live is started with arg,
// in the "--flag=value" or "--flag value" form.
func HasArg(src source.Source, live *appsv1.Deployment, arg string) bool {
	flag, value, _ := strings.Cut(arg, "=")
	for _, c := range live.Spec.Template.Spec.Containers {
		if src.Container != "" && c.Name != src.Container {
			continue
		}
		all := append(append([]string(nil), c.Command...), c.Args...)
		for i, a := range all {
			if a == arg || (a == flag && i+1 < len(all) && all[i+1] == value) {
				return true
			}
		}
		if src.Container == "" {
			break
		}
	}
	return false
}

func hasToleration(ts []corev1.Toleration, t corev1.Toleration) bool {
	for _, x := range ts {
		if x.MatchToleration(&t) && x.Value == t.Value && equality.Semantic.DeepEqual(x.TolerationSeconds, t.TolerationSeconds) {
			return true
		}
	}
	return false
}

func specHash(d *appsv1.Deployment) (string, error) {
	b, err := json.Marshal(struct {
		Labels map[string]string     `json:"labels"`
		Spec   appsv1.DeploymentSpec `json:"spec"`
	}{d.Labels, d.Spec})
	if err != nil {
		return "", fmt.Errorf("hashing %s: %w", d.Name, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// UpToDate reports whether the existing Deployment already matches the
// rendered one: same hash, and no field that the render sets was changed by
// hand since (fields the API server defaults are ignored).
func UpToDate(rendered, existing *appsv1.Deployment) bool {
	if existing.Annotations[SpecHashAnnotation] != rendered.Annotations[SpecHashAnnotation] {
		return false
	}
	for k, v := range rendered.Labels {
		if existing.Labels[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepDerivative(rendered.Spec, existing.Spec)
}

// SelectorChanged reports whether the existing Deployment's selector differs
// from the rendered one. The selector is immutable, so such a Deployment (one
// handed over from Fleet's static shards, say) has to be replaced.
func SelectorChanged(rendered, existing *appsv1.Deployment) bool {
	return !equality.Semantic.DeepEqual(rendered.Spec.Selector, existing.Spec.Selector)
}

// IsManaged reports whether d carries shardkeeper's managed-by label.
func IsManaged(d *appsv1.Deployment) bool {
	return d.Labels[ManagedByLabel] == ManagedByValue
}
