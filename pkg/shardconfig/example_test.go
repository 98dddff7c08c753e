package shardconfig_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// describe returns a shard as one line: its ID and the settings it has.
func describe(s shardconfig.Shard) string {
	parts := []string{s.ID}
	for _, k := range slices.Sorted(maps.Keys(s.NodeSelector)) {
		parts = append(parts, fmt.Sprintf("nodeSelector %s=%s", k, s.NodeSelector[k]))
	}
	for _, t := range s.Tolerations {
		parts = append(parts, fmt.Sprintf("toleration %s %s %s", t.Key, t.Operator, t.Effect))
	}
	if r := s.Resources; r != nil {
		for _, l := range []struct {
			what string
			list corev1.ResourceList
		}{{"requests", r.Requests}, {"limits", r.Limits}} {
			for _, name := range slices.Sorted(maps.Keys(l.list)) {
				q := l.list[name]
				parts = append(parts, fmt.Sprintf("%s.%s=%s", l.what, name, q.String()))
			}
		}
	}
	if s.Replicas != nil {
		parts = append(parts, fmt.Sprintf("replicas=%d", *s.Replicas))
	}
	return strings.Join(parts, ", ")
}

// shardLines parses data.shards into one line a shard.
func shardLines(value string) ([]string, error) {
	shards, err := shardconfig.ParseShards(value)
	if len(shards) == 0 {
		return []string{"no shards"}, err
	}
	lines := make([]string, 0, len(shards))
	for _, s := range shards {
		lines = append(lines, describe(s))
	}
	return lines, err
}

// placementLines parses data.placement into one line.
func placementLines(value string) ([]string, error) {
	p, err := shardconfig.ParsePlacement(value)
	return []string{describePlacement(p)}, err
}

// show prints each ConfigMap value as it is written in the ConfigMap's
// YAML, then the lines that parse returns for it, or its error.
func show(key string, values []string, parse func(string) ([]string, error)) {
	for _, value := range values {
		printValue("", key, value)
		lines, err := parse(value)
		if err != nil {
			fmt.Println("  error:", err)
			continue
		}
		for _, l := range lines {
			fmt.Println("  =>", l)
		}
	}
}

// printValue prints "key: value" as YAML has it: a block for a value of
// several lines, else a quoted string.
func printValue(indent, key, value string) {
	if strings.Contains(value, "\n") {
		body := strings.ReplaceAll(strings.TrimSuffix(value, "\n"), "\n", "\n  "+indent)
		fmt.Printf("%s%s: |\n%s  %s\n", indent, key, indent, body)
		return
	}
	fmt.Printf("%s%s: %q\n", indent, key, value)
}

// data.shards takes a plain list of IDs, separated by commas, spaces or
// newlines, or a YAML list whose items are IDs or shards with their own
// placement. A value that is empty, has a bad ID or sets anything else is
// an error, never an empty list: only "[]" removes every shard.
func ExampleParseShards() {
	show("shards", []string{
		"shard0,shard1",
		"shard0 shard1\nshard2\n",
		`- shard0
- id: gpu
  nodeSelector: {pool: gpu}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  resources: {requests: {memory: 256Mi}, limits: {memory: 1Gi}}
  replicas: 2
`,
		"[]",
		"",
		"shard0,Shard_1",
		"- {id: shard0, image: evil}",
	}, shardLines)
	// Output:
	// shards: "shard0,shard1"
	//   => shard0
	//   => shard1
	// shards: |
	//   shard0 shard1
	//   shard2
	//   => shard0
	//   => shard1
	//   => shard2
	// shards: |
	//   - shard0
	//   - id: gpu
	//     nodeSelector: {pool: gpu}
	//     tolerations:
	//     - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
	//     resources: {requests: {memory: 256Mi}, limits: {memory: 1Gi}}
	//     replicas: 2
	//   => shard0
	//   => gpu, nodeSelector pool=gpu, toleration nvidia.com/gpu Exists NoSchedule, requests.memory=256Mi, limits.memory=1Gi, replicas=2
	// shards: "[]"
	//   => no shards
	// shards: ""
	//   error: shards: the list is empty; to remove every shard, list none explicitly with "[]"
	// shards: "shard0,Shard_1"
	//   error: shards[1]: shard ID "Shard_1" is invalid: use lower-case letters, digits and '-', starting and ending with a letter or digit
	// shards: "- {id: shard0, image: evil}"
	//   error: shards: not a valid YAML list of shard IDs or shard objects {id, nodeSelector, tolerations, resources, replicas}: error unmarshaling JSON: while decoding JSON: error unmarshaling JSON: while decoding JSON: json: unknown field "image"
}

// describePlacement returns the settings placement runs with, the
// defaults included.
func describePlacement(p shardconfig.Placement) string {
	if !p.Enabled {
		return "placement off"
	}
	namespaces := "all"
	if len(p.Namespaces) > 0 {
		namespaces = strings.Join(p.Namespaces, ",")
	}
	s := "placement on: namespaces=" + namespaces
	if p.Selector != nil {
		s += fmt.Sprintf(" selector=%q", p.Selector.String())
	}
	switch p.GroupBy {
	case shardconfig.GroupByNamespace:
		s += " groupBy=namespace"
	case shardconfig.GroupByLabel:
		s += " groupBy=label:" + p.GroupLabel
	}
	s += fmt.Sprintf(" threshold=%s maxMoves=%d interval=%s cooldown=%s", p.Threshold.String(), p.MaxMoves, p.Interval, p.Cooldown)
	if p.FailoverAfter > 0 {
		s += fmt.Sprintf(" failoverAfter=%s failoverMaxDown=%s", p.FailoverAfter, p.FailoverMaxDown.String())
	}
	return s
}

