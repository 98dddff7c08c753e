// Package source describes the controller Deployments that are cloned for
// every shard (the presets for Fleet and Flux, and custom ones), and the
// object kinds whose shard label maps them to a shard.
package source

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Placeholder is replaced by the shard ID in argument and label templates.
const Placeholder = "{shard}"

// Preset names accepted by --preset.
const (
	PresetFleet = "fleet"
	PresetFlux  = "flux"
)

// Fleet and Flux labels and flags that the presets use.
const (
	FleetShardRefLabel     = "fleet.cattle.io/shard-ref"
	FleetShardIDLabel      = "fleet.cattle.io/shard-id"
	FleetShardDefaultLabel = "fleet.cattle.io/shard-default"
	FluxShardKeyLabel      = "sharding.fluxcd.io/key"
	fluxSelectorFlag       = "--watch-label-selector"
)

// Source is a controller Deployment that shardkeeper clones for every shard.
type Source struct {
	// Namespace and Name of the live source Deployment.
	Namespace string
	Name      string
	// Container is the one container the clone keeps; the others (cleanup,
	// agent management) stay with the unsharded controller. Empty keeps
	// every container and passes the shard to the first one.
	Container string
	// Args are "--flag=value" templates set on the container, replacing
	// any earlier value of the same flag; Placeholder becomes the shard ID.
	Args []string
	// PodLabels are added to the pod template, values being templates.
	PodLabels map[string]string
	// DropPodLabels are removed from the pod template.
	DropPodLabels []string
	// NodeSelectorFlag, when set, receives the shard's node selector as
	// JSON, for controllers that start Jobs on the shard's nodes.
	NodeSelectorFlag string
	// RequiredArg, when set, must be among the source's own arguments for
	// the source to leave the sharded objects alone.
	RequiredArg string
}

// Key returns "namespace/name".
func (s Source) Key() string { return s.Namespace + "/" + s.Name }

// CloneName returns the name of the shard's copy of the source.
func (s Source) CloneName(shardID string) string { return s.Name + "-shard-" + shardID }

// MappedKind is an object kind whose label maps its objects to a shard.
type MappedKind struct {
	// Resource is the kind's group, version and plural resource name.
	Resource schema.GroupVersionResource
	// Label holds the shard ID on the kind's objects.
	Label string
}

// Name is how the kind is shown in the status and in Events.
func (m MappedKind) Name() string { return m.Resource.Resource }

// CRDName is the name of the kind's CustomResourceDefinition.
func (m MappedKind) CRDName() string { return m.Resource.Resource + "." + m.Resource.Group }

// Set is what shardkeeper clones and counts.
type Set struct {
	Sources []Source
	Mapped  []MappedKind
}

// Namespaces returns the sorted namespaces of the sources.
func (s Set) Namespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, src := range s.Sources {
		if !seen[src.Namespace] {
			seen[src.Namespace] = true
			out = append(out, src.Namespace)
		}
	}
	sort.Strings(out)
	return out
}

// Options are the command-line choices that Build turns into a Set.
type Options struct {
	// Presets are "fleet" and/or "flux".
	Presets []string
	// FleetNamespace and FluxNamespace are where the presets' sources run.
	FleetNamespace string
	FluxNamespace  string
	// Custom are --source values: "NAMESPACE/NAME[:CONTAINER]=--flag=...{shard}...".
	Custom []string
	// Mapped are --mapped-kind values: "RESOURCE.VERSION.GROUP=LABEL".
	// Empty means the presets' own kinds.
	Mapped []string
}

