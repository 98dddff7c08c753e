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
	var figures []string
	for _, r := range b.rows() {
		figures = append(figures, r.figure)
	}
	assert.Equal(t, []string{
		"mean reconcile across a patch adding a shard, 1,000 objects (median of 5)",
		"mean reconcile across a patch adding a shard, 100,000 objects (median of 3)",
	}, figures)
}
