package mapped

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// livePageSize bounds one answer of Live. The objects it finds are ones the
// caches have not shown yet, so there are seldom more than a few.
const livePageSize = 100

// Live asks the API server, not the caches, which of shards have objects
// mapped to them, and returns one such object of each ("kind
// namespace/name"). A deletion rests on it: a cache lags behind the API
// server by as long as its watch takes, and an object labelled just before
// its shard was removed from the list may not be in it yet.
//
// It sends one LIST of metadata per watched kind, in parallel, selecting the
// shard label's values; and again for the shards not yet found, in the rare
// case that a full page did not name them all. The LIST has no
// resourceVersion, so it is a consistent read: kube-apiserver 1.37 answers
// it, limit included, from its watch cache once that has caught up with
// etcd; older ones that do not serve a paged consistent read from the cache
// read etcd. A kind whose CRD is not installed counts as
// empty, as it does in the caches.
func (t *Tracker) Live(ctx context.Context, shards []string) (map[string]string, error) {
	if len(shards) == 0 {
		return nil, nil
	}
	var (
		mu   sync.Mutex
		out  = map[string]string{}
		errs []error
		wg   sync.WaitGroup
	)
	for _, k := range t.kinds {
		if k.current() == nil {
			continue
		}
		wg.Go(func() {
			found, err := t.liveKind(ctx, k, shards)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for shard, ref := range found {
				if _, ok := out[shard]; !ok {
					out[shard] = ref
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// liveKind is Live for one kind. An object found names its shard, which is
// then left out of the next request; a request that comes back with no more
// pages has found every shard it asked for.
func (t *Tracker) liveKind(ctx context.Context, k *kind, shards []string) (map[string]string, error) {
	found := map[string]string{}
	left := slices.Clone(shards)
	for len(left) > 0 {
		req, err := labels.NewRequirement(k.spec.Label, selection.In, left)
		if err != nil {
			return nil, fmt.Errorf("selecting %s in %v: %w", k.spec.Label, left, err)
		}
		list, err := t.client.Resource(k.spec.Resource).List(ctx, metav1.ListOptions{
			LabelSelector: labels.NewSelector().Add(*req).String(),
			Limit:         livePageSize,
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s on shards %v: %w", k.spec.Name(), left, err)
		}
		for _, o := range list.Items {
			shard := o.Labels[k.spec.Label]
			if _, ok := found[shard]; !ok && slices.Contains(left, shard) {
				found[shard] = k.spec.Name() + " " + o.Namespace + "/" + o.Name
			}
		}
		if list.Continue == "" {
			break
		}
		before := len(left)
		left = slices.DeleteFunc(left, func(s string) bool { _, ok := found[s]; return ok })
		if len(left) == before {
			// A full page that found nothing new cannot happen with a
			// selector on the label; stop rather than loop.
			break
		}
	}
	return found, nil
}
