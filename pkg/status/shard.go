package status

// Shard states shown in the status.
const (
	// StateActive: the shard is configured and its Deployments are rendered.
	StateActive = "Active"
	// StateBlocked: the shard was removed from the list, but objects are
	// still mapped to it, so its Deployments are kept.
	StateBlocked = "Blocked"
	// StateWaiting: the shard was removed from the list, and its deletion
	// waits until the mapped-object caches have synced, or until they show
	// the objects the API server has mapped to it.
	StateWaiting = "Waiting"
	// StateConflict: a Deployment or Service with a shard object's name
	// exists but is not managed by shardkeeper.
	StateConflict = "Conflict"
	// StatePending: a listed shard's copy of a source is not created,
	// because the source is not shard-aware (it would reconcile the
	// shard's objects too).
	StatePending = "Pending"
	// StateDraining: placement is moving the shard's objects away; the
	// shard is deleted once it is empty (unless it is still listed).
	StateDraining = "Draining"
	// StateDrained: a listed shard that the drain annotation emptied; it is
	// deleted once it is removed from the list.
	StateDrained = "Drained"
	// StateFailedOver: a listed shard whose Deployments have had no
	// Available replica for placement.failoverAfter; placement moves its
	// objects to the other shards. It stays listed, its Deployments as
	// they are.
	StateFailedOver = "FailedOver"
	// StateWriteFailing: a write to the shard's Deployments or Services
	// failed for another reason than a stale cache, and is retried with
	// backoff; the message carries the error. It takes the place of Active
	// and Pending (the other states keep theirs, and their Events), and of
	// a removed shard whose deletion fails.
	StateWriteFailing = "WriteFailing"
)

// ShardStatus is one shard's line in the status.
type ShardStatus struct {
	ID      string         `json:"id"`
	State   string         `json:"state"`
	Ready   int            `json:"ready"`
	Desired int            `json:"desired"`
	Mapped  map[string]int `json:"mapped,omitempty"`
	Message string         `json:"message,omitempty"`
	// JobPlacement says why the shard's Jobs (Fleet's git Jobs) cannot be
	// placed as the shard asks; the shard runs anyway.
	JobPlacement string `json:"jobPlacement,omitempty"`
}

// NotShardAware is a source whose main controller lacks the argument that
// keeps it off the sharded objects.
type NotShardAware struct {
	// Source is "namespace/name" of the source Deployment.
	Source string `json:"source"`
	// Needs is the argument it must be started with.
	Needs string `json:"needs"`
}
