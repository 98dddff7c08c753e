package status

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reasons(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return out
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	s := Status{
		Shards: []ShardStatus{
			{ID: "a", State: StateActive, Ready: 3, Desired: 3},
			{ID: "b", State: StateBlocked, Ready: 3, Desired: 3, Mapped: map[string]int{"gitrepos": 2}, Message: "blocked"},
		},
		Warnings: Warnings{UnknownShards: []UnknownShard{{ID: "typo", Count: 1, Objects: []string{"gitrepos x/y"}}}},
	}
	data, err := Encode(s)
	require.NoError(t, err)
	assert.Contains(t, data[shardsKey], "state: Blocked")
	assert.NotContains(t, data, errorKey)
	assert.Equal(t, s, Decode(data))

	empty, err := Encode(Status{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{shardsKey: "[]\n"}, empty)
}

// The admission policy reads one "<id>: <counts>" line per shard that has
// objects, kinds sorted, and nothing for a shard without.
func TestEncodeMappedLines(t *testing.T) {
	data, err := Encode(Status{Shards: []ShardStatus{
		{ID: "a", State: StateActive, Mapped: map[string]int{"helmreleases": 3, "gitrepos": 12}},
		{ID: "empty", State: StateActive},
		{ID: "b", State: StateBlocked, Mapped: map[string]int{"gitrepos": 1}},
	}})
	require.NoError(t, err)
	assert.Equal(t, "a: 12 gitrepos, 3 helmreleases\nb: 1 gitrepos", data[mappedKey])

	empty, err := Encode(oneShard("a", StateActive, ""))
	require.NoError(t, err)
	assert.NotContains(t, empty, mappedKey)
}

// oneShard is a status of one shard, in state, with message.
func oneShard(id, state, message string) Status {
	return Status{Shards: []ShardStatus{{ID: id, State: state, Message: message}}}
}

func TestChangesOnlyOnTransitions(t *testing.T) {
	active := oneShard("b", StateActive, "")
	blocked := oneShard("b", StateBlocked, "2 gitrepos")
	blockedMore := oneShard("b", StateBlocked, "3 gitrepos")

	assert.Equal(t, []string{ReasonShardDeletionBlocked}, reasons(Changes(active, blocked)))
	assert.Empty(t, Changes(blocked, blocked), "an unchanged condition emits nothing")
	assert.Empty(t, Changes(blocked, blockedMore), "a count change is in the status, not a new Event")

	invalid := Status{Error: "bad"}
	assert.Equal(t, []string{ReasonInvalidShardConfig}, reasons(Changes(Status{}, invalid)))
	assert.Empty(t, Changes(invalid, invalid))
	assert.Len(t, Changes(invalid, Status{Error: "worse"}), 1)

	unknown := Status{Warnings: Warnings{UnknownShards: []UnknownShard{{ID: "x", Count: 1}}, NotShardAware: []NotShardAware{{Source: "flux-system/helm-controller", Needs: "--watch-label-selector=!sharding.fluxcd.io/key"}}}}
	assert.Equal(t, []string{ReasonUnknownShard, ReasonSourceNotShardAware}, reasons(Changes(Status{}, unknown)))
	assert.Empty(t, Changes(unknown, unknown))

	conflict := oneShard("a", StateConflict, "m")
	assert.Equal(t, []string{ReasonShardConflict}, reasons(Changes(Status{}, conflict)))

	draining := oneShard("b", StateDraining, "5 objects left")
	drainingLess := oneShard("b", StateDraining, "4 objects left")
	drained := oneShard("b", StateDrained, "")
	assert.Equal(t, []string{ReasonShardDraining}, reasons(Changes(active, draining)))
	assert.Empty(t, Changes(draining, drainingLess), "progress is in the status, not a new Event")
	assert.Equal(t, []string{reasonShardDrained}, reasons(Changes(drainingLess, drained)))
	assert.Equal(t, []string{ReasonShardDeletionBlocked}, reasons(Changes(draining, blocked)), "a pinned object stops the drain")
}

func TestChangesOfFailover(t *testing.T) {
	active := oneShard("a", StateActive, "")
	down := oneShard("a", StateFailedOver, "shard a is down")
	assert.Equal(t, []string{reasonShardUnavailable}, reasons(Changes(active, down)))
	assert.Empty(t, Changes(down, down), "no news while it stays down")
	assert.Equal(t, []string{reasonShardRecovered}, reasons(Changes(down, active)))

	withheld := Status{Shards: active.Shards, Warnings: Warnings{FailoverWithheld: "3 of 4 listed shards are down"}}
	assert.Equal(t, []string{reasonFailoverWithheld}, reasons(Changes(active, withheld)))
	assert.Empty(t, Changes(withheld, withheld))
}

func TestChangesOfWriteFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to Status
		want     []string
	}{
		{"writes start to fail", oneShard("a", StateActive, ""), oneShard("a", StateWriteFailing, "denied: attempt 1"), []string{ReasonShardWriteFailed}},
		{"a retry that fails again is no news", oneShard("a", StateWriteFailing, "denied: attempt 1"), oneShard("a", StateWriteFailing, "denied: attempt 2"), nil},
		{"writes succeed again", oneShard("a", StateWriteFailing, "denied: attempt 2"), oneShard("a", StateActive, ""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, reasons(Changes(tc.from, tc.to)))
		})
	}
}

