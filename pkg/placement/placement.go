// Package placement holds the values that automatic placement passes
// between packages: a mapped object as the caches keep it (pkg/mapped fills
// it, the decisions in pkg/plan and the mover read it), and what the shard
// set's reconcile decided that the mover needs. It is a leaf of the package
// graph, free of client-go, so that the pure decisions do not depend on the
// caches' informer machinery, nor the shard set on the mover.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package placement

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// Object is what the cache keeps of one mapped object: what the decisions
// read, and nothing else.
type Object struct {
	// Kind is the mapped kind's name, e.g. "gitrepos.fleet.cattle.io".
	Kind string
	// Namespace and Name identify the object.
	Namespace, Name string
	// ResourceVersion is the precondition of a relabel.
	ResourceVersion string
	// Shard is the shard label's value; Labelled is false when there is none.
	Shard    string
	Labelled bool
	// Labels are the object's labels, shared between objects that have the
	// same ones: read them, never write them.
	Labels labels.Set
	// AssignedShard and AssignedAt are placement's record (empty and zero
	// when placement never labelled the object).
	AssignedShard string
	AssignedAt    time.Time
	// Weight is the weight annotation, 1 when absent or invalid.
	Weight int
	// Deleting is true once the object has a deletion timestamp.
	Deleting bool
	// Derived is true for objects of a derived kind (source.MappedKind):
	// guarded, never placed.
	Derived bool
	// Grouped is true for objects of a kind placed by namespace
	// (source.MappedKind.GroupByNamespace): all such objects in one
	// namespace are one unit of placement unless the placement settings
	// group them otherwise, see Group.
	Grouped bool
}

// Prefixes of the group keys that Group returns: a namespace's and a
// label value's groups never share a key, and a key is also a valid
// ConfigMap data key (pkg/stamp publishes groups under it). A label
// group's key is "label.<namespace>.<value>": a namespace has no dot, so
// the first dot after the prefix ends it.
const (
	namespaceGroup = "namespace."
	labelGroup     = "label."
)

// Group names the unit of placement o belongs to under p's grouping:
// "label.<ns>.<value>" for an object that carries the label p groups by,
// "namespace.<ns>" when p groups by namespace or o's kind is placed by
// namespace (Grouped), and "" for an object placed on its own. An object
// being deleted is placed on its own: it stays with the controller that
// removes its finalizer, and must not hold the rest of its group.
//
// A unit never spans namespaces. What one object of a unit does (a pin, a
// placement record, a weight, being outside placement's scope) decides
// where the whole unit goes or that it stays, so whoever may write one
// namespace's objects must not be able to join another namespace's unit:
// the label's value alone would let them pin, freeze or pull another
// tenant's objects.
func (o Object) Group(p shardconfig.Placement) string {
	if o.Deleting || o.Derived {
		return ""
	}
	if p.GroupBy == shardconfig.GroupByLabel {
		if v := o.Labels[p.GroupLabel]; v != "" {
			return labelGroup + o.Namespace + "." + v
		}
	}
	if o.Grouped || p.GroupBy == shardconfig.GroupByNamespace {
		return namespaceGroup + o.Namespace
	}
	return ""
}

// DescribeGroup names a group key of Group in messages: "namespace
// team-a", or "group example.com/tenant=acme in namespace team-a".
func DescribeGroup(key string, p shardconfig.Placement) string {
	if rest, ok := strings.CutPrefix(key, labelGroup); ok {
		ns, v, _ := strings.Cut(rest, ".")
		return "group " + p.GroupLabel + "=" + v + " in namespace " + ns
	}
	return "namespace " + strings.TrimPrefix(key, namespaceGroup)
}

// Ref names the object in messages and placement rounds: "kind
// namespace/name".
func (o Object) Ref() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Pinned reports whether a person set the shard label: placement never
// moves such an object.
func (o Object) Pinned() bool {
	return o.Labelled && o.Shard != o.AssignedShard
}

// State is what the shard set's last reconcile decided that placement
// needs.
type State struct {
	// ConfigMap is the shard ConfigMap, which the Events are about.
	ConfigMap *corev1.ConfigMap
	// Placement are the settings; placement does nothing while disabled.
	Placement shardconfig.Placement
	// Targets may receive objects; Draining must lose theirs, and so must
	// FailingOver, the shards that are down.
	Targets, Draining, FailingOver []string
	// FailingKinds holds, per shard in FailingOver, the kinds that leave
	// it (plan.Plan.FailingKinds); the others' controllers run there.
	FailingKinds map[string][]string
	// Shards are every shard that is listed or still runs. An object that
	// placement put on any other shard is served by nobody, and leaves as a
	// drain's objects do.
	Shards []string
	// Served is whether the unsharded controllers run: they serve the
	// objects with no shard label, whose assignments are then paced.
	Served bool
}

// Annotations that placement writes and reads. An object whose shard label
// equals AssignedShardAnnotation was placed by shardkeeper; any other shard
// label was set by a person and pins the object.
const (
	// AssignedShardAnnotation records the shard placement gave the object.
	AssignedShardAnnotation = "shardkeeper.io/assigned-shard"
	// AssignedAtAnnotation records when (RFC 3339), for the cool-down.
	AssignedAtAnnotation = "shardkeeper.io/assigned-at"
	// WeightAnnotation is the load an object adds to its shard (default 1).
	WeightAnnotation = "shardkeeper.io/weight"
)
