// Package plan decides, from the parsed ConfigMap and what the caches hold,
// which shard Deployments to create, update or delete, which shards are
// blocked, and what the status says. It reads nothing and writes nothing:
// its input is values, so that every decision can be tested without a
// cluster, and it depends on no cache or client.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/placement"
	"github.com/shardkeeper/shardkeeper/pkg/render"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
	"github.com/shardkeeper/shardkeeper/pkg/status"
)

// sampleSize is how many mapped objects a message names.
const sampleSize = 5

// Mapped is the view of the mapped-object caches that the decisions need.
type Mapped interface {
	// Synced reports whether every mapped kind whose CRD exists is cached.
	Synced() bool
	// Failing returns, as "kind: reason", the kinds whose CRD exists but
	// whose objects cannot be listed: Synced is false while there are any.
	Failing() []string
	// Counts returns the number of objects of each kind mapped to shard.
	Counts(shard string) map[string]int
	// Sample returns up to n "kind namespace/name" of objects mapped to shard.
	Sample(shard string, n int) []string
	// Shards returns every shard ID that some object carries.
	Shards() []string
	// MappedTo returns the objects labelled with shard.
	MappedTo(shard string) []placement.Object
	// All returns every object, labelled or not.
	All() []placement.Object
}

// SourceState is a source and its live Deployment and metrics Service (nil
// when absent).
type SourceState struct {
	Source      source.Source
	Live        *appsv1.Deployment
	LiveService *corev1.Service
}

// shardAware reports whether the source's main controller leaves the
// sharded objects alone, as far as its arguments tell.
func (s SourceState) shardAware() bool {
	return s.Source.RequiredArg == "" || render.HasArg(s.Source, s.Live, s.Source.RequiredArg)
}

// Input is everything a decision depends on.
type Input struct {
	// Config is the parsed ConfigMap.
	Config shardconfig.Config
	// Sources are the configured sources with their live Deployments.
	Sources []SourceState
	// Deployments are the cached Deployments in the sources' namespaces,
	// keyed "namespace/name".
	Deployments map[string]*appsv1.Deployment
	// Services are the cached Services in the sources' namespaces, keyed
	// "namespace/name".
	Services map[string]*corev1.Service
	// Mapped counts the objects mapped to each shard.
	Mapped Mapped
	// ForceDeleted are shards this process force-deleted; a force-delete
	// entry naming one of them is a leftover to tidy, not a mistake.
	ForceDeleted map[string]bool
	// ConfigMap is the shard ConfigMap, for the commands that messages quote.
	ConfigMap types.NamespacedName
	// Now is the time of the decision, and Availability what this process
	// saw of the shards' Deployments up to the decision before: failover
	// decides from both.
	Now          time.Time
	Availability Availability
	// Renders, if set, remembers renders and comparisons between
	// decisions; nil renders every time.
	Renders *render.Cache
	// LiveMapped are removed shards that the API server showed an object
	// mapped to although the caches showed none, each with that object:
	// their removal waits until the caches show it (see Plan.ToCheck).
	LiveMapped map[string]string
	// StampWait are removed shards that the admission policy may still
	// stamp onto new objects, each with why (the withdrawal is not
	// written, or the API server does not apply it yet): their removal
	// waits, forced or not, since an object born on a deleted shard is
	// served by no controller (see Plan.Deleting).
	StampWait map[string]string
}

// ActionKind is what to do with one Deployment or Service.
type ActionKind string

// Action kinds.
const (
	Create  ActionKind = "create"
	Update  ActionKind = "update"
	Replace ActionKind = "replace"
	Delete  ActionKind = "delete"
)

// Action is one write to the cluster: of a Deployment, or of a Service
// when Service is set.
type Action struct {
	Kind  ActionKind
	Shard string
	// Deployment is the rendered Deployment (create, update, replace) or
	// the existing one (delete).
	Deployment *appsv1.Deployment
	// Existing is the Deployment being updated or replaced.
	Existing *appsv1.Deployment
	// Service and ExistingService are the same for a shard's metrics
	// Service (never replaced: its selector can change in place).
	Service, ExistingService *corev1.Service
	// Restore marks a write that undoes a change made by hand: an update
	// although the render did not change, or a create for a shard that has
	// its other Deployments.
	Restore bool
	// Renamed marks the delete of a listed shard's copy under the name an
	// earlier release gave it, once its copy of the current name runs.
	Renamed bool
}

// Object returns the object the action writes: the rendered one, or the
// existing one for a delete.
func (a Action) Object() metav1.Object {
	if a.Service != nil {
		return a.Service
	}
	return a.Deployment
}

