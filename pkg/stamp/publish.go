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

// ProbeName returns the name of the ConfigMap that Confirm creates in a
// dry run, in the stamp ConfigMap's namespace: the chart's policies match
// its create as well as the placed kinds'.
func ProbeName(configMap string) string { return configMap + "-stamp-probe" }

// Annotations of the probe. A probe asks the policy of the shard label
// in AnnotationProbe to answer; the policy answers with the
// resourceVersion of the stamp ConfigMap it applies, in AnnotationParams.
const (
	AnnotationProbe  = "shardkeeper.io/stamp-probe"
	AnnotationParams = "shardkeeper.io/stamp-params"
)

// writeTimeout bounds every request of the publisher, so that a write
// that hangs holds neither a placement round nor a removal for longer.
const writeTimeout = 10 * time.Second

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
	// name is the stamp ConfigMap's; probe the probe's (ProbeName).
	name, probe string
	now         func() time.Time

	mu sync.Mutex
	// last is the ConfigMap as last read or written, at lastSeen; nil:
	// read it first.
	last     *corev1.ConfigMap
	lastSeen time.Time
	// confirmed is the resourceVersion of last that every policy asked
	// has answered with: Confirm need not ask again until last changes.
	confirmed string
}

// NewPublisher returns a Publisher of the stamp ConfigMap of the shard
// ConfigMap namespace/configMap.
func NewPublisher(client corev1client.ConfigMapsGetter, namespace, configMap string) *Publisher {
	return &Publisher{client: client.ConfigMaps(namespace), name: Name(configMap), probe: ProbeName(configMap), now: time.Now}
}

// Publish makes the stamp ConfigMap's data equal data. The update carries
// the resourceVersion last seen, so that a write by anyone else is
// noticed: it is read again and overwritten, since only the daemon's
// answers may stand there.
func (p *Publisher) Publish(ctx context.Context, data map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
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

// Confirm returns nil once the API server applies the records last
// published: for each shard label in labels, it creates the probe
// ConfigMap in a dry run, which goes through mutating admission and
// nothing further, and reads which version of the stamp ConfigMap the
// policy of that label applied to it. The API server applies a policy
// with its own cached copy of the parameter, which follows a write by as
// long as a watch event takes; a shard withdrawn from the records may be
// stamped onto new objects until then. An error says what is not in force
// yet, or that a policy did not answer at all (missing, or failing: the
// policies fail open). Once confirmed, the same records are not asked
// about again.
func (p *Publisher) Confirm(ctx context.Context, labels []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return fmt.Errorf("the stamp ConfigMap %s is not written yet", p.name)
	}
	want := p.last.ResourceVersion
	if p.confirmed == want {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	for _, label := range labels {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:        p.probe,
			Annotations: map[string]string{AnnotationProbe: label},
		}}
		out, err := p.client.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return fmt.Errorf("asking the admission policy that stamps %s which records it applies (a dry-run create of ConfigMap %s): %w",
				label, probe.Name, err)
		}
		switch got, ok := out.Annotations[AnnotationParams]; {
		case !ok:
			return fmt.Errorf("the admission policy that stamps %s did not answer a dry-run create of ConfigMap %s: "+
				"it is missing or failing (turn stamping off with the chart value placement.stamp.enabled=false if it was removed on purpose)",
				label, probe.Name)
		case got != want:
			return fmt.Errorf("the admission policy that stamps %s still applies the stamp ConfigMap %s at resourceVersion %q, not yet %q",
				label, p.name, got, want)
		}
	}
	p.confirmed = want
	return nil
}