// A shardkeeper ConfigMap: the shard list, placement turned on by its key,
// and the annotations that force a deletion or drain a shard. Whatever is
// wrong in it rejects all of it, so that a slip never reads as fewer shards.
func ExampleParse() {
	configMaps := []struct {
		data        map[string]string
		annotations map[string]string
	}{
		{data: map[string]string{"shards": "shard0,shard1"}},
		{
			data: map[string]string{"shards": "shard0,shard1,shard2", "placement": "namespaces: [fleet-default]\nfailoverAfter: 5m\n"},
			annotations: map[string]string{
				shardconfig.ForceDeleteAnnotation: "shard3",
				shardconfig.DrainAnnotation:       "shard2",
			},
		},
		{data: map[string]string{"shards": "auto", "placement": ""}},
		{data: map[string]string{"shard": "shard0"}},
		{data: map[string]string{"shards": "auto"}},
	}
	for _, cm := range configMaps {
		fmt.Println("---")
		for _, part := range []struct {
			name   string
			values map[string]string
		}{{"annotations", cm.annotations}, {"data", cm.data}} {
			if len(part.values) > 0 {
				fmt.Println(part.name + ":")
			}
			for _, k := range slices.Sorted(maps.Keys(part.values)) {
				printValue("  ", k, part.values[k])
			}
		}
		cfg, err := shardconfig.Parse(cm.data, nil, cm.annotations)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		shards := "auto, sized by placement"
		if !cfg.Auto {
			var ids []string
			for _, s := range cfg.Shards {
				ids = append(ids, s.ID)
			}
			shards = strings.Join(ids, ", ")
		}
		fmt.Printf("=> shards: %s; %s\n", shards, describePlacement(cfg.Placement))
		if !cfg.Force.Empty() || len(cfg.Drain) > 0 {
			fmt.Printf("=> force-delete: %s; drain: %s\n", cfg.Force, strings.Join(cfg.Drain, ", "))
		}
	}
	// Output:
	// ---
	// data:
	//   shards: "shard0,shard1"
	// => shards: shard0, shard1; placement off
	// ---
	// annotations:
	//   shardkeeper.io/drain: "shard2"
	//   shardkeeper.io/force-delete: "shard3"
	// data:
	//   placement: |
	//     namespaces: [fleet-default]
	//     failoverAfter: 5m
	//   shards: "shard0,shard1,shard2"
	// => shards: shard0, shard1, shard2; placement on: namespaces=fleet-default threshold=10% maxMoves=50 interval=30s cooldown=10m0s failoverAfter=5m0s failoverMaxDown=50%
	// => force-delete: shard3; drain: shard2
	// ---
	// data:
	//   placement: ""
	//   shards: "auto"
	// => shards: auto, sized by placement; placement on: namespaces=all threshold=10% maxMoves=50 interval=30s cooldown=10m0s
	// ---
	// data:
	//   shard: "shard0"
	// error: the ConfigMap has no "shards" key; set data.shards to a list of shard IDs, e.g. "shard0,shard1"
	// ---
	// data:
	//   shards: "auto"
	// error: shards: "auto" sizes the shard list from the objects placement assigns; add a "placement" key (it may be empty) to turn placement on
}

// data.placement is a YAML object whose fields are all optional: the key
// alone, even empty, turns placement on with the defaults. A misspelt
// field or a value out of bounds is an error, not a default.
func ExampleParsePlacement() {
	show("placement", []string{
		"",
		"namespaces: [fleet-default, flux-apps]\nselector: team!=platform\nthreshold: 5\nmaxMoves: 20\ninterval: 1m\n",
		"failoverAfter: 2m\nfailoverMaxDown: 1\n",
		"groupBy: label\ngroupLabel: example.com/tenant\n",
		"groupBy: label\n",
		"maxMove: 20\n",
		"interval: 100ms\n",
	}, placementLines)
	// Output:
	// placement: ""
	//   => placement on: namespaces=all threshold=10% maxMoves=50 interval=30s cooldown=10m0s
	// placement: |
	//   namespaces: [fleet-default, flux-apps]
	//   selector: team!=platform
	//   threshold: 5
	//   maxMoves: 20
	//   interval: 1m
	//   => placement on: namespaces=fleet-default,flux-apps selector="team!=platform" threshold=5 maxMoves=20 interval=1m0s cooldown=10m0s
	// placement: |
	//   failoverAfter: 2m
	//   failoverMaxDown: 1
	//   => placement on: namespaces=all threshold=10% maxMoves=50 interval=30s cooldown=10m0s failoverAfter=2m0s failoverMaxDown=1
	// placement: |
	//   groupBy: label
	//   groupLabel: example.com/tenant
	//   => placement on: namespaces=all groupBy=label:example.com/tenant threshold=10% maxMoves=50 interval=30s cooldown=10m0s
	// placement: |
	//   groupBy: label
	//   error: placement.groupBy: label needs groupLabel, the label whose value names a group
	// placement: |
	//   maxMove: 20
	//   error: placement: not a valid YAML object {namespaces, selector, groupBy, groupLabel, threshold, maxMoves, interval, cooldown, objectsPerShard, minShards, maxShards, failoverAfter, failoverMaxDown}: error unmarshaling JSON: while decoding JSON: json: unknown field "maxMove"
	// placement: |
	//   interval: 100ms
	//   error: placement.interval 100ms: must be between 1s and 1h0m0s
}
