package shardset

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// timeline records when a reconcile reached each of its steps and logs
// them in one line at debug level: where the time of a burst goes (its
// parse, its decision, its writes, its status and Events) is then read
// from the log beside the API server's audit log, as `make bench` does.
// With debug logging off nothing is recorded: a nil timeline ignores
// every call.
type timeline struct {
	start time.Time
	marks []timelineMark
}

type timelineMark struct {
	step string
	at   time.Time
}

// startTimeline starts the timeline of a reconcile, nil unless debug
// logging is on.
func startTimeline() *timeline {
	if !logrus.IsLevelEnabled(logrus.DebugLevel) {
		return nil
	}
	return &timeline{start: time.Now()}
}

// mark records that the reconcile reached step now.
func (t *timeline) mark(step string) {
	if t != nil {
		t.markAt(step, time.Now())
	}
}

// markAt records that the reconcile reached step at a time measured
// elsewhere, such as a write sent by another goroutine.
func (t *timeline) markAt(step string, at time.Time) {
	if t != nil && !at.IsZero() {
		t.marks = append(t.marks, timelineMark{step, at})
	}
}

// log writes the timeline: its start as an RFC 3339 time with nanoseconds,
// to be set beside other clocks of the same machine, and each step as
// "step=+ms" after it.
func (t *timeline) log(log *logrus.Entry) {
	if t == nil {
		return
	}
	var b strings.Builder
	for i, m := range t.marks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(m.step)
		b.WriteString("=+")
		b.WriteString(strconv.FormatFloat(float64(m.at.Sub(t.start))/float64(time.Millisecond), 'f', 3, 64))
	}
	log.WithFields(logrus.Fields{"start": t.start.UTC().Format(time.RFC3339Nano), "steps": b.String()}).Debug("reconcile timeline")
}

// writeTimes are when a set of parallel writes sent its first request and
// had its last answer.
type writeTimes struct {
	first atomic.Int64 // UnixNano; 0 until set
	last  atomic.Int64
}

// sent records a request about to be sent; only the first counts.
func (w *writeTimes) sent() {
	w.first.CompareAndSwap(0, time.Now().UnixNano())
}

// answered records an answer; the latest counts.
func (w *writeTimes) answered() {
	now := time.Now().UnixNano()
	for {
		old := w.last.Load()
		if now <= old || w.last.CompareAndSwap(old, now) {
			return
		}
	}
}

// mark puts both times on t.
func (w *writeTimes) mark(t *timeline) {
	if t == nil {
		return
	}
	if n := w.first.Load(); n != 0 {
		t.markAt("first-write", time.Unix(0, n))
	}
	if n := w.last.Load(); n != 0 {
		t.markAt("last-answer", time.Unix(0, n))
	}
}