// Ref names the object the action writes: "Deployment namespace/name" or
// "Service namespace/name".
func (a Action) Ref() string {
	kind := "Deployment"
	if a.Service != nil {
		kind = "Service"
	}
	o := a.Object()
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// Removal is a shard whose Deployments are deleted in this plan.
type Removal struct {
	Shard  string
	Forced bool
	// Mapped are the objects left behind by a forced deletion, per kind.
	Mapped map[string]int
	Sample []string
	// check is set when the removal deletes something on the caches' word
	// alone, no force-delete entry allowing it: a cache lags behind the API
	// server, so the caller asks the API server whether objects are mapped
	// to the shard before it writes, and decides again with its answer in
	// Input.LiveMapped.
	check bool
	// deletes is set when the removal deletes anything (see Deleting).
	deletes bool
	// statusLine is the shard's status, reported should its deletion fail
	// (see StatusAfter).
	statusLine status.ShardStatus
}

// Unknown is a shard ID that objects carry but no shard has.
type Unknown struct {
	Shard string
	Count int
	// Mapped are the objects by kind; Count is their sum.
	Mapped map[string]int
	Sample []string
}

// Plan is the outcome of a decision.
type Plan struct {
	Actions []Action
	// NewShards are the listed shards that had no Deployment at all.
	NewShards map[string]bool
	Removals  []Removal
	// Shards is the status, sorted by ID; removed shards are absent.
	Shards []status.ShardStatus
	// Force is the force-delete annotation as it should be after the plan
	// is carried out, and ForceChanged whether it differs.
	Force        shardconfig.Force
	ForceChanged bool
	// NotShardAware are sources that would also reconcile sharded objects;
	// no new copy of them is created.
	NotShardAware []status.NotShardAware
	// RenderErrors are sources that could not be rendered.
	RenderErrors []string
	// Unknown are shard IDs on objects that no shard serves.
	Unknown []Unknown
	// Targets are the shards placement may put objects on: listed, not
	// draining or failing over, every Deployment rolled out with an
	// Available replica (a shard paused with replicas: 0 is none).
	// Draining are the shards whose movable objects placement moves away:
	// the removed shards it drains, and the unknown shard IDs, on which
	// only the admission policy can have put an object it placed. Both
	// are empty when placement is off.
	Targets, Draining []string
	// FailingOver are the listed shards that are down, whose movable
	// objects placement moves away; FailoverWithheld says why none is
	// although some are down.
	FailingOver      []string
	FailoverWithheld string
	// FailingKinds holds, per shard in FailingOver, the mapped kinds whose
	// controllers on it are down: only objects of these kinds leave it.
	FailingKinds map[string][]string
	// Availability is Input.Availability brought up to this decision, for
	// the next one; RecheckAfter, when not 0, is when the next decision is
	// due although nothing changes (a shard then counts as down, or as back).
	Availability Availability
	RecheckAfter time.Duration
}

// inForce is what a shard has in the cluster: its managed Deployments and
// metrics Services.
type inForce struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
}

