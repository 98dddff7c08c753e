// Package render turns a live source Deployment and a shard's settings into
// the Deployment that runs the source controller for that shard.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	// controllerLabel holds the source's name on a shard Deployment and its
	// pods; with ShardLabel it makes every clone's selector its own.
	controllerLabel = "shardkeeper.io/controller"
	// sourceAnnotation names the source Deployment ("namespace/name").
	sourceAnnotation = "shardkeeper.io/source"
	// SpecHashAnnotation is the hash of the rendered labels and spec, so an
	// unchanged render is recognised without comparing whole objects.
	SpecHashAnnotation = "shardkeeper.io/spec-hash"
)

// droppedLabels belong to whoever installed the source (Helm, or Flux's own
// kustomize-controller after `flux bootstrap`); a clone carrying them would
// look like part of that release or Kustomization.
var droppedLabels = []string{
	ManagedByLabel, "app.kubernetes.io/instance", "helm.sh/chart", "heritage", "release",
	"kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace",
	"fluxcd.controlplane.io/name", "fluxcd.controlplane.io/namespace",
}

// Render returns the Deployment that runs src for shard, cloned from the
// live source Deployment.
func Render(src source.Source, live *appsv1.Deployment, shard shardconfig.Shard) (*appsv1.Deployment, error) {
	if live == nil {
		return nil, fmt.Errorf("source %s: Deployment not found", src.Key())
	}
	clone := map[string]string{controllerLabel: src.Name, ShardLabel: shard.ID}
	labels := cloneLabels(live.Labels, clone)

	spec := *live.Spec.DeepCopy()
	if shard.Replicas != nil {
		r := *shard.Replicas
		spec.Replicas = &r
	}
	selector := selectorOf(src, shard.ID)
	spec.Selector = &metav1.LabelSelector{MatchLabels: selector}

	tmpl := &spec.Template
	podLabels := shardPodLabels(src, tmpl.Labels, shard.ID)
	maps.Copy(podLabels, selector)
	podLabels[ShardLabel] = shard.ID
	tmpl.Labels = podLabels
	tmpl.Annotations = withAnnotations(tmpl.Annotations, src.Annotations)

	if err := refuseSharedClaims(src, &tmpl.Spec); err != nil {
		return nil, err
	}
	target, err := keepContainer(&tmpl.Spec, src)
	if err != nil {
		return nil, err
	}
	if err := configureContainer(target, src, shard); err != nil {
		return nil, err
	}
	placePod(&tmpl.Spec, shard)

	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        src.CloneName(shard.ID),
			Namespace:   src.Namespace,
			Labels:      labels,
			Annotations: withAnnotations(map[string]string{sourceAnnotation: src.Key()}, src.Annotations),
		},
		Spec: spec,
	}
	if err := setHash(d); err != nil {
		return nil, err
	}
	return d, nil
}

// selectorOf returns the selector of the shard's copy of src: the
// source's own when it names one (Flux's "app: <controller>-<id>"), so
// that a copy made by the upstream tools keeps its immutable selector when
// it is handed over; else shardkeeper's controller and shard labels, which
// no other Deployment's pods carry together.
func selectorOf(src source.Source, shardID string) map[string]string {
	if len(src.SelectorLabels) == 0 {
		return map[string]string{controllerLabel: src.Name, ShardLabel: shardID}
	}
	out := make(map[string]string, len(src.SelectorLabels))
	for k, v := range src.SelectorLabels {
		out[k] = strings.ReplaceAll(v, source.Placeholder, shardID)
	}
	return out
}

// withAnnotations returns a copy of base with extra set over it, or base
// itself when there is nothing to add.
func withAnnotations(base, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}

// refuseSharedClaims refuses a copy of a pod that mounts a
// PersistentVolumeClaim when the source's storage must be its own: the
// copy would mount the same claim, and two source-controllers writing one
// artifact store (or a ReadWriteOnce claim that a second node cannot
// attach) is a broken shard, not a working one.
func refuseSharedClaims(src source.Source, pod *corev1.PodSpec) error {
	if !src.ExclusiveClaims {
		return nil
	}
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			return fmt.Errorf("source %s keeps its storage on PersistentVolumeClaim %s (volume %q), which a shard must not share; "+
				"give the source an emptyDir volume (Flux's default) to have it sharded", src.Key(), v.PersistentVolumeClaim.ClaimName, v.Name)
		}
	}
	return nil
}

