package expect

import (
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestSeen(t *testing.T) {
	created := write{resourceVersion: "120", created: true}
	updated := write{resourceVersion: "120"}
	deleted := write{uid: "u1", deleted: true}
	for _, tc := range []struct {
		name   string
		write  write
		cached Cached
		want   bool
	}{
		{"created, not in the cache yet", created, Cached{}, false},
		{"created, the cache holds an older version", created, Cached{ResourceVersion: "119", Exists: true}, false},
		{"created, the cache holds an older version of fewer digits", write{resourceVersion: "1000", created: true}, Cached{ResourceVersion: "999", Exists: true}, false},
		{"updated, the cache holds the version before", updated, Cached{ResourceVersion: "119", Exists: true}, false},
		{"updated, since deleted", updated, Cached{}, true},
		{"written, the cache holds that version", created, Cached{ResourceVersion: "120", Exists: true}, true},
		{"written, the cache holds a newer version", created, Cached{ResourceVersion: "1200", Exists: true}, true},
		{"written, versions that are not integers, different", write{resourceVersion: "b", created: true}, Cached{ResourceVersion: "a", Exists: true}, false},
		{"written, versions that are not integers, equal", write{resourceVersion: "b"}, Cached{ResourceVersion: "b", Exists: true}, true},
		{"deleted, still in the cache", deleted, Cached{ResourceVersion: "5", UID: "u1", Exists: true}, false},
		{"deleted, gone from the cache", deleted, Cached{}, true},
		{"deleted, made again by someone else", deleted, Cached{ResourceVersion: "6", UID: "u2", Exists: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, seen(tc.write, tc.cached))
		})
	}
}

// testClock is a clock the test moves by hand.
type testClock struct{ now time.Time }

func (c *testClock) advance(d time.Duration) { c.now = c.now.Add(d) }

// newTestWrites returns expectations with a one-minute TTL on a clock the
// test moves, and a cache of objects the test fills, with its lookup.
func newTestWrites() (*Writes, *testClock, map[string]Cached, func(string) Cached) {
	clock := &testClock{now: time.Unix(1000, 0)}
	w := New(time.Minute)
	w.now = func() time.Time { return clock.now }
	cache := map[string]Cached{}
	return w, clock, cache, func(key string) Cached { return cache[key] }
}

func TestWritesUnseen(t *testing.T) {
	w, clock, cache, lookup := newTestWrites()

	w.Created("ns/b", "10")
	w.Created("ns/a", "11")
	w.Deleted("ns/c", types.UID("u"))
	cache["ns/c"] = Cached{ResourceVersion: "3", UID: "u", Exists: true}

	unseen, expired := w.unseen(lookup)
	assert.Equal(t, []string{"ns/a", "ns/b", "ns/c"}, unseen, "sorted, none seen yet")
	assert.Empty(t, expired)

	cache["ns/a"] = Cached{ResourceVersion: "11", Exists: true}
	delete(cache, "ns/c")
	unseen, _ = w.unseen(lookup)
	assert.Equal(t, []string{"ns/b"}, unseen)
	assert.Equal(t, 1, w.Len(), "what was seen is forgotten")

	// A later write of the same object replaces the earlier one.
	w.Updated("ns/a", "20")
	unseen, _ = w.unseen(lookup)
	assert.Equal(t, []string{"ns/a", "ns/b"}, unseen)

	clock.advance(time.Minute)
	unseen, expired = w.unseen(lookup)
	assert.Empty(t, unseen)
	assert.Equal(t, []string{"ns/a", "ns/b"}, expired, "forgotten after the TTL, and said so")
	assert.Zero(t, w.Len())
}

func TestBehind(t *testing.T) {
	w, clock, cache, lookup := newTestWrites()
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	entry := log.WithField("caller", "test")

	assert.False(t, w.Behind(lookup, entry), "nothing written, nothing to wait for")
	assert.Empty(t, hook.AllEntries())

	w.Created("ns/a", "5")
	w.Created("ns/b", "6")
	assert.True(t, w.Behind(lookup, entry), "the cache holds neither create")
	require.Len(t, hook.AllEntries(), 1)
	wait := hook.LastEntry()
	assert.Equal(t, logrus.DebugLevel, wait.Level)
	assert.Equal(t, logrus.Fields{"caller": "test", "unseen": 2, "first": "ns/a"}, wait.Data)

	cache["ns/a"] = Cached{ResourceVersion: "5", Exists: true}
	clock.advance(time.Minute)
	hook.Reset()
	assert.False(t, w.Behind(lookup, entry), "one seen, the other given up for age")
	require.Len(t, hook.AllEntries(), 1)
	lost := hook.LastEntry()
	assert.Equal(t, logrus.WarnLevel, lost.Level)
	assert.Equal(t, []string{"ns/b"}, lost.Data["writes"])
	assert.Contains(t, lost.Message, "within 1m0s")
	assert.Zero(t, w.Len())
}