// shardsInForce returns the shards that have managed Deployments or
// Services, with those objects, derived from the cluster so a restart
// resumes where it stopped.
func shardsInForce(sources []SourceState, deployments map[string]*appsv1.Deployment, services map[string]*corev1.Service) map[string]*inForce {
	out := map[string]*inForce{}
	shard := func(id string) *inForce {
		if out[id] == nil {
			out[id] = &inForce{}
		}
		return out[id]
	}
	for _, s := range sources {
		for _, d := range deployments {
			id, ok := render.DeploymentShard(s.Source, d)
			if !ok {
				id, ok = render.LegacyDeploymentShard(s.Source, d)
			}
			if ok {
				f := shard(id)
				f.deployments = append(f.deployments, d)
			}
		}
		for _, svc := range services {
			id, ok := render.ServiceShard(s.Source, svc)
			if !ok {
				id, ok = render.LegacyServiceShard(s.Source, svc)
			}
			if ok {
				f := shard(id)
				f.services = append(f.services, svc)
			}
		}
	}
	for _, f := range out {
		sort.Slice(f.deployments, func(i, j int) bool { return key(f.deployments[i]) < key(f.deployments[j]) })
		sort.Slice(f.services, func(i, j int) bool { return key(f.services[i]) < key(f.services[j]) })
	}
	return out
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// validateIDLength refuses a list with an ID that parses but is too long
// for a name the sources derive from it: every write of that shard's
// copies would fail, on every reconcile.
func validateIDLength(in Input) error {
	var set source.Set
	for _, s := range in.Sources {
		set.Sources = append(set.Sources, s.Source)
	}
	limit := set.IDLimit()
	for i, s := range in.Config.Shards {
		if err := limit.Check(s.ID); err != nil {
			return fmt.Errorf("shards[%d]: %w", i, err)
		}
	}
	return nil
}

// validateForce checks the force-delete annotation against the shards that
// exist: naming a shard that is neither listed nor running is a mistake
// (a typo would otherwise wait, armed, for a later shard of that name).
func validateForce(in Input, running map[string]*inForce) error {
	desired := in.Config.IDs()
	var unknown []string
	for _, id := range in.Config.Force.IDs {
		if !desired[id] && running[id] == nil && !in.ForceDeleted[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return fmt.Errorf("annotation %s names %s, which is neither listed nor running; remove it from the annotation",
			shardconfig.ForceDeleteAnnotation, strings.Join(quoteAll(unknown), ", "))
	}
	return nil
}

// listed is what deciding one listed shard produces.
type listed struct {
	actions []Action
	// conflicts are "Kind namespace/name" of unmanaged Deployments and
	// Services in the way, for the shard's message.
	conflicts []string
	// withheld are copies not created because their source is not
	// shard-aware.
	withheld []string
	// idle are the names of copies rolled out at no replica (a shard
	// paused with replicas: 0): ready, yet no controller of theirs runs.
	idle []string
}

// countReady counts d, a copy of s, in the shard's readiness if it has
// rolled out, and remembers it if it has rolled out to no replica at all;
// unless s itself is scaled to 0: that controller is off everywhere, so
// no shard serves its kinds less than another, and placement of the
// others goes on.
func (out *listed) countReady(s SourceState, d *appsv1.Deployment, st *status.ShardStatus) {
	if !ready(d) {
		return
	}
	st.Ready++
	sourceOff := s.Live != nil && s.Live.Spec.Replicas != nil && *s.Live.Spec.Replicas == 0
	if d.Status.AvailableReplicas == 0 && !sourceOff {
		out.idle = append(out.idle, d.Name)
	}
}

// decideShard decides the writes of one listed shard and fills in its
// status. A Deployment or Service that shardkeeper does not manage is never
// touched, and a copy of a source that is not shard-aware is never created,
// since either would put two controllers on the same objects; the shard
// says why instead.
func decideShard(in Input, shard shardconfig.Shard, f *inForce, isNew bool, st *status.ShardStatus, renderErr func(error)) listed {
	var out listed
	for _, s := range in.Sources {
		if s.Live == nil {
			continue
		}
		st.Desired++
		out.decideCopy(in, s, shard, f, isNew, st, renderErr)
	}
	switch {
	case len(out.conflicts) > 0:
		st.State = status.StateConflict
		st.Message = fmt.Sprintf("%s exists but is not managed by shardkeeper; it is left alone. Delete it, or label it %s=%s to hand it over",
			strings.Join(out.conflicts, ", "), render.ManagedByLabel, render.ManagedByValue)
	case len(out.withheld) > 0:
		st.State = status.StatePending
		st.Message = fmt.Sprintf("%s not created: its source would reconcile this shard's objects too (see the %s warning); it is created once the source is shard-aware",
			strings.Join(out.withheld, ", "), "SourceNotShardAware")
	}
	return out
}

// decideCopy decides the writes of the shard's copy of one installed
// source: its Deployment, then its metrics Service; f is what the shard
// has in the cluster, nil if nothing. A copy in conflict, or withheld, or
// whose render failed, gets no Service either.
func (out *listed) decideCopy(in Input, s SourceState, shard shardconfig.Shard, f *inForce, isNew bool, st *status.ShardStatus, renderErr func(error)) {
	existing := in.Deployments[s.Source.Namespace+"/"+s.Source.CloneName(shard.ID)]
	if existing != nil && !render.IsManaged(existing) {
		out.conflicts = append(out.conflicts, "Deployment "+key(existing))
		return
	}
	if existing != nil {
		if _, current := render.DeploymentShard(s.Source, existing); !current {
			// Another shard's copy of the old name holds this one's name:
			// it goes when its own shard's copy is renamed.
			out.conflicts = append(out.conflicts, "Deployment "+key(existing)+" (the earlier copy of another shard)")
			return
		}
	}
	legacy, legacyServices := legacyCopy(in, s.Source, shard.ID), f.legacyServices(s.Source)
	if legacy != nil || len(legacyServices) > 0 {
		defer out.retireLegacy(s, shard.ID, legacy, legacyServices, existing, st)
	}
	rendered, err := in.Renders.Render(s.Source, s.Live, shard)
	if err != nil {
		renderErr(err)
		return
	}
	switch {
	case existing == nil && !s.shardAware():
		out.withheld = append(out.withheld, rendered.Name)
		return
	case existing == nil:
		out.actions = append(out.actions, Action{Kind: Create, Shard: shard.ID, Deployment: rendered, Restore: !isNew})
	case existing.DeletionTimestamp != nil:
		// Being deleted (a replace in progress, or by hand): it is
		// created again once it is gone.
	case !s.shardAware():
		// Left as it is until the source is shard-aware again: the
		// SourceNotShardAware warning stands meanwhile.
		out.countReady(s, existing, st)
	default:
		// A copy being replaced is not ready: it is deleted first.
		if replaced := out.updateCopy(in, shard.ID, rendered, existing); !replaced {
			out.countReady(s, existing, st)
		}
	}
	a, conflict, err := decideService(in, s, shard, isNew)
	switch {
	case err != nil:
		renderErr(err)
	case conflict != "":
		out.conflicts = append(out.conflicts, conflict)
	case a != nil:
		out.actions = append(out.actions, *a)
	}
}

// legacyCopy returns the shard's copy of the source under the name an
// earlier release gave it, if there is one.
func legacyCopy(in Input, src source.Source, id string) *appsv1.Deployment {
	name := src.LegacyCloneName(id)
	if name == "" {
		return nil
	}
	d := in.Deployments[src.Namespace+"/"+name]
	if d == nil {
		return nil
	}
	if legacyID, ok := render.LegacyDeploymentShard(src, d); !ok || legacyID != id {
		return nil
	}
	return d
}

// legacyServices returns the shard's copies of src's metrics Services
// under the name an earlier release gave them.
func (f *inForce) legacyServices(src source.Source) []*corev1.Service {
	if f == nil || src.LegacyNameSep == "" {
		return nil
	}
	var out []*corev1.Service
	for _, svc := range f.services {
		if _, ok := render.LegacyServiceShard(src, svc); ok {
			out = append(out, svc)
		}
	}
	return out
}

// retireLegacy decides the fate of a copy of the earlier name (legacy,
// nil when there is none, and its metrics Services), once the copy of the
// current name has been decided: it is deleted only when the current copy
// is Available, so that the shard always has a running controller. Both
// run the same --watch-label-selector and so contend for one
// leader-election Lease, whose name hashes the selector: only one of them
// acts at a time. Until then it stands in for the current copy in the
// shard's readiness. Its Services select its pods only, and go with it, or
// once it is gone.
func (out *listed) retireLegacy(s SourceState, id string, legacy *appsv1.Deployment, services []*corev1.Service, current *appsv1.Deployment, st *status.ShardStatus) {
	if legacy != nil && legacy.DeletionTimestamp == nil {
		currentReady := current != nil && current.DeletionTimestamp == nil && ready(current) && !out.replacing(current)
		if !currentReady {
			out.countReady(s, legacy, st)
			return
		}
		out.actions = append(out.actions, Action{Kind: Delete, Shard: id, Deployment: legacy, Renamed: true})
	}
	for _, svc := range services {
		if svc.DeletionTimestamp == nil {
			out.actions = append(out.actions, Action{Kind: Delete, Shard: id, Service: svc, Renamed: true})
		}
	}
}

// replacing reports whether the decision so far replaces d.
func (out *listed) replacing(d *appsv1.Deployment) bool {
	for _, a := range out.actions {
		if a.Kind == Replace && a.Existing == d {
			return true
		}
	}
	return false
}

// updateCopy decides the write that brings an existing copy to its render:
// an update when they differ, or a replace, which it reports, when its
// selector changed in a way the existing Deployment cannot keep (a
// Deployment's selector is immutable).
func (out *listed) updateCopy(in Input, id string, rendered, existing *appsv1.Deployment) (replaced bool) {
	if render.SelectorChanged(rendered, existing) {
		kept, ok := render.KeepSelector(rendered, existing)
		if !ok {
			out.actions = append(out.actions, Action{Kind: Replace, Shard: id, Deployment: rendered, Existing: existing})
			return true
		}
		rendered = kept
	}
	if !in.Renders.UpToDate(rendered, existing) {
		out.actions = append(out.actions, Action{Kind: Update, Shard: id, Deployment: rendered, Existing: existing,
			Restore: existing.Annotations[render.SpecHashAnnotation] == rendered.Annotations[render.SpecHashAnnotation]})
	}
	return false
}

// decideService decides the write of a shard's copy of the source's metrics
// Service, if the source has one. It returns the conflicting Service's
// name when an unmanaged Service holds the copy's name.
func decideService(in Input, s SourceState, shard shardconfig.Shard, isNew bool) (*Action, string, error) {
	if s.Source.MetricsService == "" || s.LiveService == nil {
		return nil, "", nil
	}
	existing := in.Services[s.Source.Namespace+"/"+s.Source.ServiceCloneName(shard.ID)]
	if existing != nil && !render.IsManaged(existing) {
		return nil, "Service " + key(existing), nil
	}
	if existing != nil {
		if _, legacy := render.LegacyServiceShard(s.Source, existing); legacy {
			// As with the Deployments: it goes with its own shard's
			// earlier copy.
			return nil, "Service " + key(existing) + " (the earlier copy of another shard)", nil
		}
	}
	rendered, err := render.RenderService(s.Source, s.LiveService, shard)
	if err != nil {
		return nil, "", err
	}
	switch {
	case existing == nil:
		return &Action{Kind: Create, Shard: shard.ID, Service: rendered, Restore: !isNew}, "", nil
	case existing.DeletionTimestamp != nil:
		return nil, "", nil
	case !render.ServiceUpToDate(rendered, existing):
		return &Action{Kind: Update, Shard: shard.ID, Service: rendered, ExistingService: existing,
			Restore: existing.Annotations[render.SpecHashAnnotation] == rendered.Annotations[render.SpecHashAnnotation]}, "", nil
	}
	return nil, "", nil
}

// Decide computes the plan for a valid configuration. The steps run in
// this order because each reads what the one before it decided: removed
// shards drain only onto the targets of the listed shards, and a
// force-delete entry is consumed only by the removals it let through.
func Decide(in Input) (Plan, error) {
	running := shardsInForce(in.Sources, in.Deployments, in.Services)
	synced := in.Mapped.Synced()
	if in.Config.Auto {
		in.Config.Shards = autoShards(in, running, synced)
	}
	if err := validateIDLength(in); err != nil {
		return Plan{}, err
	}
	if err := validateForce(in, running); err != nil {
		return Plan{}, err
	}
	p := Plan{NewShards: map[string]bool{}, FailingKinds: map[string][]string{}}
	p.NotShardAware = notShardAware(in.Sources)
	fo := decideFailover(in, running)
	p.Availability, p.RecheckAfter, p.FailoverWithheld = fo.seen, fo.recheck, fo.withheld
	decideListed(in, running, fo, &p)
	decideRemoved(in, running, synced, &p)
	p.Force, p.ForceChanged = consumeForce(in, running, p.Removals, synced)
	p.Unknown = unknownShards(in, running)
	if in.Config.Placement.Enabled {
		// The admission policy fails open, and with several API servers
		// one may stamp from records older than a removal: an object can
		// be born on a shard that is gone. Placement labelled it, so
		// placement takes it back; an ID set by hand stays, warned about.
		for _, u := range p.Unknown {
			p.Draining = append(p.Draining, u.Shard)
		}
	}
	sort.Slice(p.Shards, func(i, j int) bool { return p.Shards[i].ID < p.Shards[j].ID })
	return p, nil
}

// notShardAware lists the sources to warn about: such a source would
// reconcile the sharded objects alongside the shards, so the operator must
// restart it with the argument before new copies of it are made.
func notShardAware(sources []SourceState) []status.NotShardAware {
	var out []status.NotShardAware
	for _, s := range sources {
		if s.Live != nil && !s.shardAware() {
			out = append(out, status.NotShardAware{Source: s.Source.Key(), Needs: s.Source.RequiredArg})
		}
	}
	return out
}

// decideListed decides every listed shard. Placement is settled here, after
// the shard's own writes, because only a shard whose Deployments are all
// ready, each with an Available replica, may take objects, and a shard in
// conflict is not ours to place onto or drain. A target is a whole shard,
// not a shard per kind, since placement moves groups that mix kinds and
// the stamp names one shard for a new object of any kind: one copy at no
// replica keeps its shard from receiving anything. A render error is
// reported once, however many shards hit it, since it is the source's
// fault, not the shard's.
func decideListed(in Input, running map[string]*inForce, fo failover, p *Plan) {
	place := in.Config.Placement
	renderFailed := map[string]bool{}
	renderErr := func(err error) {
		if !renderFailed[err.Error()] {
			renderFailed[err.Error()] = true
			p.RenderErrors = append(p.RenderErrors, err.Error())
		}
	}
	for _, shard := range in.Config.Shards {
		if running[shard.ID] == nil {
			p.NewShards[shard.ID] = true
		}
		st := status.ShardStatus{ID: shard.ID, State: status.StateActive}
		d := decideShard(in, shard, running[shard.ID], p.NewShards[shard.ID], &st, renderErr)
		p.Actions = append(p.Actions, d.actions...)
		st.JobPlacement = jobPlacementMismatch(in, shard)
		st.Mapped = nonZero(in.Mapped.Counts(shard.ID))
		if len(d.idle) > 0 && st.State == status.StateActive {
			st.Message = pausedMessage(shard.ID, d.idle, st.Mapped, place)
		}
		placeListed(in, shard.ID, fo, len(d.idle) > 0, &st, p)
		p.Shards = append(p.Shards, st)
	}
}

// placeListed decides a listed shard's part in placement: draining, failed
// over, down or back, or a target, which a shard is only when every copy
// has rolled out with an Available replica (idle: one has none).
func placeListed(in Input, id string, fo failover, idle bool, st *status.ShardStatus, p *Plan) {
	place := in.Config.Placement
	switch {
	case !place.Enabled || st.State == status.StateConflict:
	case in.Config.Draining(id):
		p.Draining = append(p.Draining, id)
		left := total(st.Mapped)
		st.State, st.Message = status.StateDraining, drainingMessage(id, left, place, true)
		if left == 0 {
			st.State, st.Message = status.StateDrained, fmt.Sprintf("shard %s is empty; remove it from the list to delete it", id)
		} else if n, sample := pinned(place, in.Mapped, id, sampleSize); n > 0 {
			st.Message = pinnedMessage(in.ConfigMap, id, n, sample)
		}
	case fo.failing[id]:
		o := fo.down[id]
		p.FailingOver = append(p.FailingOver, id)
		p.FailingKinds[id] = o.kinds
		had, left := 0, 0
		for _, k := range o.kinds {
			had, left = had+fo.seen.had[id+"/"+k], left+st.Mapped[k]
		}
		n, sample := pinned(place, in.Mapped, id, sampleSize)
		st.State = status.StateFailedOver
		st.Message = failedOverMessage(id, o, had, left, n, sample)
	case !fo.down[id].since.IsZero():
		st.Message = fmt.Sprintf("shard %s is down, but is not failed over: %s", id, fo.withheld)
	case fo.recovering[id]:
		st.Message = fmt.Sprintf("shard %s is back after a failover; it takes objects again once it has been up for %s",
			id, place.FailoverAfter)
	case st.Desired > 0 && st.Ready == st.Desired && !idle:
		p.Targets = append(p.Targets, id)
	}
}

// pausedMessage says what a shard whose copies idle (rolled out at no
// replica) does: it takes no new objects, and those on it stay, until
// failover moves them if it is on.
func pausedMessage(id string, idle []string, mapped map[string]int, place shardconfig.Placement) string {
	verb := "has"
	if len(idle) > 1 {
		verb = "have"
	}
	msg := fmt.Sprintf("shard %s is paused: %s %s no Available replica (scaled to 0 replicas)", id, strings.Join(idle, ", "), verb)
	if place.Enabled {
		msg += ", so it receives no new objects"
	}
	if len(mapped) > 0 {
		msg += fmt.Sprintf("; the objects mapped to it stay (%s)", FormatCounts(mapped))
		if place.Enabled && place.FailoverAfter > 0 {
			msg += fmt.Sprintf(" until failover moves them, once it has had no Available replica for %s", place.FailoverAfter)
		}
	}
	return msg
}

// decideRemoved decides the shards in force that are no longer listed.
// Deleting a shard that objects still map to would leave them served by
// no controller, so its Deployments are kept until the caches have synced
// (the counts are wrong before), until placement has drained it, or until
// the operator forces the deletion; and while the API server shows an
// object on it that the caches do not show yet. It runs after decideListed
// because a draining shard needs the listed shards' targets to drain onto.
func decideRemoved(in Input, running map[string]*inForce, synced bool, p *Plan) {
	desired := in.Config.IDs()
	for _, id := range slices.Sorted(maps.Keys(running)) {
		if desired[id] {
			continue
		}
		f := running[id]
		st := status.ShardStatus{ID: id, Mapped: nonZero(in.Mapped.Counts(id)), Desired: len(f.deployments)}
		for _, d := range f.deployments {
			if ready(d) {
				st.Ready++
			}
		}
		if kept, draining := keepRemoved(in, synced, len(p.Targets) > 0, &st); kept {
			if draining {
				p.Draining = append(p.Draining, id)
			}
			p.Shards = append(p.Shards, st)
			continue
		}
		p.remove(in, f, st)
	}
}

// keepRemoved reports whether a removed shard's Deployments are kept, and
// then says why in st; draining reports a kept shard whose objects
// placement moves away (onto the targets: hasTargets says whether there
// are any).
func keepRemoved(in Input, synced, hasTargets bool, st *status.ShardStatus) (kept, draining bool) {
	id, counts := st.ID, st.Mapped
	force, place := in.Config.Force, in.Config.Placement
	switch {
	case !synced:
		st.State = status.StateWaiting
		st.Message = "removal waits until the mapped-object caches have synced"
		if failing := in.Mapped.Failing(); len(failing) > 0 {
			st.Message += "; these kinds cannot be listed: " + strings.Join(failing, "; ")
		}
		return true, false
	case total(counts) > 0 && !force.Allows(id) && place.Enabled:
		st.State, st.Message = status.StateDraining, drainingMessage(id, total(counts), place, false)
		if !hasTargets {
			st.Message = fmt.Sprintf("shard %s is draining, but no listed shard is Available to take its %d objects; it is kept until one is", id, total(counts))
		}
		if n, sample := pinned(place, in.Mapped, id, sampleSize); n > 0 {
			st.State, st.Message = status.StateBlocked, pinnedMessage(in.ConfigMap, id, n, sample)
		}
		return true, true
	case total(counts) > 0 && !force.Allows(id):
		st.State = status.StateBlocked
		st.Message = blockedMessage(in.ConfigMap, id, counts, in.Mapped.Sample(id, sampleSize))
		return true, false
	case in.StampWait[id] != "":
		st.State = status.StateWaiting
		st.Message = fmt.Sprintf("removal waits until no new object can be born on shard %s: %s", id, in.StampWait[id])
		return true, false
	case in.LiveMapped[id] != "" && !force.Allows(id):
		st.State = status.StateWaiting
		st.Message = fmt.Sprintf("removal waits until the mapped-object caches show %s, which the API server has mapped to shard %s",
			in.LiveMapped[id], id)
		return true, false
	}
	return false, false
}

// remove deletes a removed shard's Deployments and Services, those not
// being deleted already; st is its status, should a deletion fail.
func (p *Plan) remove(in Input, f *inForce, st status.ShardStatus) {
	id := st.ID
	r := Removal{Shard: id, statusLine: st}
	if total(st.Mapped) > 0 {
		r.Forced = true
		r.Mapped = st.Mapped
		r.Sample = in.Mapped.Sample(id, sampleSize)
	}
	deletes := len(p.Actions)
	for _, d := range f.deployments {
		if d.DeletionTimestamp == nil {
			p.Actions = append(p.Actions, Action{Kind: Delete, Shard: id, Deployment: d})
		}
	}
	for _, svc := range f.services {
		if svc.DeletionTimestamp == nil {
			p.Actions = append(p.Actions, Action{Kind: Delete, Shard: id, Service: svc})
		}
	}
	r.deletes = len(p.Actions) > deletes
	r.check = !in.Config.Force.Allows(id) && r.deletes
	p.Removals = append(p.Removals, r)
}

// StatusAfter returns the shards' status once the plan has been carried
// out; failing holds the first error of each shard whose writes failed and
// are retried. Such a shard is never reported healthy: instead of Active
// or Pending it is WriteFailing, with the error; a state that has Events
// of its own keeps it, and its message says why the writes fail; and a
// removed shard that could not be deleted is reported again, WriteFailing,
// after the others as decideRemoved orders them.
func (p Plan) StatusAfter(failing map[string]error) []status.ShardStatus {
	if len(failing) == 0 {
		return p.Shards
	}
	out := slices.Clone(p.Shards)
	for _, r := range p.Removals {
		if failing[r.Shard] != nil {
			out = append(out, r.statusLine)
		}
	}
	for i, st := range out {
		err := failing[st.ID]
		if err == nil {
			continue
		}
		msg := fmt.Sprintf("writes to shard %s fail and are retried with backoff: %v", st.ID, err)
		switch st.State {
		case status.StateActive, status.StatePending, "":
			out[i].State, out[i].Message = status.StateWriteFailing, msg
		default:
			out[i].Message = st.Message + ". Also, " + msg
		}
	}
	return out
}

// ShardIDs returns the IDs of the shards that p decided, listed or still
// running: an object labelled with any other ID is served by nobody.
func (p Plan) ShardIDs() []string {
	out := make([]string, len(p.Shards))
	for i, s := range p.Shards {
		out[i] = s.ID
	}
	return out
}

// Deleting returns the shards of the removals that delete anything,
// sorted: before they go, no new object may be born on them.
func (p Plan) Deleting() []string { return p.removalsWhere(func(r Removal) bool { return r.deletes }) }

// ToCheck returns the shards of the removals that the API server must
// confirm before the plan is carried out, sorted.
func (p Plan) ToCheck() []string { return p.removalsWhere(func(r Removal) bool { return r.check }) }

// removalsWhere returns the shards of the removals for which keep holds,
// in the removals' order, which is the shards'.
func (p Plan) removalsWhere(keep func(Removal) bool) []string {
	var out []string
	for _, r := range p.Removals {
		if keep(r) {
			out = append(out, r.Shard)
		}
	}
	return out
}

// consumeForce returns the force-delete annotation as it should be after
// the plan, and whether it changed. An entry is dropped once it has done
// its work (its shard is removed in this plan) or can do none (a leftover
// of an earlier forced deletion), so that it never waits, armed, for a
// later shard of that name.
func consumeForce(in Input, running map[string]*inForce, removals []Removal, synced bool) (shardconfig.Force, bool) {
	force := in.Config.Force
	desired := in.Config.IDs()
	var consumed []string
	for _, r := range removals {
		if force.Allows(r.Shard) {
			consumed = append(consumed, r.Shard)
		}
	}
	for _, id := range force.IDs {
		if !desired[id] && running[id] == nil {
			consumed = append(consumed, id) // a leftover of an earlier forced deletion
		}
	}
	// "*" is consumed as soon as it could act, so that it never waits,
	// armed, for a later removal.
	consumeAll := force.All && synced
	after := force.Without(consumed, consumeAll)
	return after, after.String() != force.String()
}

// unknownShards returns the shard IDs that objects carry but no shard
// serves, listed or in force: those objects are reconciled by nobody, most
// often because of a typo in their label, and only the operator can tell.
func unknownShards(in Input, running map[string]*inForce) []Unknown {
	known := in.Config.IDs()
	for id := range running {
		known[id] = true
	}
	var out []Unknown
	for _, id := range in.Mapped.Shards() {
		if known[id] {
			continue
		}
		counts := nonZero(in.Mapped.Counts(id))
		out = append(out, Unknown{Shard: id, Count: total(counts), Mapped: counts, Sample: in.Mapped.Sample(id, sampleSize)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}

// autoShards sizes "shards: auto". Until the caches have synced the count
// of objects is wrong, so the shards that run stay as they are.
func autoShards(in Input, running map[string]*inForce, synced bool) []shardconfig.Shard {
	if synced {
		return wantedAutoShards(in.Config, slices.Collect(maps.Keys(running)), in.Mapped)
	}
	var ids []int
	for id := range running {
		if i := shardconfig.AutoIndex(id); i >= 0 {
			ids = append(ids, i)
		}
	}
	slices.Sort(ids)
	out := make([]shardconfig.Shard, len(ids))
	for i, n := range ids {
		out[i] = shardconfig.Shard{ID: shardconfig.AutoID(n)}
	}
	return out
}

// blockedMessage says why a shard's deletion is blocked and how to force it.
func blockedMessage(cm types.NamespacedName, id string, counts map[string]int, sample []string) string {
	msg := fmt.Sprintf("shard %s was removed from the list but %s are still mapped to it (%s); its Deployments are kept. "+
		"Relabel or delete those objects and the shard is deleted by itself, or force it with: kubectl -n %s annotate configmap %s %s=%s",
		id, FormatCounts(counts), strings.Join(sample, ", "), cm.Namespace, cm.Name, shardconfig.ForceDeleteAnnotation, id)
	if counts["bundles"]+counts["bundledeployments"] > 0 {
		msg += ". " + bundlesHint
	}
	return msg
}

// bundlesHint says how Fleet's Bundles follow a GitRepo that was moved by
// hand: gitjob passes a GitRepo's labels to `fleet apply` only when it runs
// a new job (a new commit, a spec change, or spec.forceSyncGeneration
// differing from status.updateGeneration), and fleet-controller then
// relabels the BundleDeployments.
const bundlesHint = "Bundles take a GitRepo's shard label only when it is applied again: after relabelling a GitRepo by hand, " +
	"add one to its spec.forceSyncGeneration (kubectl -n NAMESPACE patch gitrepo NAME --type merge -p '{\"spec\":{\"forceSyncGeneration\":N}}'). " +
	"A HelmOp's Bundle takes the shard label of the HelmOp's spec.labels, not of its own labels"

// FormatCounts renders per-kind counts as "2 gitrepos, 1 helmreleases".
func FormatCounts(counts map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	if len(parts) == 0 {
		return "no objects"
	}
	return strings.Join(parts, ", ")
}

// StatusRead is all that decisions read of a Deployment's status: whether
// it has rolled out its spec (ready) and whether it has no available
// replica (failover, and whether the main controllers serve unlabelled
// objects). A status update that changes neither changes no decision.
type StatusRead struct {
	RolledOut, Unavailable bool
}

// ReadStatus returns what decisions read of d's status.
func ReadStatus(d *appsv1.Deployment) StatusRead {
	return StatusRead{RolledOut: ready(d), Unavailable: d.Status.AvailableReplicas == 0}
}

// ready reports whether a Deployment has rolled out its current spec, as
// kubectl rollout status decides it: every replica is updated and
// available, and no old replica is left (they may still run the previous
// version while the new ones are already available).
func ready(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= want &&
		s.Replicas <= s.UpdatedReplicas && s.AvailableReplicas >= s.UpdatedReplicas
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func nonZero(counts map[string]int) map[string]int {
	var out map[string]int
	for k, v := range counts {
		if v > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[k] = v
		}
	}
	return out
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
