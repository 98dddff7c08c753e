package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// watchTarget is what resumableWatch watches: one resource in one
// namespace.
type watchTarget struct {
	// what names the watch in errors: "watch of <what>: ...".
	what string
	// list lists with opts and returns the list's resourceVersion.
	list func(ctx context.Context, opts metav1.ListOptions) (string, error)
	// watch watches with opts.
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// listVersion turns a typed client's List into a watchTarget's list.
func listVersion[L interface{ GetResourceVersion() string }](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (string, error) {
	return func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		l, err := list(ctx, opts)
		if err != nil {
			return "", err
		}
		return l.GetResourceVersion(), nil
	}
}

// eventFunc takes an event of a resumableWatch that is not an error, with
// the time it arrived, and returns its object's resourceVersion ("" keeps
// the last one). An error ends the watch.
type eventFunc func(ev watch.Event, at time.Time) (rv string, err error)

// resumableWatch lists one object of t for the current resourceVersion and
// watches from there, with bookmarks, handing every event to handle from a
// goroutine, timestamped on arrival. The API server closes a watch whose
// client falls behind; as a reflector does, the watch is then resumed from
// the last resourceVersion seen, and rewatches counts it. The watch ends
// with ctx, or at its first error, which goes to fail unless ctx has ended.
func resumableWatch(ctx context.Context, t watchTarget, rewatches *atomic.Int64, handle eventFunc, fail func(err error, at time.Time)) error {
	rv, err := t.list(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	wi, err := t.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	end := func(err error, at time.Time) {
		if ctx.Err() == nil {
			fail(fmt.Errorf("watch of %s: %w", t.what, err), at)
		}
	}
	go func() {
		for {
			for ev := range wi.ResultChan() {
				at := time.Now()
				if ev.Type == watch.Error {
					end(fmt.Errorf("%v", ev.Object), at)
					wi.Stop()
					return
				}
				next, err := handle(ev, at)
				if err != nil {
					end(err, at)
					wi.Stop()
					return
				}
				if next != "" {
					rv = next
				}
			}
			wi.Stop()
			if ctx.Err() != nil {
				return
			}
			rewatches.Add(1)
			var err error
			if wi, err = t.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}); err != nil {
				end(err, time.Time{})
				return
			}
		}
	}()
	return nil
}
