package render

import (
	"encoding/json"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
	"github.com/shardkeeper/shardkeeper/pkg/source"
)

// Cache remembers renders and spec comparisons between decisions. Most
// reconciles are brought by a shard Deployment's status changing (a rollout
// updates each one several times): the sources and the shard settings are
// the same as the decision before, and so is every render. Rendering hashes
// the whole spec, and comparing walks it; at 20 shards of 4 sources that was
// a third of the daemon's CPU in a burst of changes, and it grows with the
// shard count.
//
// The Deployments it returns are shared between decisions: they must not
// be changed. A nil *Cache renders and compares every time.
type Cache struct {
	mu sync.Mutex
	// renders are keyed by the source, its live Deployment's version and
	// the shard's settings.
	renders map[renderKey]*entry[*appsv1.Deployment]
	// upToDate are the comparisons of rendered with existing specs, keyed
	// by the existing Deployment's UID and generation (its spec does not
	// change without the generation) and the rendered hash.
	upToDate map[compareKey]*entry[bool]
}

type renderKey struct {
	source, liveVersion string
	liveUID             types.UID
	shard               string // the shard's settings, JSON
}

type compareKey struct {
	uid        types.UID
	generation int64
	hash       string
}

// entry is a remembered value, and whether a decision used it since the
// last Sweep.
type entry[T any] struct {
	v    T
	used bool
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{renders: map[renderKey]*entry[*appsv1.Deployment]{}, upToDate: map[compareKey]*entry[bool]{}}
}

// Render is the package's Render, remembered.
func (c *Cache) Render(src source.Source, live *appsv1.Deployment, shard shardconfig.Shard) (*appsv1.Deployment, error) {
	if c == nil || live == nil || live.ResourceVersion == "" {
		// Without a version (not read from the API server) a change
		// of the source would go unnoticed.
		return Render(src, live, shard)
	}
	settings, err := json.Marshal(shard)
	if err != nil {
		return Render(src, live, shard)
	}
	key := renderKey{source: src.Key(), liveVersion: live.ResourceVersion, liveUID: live.UID, shard: string(settings)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.renders[key]; ok {
		e.used = true
		return e.v, nil
	}
	d, err := Render(src, live, shard)
	if err != nil {
		return nil, err
	}
	c.renders[key] = &entry[*appsv1.Deployment]{v: d, used: true}
	return d, nil
}

// UpToDate reports whether the existing Deployment already matches the
// rendered one: same hash, and no field that the render sets was changed by
// hand since (fields the API server defaults are ignored). The spec
// comparison is remembered.
func (c *Cache) UpToDate(rendered, existing *appsv1.Deployment) bool {
	if c == nil || existing.UID == "" {
		return deploymentUpToDate(rendered, existing)
	}
	if !metaUpToDate(rendered, existing) {
		return false
	}
	key := compareKey{uid: existing.UID, generation: existing.Generation, hash: rendered.Annotations[SpecHashAnnotation]}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.upToDate[key]; ok {
		e.used = true
		return e.v
	}
	equal := equality.Semantic.DeepDerivative(rendered.Spec, existing.Spec)
	c.upToDate[key] = &entry[bool]{v: equal, used: true}
	return equal
}

// Wrote records that written, the API server's answer to a create or an
// update of rendered, is up to date with it: written is what this process
// wrote, at the generation it holds until someone changes its spec. The
// decision that confirms a burst of writes then compares none of the
// Deployments it made. It also keeps the daemon from fighting a mutating
// admission webhook that changes a field the render sets: the answer
// already carries the change, and a rewrite would only bring it again.
func (c *Cache) Wrote(rendered, written *appsv1.Deployment) {
	if c == nil || written == nil || written.UID == "" {
		return
	}
	key := compareKey{uid: written.UID, generation: written.Generation, hash: rendered.Annotations[SpecHashAnnotation]}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upToDate[key] = &entry[bool]{v: true, used: true}
}

// Sweep forgets what was not used since the Sweep before. Called after each
// decision, it keeps what the current sources, shards and Deployments need,
// as each decision renders every listed shard.
func (c *Cache) Sweep() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sweep(c.renders)
	sweep(c.upToDate)
}

// sweep deletes the entries of m not used since the last sweep, and marks
// the others unused.
func sweep[K comparable, T any](m map[K]*entry[T]) {
	for k, e := range m {
		if !e.used {
			delete(m, k)
		}
		e.used = false
	}
}

// size is the number of renders and comparisons held.
func (c *Cache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.renders) + len(c.upToDate)
}