func TestChangesOfUnknownShardsBeyondTheNamed(t *testing.T) {
	named := Warnings{UnknownShards: []UnknownShard{{ID: "x", Count: 3}}}
	more := named
	more.MoreUnknownShards, more.MoreUnknownObjects = 2, 2
	evs := Changes(Status{Warnings: named}, Status{Warnings: more})
	require.Len(t, evs, 1)
	assert.Equal(t, "and 2 more shard IDs that are not configured, on 2 object(s); the status names the 1 with the most objects", evs[0].Message)
	even := more
	even.MoreUnknownShards, even.MoreUnknownObjects = 200, 300
	assert.Empty(t, Changes(Status{Warnings: more}, Status{Warnings: even}), "the count is in the status, not a new Event")
}

func TestChangesOfCrossShard(t *testing.T) {
	warned := func(count int, objects ...string) Status {
		return Status{Warnings: Warnings{CrossShard: &CrossShard{Count: count, Objects: objects}}}
	}
	one := warned(1, "helmreleases apps/a: r")
	evs := Changes(Status{}, one)
	require.Len(t, evs, 1)
	assert.Equal(t, Event{"Warning", ReasonCrossShardReference,
		"1 object(s) have part of their work on another shard than their own, where it fails or is reconciled by the wrong controllers: helmreleases apps/a: r"}, evs[0])
	assert.Empty(t, Changes(one, one), "an unchanged warning emits nothing")

	two := warned(7, "helmreleases apps/a: r", "helmops ns/b: r")
	evs = Changes(one, two)
	require.Len(t, evs, 1, "a newly named object is news")
	assert.Contains(t, evs[0].Message, "7 object(s)")
	assert.Contains(t, evs[0].Message, "(and 5 more, not named)")
	assert.Empty(t, Changes(two, warned(9, "helmreleases apps/a: r", "helmops ns/b: r")), "the count is in the status, not a new Event")
	assert.Empty(t, Changes(two, one), "an object that was fixed is no warning")
	assert.Empty(t, Changes(one, Status{}), "nor is the warning's end")

	data, err := Encode(two)
	require.NoError(t, err)
	assert.Contains(t, data[warningsKey], "crossShard:")
	assert.Equal(t, two.Warnings, Decode(data).Warnings)
	assert.Empty(t, Changes(Decode(data), two), "a restart that reads the status back emits nothing")
}