// advertised returns the address that the shard's copy of src advertises
// with src.AdvertiseFlag: its own Service's, in the cluster domain (and
// with the port) of the source's value, "<svc>.<ns>.svc.<domain>", as Flux
// Operator renders it for a shard. The namespace is the kubelet's
// expansion of $(RUNTIME_NAMESPACE) when the container has that variable,
// as Flux's containers do, and the literal namespace otherwise.
func advertised(src source.Source, c *corev1.Container, shardID string) string {
	domain := "cluster.local."
	if v, ok := flagValue(c.Args, src.AdvertiseFlag); ok {
		if _, rest, found := strings.Cut(v, ".svc."); found && rest != "" {
			domain = rest
		}
	}
	ns := src.Namespace
	for _, e := range c.Env {
		if e.Name == runtimeNamespaceVar {
			ns = "$(" + runtimeNamespaceVar + ")"
		}
	}
	return src.ServiceCloneName(shardID) + "." + ns + ".svc." + domain
}

// runtimeNamespaceVar is the variable Flux's containers take their
// namespace from (a fieldRef to metadata.namespace).
const runtimeNamespaceVar = "RUNTIME_NAMESPACE"

// flagValue returns the last value of flag in args, in the "--flag=v" or
// "--flag v" form: the one a pflag command line takes.
func flagValue(args []string, flag string) (string, bool) {
	var value string
	var found bool
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, flag+"="):
			value, found = a[len(flag)+1:], true
		case a == flag && i+1 < len(args):
			value, found = args[i+1], true
		}
	}
	return value, found
}

// configureContainer gives the source's controller container the shard:
// its arguments, its node selector as a flag (for the Jobs the controller
// starts) and its resources.
func configureContainer(target *corev1.Container, src source.Source, shard shardconfig.Shard) error {
	for _, a := range src.Args {
		target.Args = setFlag(target.Args, strings.ReplaceAll(a, source.Placeholder, shard.ID))
	}
	if src.AdvertiseFlag != "" && src.MetricsService != "" {
		target.Args = setFlag(target.Args, src.AdvertiseFlag+"="+advertised(src, target, shard.ID))
	}
	if src.NodeSelectorFlag != "" {
		target.Args = removeFlag(target.Args, src.NodeSelectorFlag)
		if len(shard.NodeSelector) > 0 {
			js, err := json.Marshal(shard.NodeSelector)
			if err != nil {
				return fmt.Errorf("shard %s: node selector: %w", shard.ID, err)
			}
			target.Args = append(target.Args, src.NodeSelectorFlag+"="+string(js))
		}
	}
	if shard.Resources != nil {
		target.Resources = *shard.Resources.DeepCopy()
	}
	return nil
}

// placePod merges the shard's node selector over the pod's and adds the
// shard's tolerations that the pod lacks.
func placePod(pod *corev1.PodSpec, shard shardconfig.Shard) {
	if len(shard.NodeSelector) > 0 {
		ns := map[string]string{}
		maps.Copy(ns, pod.NodeSelector)
		maps.Copy(ns, shard.NodeSelector)
		pod.NodeSelector = ns
	}
	for _, t := range shard.Tolerations {
		if !hasToleration(pod.Tolerations, t) {
			pod.Tolerations = append(pod.Tolerations, t)
		}
	}
}

// cloneLabels returns the labels of a shard's copy of an object: the
// source's, without the installer's, with shardkeeper's and extra.
func cloneLabels(live, extra map[string]string) map[string]string {
	labels := map[string]string{}
	maps.Copy(labels, live)
	for _, k := range droppedLabels {
		delete(labels, k)
	}
	labels[ManagedByLabel] = ManagedByValue
	maps.Copy(labels, extra)
	return labels
}

