// Package crossref decides which mapped objects have part of their work
// done on another shard than their own. Two things put it there:
//
//   - a controller derives an object from it and labels that object from a
//     map in the spec, not from the object's own labels: helm-controller
//     labels a HelmRelease's HelmChart with spec.chart.metadata.labels, and
//     Fleet labels a HelmOp's Bundle with spec.labels. Without the shard
//     label there, the derived object belongs to another shard (or to the
//     main controllers);
//   - it refers to a source that a controller reads through a cache
//     filtered by the shard label: source-controller finds a HelmChart's
//     repository only among the objects of its own shard, and reports any
//     other one as not found (fluxcd/source-controller#2114).
//
// The decision is Find, a pure function; the caches only hand it values.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package crossref

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Shard is where a shard label puts an object: the shard ID, or, with no
// label, the main controllers.
type Shard struct {
	ID       string
	Labelled bool
}

// On returns the Shard of a label value; labelled says the label is there.
func On(id string, labelled bool) Shard {
	if !labelled {
		return Shard{}
	}
	return Shard{ID: id, Labelled: true}
}

// String names the shard for a person.
func (s Shard) String() string {
	if !s.Labelled {
		return "the main controllers (no shard label)"
	}
	return fmt.Sprintf("shard %q", s.ID)
}

// Object is a mapped object that derives an object or refers to a source.
type Object struct {
	// Kind is the mapped kind's name ("helmreleases"); Label its shard
	// label.
	Kind, Label string
	Namespace   string
	Name        string
	// Shard is where the object's own label puts it.
	Shard Shard
	// Derived, when set, is the spec map whose labels the controller
	// puts on the object it derives from this one, and where that map's
	// shard label puts the derived object.
	Derived *Derived
	// Ref, when set, is the source the object refers to.
	Ref *Ref
}

// Derived is the labels map of a derived object, in the spec.
type Derived struct {
	// Path is the map's dotted path ("spec.chart.metadata.labels").
	Path string
	// Shard is where the map's shard label puts the derived object.
	Shard Shard
}

// Ref is a reference to a source.
type Ref struct {
	// Field is the reference's path in the spec ("spec.sourceRef").
	Field string
	// Kind is the source's kind as the reference names it
	// ("HelmRepository"); Namespace and Name name it.
	Kind, Namespace, Name string
	// From is the shard whose controller resolves the reference.
	From Shard
}

// ShardOf returns the shard of the source that kind, namespace and name
// identify, and false when it is not known: not cached, or of a kind
// whose shard is not tracked. An unknown source is no finding: a missing
// one is missing on every shard.
type ShardOf func(kind, namespace, name string) (Shard, bool)

// Crossed is an object whose work lands on another shard, and why.
type Crossed struct {
	// Object is "kind namespace/name", as the other warnings name objects.
	Object string
	// Reasons say where the work lands, one sentence each.
	Reasons []string
}

// String is the object and its reasons, as the status lists it.
func (c Crossed) String() string {
	return c.Object + ": " + strings.Join(c.Reasons, "; ")
}

// Find returns the objects whose derived object or whose source is on
// another shard than the one that needs it, sorted by Object.
func Find(objs []Object, shardOf ShardOf) []Crossed {
	var out []Crossed
	for _, o := range objs {
		var reasons []string
		if d := o.Derived; d != nil && d.Shard != o.Shard {
			reasons = append(reasons, derivedReason(o, d))
		}
		if r := o.Ref; r != nil {
			if src, ok := shardOf(r.Kind, r.Namespace, r.Name); ok && src != r.From {
				reasons = append(reasons, fmt.Sprintf("%s %s %s/%s is on %s, but is resolved on %s, and Flux resolves references within one shard",
					r.Field, r.Kind, r.Namespace, r.Name, src, r.From))
			}
		}
		if len(reasons) > 0 {
			out = append(out, Crossed{Object: o.Kind + " " + o.Namespace + "/" + o.Name, Reasons: reasons})
		}
	}
	slices.SortFunc(out, func(a, b Crossed) int { return cmp.Compare(a.Object, b.Object) })
	return out
}

// derivedReason says where the derived object goes, and what puts it with
// its origin.
func derivedReason(o Object, d *Derived) string {
	fix := fmt.Sprintf("set %s: %s there", o.Label, o.Shard.ID)
	if !o.Shard.Labelled {
		fix = fmt.Sprintf("remove %s there", o.Label)
	}
	return fmt.Sprintf("it is on %s, but %s puts the object derived from it on %s: %s", o.Shard, d.Path, d.Shard, fix)
}

// Sample returns the first n of crossed, as the status names them.
func Sample(crossed []Crossed, n int) []string {
	out := make([]string, 0, min(n, len(crossed)))
	for _, c := range crossed[:min(n, len(crossed))] {
		out = append(out, c.String())
	}
	return out
}
