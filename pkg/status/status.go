// Package status holds what shardkeeper reports in its status ConfigMap (the
// shards and their states), and derives the condition Events from how that
// report changes, so that an Event is emitted once per change and not again
// after a restart. Every Event reason, and the broadcaster that sends the
// Events, are here too.
//
// The status ConfigMap's format is shardkeeper's interface; the Go package
// is the daemon's own: not a supported API, and it may change in any
// release.
package status

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ConfigMap data keys of the status ConfigMap.
const (
	// shardsKey holds the YAML list of shards.
	shardsKey = "status"
	// errorKey holds why the shard ConfigMap was rejected, if it was.
	errorKey = "error"
	// warningsKey holds the YAML warnings: unknown shard IDs, sources that
	// are not shard-aware, render errors.
	warningsKey = "warnings"
	// mappedKey holds one line "<id>: <n> <kind>, ..." per shard with
	// objects mapped, in the order of shardsKey. It repeats what shardsKey says in a form
	// CEL can read, so that the chart's admission policy can warn at the
	// prompt when an edit removes such a shard (CEL has no YAML parser).
	mappedKey = "mapped"
)

// Event reasons.
const (
	ReasonShardCreated         = "ShardCreated"
	ReasonShardDeleted         = "ShardDeleted"
	ReasonShardDeletionBlocked = "ShardDeletionBlocked"
	ReasonShardForceDeleted    = "ShardForceDeleted"
	ReasonInvalidShardConfig   = "InvalidShardConfig"
	ReasonShardConflict        = "ShardConflict"
	ReasonUnknownShard         = "UnknownShard"
	ReasonSourceNotShardAware  = "SourceNotShardAware"
	reasonRenderFailed         = "RenderFailed"
	ReasonShardRestored        = "ShardRestored"
	// ReasonShardRenamed: a shard's copy under the name an earlier release
	// gave it was deleted once its copy of the current name ran.
	ReasonShardRenamed    = "ShardRenamed"
	ReasonShardDraining   = "ShardDraining"
	reasonShardDrained    = "ShardDrained"
	ReasonObjectsMoved    = "ObjectsMoved"
	ReasonPlacementFailed = "PlacementFailed"
	// ReasonPinConflict: objects that placement keeps together (a
	// namespace of Flux objects) are pinned to different shards, so none
	// of them is moved.
	ReasonPinConflict = "PinConflict"
	// ReasonGitJobPlacementMismatch: a shard's git Jobs cannot run where
	// the shard asks (Fleet gives them fleet-controller's placement).
	ReasonGitJobPlacementMismatch = "GitJobPlacementMismatch"
	// ReasonShardWriteFailed: a shard entered StateWriteFailing; it is
	// emitted once for it, not per retry.
	ReasonShardWriteFailed = "ShardWriteFailed"
	// ReasonCrossShardReference: objects have part of their work done on
	// another shard than their own (a HelmRelease's chart, a HelmOp's
	// Bundle, a source that a shard's controller cannot see).
	ReasonCrossShardReference = "CrossShardReference"
	// Failover: a shard went down and its objects are moving away, it came
	// back, or shards are down but none is failed over (too many at once).
	reasonShardUnavailable = "ShardUnavailable"
	reasonShardRecovered   = "ShardRecovered"
	reasonFailoverWithheld = "FailoverWithheld"
)

// Warnings are the cluster-wide findings that are not a shard's state.
type Warnings struct {
	// UnknownShards are the unknown shard IDs with the most objects, and
	// MoreUnknownShards and MoreUnknownObjects count the others and their
	// objects: the IDs come from labels anyone may set, and the status
	// must stay within an object's size limit.
	UnknownShards      []UnknownShard  `json:"unknownShards,omitempty"`
	MoreUnknownShards  int             `json:"moreUnknownShards,omitempty"`
	MoreUnknownObjects int             `json:"moreUnknownObjects,omitempty"`
	NotShardAware      []NotShardAware `json:"notShardAware,omitempty"`
	// FailoverWithheld says why no shard is failed over although some are
	// down.
	FailoverWithheld string   `json:"failoverWithheld,omitempty"`
	RenderErrors     []string `json:"renderErrors,omitempty"`
	// CrossShard names the objects whose derived objects or sources are
	// on another shard than the one that needs them.
	CrossShard *CrossShard `json:"crossShard,omitempty"`
}

