package shardset

import (
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoonest(t *testing.T) {
	clock := requeue{after: 30 * time.Second, reason: reasonFailoverClock}
	unseen := requeue{after: time.Second, reason: reasonWritesUnseen}
	unsynced := requeue{after: time.Second, reason: reasonMappedUnsynced}
	paced := requeue{after: 300 * time.Millisecond, reason: reasonStatusPaced}
	for name, tc := range map[string]struct {
		in   []requeue
		want requeue
	}{
		"none":                       {want: requeue{}},
		"nothing asked":              {in: []requeue{{}, {}}, want: requeue{}},
		"one":                        {in: []requeue{clock}, want: clock},
		"the soonest, with its why":  {in: []requeue{clock, paced, unseen}, want: paced},
		"in any order":               {in: []requeue{unseen, paced, clock}, want: paced},
		"a zero never wins":          {in: []requeue{{}, clock, {}}, want: clock},
		"a tie keeps the first":      {in: []requeue{unsynced, unseen}, want: unsynced},
		"a negative delay is no ask": {in: []requeue{{after: -time.Second, reason: "past"}, clock}, want: clock},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, soonest(tc.in...))
		})
	}
}

// A reconcile that several steps need to run again enqueues its key once,
// at the soonest of them, and its debug log says why.
func TestReconcileRequeuesOnceAtTheSoonest(t *testing.T) {
	e := removalEnv(t)
	hooks := logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{})
	logs := logtest.NewGlobal()
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.DebugLevel)
	t.Cleanup(func() {
		logrus.SetLevel(level)
		logrus.StandardLogger().ReplaceHooks(hooks)
	})
	// Shard b's removal waits for the caches (a recheck after liveRecheck),
	// and the status that says so is held back by the pacing, whose wait
	// ends sooner.
	e.mapped.Ahead = map[string]string{"b": "gitrepos team/payments"}
	now := e.c.now()
	e.c.now = func() time.Time { return now }
	e.c.lastStatusWrite = now.Add(-statusInterval / 4)
	require.Less(t, statusInterval*3/4, liveRecheck)

	_, err := e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))

	require.NoError(t, err)
	assert.Equal(t, []enqueued{{Key: shardCM.String(), After: statusInterval * 3 / 4}}, e.configMaps.enqueues)
	assert.Equal(t, []string{reasonStatusPaced}, requeueReasons(logs))

	// Once the status is written, the removal's recheck is what is left.
	now = now.Add(statusInterval)
	e.configMaps.enqueues = nil
	logs.Reset()
	_, err = e.c.onConfigMap(shardCM.String(), shardConfigMapObject("a", ""))
	require.NoError(t, err)
	assert.Equal(t, []enqueued{{Key: shardCM.String(), After: liveRecheck}}, e.configMaps.enqueues)
	assert.Equal(t, []string{reasonLiveMapped}, requeueReasons(logs))
}

// requeueReasons returns the reasons that the requeues logged.
func requeueReasons(logs *logtest.Hook) []string {
	var out []string
	for _, entry := range logs.AllEntries() {
		if entry.Message == "reconcile requeued" {
			out = append(out, entry.Data["reason"].(string))
		}
	}
	return out
}
