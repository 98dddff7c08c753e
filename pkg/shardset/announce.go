package shardset

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// announcement is the Event of a write this process made, held until its
// caches show the write.
type announcement struct {
	eventType, reason, message string
}

// announceLater holds an Event of a write until announceSeen.
func (c *Controller) announceLater(eventType, reason, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.announce = append(c.announce, announcement{eventType, reason, fmt.Sprintf(format, args...)})
}

// announceSeen emits on cm the Events held since the last call. A reconcile
// calls it once its caches show every write of this process: the Events of
// a burst of writes, like the status that follows them, then go to the API
// server after it has sent out the burst's watch events, which the shards'
// controllers and kube-controller-manager are waiting for, not in the middle
// of them. They then also tell what the caches confirm. It returns how many
// it emitted.
func (c *Controller) announceSeen(cm *corev1.ConfigMap) int {
	c.mu.Lock()
	held := c.announce
	c.announce = nil
	c.mu.Unlock()
	for _, a := range held {
		c.recorder.Event(cm, a.eventType, a.reason, a.message)
	}
	return len(held)
}