// Build validates the options and returns the sources and mapped kinds.
func Build(o Options) (Set, error) {
	var set Set
	for _, p := range o.Presets {
		switch strings.TrimSpace(p) {
		case PresetFleet:
			set.Sources = append(set.Sources, fleetSources(o.FleetNamespace)...)
			if len(o.Mapped) == 0 {
				set.Mapped = append(set.Mapped,
					MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "gitrepos"}, Label: FleetShardRefLabel},
					MappedKind{Resource: schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "helmops"}, Label: FleetShardRefLabel},
				)
			}
		case PresetFlux:
			set.Sources = append(set.Sources, fluxSources(o.FluxNamespace)...)
			if len(o.Mapped) == 0 {
				set.Mapped = append(set.Mapped,
					MappedKind{Resource: schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}, Label: FluxShardKeyLabel})
			}
		case "":
		default:
			return Set{}, fmt.Errorf("unknown preset %q: use %q and/or %q", p, PresetFleet, PresetFlux)
		}
	}
	for _, c := range o.Custom {
		src, err := ParseCustom(c)
		if err != nil {
			return Set{}, err
		}
		set.Sources = append(set.Sources, src)
	}
	for _, m := range o.Mapped {
		mk, err := ParseMappedKind(m)
		if err != nil {
			return Set{}, err
		}
		set.Mapped = append(set.Mapped, mk)
	}
	if len(set.Sources) == 0 {
		return Set{}, fmt.Errorf("no source controllers: choose a preset (%s, %s) or name one with --source", PresetFleet, PresetFlux)
	}
	seen := map[string]bool{}
	for _, s := range set.Sources {
		if seen[s.Key()] {
			return Set{}, fmt.Errorf("source %s is named twice", s.Key())
		}
		seen[s.Key()] = true
	}
	names := map[string]bool{}
	for _, m := range set.Mapped {
		if names[m.Name()] {
			return Set{}, fmt.Errorf("mapped kind %s is named twice", m.Name())
		}
		names[m.Name()] = true
	}
	return set, nil
}

func fleetSources(ns string) []Source {
	base := func(name string) Source {
		return Source{
			Namespace:     ns,
			Name:          name,
			Container:     name,
			Args:          []string{"--shard-id=" + Placeholder},
			PodLabels:     map[string]string{FleetShardIDLabel: Placeholder},
			DropPodLabels: []string{FleetShardDefaultLabel},
		}
	}
	gitjob := base("gitjob")
	gitjob.NodeSelectorFlag = "--shard-node-selector"
	return []Source{base("fleet-controller"), gitjob, base("helmops")}
}

func fluxSources(ns string) []Source {
	return []Source{{
		Namespace:   ns,
		Name:        "helm-controller",
		Container:   "manager",
		Args:        []string{fluxSelectorFlag + "=" + FluxShardKeyLabel + "=" + Placeholder},
		RequiredArg: fluxSelectorFlag + "=!" + FluxShardKeyLabel,
	}}
}

// ParseCustom parses "NAMESPACE/NAME[:CONTAINER]=--flag=...{shard}...".
func ParseCustom(v string) (Source, error) {
	target, arg, ok := strings.Cut(v, "=")
	if !ok {
		return Source{}, fmt.Errorf("--source %q: want NAMESPACE/NAME[:CONTAINER]=--flag={shard}", v)
	}
	target, container, _ := strings.Cut(target, ":")
	ns, name, ok := strings.Cut(target, "/")
	if !ok || ns == "" || name == "" {
		return Source{}, fmt.Errorf("--source %q: want NAMESPACE/NAME[:CONTAINER]=--flag={shard}", v)
	}
	for what, s := range map[string]string{"namespace": ns, "name": name} {
		if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
			return Source{}, fmt.Errorf("--source %q: %s %q: %s", v, what, s, strings.Join(errs, "; "))
		}
	}
	if container != "" {
		if errs := validation.IsDNS1123Label(container); len(errs) > 0 {
			return Source{}, fmt.Errorf("--source %q: container %q: %s", v, container, strings.Join(errs, "; "))
		}
	}
	flag, _, hasValue := strings.Cut(arg, "=")
	if !strings.HasPrefix(flag, "-") || !hasValue || !strings.Contains(arg, Placeholder) {
		return Source{}, fmt.Errorf("--source %q: the argument template must look like --flag=...%s...", v, Placeholder)
	}
	return Source{Namespace: ns, Name: name, Container: container, Args: []string{arg}}, nil
}

// ParseMappedKind parses "RESOURCE.VERSION.GROUP=LABEL", as in
// "gitrepos.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref".
func ParseMappedKind(v string) (MappedKind, error) {
	res, label, ok := strings.Cut(v, "=")
	parts := strings.SplitN(res, ".", 3)
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return MappedKind{}, fmt.Errorf("--mapped-kind %q: want RESOURCE.VERSION.GROUP=LABEL, e.g. gitrepos.v1alpha1.fleet.cattle.io=%s", v, FleetShardRefLabel)
	}
	if errs := validation.IsQualifiedName(label); len(errs) > 0 {
		return MappedKind{}, fmt.Errorf("--mapped-kind %q: label %q: %s", v, label, strings.Join(errs, "; "))
	}
	return MappedKind{Resource: schema.GroupVersionResource{Resource: parts[0], Version: parts[1], Group: parts[2]}, Label: label}, nil
}
