package balance_test

import (
	"fmt"
	"time"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
)

// One placement round. shard0 carries most of the load, shard2 was just
// added and shard3 is draining. The two new GitRepos are assigned whatever
// the budget, since nothing serves them until they have a shard; the drain
// and the rebalance share the budget of MaxMoves paced moves, the drain
// first. On shard0, billing is pinned (its label was set by hand): it
// counts as load but never moves, and neither does api, which placement
// moved a minute ago, within the cooldown.
func ExampleMoves() {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	in := balance.Input{
		Objects: []balance.Object{
			{Key: "gitrepos fleet-default/api", Shard: "shard0", Movable: true, MovedAt: now.Add(-time.Minute)},
			{Key: "gitrepos fleet-default/billing", Shard: "shard0", Movable: false},
			{Key: "gitrepos fleet-default/checkout", Shard: "shard0", Movable: true},
			{Key: "gitrepos fleet-default/frontend", Shard: "shard0", Movable: true},
			{Key: "gitrepos fleet-default/search", Shard: "shard0", Movable: true},
			{Key: "gitrepos fleet-default/shipping", Shard: "shard0", Movable: true},
			{Key: "gitrepos fleet-default/ledger", Shard: "shard1", Movable: true},
			{Key: "gitrepos fleet-default/legacy", Shard: "shard3", Movable: true},
			{Key: "gitrepos fleet-default/new-a", Movable: true},
			{Key: "gitrepos fleet-default/new-b", Movable: true},
		},
		Targets:   []string{"shard0", "shard1", "shard2"},
		Draining:  []string{"shard3"},
		Now:       now,
		Threshold: 1,
		MaxMoves:  3,
		Cooldown:  10 * time.Minute,
	}
	for _, m := range balance.Moves(in) {
		from := m.From
		if from == "" {
			from = "(none)"
		}
		fmt.Printf("%-9s %-31s %s -> %s paced=%v\n", m.Reason, m.Key, from, m.To, m.Paced)
	}
	// Output:
	// Assign    gitrepos fleet-default/new-a    (none) -> shard2 paced=false
	// Assign    gitrepos fleet-default/new-b    (none) -> shard1 paced=false
	// Drain     gitrepos fleet-default/legacy   shard3 -> shard2 paced=true
	// Rebalance gitrepos fleet-default/checkout shard0 -> shard1 paced=true
	// Rebalance gitrepos fleet-default/frontend shard0 -> shard2 paced=true
}

// ShardCount sizes `shards: auto`, here with objectsPerShard 100 and
// between 1 and 20 shards. The first answer covers the load; after that
// the count only grows above 120% of what the shards hold and only shrinks
// below 60%, so that a load hovering at a boundary does not add and remove
// a shard (and move objects) every round.
func ExampleShardCount() {
	const perShard, minShards, maxShards = 100, 1, 20
	for _, c := range []struct{ current, objects int }{
		{0, 0},
		{0, 250},
		{3, 330},
		{3, 370},
		{3, 190},
		{3, 170},
		{20, 5000},
	} {
		fmt.Printf("current %-2d objects %-4d => %d shards\n", c.current, c.objects,
			balance.ShardCount(c.current, c.objects, perShard, minShards, maxShards))
	}
	// Output:
	// current 0  objects 0    => 1 shards
	// current 0  objects 250  => 3 shards
	// current 3  objects 330  => 3 shards
	// current 3  objects 370  => 4 shards
	// current 3  objects 190  => 3 shards
	// current 3  objects 170  => 2 shards
	// current 20 objects 5000 => 20 shards
}
