package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Store is a reflector's store that takes the initial state object by
// object, as it arrives, and makes it its whole content at the next
// Replace with an empty list. The objects are *metav1.PartialObjectMetadata,
// or *SpecObject from a Clients.Spec ListerWatcher.
type Store interface {
	cache.ReflectorStore
	// BeginSync starts a new initial state, forgetting any other that
	// was begun.
	BeginSync()
	// SyncObject adds obj, as it was decoded, to the initial state begun.
	SyncObject(obj runtime.Object) error
	// DropSync forgets the initial state begun.
	DropSync()
}

// initialSync is a ListerWatcher whose List brings the initial state into
// its store itself and returns an empty list at that state's
// resourceVersion; the reflector then replaces its store's content with
// nothing but what the store has taken.
//
// The reflector's own ways keep every object until the last one arrives:
// its watch list gathers them in a store keyed by a fresh copy of each
// object's name, and its paged list in one list of whole objects. At a
// million objects that is about 100 MiB above what the index keeps, for
// the time the start-up takes, and the memory limit must allow for it.
type initialSync struct {
	lw    cache.ListerWatcherWithContext
	store Store
	// pageSize pages the list, where the API server does not stream.
	pageSize int64
	// pagesFirst lists in pages without asking for a stream (see
	// readsPages) unless, with streamAbove set, the first page says more
	// than streamAbove objects remain: those are streamed instead.
	pagesFirst  bool
	streamAbove int64
}

// errManyObjects stops a paged list whose first page says that more than
// streamAbove objects remain.
var errManyObjects = errors.New("more objects than pages are read for")

var (
	_ cache.ListerWatcher            = (*initialSync)(nil)
	_ cache.ListerWatcherWithContext = (*initialSync)(nil)
)

// streamTimeout bounds the watch that streams the initial state; at a
// million objects the stream takes about a minute on two cores.
const streamTimeout = 30 * time.Minute

// initialEventsEnd is the annotation of the bookmark that ends the initial
// state of a watch with sendInitialEvents (metav1.InitialEventsAnnotationKey).
const initialEventsEnd = metav1.InitialEventsAnnotationKey

// IsWatchListSemanticsUnSupported tells the reflector to list rather than
// stream: the list streams, into the store.
func (l *initialSync) IsWatchListSemanticsUnSupported() bool { return true }

// List implements cache.ListerWatcher; the reflector calls
// ListWithContext.
func (l *initialSync) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), o)
}

// Watch implements cache.ListerWatcher; the reflector calls
// WatchWithContext.
func (l *initialSync) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), o)
}

// WatchWithContext implements cache.ListerWatcherWithContext.
func (l *initialSync) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := l.lw.WatchWithContext(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("watching: %w", err)
	}
	return w, nil
}

// ListWithContext implements cache.ListerWatcherWithContext. The initial
// state is listed in pages with pagesFirst, unless there are more objects
// than streamAbove; otherwise it streams as a watch (sendInitialEvents,
// beta and on from 1.32), and an API server that refuses that is listed in
// pages instead.
func (l *initialSync) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	if o.Continue != "" {
		return nil, errors.New("a continued list: the initial state was taken whole from the first call")
	}
	l.store.BeginSync()
	var rv string
	var err error
	if l.pagesFirst {
		rv, err = l.pages(ctx, o.ResourceVersion, l.streamAbove)
	}
	if !l.pagesFirst || errors.Is(err, errManyObjects) {
		l.store.BeginSync()
		rv, err = l.stream(ctx, o.ResourceVersion)
		var status apierrors.APIStatus
		if err != nil && errors.As(err, &status) && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
			l.store.BeginSync()
			rv, err = l.pages(ctx, o.ResourceVersion, 0)
		}
	}
	if err != nil {
		l.store.DropSync()
		return nil, err
	}
	return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}, nil
}

// stream takes the initial state from a watch with sendInitialEvents and
// returns its resourceVersion. rv "0", the reflector's first list (any
// state the cache holds), streams the most recent state instead, as the
// reflector's own watch list does.
func (l *initialSync) stream(ctx context.Context, rv string) (string, error) {
	if rv == "0" {
		rv = ""
	}
	timeout := int64(streamTimeout.Seconds())
	w, err := l.lw.WatchWithContext(ctx, metav1.ListOptions{
		ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents: new(true), AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
	})
	if err != nil {
		return "", fmt.Errorf("streaming the initial state: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("streaming the initial state: %w", ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", errors.New("streaming the initial state: the watch ended before the state was complete")
			}
			done, rv, err := l.event(ev)
			if err != nil || done {
				return rv, err
			}
		}
	}
}

// event takes one event of the initial state's stream; it reports whether
// it ended the state, and then the state's resourceVersion.
func (l *initialSync) event(ev watch.Event) (bool, string, error) {
	switch ev.Type {
	case watch.Added, watch.Modified:
		if err := l.store.SyncObject(ev.Object); err != nil {
			return false, "", err
		}
	case watch.Bookmark:
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return false, "", fmt.Errorf("streaming the initial state: a bookmark: %w", err)
		}
		if m.GetAnnotations()[initialEventsEnd] == "true" {
			return true, m.GetResourceVersion(), nil
		}
	case watch.Error:
		return false, "", fmt.Errorf("streaming the initial state: %w", apierrors.FromObject(ev.Object))
	case watch.Deleted:
		// The initial state is all ADDED events: a change made while it
		// streams comes after the bookmark that ends it.
		return false, "", errors.New("streaming the initial state: a deletion before the state was complete")
	}
	return false, "", nil
}

// pages takes the initial state from a paged list and returns its
// resourceVersion, each page's objects stripped before the next page. It
// returns errManyObjects, having taken one page, if streamAbove is set and
// the first page says that more objects than that remain.
func (l *initialSync) pages(ctx context.Context, rv string, streamAbove int64) (string, error) {
	if rv == "0" {
		// The watch cache answers "0" in one page, whatever the limit.
		rv = ""
	}
	o := metav1.ListOptions{ResourceVersion: rv, Limit: l.pageSize}
	if rv != "" {
		o.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	listed := ""
	for {
		list, err := l.lw.ListWithContext(ctx, o)
		if err != nil {
			return "", fmt.Errorf("listing the initial state: %w", err)
		}
		m, err := meta.ListAccessor(list)
		if err != nil {
			return "", fmt.Errorf("listing the initial state: %w", err)
		}
		if listed == "" {
			// Every page is of the first page's snapshot.
			listed = m.GetResourceVersion()
			if n := m.GetRemainingItemCount(); streamAbove > 0 && n != nil && *n > streamAbove {
				return "", errManyObjects
			}
		}
		if err := meta.EachListItem(list, l.store.SyncObject); err != nil {
			return "", err
		}
		if m.GetContinue() == "" {
			return listed, nil
		}
		o = metav1.ListOptions{Limit: l.pageSize, Continue: m.GetContinue()}
	}
}
