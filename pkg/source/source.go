// Package source describes the controller Deployments that are cloned for
// every shard (the presets for Fleet and Flux, and custom ones), and the
// object kinds whose shard label maps them to a shard.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package source

import (
	"fmt"
	"maps"
	"slices"
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
	presetFlux  = "flux"
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
	// the source to leave the sharded objects alone. Without it no new
	// clone of the source is created: the main controller would reconcile
	// the shard's objects too.
	RequiredArg string
	// MetricsService, when set, names the source's metrics Service in its
	// namespace; while it exists, every shard gets a copy that selects the
	// shard's pods.
	MetricsService string
	// JobPlacementFrom, when set, names the Deployment in the source's
	// namespace whose pod tolerations and node selector the source's Jobs
	// take, whatever the shard asks for (Fleet's gitjob and
	// fleet-controller).
	JobPlacementFrom string
	// Serves are the mapped kinds (MappedKind.Name) whose objects need the
	// source's controller, for failover: when its copy on a shard is down,
	// those objects are not served there, whatever else runs. Empty means
	// every mapped kind.
	Serves []string
	// NameSep joins the source's name (and its Service's) and a shard ID in
	// the names of the shard's copies; empty means "-shard-", as Fleet's
	// chart names a shard. Flux names its shards "<controller>-<id>".
	NameSep string
	// LegacyNameSep, when set, is the separator of the names that earlier
	// releases gave the copies: such a copy is replaced by one of the
	// current name, which is created first.
	LegacyNameSep string
	// SelectorLabels, when set, are the copy's Deployment selector, values
	// being templates (Flux's "app: <controller>-<id>"), so that a shard
	// Deployment made by Flux's own tools is handed over in place. Empty
	// selects by shardkeeper's controller and shard labels.
	SelectorLabels map[string]string
	// Annotations are set on the copy's Deployment, its pods and its
	// Service (Flux's "sharding.fluxcd.io/role: shard").
	Annotations map[string]string
	// AdvertiseFlag, when set, is the flag that tells the controller the
	// address it advertises for its Service (source-controller's
	// --storage-adv-addr); the copy advertises its own Service's, in the
	// cluster domain of the source's value.
	AdvertiseFlag string
	// ExclusiveClaims refuses a copy of a pod that mounts a
	// PersistentVolumeClaim: the source's storage is its own, and two
	// controllers writing one volume would corrupt it.
	ExclusiveClaims bool
}

// Key returns "namespace/name".
func (s Source) Key() string { return s.Namespace + "/" + s.Name }

// CloneName returns the name of the shard's copy of the source.
func (s Source) CloneName(shardID string) string { return s.Name + s.sep() + shardID }

// LegacyCloneName returns the name that an earlier release gave the
// shard's copy, or "" when the name did not change.
func (s Source) LegacyCloneName(shardID string) string {
	if s.LegacyNameSep == "" {
		return ""
	}
	return s.Name + s.LegacyNameSep + shardID
}

// sep returns the separator of the copies' names.
func (s Source) sep() string {
	if s.NameSep == "" {
		return cloneInfix
	}
	return s.NameSep
}

// ServiceKey returns "namespace/name" of the source's metrics Service, or
// "" when it has none.
func (s Source) ServiceKey() string {
	if s.MetricsService == "" {
		return ""
	}
	return s.Namespace + "/" + s.MetricsService
}

// ServiceCloneName returns the name of the shard's copy of the metrics
// Service, as Fleet's chart names it: "monitoring-fleet-controller-shard-<id>".
func (s Source) ServiceCloneName(shardID string) string {
	return s.MetricsService + s.sep() + shardID
}