// CrossShard is how many objects have work on another shard than their
// own, and the first of them by name, each with why.
type CrossShard struct {
	Count   int      `json:"count"`
	Objects []string `json:"objects"`
}

// UnknownShard is a shard ID on objects that no shard serves.
type UnknownShard struct {
	ID      string   `json:"id"`
	Count   int      `json:"count"`
	Objects []string `json:"objects,omitempty"`
}

// Status is the whole report.
type Status struct {
	Shards   []ShardStatus
	Error    string
	Warnings Warnings
}

// Encode renders s as ConfigMap data.
func Encode(s Status) (map[string]string, error) {
	shards := s.Shards
	if shards == nil {
		shards = []ShardStatus{}
	}
	b, err := yaml.Marshal(shards)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	data := map[string]string{shardsKey: string(b)}
	if lines := mappedLines(shards); lines != "" {
		data[mappedKey] = lines
	}
	if s.Error != "" {
		data[errorKey] = s.Error
	}
	w := s.Warnings
	if len(w.UnknownShards)+len(w.NotShardAware)+len(w.RenderErrors) > 0 || w.FailoverWithheld != "" || w.CrossShard != nil {
		b, err := yaml.Marshal(w)
		if err != nil {
			return nil, fmt.Errorf("encoding warnings: %w", err)
		}
		data[warningsKey] = string(b)
	}
	return data, nil
}

// mappedLines renders mappedKey's value, "" when no shard has objects.
func mappedLines(shards []ShardStatus) string {
	var lines []string
	for _, sh := range shards {
		if len(sh.Mapped) == 0 {
			continue
		}
		counts := make([]string, 0, len(sh.Mapped))
		for _, kind := range slices.Sorted(maps.Keys(sh.Mapped)) {
			counts = append(counts, fmt.Sprintf("%d %s", sh.Mapped[kind], kind))
		}
		lines = append(lines, sh.ID+": "+strings.Join(counts, ", "))
	}
	return strings.Join(lines, "\n")
}

// Decode reads a status ConfigMap's data. A part that cannot be read is
// left empty: the status is only a report, and it is rewritten in full.
func Decode(data map[string]string) Status {
	var s Status
	_ = yaml.Unmarshal([]byte(data[shardsKey]), &s.Shards)
	_ = yaml.Unmarshal([]byte(data[warningsKey]), &s.Warnings)
	s.Error = data[errorKey]
	return s
}

// Event is one Kubernetes Event to emit on the shard ConfigMap.
type Event struct {
	Type    string
	Reason  string
	Message string
}

// Changes returns the condition Events for going from old to cur: each is
// emitted when its condition appears or its message changes, never for an
// unchanged condition.
func Changes(old, cur Status) []Event {
	var out []Event
	if cur.Error != "" && cur.Error != old.Error {
		out = append(out, Event{corev1.EventTypeWarning, ReasonInvalidShardConfig,
			"The shard list was rejected and nothing was changed: " + cur.Error})
	}
	prev := map[string]ShardStatus{}
	for _, s := range old.Shards {
		prev[s.ID] = s
	}
	for _, s := range cur.Shards {
		p, had := prev[s.ID]
		out = append(out, shardChanges(p, had, s)...)
	}
	return append(out, warningChanges(old.Warnings, cur.Warnings)...)
}

// stateEvents are the type and reason of the Event that a shard entering
// each state brings.
var stateEvents = map[string]struct{ eventType, reason string }{
	StateBlocked:      {corev1.EventTypeWarning, ReasonShardDeletionBlocked},
	StateDraining:     {corev1.EventTypeNormal, ReasonShardDraining},
	StateDrained:      {corev1.EventTypeNormal, reasonShardDrained},
	StateConflict:     {corev1.EventTypeWarning, ReasonShardConflict},
	StateFailedOver:   {corev1.EventTypeWarning, reasonShardUnavailable},
	StateWriteFailing: {corev1.EventTypeWarning, ReasonShardWriteFailed},
}

