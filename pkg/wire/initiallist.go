package wire

import (
	"fmt"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/version"
	apiversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// InitialList is how the initial state of each mapped kind is read.
type InitialList string

const (
	// InitialListAuto reads in pages where the API server serves every
	// page from its watch cache (Kubernetes 1.34 on), but streams a kind
	// of more than autoStreamAbove objects, and every kind on an older
	// API server.
	InitialListAuto InitialList = "auto"
	// InitialListPages reads a paged list, ListPageSize objects a page.
	InitialListPages InitialList = "pages"
	// InitialListStream reads a watch with sendInitialEvents, falling back
	// to pages where the API server refuses one (before 1.32).
	InitialListStream InitialList = "stream"
)

// ParseInitialList parses an --initial-list value.
func ParseInitialList(s string) (InitialList, error) {
	switch l := InitialList(s); l {
	case InitialListAuto, InitialListPages, InitialListStream:
		return l, nil
	}
	return "", fmt.Errorf("initial list %q: want auto, pages or stream", s)
}

// ListPageSize pages the initial state where it is listed (see
// readsPages) or the API server cannot stream it as a watch (before
// 1.32); each page is stripped before the next is asked for
// (initialSync).
const ListPageSize = 500

// pagesFromCacheSince is the first release whose API server serves a
// paged list's later pages from the snapshots of its watch cache
// (ListFromCacheSnapshot, beta and on by default from 1.34, in
// k8s.io/apiserver/pkg/features/kube_features.go). Before it, every page
// after the first is read from etcd (delegator.ShouldDelegateList in
// k8s.io/apiserver/pkg/storage/cacher/delegator).
var pagesFromCacheSince = version.MajorMinor(1, 34)

// autoStreamAbove is how many objects of a kind InitialListAuto still
// reads in pages. The watch cache answers each page by collecting every
// object from the page's first key to the end of the kind and then
// keeping a page of them (OrderedListPrefix in
// k8s.io/apiserver/pkg/storage/cacher/store/store_btree.go), so a paged
// list of n objects costs it in the order of n² / pageSize, and the
// stream, linear, is the cheaper from some size on. At 25,000 objects of
// each of four kinds the pages cost the API server less; at 250,000 of
// each, a paged LIST of them all took 237 s and the stream 99 s.
const autoStreamAbove = 50_000

// readsPages decides how the initial state is read, given the API
// server's version (nil if it could not be had).
//
// A paged list from the watch cache costs the API server less than the
// stream does for the same objects: the stream deep-copies every
// custom resource it sends (getMutableObject in
// k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go), and garbage
// collects the copies, and frames each as an event, whose JSON
// encoding/json compacts once more (an Unstructured is a json.Marshaler);
// the list hands the cache's own objects to one encoding. Before 1.34
// the pages after the first are read from etcd and decoded afresh, where
// the stream is served from the cache.
func readsPages(mode InitialList, server *apiversion.Info) bool {
	switch mode {
	case InitialListPages:
		return true
	case InitialListStream:
		return false
	}
	if server == nil {
		return false
	}
	v, err := version.ParseGeneric(server.GitVersion)
	if err != nil {
		// Some distributions put more than a release in gitVersion;
		// major and minor ("1", "34+") are what the API guarantees.
		if v, err = version.ParseGeneric(server.Major + "." + trimPlus(server.Minor)); err != nil {
			return false
		}
	}
	return v.AtLeast(pagesFromCacheSince)
}

func trimPlus(minor string) string {
	if n := len(minor); n > 0 && minor[n-1] == '+' {
		return minor[:n-1]
	}
	return minor
}

// Reading is how the initial state of every kind is read, as Decide
// settled it.
type Reading struct {
	// Pages lists the initial state in pages of ListPageSize; without it,
	// the state streams as a watch.
	Pages bool
	// StreamAbove, with Pages, streams instead a kind whose first page
	// says that more than StreamAbove objects remain.
	StreamAbove int64
	// PageSize, when set, replaces ListPageSize: the tests read a few
	// objects in several pages.
	PageSize int64
}

// Decide settles mode against the API server's version, which it asks of
// disc only for InitialListAuto: call it when the first kind starts, so
// that a daemon with no mapped kind served never asks. A version that
// cannot be had leaves the stream, which every server from 1.32 serves from
// its cache.
func Decide(mode InitialList, disc discovery.ServerVersionInterface) Reading {
	var server *apiversion.Info
	if mode == InitialListAuto || mode == "" {
		v, err := disc.ServerVersion()
		if err != nil {
			logrus.WithError(err).Warn("reading the API server's version; the mapped objects' initial state is streamed")
		}
		server = v
	}
	r := Reading{Pages: readsPages(mode, server)}
	how := "streamed"
	if r.Pages {
		how = fmt.Sprintf("listed in pages of %d", ListPageSize)
		if mode != InitialListPages {
			r.StreamAbove = autoStreamAbove
			how += fmt.Sprintf(", and streamed for a kind of more than %d objects", autoStreamAbove)
		}
	}
	logrus.WithField("initialList", string(mode)).Infof("the mapped objects' initial state is %s", how)
	return r
}
