package stamp

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/shardkeeper/shardkeeper/pkg/render"
)

// Name returns the name of the stamp ConfigMap of the shard ConfigMap
// named configMap; the chart binds the policy to it.
func Name(configMap string) string { return configMap + "-stamp" }

// configMaps is the one client the publisher needs, narrow so that a
// fake records its writes.
type configMaps interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// recheckAfter is how long the publisher trusts its copy of the stamp
// ConfigMap: then it reads it again, so that records changed by anyone
// else are put back even while the daemon's own stay the same.
const recheckAfter = 10 * time.Minute

// Publisher writes the stamp ConfigMap, only when its data changes (or
// someone else changed it): idle, it reads it once every recheckAfter and
// writes nothing.
type Publisher struct {
	client configMaps
	name   string
	now    func() time.Time

	mu sync.Mutex
	// last is the ConfigMap as last read or written, at lastSeen; nil:
	// read it first.
	last     *corev1.ConfigMap
	lastSeen time.Time
}

// NewPublisher returns a Publisher of the stamp ConfigMap of the shard
// ConfigMap namespace/configMap.
func NewPublisher(client corev1client.ConfigMapsGetter, namespace, configMap string) *Publisher {
	return &Publisher{client: client.ConfigMaps(namespace), name: Name(configMap), now: time.Now}
}

// Publish makes the stamp ConfigMap's data equal data. The update carries
// the resourceVersion last seen, so that a write by anyone else is
// noticed: it is read again and overwritten, since only the daemon's
// answers may stand there.
func (p *Publisher) Publish(ctx context.Context, data map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last != nil && p.now().Sub(p.lastSeen) >= recheckAfter {
		p.last = nil
	}
	if p.last == nil {
		p.lastSeen = p.now()
		live, err := p.client.Get(ctx, p.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading stamp ConfigMap %s: %w", p.name, err)
		default:
			p.last = live
		}
	}
	if p.last != nil && maps.Equal(p.last.Data, data) && p.last.Labels[render.ManagedByLabel] == render.ManagedByValue {
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{render.ManagedByLabel: render.ManagedByValue}},
		Data:       data,
	}
	var out *corev1.ConfigMap
	var err error
	if p.last == nil {
		out, err = p.client.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm.ResourceVersion = p.last.ResourceVersion
		out, err = p.client.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		p.last = nil // read it again next time: it changed, or appeared
		return fmt.Errorf("writing stamp ConfigMap %s: %w", p.name, err)
	}
	p.last, p.lastSeen = out, p.now()
	return nil
}
