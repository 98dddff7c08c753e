package balance

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestShardCount(t *testing.T) {
	tests := []struct {
		name                                 string
		current, objects, perShard, min, max int
		want                                 int
	}{
		{name: "first: ceil", current: 0, objects: 1001, perShard: 100, min: 1, want: 11},
		{name: "first: exact", current: 0, objects: 1000, perShard: 100, min: 1, want: 10},
		{name: "first: no objects", current: 0, objects: 0, perShard: 100, min: 0, want: 1},
		{name: "first: min", current: 0, objects: 50, perShard: 100, min: 3, want: 3},
		{name: "first: max", current: 0, objects: 5000, perShard: 100, min: 1, max: 8, want: 8},
		{name: "first: max below min", current: 0, objects: 5000, perShard: 100, min: 4, max: 2, want: 4},
		{name: "grow", current: 10, objects: 1201, perShard: 100, min: 1, want: 13},
		{name: "at grow boundary: keep", current: 10, objects: 1200, perShard: 100, min: 1, want: 10},
		{name: "above ceil but inside band: keep", current: 10, objects: 1150, perShard: 100, min: 1, want: 10},
		{name: "grow clamped by max", current: 10, objects: 5000, perShard: 100, min: 1, max: 12, want: 12},
		{name: "shrink", current: 10, objects: 599, perShard: 100, min: 1, want: 6},
		{name: "at shrink boundary: keep", current: 10, objects: 600, perShard: 100, min: 1, want: 10},
		{name: "shrink clamped by min", current: 10, objects: 10, perShard: 100, min: 4, want: 4},
		{name: "shrink to nothing: one", current: 3, objects: 0, perShard: 100, min: 0, want: 1},
		{name: "keep clamped into max", current: 10, objects: 1000, perShard: 100, min: 1, max: 6, want: 6},
		{name: "keep clamped into min", current: 2, objects: 200, perShard: 100, min: 5, want: 5},
		{name: "perShard < 1 counts as 1", current: 0, objects: 7, perShard: 0, min: 1, want: 7},
		{name: "negative objects", current: 0, objects: -5, perShard: 10, min: 1, want: 1},
		{name: "huge capacity shrinks", current: math.MaxInt, objects: 10, perShard: math.MaxInt, min: 1, want: 1},
		{name: "huge objects grow", current: 1, objects: math.MaxInt, perShard: 1 << 40, min: 1, want: math.MaxInt>>40 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ShardCount(tt.current, tt.objects, tt.perShard, tt.min, tt.max))
		})
	}
}

func TestCountHysteresis(t *testing.T) {
	// A load hovering around a boundary keeps the shard count.
	n := ShardCount(0, 1000, 100, 1, 0)
	for _, objects := range []int{1001, 999, 1100, 950, 1010} {
		n = ShardCount(n, objects, 100, 1, 0)
		assert.Equal(t, 10, n, "objects %d", objects)
	}
}
