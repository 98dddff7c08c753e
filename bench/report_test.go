package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLatencyRowsCountTheWindowsMade(t *testing.T) {
	ms := time.Millisecond
	b := &bench{runs: 3, latencyRuns: 5}
	b.res.levels = []*level{
		{objects: 1000, addMean: []time.Duration{20 * ms, 22 * ms, 24 * ms, 21 * ms, 23 * ms}},
		// A part stopped after three windows of the largest count.
		{objects: 100000, addMean: []time.Duration{30 * ms, 33 * ms, 27 * ms}},
	}
	assert.Equal(t, []string{
		"mean reconcile across a patch adding a shard, 1,000 objects (median of 5)",
		"mean reconcile across a patch adding a shard, 100,000 objects (median of 3)",
	}, figures(b))
}

func TestMemoryAndStartUpRowsCountTheRunsMade(t *testing.T) {
	mib := int64(1 << 20)
	s := time.Second
	b := &bench{runs: 3, latencyRuns: 5}
	b.res.levels = []*level{
		// A part stopped after two runs of the largest count.
		{objects: 100000,
			mem:       []memory{{RSS: 70 * mib}, {RSS: 72 * mib}},
			refMem:    []memory{{RSS: 900 * mib}, {RSS: 940 * mib}},
			ready:     []time.Duration{s, 2 * s},
			counted:   []time.Duration{5 * s, 6 * s},
			refSynced: []time.Duration{15 * s, 16 * s}},
	}
	assert.Equal(t, []string{
		"RSS with 100,000 mapped objects (median of 2)",
		"start-up to /readyz 200, 100,000 objects (median of 2)",
		"start-up to every object counted, 100,000 objects (median of 2)",
	}, figures(b))
}

// figures are the names of the summary's rows.
func figures(b *bench) []string {
	var out []string
	for _, r := range b.rows() {
		out = append(out, r.figure)
	}
	return out
}
