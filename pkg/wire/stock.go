package wire

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Stock reads the mapped objects with client-go's own clients, decoders and
// transport, and nothing of this package's: the metadata client for the
// metadata, and the dynamic client, converted field by field, for the kinds
// whose spec is read. It is the reference that the skimmers must beat by a
// margin a user would notice (docs/performance.md), and the way around them
// should one ever read an object wrong (--mapped-reader=stock).
type Stock struct {
	meta metadata.Interface
	dyn  dynamic.Interface
}

// NewStock returns the Stock clients of cfg.
func NewStock(cfg *rest.Config) (*Stock, error) {
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Stock{meta: meta, dyn: dyn}, nil
}

// Meta lists and watches gvr's objects as *metav1.PartialObjectMetadata.
func (s *Stock) Meta(gvr schema.GroupVersionResource) ListerWatcher {
	client := s.meta.Resource(gvr)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	}
}

// Spec lists and watches gvr's objects as *SpecObject, converted from the
// dynamic client's unstructured objects as they arrive.
func (s *Stock) Spec(gvr schema.GroupVersionResource) ListerWatcher {
	client := s.dyn.Resource(gvr)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := client.List(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
			}
			return specListFromUnstructured(list)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := client.Watch(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("watching %s: %w", gvr.Resource, err)
			}
			return watch.Filter(w, specEvent), nil
		},
	}
}

// specEvent converts a watch event's object to *SpecObject; an error
// event's Status goes through as it is. An object that does not convert
// ends the watch with an error event, as an event the skimmer cannot
// decode ends its stream (apimachinery's StreamWatcher): the reflector
// would otherwise log the unexpected type and go on without the event,
// and the cache would keep the object's older version for good.
func specEvent(ev watch.Event) (watch.Event, bool) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return ev, true
	}
	o, err := specFromUnstructured(u)
	if err != nil {
		status := apierrors.NewInternalError(err).ErrStatus
		return watch.Event{Type: watch.Error, Object: &status}, true
	}
	ev.Object = o
	return ev, true
}

// specFromUnstructured keeps of u what a SpecObject keeps, by
// apimachinery's converter (the struct's json tags), not by the skimmer.
func specFromUnstructured(u *unstructured.Unstructured) (*SpecObject, error) {
	o := &SpecObject{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
		return nil, fmt.Errorf("converting %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	o.fill()
	return o, nil
}

// specListFromUnstructured is specFromUnstructured for a list.
func specListFromUnstructured(l *unstructured.UnstructuredList) (runtime.Object, error) {
	out := &specList{TypeMeta: metav1.TypeMeta{Kind: l.GetKind(), APIVersion: l.GetAPIVersion()},
		ListMeta: metav1.ListMeta{ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue(), RemainingItemCount: l.GetRemainingItemCount()}}
	out.Items = make([]SpecObject, 0, len(l.Items))
	for i := range l.Items {
		o, err := specFromUnstructured(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *o)
	}
	return out, nil
}
