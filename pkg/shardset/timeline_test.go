package shardset

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTimelineOnlyAtDebugLevel(t *testing.T) {
	level := logrus.GetLevel()
	defer logrus.SetLevel(level)

	logrus.SetLevel(logrus.InfoLevel)
	tl := startTimeline()
	assert.Nil(t, tl, "nothing is recorded without debug logging")
	tl.mark("parsed") // a nil timeline ignores every call
	tl.log(logrus.NewEntry(logrus.StandardLogger()))

	logrus.SetLevel(logrus.DebugLevel)
	require.NotNil(t, startTimeline())
}

func TestTimelineLogsItsSteps(t *testing.T) {
	var out bytes.Buffer
	logger := logrus.New()
	logger.SetOutput(&out)
	logger.SetFormatter(&logrus.JSONFormatter{})
	logger.SetLevel(logrus.DebugLevel)

	start := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	tl := &timeline{start: start}
	tl.markAt("parsed", start.Add(150*time.Microsecond))
	var w writeTimes
	w.first.Store(start.Add(2 * time.Millisecond).UnixNano())
	w.last.Store(start.Add(200 * time.Millisecond).UnixNano())
	w.mark(tl)
	tl.markAt("skipped", time.Time{})
	tl.log(logrus.NewEntry(logger))

	var line map[string]string
	require.NoError(t, json.Unmarshal(out.Bytes(), &line))
	assert.Equal(t, "reconcile timeline", line["msg"])
	assert.Equal(t, "2026-12-02T06:00:00Z", line["start"])
	assert.Equal(t, "parsed=+0.150 first-write=+2.000 last-answer=+200.000", line["steps"], "a zero time is no step")
}

func TestWriteTimesKeepTheFirstSendAndTheLastAnswer(t *testing.T) {
	var w writeTimes
	w.sent()
	first := w.first.Load()
	time.Sleep(time.Millisecond)
	w.sent()
	assert.Equal(t, first, w.first.Load(), "only the first send counts")
	w.answered()
	last := w.last.Load()
	assert.GreaterOrEqual(t, last, first)
	w.last.Store(last + int64(time.Hour))
	w.answered()
	assert.Equal(t, last+int64(time.Hour), w.last.Load(), "an earlier answer does not move the last one back")
}
