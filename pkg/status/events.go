package status

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewEventBroadcaster returns a broadcaster tuned for shardkeeper, whose
// Events all concern one object, the shard ConfigMap. client-go's defaults
// rate-limit Events per object and type (25, then one every five minutes)
// and fold ten similar ones into one: adding 100 shards would then lose most
// of their ShardCreated Events. shardkeeper emits an Event only when
// something changes, so only identical Events are limited here.
func NewEventBroadcaster(ctx context.Context) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx), record.WithCorrelatorOptions(record.CorrelatorOptions{
		BurstSize: 100,
		QPS:       1,
		MaxEvents: 1000,
		SpamKeyFunc: func(e *corev1.Event) string {
			return string(e.InvolvedObject.UID) + "/" + e.Type + "/" + e.Reason + "/" + e.Message
		},
	}))
}