// Limits of what a shard ID becomes part of.
const (
	// cloneInfix joins a source's name, or its metrics Service's, and a
	// shard ID in the name of the shard's copy.
	cloneInfix = "-shard-"
	// maxDeploymentName leaves room for the "-<pod-template-hash>" (up to
	// 11 characters) that the Deployment controller appends to name each
	// ReplicaSet, which must be a DNS-1123 subdomain too.
	maxDeploymentName = validation.DNS1123SubdomainMaxLength - 11
	// maxServiceName: a Service's name is a DNS-1035 label.
	maxServiceName = validation.DNS1035LabelMaxLength
	// idInName stands for the shard ID in the names IDLimit reports.
	idInName = "<id>"
)

// IDLimit is the longest shard ID that the names and label values derived
// from it allow, and the one derived name that sets that bound.
type IDLimit struct {
	// maxLen is the most characters a shard ID may have.
	maxLen int
	// name is the derived name or label that sets maxLen, with "<id>" for
	// the ID: "Service monitoring-fleet-controller-shard-<id>".
	name string
	// nameMaxLen is the most characters name may have.
	nameMaxLen int
}

// Check returns an error when id is longer than l allows. The shard list
// is checked when it is read, so that an ID that parses never makes a
// shard whose writes all fail.
func (l IDLimit) Check(id string) error {
	if len(id) <= l.maxLen {
		return nil
	}
	return fmt.Errorf("shard ID %q is %d characters long, at most %d are allowed with the enabled sources (%s must fit in %d characters)",
		id, len(id), l.maxLen, l.name, l.nameMaxLen)
}

// IDLimit returns the tightest bound that the sources' derived names set;
// on a tie, the first source's.
func (s Set) IDLimit() IDLimit {
	var out IDLimit
	for i, src := range s.Sources {
		if l := src.idLimit(); i == 0 || l.maxLen < out.maxLen {
			out = l
		}
	}
	return out
}

// idLimit returns the bound that the source's own derived names set: the
// ID as a label value on every copy and its pods, the copy's name, its pod
// labels and its metrics Service's name.
func (s Source) idLimit() IDLimit {
	out := IDLimit{maxLen: validation.LabelValueMaxLength, name: "label value " + idInName, nameMaxLen: validation.LabelValueMaxLength}
	tighter := func(prefix, template string, nameMaxLen int) {
		n := strings.Count(template, Placeholder)
		if n == 0 {
			return
		}
		if l := (nameMaxLen - len(template) + n*len(Placeholder)) / n; l < out.maxLen {
			out = IDLimit{maxLen: l, name: prefix + strings.ReplaceAll(template, Placeholder, idInName), nameMaxLen: nameMaxLen}
		}
	}
	tighter("Deployment ", s.CloneName(Placeholder), maxDeploymentName)
	for _, k := range slices.Sorted(maps.Keys(s.PodLabels)) {
		tighter("pod label "+k+"=", s.PodLabels[k], validation.LabelValueMaxLength)
	}
	for _, k := range slices.Sorted(maps.Keys(s.SelectorLabels)) {
		tighter("selector label "+k+"=", s.SelectorLabels[k], validation.LabelValueMaxLength)
	}
	if s.MetricsService != "" {
		tighter("Service ", s.ServiceCloneName(Placeholder), maxServiceName)
	}
	return out
}

// MappedKind is an object kind whose label maps its objects to a shard.
type MappedKind struct {
	// Resource is the kind's group, version and plural resource name.
	Resource schema.GroupVersionResource
	// Label holds the shard ID on the kind's objects.
	Label string
	// Derived kinds are made by the controllers from another kind, and take
	// their shard label from it (Fleet's Bundles from their GitRepo or
	// HelmOp). They are guarded like the others, but placement never moves
	// them and does not count them as load.
	Derived bool
	// BumpOnMove, when set, is an integer field of the object (a path such
	// as "spec.forceSyncGeneration") that placement increments when it moves
	// an object that has derived objects, so that its controller applies it
	// again and they follow it to the new shard.
	BumpOnMove string
	// OwnerLabel, on a derived kind, names the object it was made from, in
	// its own namespace (a Bundle's fleet.cattle.io/repo-name). On a kind
	// that is not derived, an object that carries it is derived all the
	// same: a HelmChart that helm-controller made from a HelmRelease's
	// spec.chart (helm.toolkit.fluxcd.io/name) takes its shard label from
	// there, and placement never moves it.
	OwnerLabel string
	// GroupByNamespace makes a namespace the unit of placement for the
	// kind: the objects of every such kind in one namespace live on one
	// shard and move together. Flux resolves a HelmChart's repository
	// only inside its source shard, and a tenant's objects refer to each
	// other within their namespace.
	GroupByNamespace bool
	// SpecLabels, when set, is the dotted path of a map in the object's
	// spec whose labels the controller puts on the objects it derives
	// (a HelmRelease's spec.chart.metadata.labels onto its HelmChart, a
	// HelmOp's spec.labels onto its Bundle): the shard label there decides
	// where that work runs.
	SpecLabels string
}