// shardPodLabels turns the source's pod labels (or a selector of them) into
// the shard's: the source's own shard labels are dropped and the shard's
// added, as Fleet's chart does with fleet.cattle.io/shard-default and
// fleet.cattle.io/shard-id.
func shardPodLabels(src source.Source, labels map[string]string, shardID string) map[string]string {
	out := map[string]string{}
	maps.Copy(out, labels)
	for _, k := range src.DropPodLabels {
		delete(out, k)
	}
	for k, v := range src.PodLabels {
		out[k] = strings.ReplaceAll(v, source.Placeholder, shardID)
	}
	return out
}

// setHash sets the spec-hash annotation of d from its labels and spec.
func setHash(d *appsv1.Deployment) error {
	hash, err := specHash(struct {
		Labels map[string]string     `json:"labels"`
		Spec   appsv1.DeploymentSpec `json:"spec"`
	}{d.Labels, d.Spec})
	if err != nil {
		return fmt.Errorf("hashing %s: %w", d.Name, err)
	}
	d.Annotations[SpecHashAnnotation] = hash
	return nil
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

// setFlag returns args with every earlier value of arg's flag removed and
// arg ("--flag=value") appended.
func setFlag(args []string, arg string) []string {
	flag, _, _ := strings.Cut(arg, "=")
	return append(removeFlag(args, flag), arg)
}

// removeFlag returns args without flag, in both the "--flag=v" and the
// "--flag v" form.
func removeFlag(args []string, flag string) []string {
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

// HasArg reports whether the container of src in live is started with arg:
// for "--flag=value", whether the flag's last value, in the "--flag=value"
// or "--flag value" form, is value, as a pflag command line takes a
// repeated flag; for an argument without a value, whether it is there.
func HasArg(src source.Source, live *appsv1.Deployment, arg string) bool {
	flag, value, hasValue := strings.Cut(arg, "=")
	for _, c := range live.Spec.Template.Spec.Containers {
		if src.Container != "" && c.Name != src.Container {
			continue
		}
		all := append(append([]string(nil), c.Command...), c.Args...)
		if !hasValue {
			return slices.Contains(all, arg)
		}
		last, found := flagValue(all, flag)
		return found && last == value
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

func specHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// deploymentUpToDate reports whether the existing Deployment already
// matches the rendered one: same hash, and no field that the render sets
// was changed by hand since (fields the API server defaults are ignored).
func deploymentUpToDate(rendered, existing *appsv1.Deployment) bool {
	return metaUpToDate(rendered, existing) && equality.Semantic.DeepDerivative(rendered.Spec, existing.Spec)
}

// UpdatedDeployment returns existing with the rendered labels, annotations
// and spec; labels and annotations that others set are kept.
func UpdatedDeployment(rendered, existing *appsv1.Deployment) *appsv1.Deployment {
	out := existing.DeepCopy()
	mergeMeta(out, rendered)
	out.Spec = *rendered.Spec.DeepCopy() // rendered may be a Cache's
	return out
}

// metaUpToDate reports whether existing carries the rendered hash and every
// rendered label.
func metaUpToDate(rendered, existing metav1.Object) bool {
	if existing.GetAnnotations()[SpecHashAnnotation] != rendered.GetAnnotations()[SpecHashAnnotation] {
		return false
	}
	for k, v := range rendered.GetLabels() {
		if existing.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

// mergeMeta sets the rendered labels and annotations on dst, keeping the
// others.
func mergeMeta(dst, rendered metav1.Object) {
	lbls, annotations := dst.GetLabels(), dst.GetAnnotations()
	if lbls == nil {
		lbls = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(lbls, rendered.GetLabels())
	maps.Copy(annotations, rendered.GetAnnotations())
	dst.SetLabels(lbls)
	dst.SetAnnotations(annotations)
}

// SelectorChanged reports whether the existing Deployment's selector differs
// from the rendered one. The selector is immutable, so such a Deployment
// has to be kept with its selector (KeepSelector) or replaced.
func SelectorChanged(rendered, existing *appsv1.Deployment) bool {
	return !equality.Semantic.DeepEqual(rendered.Spec.Selector, existing.Spec.Selector)
}

// KeepSelector returns the rendered Deployment with the existing one's
// selector, when that selector still selects the rendered pods. A shard
// Deployment handed over from Fleet's chart selects `app: <controller>`,
// which the rendered pods carry, so it is updated in place and never
// missing; only a selector that would not select them forces a replace.
func KeepSelector(rendered, existing *appsv1.Deployment) (*appsv1.Deployment, bool) {
	sel, err := metav1.LabelSelectorAsSelector(existing.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(rendered.Spec.Template.Labels)) {
		return nil, false
	}
	out := rendered.DeepCopy()
	out.Spec.Selector = existing.Spec.Selector.DeepCopy()
	if err := setHash(out); err != nil {
		return nil, false
	}
	return out, true
}

// IsManaged reports whether o carries shardkeeper's managed-by label.
func IsManaged(o metav1.Object) bool {
	return o.GetLabels()[ManagedByLabel] == ManagedByValue
}

// DeploymentShard returns the shard whose copy of src the managed
// Deployment d is, and false when d is no such copy.
func DeploymentShard(src source.Source, d *appsv1.Deployment) (string, bool) {
	return shardOf(src, d, src.CloneName)
}

// LegacyDeploymentShard returns the shard whose copy of src, named as an
// earlier release named it, the managed Deployment d is. Such copies were
// always labelled by shardkeeper, so their labels alone say whose they
// are: a name of the old form can also be a current copy's name.
func LegacyDeploymentShard(src source.Source, d *appsv1.Deployment) (string, bool) {
	if src.LegacyNameSep == "" || d.Namespace != src.Namespace || !IsManaged(d) {
		return "", false
	}
	id := d.Labels[ShardLabel]
	if d.Labels[controllerLabel] != src.Name || d.Name != src.LegacyCloneName(id) {
		return "", false
	}
	return id, shardconfig.ValidateID(id) == nil
}

// LegacyServiceShard returns the shard whose copy of a metrics Service of
// src, named as an earlier release named it ("<service><LegacyNameSep><id>"),
// the managed Service svc is. Its labels and the Service its source
// annotation names say whose it is, not src's options of today: the
// option that named the metrics Service may be gone since.
func LegacyServiceShard(src source.Source, svc *corev1.Service) (string, bool) {
	if src.LegacyNameSep == "" || svc.Namespace != src.Namespace || !IsManaged(svc) {
		return "", false
	}
	id := svc.Labels[ShardLabel]
	ns, service, ok := strings.Cut(svc.Annotations[sourceAnnotation], "/")
	if !ok || ns != src.Namespace || service == "" || svc.Labels[controllerLabel] != src.Name || svc.Name != service+src.LegacyNameSep+id {
		return "", false
	}
	return id, shardconfig.ValidateID(id) == nil
}

// ServiceShard returns the shard whose copy of src's metrics Service the
// managed Service svc is, and false when svc is no such copy.
func ServiceShard(src source.Source, svc *corev1.Service) (string, bool) {
	if src.MetricsService == "" {
		return "", false
	}
	return shardOf(src, svc, src.ServiceCloneName)
}

// shardOf reads the labels that every render sets: they name the source
// and the shard, which a name cannot tell apart when one source's name
// begins another's. Only a copy handed over by its managed-by label, not
// yet updated, lacks them: its name alone says whose it is, which
// source.Build keeps unambiguous.
func shardOf(src source.Source, o metav1.Object, cloneName func(shardID string) string) (string, bool) {
	if o.GetNamespace() != src.Namespace || !IsManaged(o) {
		return "", false
	}
	id, labelled := o.GetLabels()[ShardLabel]
	if controller, ok := o.GetLabels()[controllerLabel]; ok || labelled {
		if controller != src.Name || o.GetName() != cloneName(id) {
			return "", false
		}
	} else if id, ok = strings.CutPrefix(o.GetName(), cloneName("")); !ok {
		return "", false
	}
	return id, shardconfig.ValidateID(id) == nil
}
