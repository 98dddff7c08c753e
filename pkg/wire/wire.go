// Package wire reads the mapped objects off the API server: what the index
// of pkg/mapped needs of them, and nothing else. Metadata comes as
// *metav1.PartialObjectMetadata, skimmed from protobuf (metaproto.go); the
// kinds whose spec the decisions read come as *SpecObject, skimmed from
// JSON (skim.go); and the initial state of a kind goes into a Store as it
// arrives, a page or an object at a time, never held whole (InitialSync).
//
// The skimmers exist for memory and CPU at many objects
// (docs/performance.md); FuzzMetaProtobuf, FuzzSpecJSON and FuzzSkimFramer
// hold them to what apimachinery's decoders give for every field they keep.
// Stock reads the same with client-go's own clients: the reference.
//
// It is the daemon's own: not a supported API, and it may change in any
// release.
package wire

import (
	"context"
	"fmt"
	"path"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Reader lists and watches the mapped objects as the index takes them:
// *metav1.PartialObjectMetadata from Meta, *SpecObject from Spec. Clients
// and Stock are the two.
type Reader interface {
	Meta(gvr schema.GroupVersionResource) ListerWatcher
	Spec(gvr schema.GroupVersionResource) ListerWatcher
}

// Clients read the mapped objects through one rest.Config, over HTTP/1.1
// (see http1): the spec of the kinds whose objects derive others or refer
// to sources, and the metadata of the others, each with its skimmer.
type Clients struct {
	spec rest.Interface
	meta rest.Interface
}

// NewClients returns the Clients of cfg; cfg itself is left as it was.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cfg = http1(cfg)
	spec, err := specClientFor(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metaClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &Clients{spec: spec, meta: meta}, nil
}

// Meta lists and watches gvr's objects as *metav1.PartialObjectMetadata.
func (c *Clients) Meta(gvr schema.GroupVersionResource) ListerWatcher {
	return metaListWatch(c.meta, gvr)
}

// Spec lists and watches gvr's objects as *SpecObject.
func (c *Clients) Spec(gvr schema.GroupVersionResource) ListerWatcher {
	return specListWatch(c.spec, gvr)
}

func specListWatch(client rest.Interface, gvr schema.GroupVersionResource) *cache.ListWatch {
	base := path.Join("/apis", gvr.Group, gvr.Version, gvr.Resource)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list := &specList{}
			req := client.Get().AbsPath(base).VersionedParams(&o, metav1.ParameterCodec)
			err := readList(ctx, req, func(body []byte) error {
				if err := skimList(body, list); err != nil {
					return err
				}
				return listOnly(body, list.Kind)
			})
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr.Resource, err)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return client.Get().AbsPath(base).VersionedParams(&o, metav1.ParameterCodec).Watch(ctx)
		},
	}
}

// ListerWatcher is what InitialSync returns: both of client-go's forms, as
// a reflector takes either.
type ListerWatcher interface {
	cache.ListerWatcher
	cache.ListerWatcherWithContext
}

// InitialSync wraps lw so that the reflector's initial list goes into
// store as it arrives, read as r says; see initialSync.
func InitialSync(lw cache.ListerWatcherWithContext, store Store, r Reading) ListerWatcher {
	size := r.PageSize
	if size == 0 {
		size = ListPageSize
	}
	return &initialSync{lw: lw, store: store, pageSize: size, pagesFirst: r.Pages, streamAbove: r.StreamAbove}
}