// shardChanges returns the Events of shard s, which was p before (had: it
// was there at all).
func shardChanges(p ShardStatus, had bool, s ShardStatus) []Event {
	var out []Event
	// Only entering a state is news: a drain's message counts down as
	// objects leave, and a write error may read differently on each retry.
	// A conflict is news again when it names another object.
	if e, ok := stateEvents[s.State]; ok &&
		(!had || p.State != s.State || s.State == StateConflict && p.Message != s.Message) {
		out = append(out, Event{e.eventType, e.reason, s.Message})
	}
	if had && p.State == StateFailedOver && s.State != StateFailedOver {
		out = append(out, Event{corev1.EventTypeNormal, reasonShardRecovered,
			fmt.Sprintf("shard %s is available again; placement brings objects back to it by rebalancing, paced", s.ID)})
	}
	if s.JobPlacement != "" && s.JobPlacement != p.JobPlacement {
		out = append(out, Event{corev1.EventTypeWarning, ReasonGitJobPlacementMismatch, s.JobPlacement})
	}
	return out
}

// warningChanges returns the Events of the warnings that cur has and old
// did not.
func warningChanges(old, cur Warnings) []Event {
	var out []Event
	known := map[string]bool{}
	for _, u := range old.UnknownShards {
		known[u.ID] = true
	}
	for _, u := range cur.UnknownShards {
		if !known[u.ID] {
			out = append(out, Event{corev1.EventTypeWarning, ReasonUnknownShard, unknownMessage(u)})
		}
	}
	if cur.MoreUnknownShards > 0 && old.MoreUnknownShards == 0 {
		out = append(out, Event{corev1.EventTypeWarning, ReasonUnknownShard, moreUnknownMessage(cur)})
	}
	for _, src := range cur.NotShardAware {
		if !slices.Contains(old.NotShardAware, src) {
			out = append(out, Event{corev1.EventTypeWarning, ReasonSourceNotShardAware, notShardAwareMessage(src)})
		}
	}
	if w := cur.FailoverWithheld; w != "" && w != old.FailoverWithheld {
		out = append(out, Event{corev1.EventTypeWarning, reasonFailoverWithheld, w})
	}
	for _, msg := range newItems(old.RenderErrors, cur.RenderErrors) {
		out = append(out, Event{corev1.EventTypeWarning, reasonRenderFailed, "a shard Deployment could not be rendered: " + msg})
	}
	if c := cur.CrossShard; c != nil && (old.CrossShard == nil || len(newItems(old.CrossShard.Objects, c.Objects)) > 0) {
		out = append(out, Event{corev1.EventTypeWarning, ReasonCrossShardReference, crossShardMessage(*c)})
	}
	return out
}

// crossShardMessage names the objects whose work lands on another shard.
// It is news when an object that the status names was not named before:
// the count alone moves as objects come and go.
func crossShardMessage(c CrossShard) string {
	more := ""
	if n := c.Count - len(c.Objects); n > 0 {
		more = fmt.Sprintf(" (and %d more, not named)", n)
	}
	return fmt.Sprintf("%d object(s) have part of their work on another shard than their own, where it fails or is "+
		"reconciled by the wrong controllers%s: %s", c.Count, more, strings.Join(c.Objects, " | "))
}

// notShardAwareMessage says what a source that is not shard-aware lacks,
// what follows, and where the lasting fix goes.
func notShardAwareMessage(n NotShardAware) string {
	return fmt.Sprintf("source Deployment %s is not started with %s, so it would also reconcile the objects of every shard; "+
		"no new shard copy of it is created until it is (copies that exist are left as they are). "+
		"Add the argument through whatever installs it, not by hand: see "+
		"https://github.com/shardkeeper/shardkeeper/blob/main/docs/flux.md#the-main-controllers-must-leave-the-shards-objects-alone",
		n.Source, n.Needs)
}

// unknownMessage says which objects point at a shard that does not exist.
func unknownMessage(u UnknownShard) string {
	return fmt.Sprintf("%d object(s) carry shard ID %q, which is not configured, so nothing reconciles them (%s); add the shard or relabel them",
		u.Count, u.ID, strings.Join(u.Objects, ", "))
}

// moreUnknownMessage counts the unknown shard IDs beyond those named.
func moreUnknownMessage(w Warnings) string {
	return fmt.Sprintf("and %d more shard IDs that are not configured, on %d object(s); the status names the %d with the most objects",
		w.MoreUnknownShards, w.MoreUnknownObjects, len(w.UnknownShards))
}

func newItems(old, cur []string) []string {
	seen := map[string]bool{}
	for _, s := range old {
		seen[s] = true
	}
	var out []string
	for _, s := range cur {
		if !seen[s] {
			out = append(out, s)
		}
	}
	return out
}