// Name is how the kind is shown in the status and in Events.
func (m MappedKind) Name() string { return m.Resource.Resource }

// CRDName is the name of the kind's CustomResourceDefinition.
func (m MappedKind) CRDName() string { return m.Resource.Resource + "." + m.Resource.Group }

// Set is what shardkeeper clones and counts.
type Set struct {
	Sources []Source
	Mapped  []MappedKind
	// Warnings say what Build set aside in the options, and what to remove
	// from them: a --source that names a preset's controller, a value that
	// repeats a preset's. The daemon logs them at start.
	Warnings []string
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

// ServiceNamespaces returns the sorted namespaces of the sources that have a
// metrics Service: only there are Services watched.
func (s Set) ServiceNamespaces() []string {
	seen := map[string]bool{}
	var out []string
	for _, src := range s.Sources {
		if src.MetricsService != "" && !seen[src.Namespace] {
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
	// Empty means the presets' own kinds; a preset's kind listed with its
	// label keeps what the preset knows of it.
	Mapped []string
	// MetricsServices are --source-metrics-service values:
	// "NAMESPACE/NAME=SERVICE", the metrics Service of a source.
	MetricsServices []string
	// FluxShardKey is the label that maps Flux's objects to a shard, as
	// FluxInstance.spec.sharding.key sets it; empty means
	// FluxShardKeyLabel.
	FluxShardKey string
	// RequiredArgs are --source-required-arg values:
	// "NAMESPACE/NAME=--flag=value", what a source's main controller must
	// run with for its clones to be created.
	RequiredArgs []string
}

// Build validates the options and returns the sources and mapped kinds.
func Build(o Options) (Set, error) {
	set, fromPreset, err := presets(o)
	if err != nil {
		return Set{}, err
	}
	custom, err := parseAll(o.Custom, parseCustom)
	if err != nil {
		return Set{}, err
	}
	for i, c := range custom {
		// Earlier releases' flux preset had helm-controller only, and the
		// docs named the other controllers with --source: such a command
		// line must still start once the preset clones them.
		p, ok := fromPreset[c.Key()]
		if !ok {
			set.Sources = append(set.Sources, c)
			continue
		}
		set.Warnings = append(set.Warnings, fmt.Sprintf("--source %q is ignored: preset %s clones %s already (%s); remove it",
			o.Custom[i], p, c.Key(), presetDefinition(set.Sources, c.Key())))
	}
	warnings, err := applySourceFlags(set.Sources, fromPreset, o)
	if err != nil {
		return Set{}, err
	}
	set.Warnings = append(set.Warnings, warnings...)
	mapped, err := parseAll(o.Mapped, parseMappedKind)
	if err != nil {
		return Set{}, err
	}
	mapped, warnings, err = withPresetMeaning(mapped, o)
	if err != nil {
		return Set{}, err
	}
	set.Mapped = append(set.Mapped, mapped...)
	set.Warnings = append(set.Warnings, warnings...)
	if len(set.Sources) == 0 {
		return Set{}, fmt.Errorf("no source controllers: choose a preset (%s, %s) or name one with --source", PresetFleet, presetFlux)
	}
	if err := checkUnique(set); err != nil {
		return Set{}, err
	}
	if err := checkCopies(set.Sources); err != nil {
		return Set{}, err
	}
	return set, nil
}

// parseAll parses every value, stopping at the first error.
func parseAll[T any](values []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, v := range values {
		x, err := parse(v)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// presetDefinition describes the preset's source of that key, for a
// warning: its container and argument templates.
func presetDefinition(sources []Source, key string) string {
	for _, s := range sources {
		if s.Key() == key {
			return strings.Join(append([]string{"container " + s.Container}, s.Args...), ", ")
		}
	}
	return ""
}

// presets returns the sources of the chosen presets and, unless mapped
// kinds are named, their kinds; and the preset of each source, by key.
func presets(o Options) (Set, map[string]string, error) {
	var set Set
	fromPreset := map[string]string{}
	add := func(preset string, sources []Source) {
		for _, s := range sources {
			fromPreset[s.Key()] = preset
		}
		set.Sources = append(set.Sources, sources...)
	}
	for _, p := range o.Presets {
		switch strings.TrimSpace(p) {
		case PresetFleet:
			add(PresetFleet, fleetSources(o.FleetNamespace))
			if len(o.Mapped) == 0 {
				set.Mapped = append(set.Mapped, fleetKinds()...)
			}
		case presetFlux:
			key := o.FluxShardKey
			if key == "" {
				key = FluxShardKeyLabel
			}
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return Set{}, nil, fmt.Errorf("flux shard key %q: %s", key, strings.Join(errs, "; "))
			}
			add(presetFlux, fluxSources(o.FluxNamespace, key))
			if len(o.Mapped) == 0 {
				set.Mapped = append(set.Mapped, fluxKinds(key)...)
			}
		case "":
		default:
			return Set{}, nil, fmt.Errorf("unknown preset %q: use %q and/or %q", p, PresetFleet, presetFlux)
		}
	}
	return set, fromPreset, nil
}

// withPresetMeaning gives each listed kind that a preset knows, the same
// resource of the same group mapped by the same label, what the preset
// knows of it (derived, bumped on a move, its spec labels, its owner
// label, placed by namespace), at the version listed: listing a preset's
// kind beside one's own must not make Bundles placeable. Listed with
// another label, it is refused while the preset is on, whose copies select
// by the preset's label: the objects would be guarded by a label that no
// shard reads, and those that the shards serve not at all. With the preset
// off, it is a kind of the operator's own controllers, as listed, and a
// warning says so. o.Mapped are the values the kinds were parsed from.
func withPresetMeaning(listed []MappedKind, o Options) ([]MappedKind, []string, error) {
	on := map[string]bool{}
	for _, p := range o.Presets {
		on[strings.TrimSpace(p)] = true
	}
	fluxKey := o.FluxShardKey
	if fluxKey == "" {
		fluxKey = FluxShardKeyLabel
	}
	known := map[string]MappedKind{}
	preset := map[string]string{}
	for p, kinds := range map[string][]MappedKind{PresetFleet: fleetKinds(), presetFlux: fluxKinds(fluxKey)} {
		for _, k := range kinds {
			known[k.CRDName()], preset[k.CRDName()] = k, p
		}
	}
	var warnings []string
	out := make([]MappedKind, len(listed))
	for i, m := range listed {
		k, ok := known[m.CRDName()]
		switch {
		case !ok:
			out[i] = m
		case k.Label == m.Label:
			k.Resource = m.Resource
			out[i] = k
		case on[preset[m.CRDName()]]:
			hint := ""
			if preset[m.CRDName()] == presetFlux {
				hint = ", or set --flux-shard-key"
			}
			return nil, nil, fmt.Errorf("--mapped-kind %q: preset %s maps %s by the label %s, which its shards' controllers select by: list it with that label%s",
				o.Mapped[i], preset[m.CRDName()], m.CRDName(), k.Label, hint)
		default:
			out[i] = m
			warnings = append(warnings, fmt.Sprintf("--mapped-kind %q: preset %s maps %s by the label %s; by %s it is taken as a kind of its own, without what the preset knows of it",
				o.Mapped[i], preset[m.CRDName()], m.CRDName(), k.Label, m.Label))
		}
	}
	return out, warnings, nil
}

// applySourceFlags sets the metrics Services and required arguments that
// the options name on their sources. It returns a warning for each value
// that repeats what a preset (fromPreset, by source key) sets already.
func applySourceFlags(sources []Source, fromPreset map[string]string, o Options) ([]string, error) {
	var warnings []string
	repeats := func(flag, v string, s *Source, old, value string) {
		if p, ok := fromPreset[s.Key()]; ok && old == value {
			warnings = append(warnings, fmt.Sprintf("%s %q repeats what preset %s sets; remove it", flag, v, p))
		}
	}
	for _, v := range o.MetricsServices {
		if err := setOnSource(sources, "--source-metrics-service", v, func(s *Source, svc string) error {
			if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
				return fmt.Errorf("invalid Service name %q: %s", svc, strings.Join(errs, "; "))
			}
			repeats("--source-metrics-service", v, s, s.MetricsService, svc)
			s.MetricsService = svc
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, v := range o.RequiredArgs {
		if err := setOnSource(sources, "--source-required-arg", v, func(s *Source, arg string) error {
			if !strings.HasPrefix(arg, "-") {
				return fmt.Errorf("argument %q must start with -", arg)
			}
			repeats("--source-required-arg", v, s, s.RequiredArg, arg)
			s.RequiredArg = arg
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return warnings, nil
}

// checkUnique refuses a source or a mapped kind named twice.
func checkUnique(set Set) error {
	seen := map[string]bool{}
	for _, s := range set.Sources {
		if seen[s.Key()] {
			return fmt.Errorf("source %s is named twice", s.Key())
		}
		seen[s.Key()] = true
	}
	names := map[string]bool{}
	for _, m := range set.Mapped {
		if names[m.Name()] {
			return fmt.Errorf("mapped kind %s is named twice", m.Name())
		}
		names[m.Name()] = true
	}
	return nil
}

// checkCopies refuses sources that leave no room for a shard ID in the
// names of their copies, and sources in one namespace whose copies could
// have the same name: that would be one object, claimed by two sources,
// and a copy handed over without shardkeeper's labels is known by its name
// alone.
func checkCopies(sources []Source) error {
	for i, a := range sources {
		if l := a.idLimit(); l.maxLen < 1 {
			return fmt.Errorf("source %s leaves no room for a shard ID: %s must fit in %d characters", a.Key(), l.name, l.nameMaxLen)
		}
		for _, b := range sources[:i] {
			if a.Namespace != b.Namespace {
				continue
			}
			if err := overlap("Deployment", a.Namespace, b.Name, b.sep(), a.Name, a.sep()); err != nil {
				return fmt.Errorf("the copies of sources %s and %s could have the same name: %w", b.Key(), a.Key(), err)
			}
			switch {
			case a.MetricsService == "" || b.MetricsService == "":
			case a.MetricsService == b.MetricsService:
				return fmt.Errorf("sources %s and %s have the same metrics Service %s/%s: its copies for a shard would be one Service",
					b.Key(), a.Key(), a.Namespace, a.MetricsService)
			default:
				if err := overlap("Service", a.Namespace, b.MetricsService, b.sep(), a.MetricsService, a.sep()); err != nil {
					return fmt.Errorf("the metrics Service copies of sources %s and %s could have the same name: %w", b.Key(), a.Key(), err)
				}
			}
		}
	}
	return nil
}

// overlap returns an error when the copies of the objects named x and y,
// joined to a shard ID by sepX and sepY, can have the same name,
// "<x><sepX><id>" = "<y><sepY><id'>": that is when one of the two
// prefixes begins the other.
func overlap(kind, namespace, x, sepX, y, sepY string) error {
	px, py := x+sepX, y+sepY
	if len(px) > len(py) {
		x, y, px, py = y, x, py, px
	}
	if !strings.HasPrefix(py, px) {
		return nil
	}
	const id = "1"
	name := py + id
	return fmt.Errorf("%s %s/%s would be the copy of %s/%s for shard %q and of %s/%s for shard %q",
		kind, namespace, name, namespace, x, name[len(px):], namespace, y, id)
}

// setOnSource applies a "NAMESPACE/NAME=VALUE" flag to the source it names.
func setOnSource(sources []Source, flag, v string, set func(*Source, string) error) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok || value == "" {
		return fmt.Errorf("%s %q: want NAMESPACE/NAME=VALUE", flag, v)
	}
	for i := range sources {
		if sources[i].Key() == key {
			if err := set(&sources[i], value); err != nil {
				return fmt.Errorf("%s %q: %w", flag, v, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%s %q: no source %s; name it with --source or a preset first", flag, v, key)
}

// fleetKinds are the kinds whose finalizers only the controllers of the
// shard in their shard-ref label remove: GitRepos (gitjob), HelmOps
// (helmops), Bundles and BundleDeployments (fleet-controller). Bundles take
// a GitRepo's labels at its last `fleet apply`, and BundleDeployments their
// Bundle's when fleet-controller next reconciles it, so both can lag behind
// a move; a Bundle's deletion waits for its BundleDeployments. All four are
// counted before a shard is deleted.
func fleetKinds() []MappedKind {
	gvr := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: r}
	}
	return []MappedKind{
		{Resource: gvr("gitrepos"), Label: FleetShardRefLabel, BumpOnMove: "spec.forceSyncGeneration"},
		{Resource: gvr("helmops"), Label: FleetShardRefLabel, SpecLabels: "spec.labels"},
		{Resource: gvr("bundles"), Label: FleetShardRefLabel, Derived: true, OwnerLabel: "fleet.cattle.io/repo-name"},
		{Resource: gvr("bundledeployments"), Label: FleetShardRefLabel, Derived: true},
	}
}

// fleetSources mirror Fleet's chart (charts/fleet/templates/deployment*.yaml
// and service*.yaml): a shard runs only the controller container, with
// --shard-id and the pod label fleet.cattle.io/shard-id, and has its own
// metrics Service.
func fleetSources(ns string) []Source {
	base := func(name string) Source {
		return Source{
			Namespace:      ns,
			Name:           name,
			Container:      name,
			Args:           []string{"--shard-id=" + Placeholder},
			PodLabels:      map[string]string{FleetShardIDLabel: Placeholder},
			DropPodLabels:  []string{FleetShardDefaultLabel},
			MetricsService: "monitoring-" + name,
		}
	}
	controller := base("fleet-controller")
	// A GitRepo or HelmOp reaches no cluster without fleet-controller,
	// which turns its Bundles into BundleDeployments.
	controller.Serves = []string{"gitrepos", "helmops", "bundles", "bundledeployments"}
	gitjob := base("gitjob")
	gitjob.NodeSelectorFlag = "--shard-node-selector"
	gitjob.JobPlacementFrom = "fleet-controller"
	gitjob.Serves = []string{"gitrepos"}
	helmops := base("helmops")
	helmops.Serves = []string{"helmops"}
	return []Source{controller, gitjob, helmops}
}

// Flux's controllers as Flux shards them: fluxcd/website
// content/en/flux/installation/configuration/sharding.md and Flux
// Operator's FluxInstance.spec.sharding (internal/builder/templates.go).
const (
	fluxSourceController = "source-controller"
	fluxSourceWatcher    = "source-watcher"
	// fluxRoleAnnotation marks a shard's objects; the guide's patches of the
	// main controllers select "!sharding.fluxcd.io/role".
	fluxRoleAnnotation = "sharding.fluxcd.io/role"
	fluxStorageAdvFlag = "--storage-adv-addr"
)

// fluxKinds are the kinds that the sharded Flux controllers reconcile, each
// with the finalizer finalizers.fluxcd.io that only the controller whose
// --watch-label-selector matches removes. An OCI HelmRepository has none,
// but a HelmChart finds it only through its own shard's source-controller,
// so it is counted too. Every kind is placed by namespace: Flux resolves a
// HelmChart's repository inside one source shard only.
func fluxKinds(key string) []MappedKind {
	kind := func(group, version, resource string) MappedKind {
		return MappedKind{Resource: schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, Label: key, GroupByNamespace: true}
	}
	const (
		sources = "source.toolkit.fluxcd.io"
		images  = "image.toolkit.fluxcd.io"
	)
	release := kind("helm.toolkit.fluxcd.io", "v2", "helmreleases")
	release.SpecLabels = "spec.chart.metadata.labels"
	chart := kind(sources, "v1", "helmcharts")
	chart.OwnerLabel = "helm.toolkit.fluxcd.io/name"
	return []MappedKind{
		kind(sources, "v1", "gitrepositories"),
		kind(sources, "v1", "ocirepositories"),
		kind(sources, "v1", "helmrepositories"),
		chart,
		kind(sources, "v1", "buckets"),
		kind("kustomize.toolkit.fluxcd.io", "v1", "kustomizations"),
		release,
		kind(images, "v1", "imagerepositories"),
		kind(images, "v1", "imagepolicies"),
		kind(images, "v1", "imageupdateautomations"),
		kind("source.extensions.fluxcd.io", "v1beta1", "artifactgenerators"),
	}
}

// fluxSources are the controllers that Flux Operator shards, each cloned
// while it is installed: a copy "<controller>-<id>" whose pods and
// selector are "app: <controller>-<id>", annotated as a shard, watching
// only the shard's objects. source-controller and source-watcher also get
// a Service of their own and advertise it in their artifacts' URLs.
func fluxSources(ns, key string) []Source {
	base := func(name string, serves ...string) Source {
		return Source{
			Namespace:      ns,
			Name:           name,
			Container:      "manager",
			Args:           []string{fluxSelectorFlag + "=" + key + "=" + Placeholder},
			RequiredArg:    fluxSelectorFlag + "=!" + key,
			PodLabels:      map[string]string{"app": name + "-" + Placeholder},
			SelectorLabels: map[string]string{"app": name + "-" + Placeholder},
			Annotations:    map[string]string{fluxRoleAnnotation: "shard"},
			NameSep:        "-",
			// Earlier releases named the copies "<controller>-shard-<id>":
			// helm-controller's as the preset, the others' as --source.
			LegacyNameSep: cloneInfix,
			Serves:        serves,
		}
	}
	withStorage := func(s Source) Source {
		s.MetricsService = s.Name
		s.AdvertiseFlag = fluxStorageAdvFlag
		s.ExclusiveClaims = true
		return s
	}
	return []Source{
		// A HelmRelease's chart is built by its shard's source-controller.
		withStorage(base(fluxSourceController, "gitrepositories", "ocirepositories", "helmrepositories", "helmcharts", "buckets", "helmreleases")),
		base("kustomize-controller", "kustomizations"),
		base("helm-controller", "helmreleases"),
		base("image-reflector-controller", "imagerepositories", "imagepolicies"),
		base("image-automation-controller", "imageupdateautomations"),
		withStorage(base(fluxSourceWatcher, "artifactgenerators")),
	}
}

// parseCustom parses "NAMESPACE/NAME[:CONTAINER]=--flag=...{shard}...".
func parseCustom(v string) (Source, error) {
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
		return Source{}, fmt.Errorf("--source %q: the argument template must be a flag whose value holds %s, such as --flag=%s", v, Placeholder, Placeholder)
	}
	return Source{Namespace: ns, Name: name, Container: container, Args: []string{arg}}, nil
}

// parseMappedKind parses "RESOURCE.VERSION.GROUP=LABEL", as in
// "gitrepos.v1alpha1.fleet.cattle.io=fleet.cattle.io/shard-ref".
func parseMappedKind(v string) (MappedKind, error) {
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
