package shardconfig

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

const (
	// PlacementKey is the ConfigMap data key whose presence turns placement
	// on: shardkeeper then labels the objects in its scope itself.
	PlacementKey = "placement"
	// DrainAnnotation lists listed shards whose objects placement moves
	// away; the shard stays until it is removed from the list.
	DrainAnnotation = "shardkeeper.io/drain"
	// auto as the value of data.shards lets placement size the shard list.
	auto = "auto"
	// autoPrefix starts the names of the shards that "auto" makes.
	autoPrefix = "shard-"
	// maxValueBytesPlacement bounds data.placement before it is parsed.
	maxValueBytesPlacement = 16 * 1024
)

// Defaults of the placement settings.
const (
	defaultThreshold       = "10%"
	defaultMaxMoves        = 50
	defaultInterval        = 30 * time.Second
	defaultCooldown        = 10 * time.Minute
	defaultObjectsPerShard = 100
	defaultMinShards       = 1
	defaultMaxShards       = 20
	// defaultFailoverMaxDown: more than half the shards down at once is an
	// outage of the cluster, not of a shard, and moving everything onto the
	// survivors would make it worse.
	defaultFailoverMaxDown = "50%"
	// minFailoverAfter keeps a rollout or a rescheduled pod from counting
	// as a shard that is down.
	minFailoverAfter = 10 * time.Second
)

// Values of Placement.GroupBy.
const (
	// GroupByNamespace makes every namespace one unit of placement.
	GroupByNamespace = "namespace"
	// GroupByLabel makes the objects that share a value of
	// Placement.GroupLabel one unit of placement.
	GroupByLabel = "label"
)

// Placement is the parsed data.placement: which objects shardkeeper may
// label, and how fast it may move them.
type Placement struct {
	// Enabled is set when data.placement exists.
	Enabled bool
	// Namespaces limit the scope; empty means every namespace.
	Namespaces []string
	// Selector limits the scope by the objects' labels.
	Selector labels.Selector
	// GroupBy makes groups the unit of placement: GroupByNamespace,
	// GroupByLabel, or "" for the kinds' own (an object alone, a namespace
	// for the kinds that need it, see source.MappedKind.GroupByNamespace).
	GroupBy string
	// GroupLabel is the label whose value names an object's group when
	// GroupBy is GroupByLabel.
	GroupLabel string
	// Threshold is the spread between the most and the least loaded shard
	// that starts a rebalance: a load, or a percentage of the mean load.
	Threshold intstr.IntOrString
	// MaxMoves bounds the paced moves per Interval: drains, failovers,
	// rebalances, and the assignments that can wait (see balance.Object.Paced).
	MaxMoves int
	// Interval paces the moves.
	Interval time.Duration
	// Cooldown keeps a moved object where it is for this long.
	Cooldown time.Duration
	// ObjectsPerShard, MinShards and MaxShards size "shards: auto".
	ObjectsPerShard, MinShards, MaxShards int
	// FailoverAfter is how long a listed shard must have been seen with no
	// Available replica in any of its Deployments before its objects move
	// to other shards; 0 turns failover off.
	FailoverAfter time.Duration
	// FailoverMaxDown bounds the shards failed over at once: a count, or a
	// percentage of the listed shards. With more down, none is.
	FailoverMaxDown intstr.IntOrString
}

// MaxDown returns how many of listed shards may be failed over at once.
func (p Placement) MaxDown(listed int) int {
	if p.FailoverMaxDown.Type == intstr.String {
		pct, _ := downPercent(p.FailoverMaxDown.StrVal)
		return listed * pct / 100
	}
	return p.FailoverMaxDown.IntValue()
}

// InScope reports whether placement may label an object of namespace ns
// with labels l.
func (p Placement) InScope(ns string, l labels.Set) bool {
	if !p.Enabled {
		return false
	}
	if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, ns) {
		return false
	}
	return p.Selector == nil || p.Selector.Matches(l)
}

// ThresholdFor returns the rebalance threshold as a load, for a mean load.
func (p Placement) ThresholdFor(mean float64) int {
	if p.Threshold.Type == intstr.String {
		pct, _ := percent(p.Threshold.StrVal)
		return max(1, int(math.Ceil(mean*float64(pct)/100)))
	}
	return max(1, p.Threshold.IntValue())
}

// rawPlacement is data.placement as written.
type rawPlacement struct {
	Namespaces      []string            `json:"namespaces,omitempty"`
	Selector        string              `json:"selector,omitempty"`
	GroupBy         string              `json:"groupBy,omitempty"`
	GroupLabel      string              `json:"groupLabel,omitempty"`
	Threshold       *intstr.IntOrString `json:"threshold,omitempty"`
	MaxMoves        *int                `json:"maxMoves,omitempty"`
	Interval        *string             `json:"interval,omitempty"`
	Cooldown        *string             `json:"cooldown,omitempty"`
	ObjectsPerShard *int                `json:"objectsPerShard,omitempty"`
	MinShards       *int                `json:"minShards,omitempty"`
	MaxShards       *int                `json:"maxShards,omitempty"`
	FailoverAfter   *string             `json:"failoverAfter,omitempty"`
	FailoverMaxDown *intstr.IntOrString `json:"failoverMaxDown,omitempty"`
}

// ParsePlacement parses data.placement: a YAML object whose fields are all
// optional; an empty value turns placement on with the defaults.
//
// The checks run in a fixed order (size, YAML, namespaces, selector,
// grouping, threshold, counts, durations) so that a value with several mistakes
// always reports the same, first one.
func ParsePlacement(value string) (Placement, error) {
	raw, err := decodePlacement(value)
	if err != nil {
		return Placement{}, err
	}
	p := Placement{Enabled: true, Namespaces: raw.Namespaces, Threshold: intstr.FromString(defaultThreshold),
		MaxMoves: defaultMaxMoves, Interval: defaultInterval, Cooldown: defaultCooldown,
		ObjectsPerShard: defaultObjectsPerShard, MinShards: defaultMinShards, MaxShards: defaultMaxShards,
		FailoverMaxDown: intstr.FromString(defaultFailoverMaxDown)}
	if err := applyScope(&p, raw); err != nil {
		return Placement{}, err
	}
	if err := applyGrouping(&p, raw); err != nil {
		return Placement{}, err
	}
	if err := applyThreshold(&p, raw); err != nil {
		return Placement{}, err
	}
	if err := applyCounts(&p, raw); err != nil {
		return Placement{}, err
	}
	if err := applyDurations(&p, raw); err != nil {
		return Placement{}, err
	}
	if err := applyFailover(&p, raw); err != nil {
		return Placement{}, err
	}
	return p, nil
}

// decodePlacement bounds and decodes data.placement strictly, so that a
// misspelt field is an error rather than a silently ignored setting. A
// blank or null value decodes to an empty rawPlacement: the key alone turns
// placement on.
func decodePlacement(value string) (*rawPlacement, error) {
	if len(value) > maxValueBytesPlacement {
		return nil, fmt.Errorf("placement: value is %d bytes, more than the %d allowed", len(value), maxValueBytesPlacement)
	}
	var raw *rawPlacement
	if strings.TrimSpace(value) != "" {
		if err := yaml.UnmarshalStrict([]byte(value), &raw); err != nil {
			return nil, fmt.Errorf("placement: not a valid YAML object {namespaces, selector, groupBy, groupLabel, threshold, maxMoves, interval, cooldown, objectsPerShard, minShards, maxShards, failoverAfter, failoverMaxDown}: %w", err)
		}
	}
	if raw == nil {
		raw = &rawPlacement{}
	}
	return raw, nil
}

// applyScope checks the namespaces and parses the selector, so that a typo
// in the scope is reported instead of silently matching no object.
func applyScope(p *Placement, raw *rawPlacement) error {
	for i, ns := range raw.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("placement.namespaces[%d] %q: %s", i, truncate(ns), strings.Join(errs, "; "))
		}
	}
	if raw.Selector != "" {
		sel, err := labels.Parse(raw.Selector)
		if err != nil {
			return fmt.Errorf("placement.selector: %w", err)
		}
		p.Selector = sel
	}
	return nil
}

// applyGrouping checks groupBy and groupLabel together: a label to group
// by is needed exactly when groupBy is "label", and a misspelt key would
// otherwise group nothing without a word.
func applyGrouping(p *Placement, raw *rawPlacement) error {
	switch raw.GroupBy {
	case "", GroupByNamespace:
		if raw.GroupLabel != "" {
			return fmt.Errorf("placement.groupLabel %q: set only with groupBy: %s", truncate(raw.GroupLabel), GroupByLabel)
		}
	case GroupByLabel:
		if raw.GroupLabel == "" {
			return fmt.Errorf("placement.groupBy: %s needs groupLabel, the label whose value names a group", GroupByLabel)
		}
		if errs := validation.IsQualifiedName(raw.GroupLabel); len(errs) > 0 {
			return fmt.Errorf("placement.groupLabel %q: %s", truncate(raw.GroupLabel), strings.Join(errs, "; "))
		}
	default:
		return fmt.Errorf("placement.groupBy %q: must be %s or %s", truncate(raw.GroupBy), GroupByNamespace, GroupByLabel)
	}
	p.GroupBy, p.GroupLabel = raw.GroupBy, raw.GroupLabel
	return nil
}

// applyThreshold takes the threshold if one is set and checks it here, once,
// because ThresholdFor relies on it being a valid load or percentage and
// ignores the percentage's parse error.
func applyThreshold(p *Placement, raw *rawPlacement) error {
	if raw.Threshold == nil {
		return nil
	}
	p.Threshold = *raw.Threshold
	return checkIntOrPercent("threshold", p.Threshold, percent, 1, 0)
}

// checkIntOrPercent checks a setting that is either a number from least to
// most (most 0: no upper bound) or a percentage that pct accepts.
func checkIntOrPercent(name string, v intstr.IntOrString, pct func(string) (int, error), least, most int) error {
	if v.Type == intstr.String {
		if _, err := pct(v.StrVal); err != nil {
			return fmt.Errorf("placement.%s: %w", name, err)
		}
		return nil
	}
	switch n := int(v.IntVal); {
	case most == 0 && n < least:
		return fmt.Errorf("placement.%s %d: must be at least %d", name, n, least)
	case most > 0 && (n < least || n > most):
		return fmt.Errorf("placement.%s %d: must be between %d and %d", name, n, least, most)
	}
	return nil
}

// applyCounts takes the integer settings that are set, each within its
// bounds, and only then compares minShards with maxShards: both must have
// their final value, set or default, for "shards: auto" to be sure of a
// non-empty range to size within.
func applyCounts(p *Placement, raw *rawPlacement) error {
	ints := []struct {
		name     string
		in       *int
		out      *int
		min, max int
	}{
		{"maxMoves", raw.MaxMoves, &p.MaxMoves, 0, 10000},
		{"objectsPerShard", raw.ObjectsPerShard, &p.ObjectsPerShard, 1, 1000000},
		{"minShards", raw.MinShards, &p.MinShards, 1, maxShards},
		{"maxShards", raw.MaxShards, &p.MaxShards, 1, maxShards},
	}
	for _, f := range ints {
		if f.in == nil {
			continue
		}
		if *f.in < f.min || *f.in > f.max {
			return fmt.Errorf("placement.%s %d: must be between %d and %d", f.name, *f.in, f.min, f.max)
		}
		*f.out = *f.in
	}
	if p.MinShards > p.MaxShards {
		return fmt.Errorf("placement: minShards %d is above maxShards %d", p.MinShards, p.MaxShards)
	}
	return nil
}

// applyDurations parses the pacing settings that are set and bounds them, so
// that moves are never paced faster than once a second, and neither the
// interval (an hour) nor the cooldown (a week) can hold them back for good.
func applyDurations(p *Placement, raw *rawPlacement) error {
	durations := []struct {
		name     string
		in       *string
		out      *time.Duration
		min, max time.Duration
	}{
		{"interval", raw.Interval, &p.Interval, time.Second, time.Hour},
		{"cooldown", raw.Cooldown, &p.Cooldown, 0, 7 * 24 * time.Hour},
	}
	for _, f := range durations {
		if f.in == nil {
			continue
		}
		d, err := time.ParseDuration(*f.in)
		if err != nil {
			return fmt.Errorf("placement.%s: %w", f.name, err)
		}
		if d < f.min || d > f.max {
			return fmt.Errorf("placement.%s %s: must be between %s and %s", f.name, d, f.min, f.max)
		}
		*f.out = d
	}
	return nil
}

// applyFailover takes failoverAfter (absent or empty: off) and
// failoverMaxDown. The least delay is minFailoverAfter, so that a rollout is
// never taken for a shard that is down.
func applyFailover(p *Placement, raw *rawPlacement) error {
	if raw.FailoverAfter != nil && *raw.FailoverAfter != "" {
		d, err := time.ParseDuration(*raw.FailoverAfter)
		if err != nil {
			return fmt.Errorf("placement.failoverAfter: %w", err)
		}
		if d < minFailoverAfter || d > 24*time.Hour {
			return fmt.Errorf("placement.failoverAfter %s: must be between %s and %s, or empty for no failover", d, minFailoverAfter, 24*time.Hour)
		}
		p.FailoverAfter = d
	}
	if raw.FailoverMaxDown == nil {
		return nil
	}
	p.FailoverMaxDown = *raw.FailoverMaxDown
	return checkIntOrPercent("failoverMaxDown", p.FailoverMaxDown, downPercent, 1, maxShards)
}

// downPercent parses failoverMaxDown as a percentage of the listed shards.
func downPercent(s string) (int, error) {
	v, ok := strings.CutSuffix(s, "%")
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); !ok || err != nil || strconv.Itoa(n) != v || n < 1 || n > 100 {
		return 0, fmt.Errorf("%q: a number of shards, or a percentage of the listed shards from 1%% to 100%%", truncate(s))
	}
	return n, nil
}

func percent(s string) (int, error) {
	v, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q: a load (an integer) or a percentage of the mean load such as \"10%%\"", truncate(s))
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || strconv.Itoa(n) != v || n < 1 || n > 1000 {
		return 0, fmt.Errorf("%q: the percentage must be an integer between 1 and 1000", truncate(s))
	}
	return n, nil
}

// parseDrain parses the drain annotation: shard IDs separated by commas or
// spaces.
func parseDrain(value string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, field := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		if err := ValidateID(field); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", DrainAnnotation, err)
		}
		if !seen[field] {
			seen[field] = true
			out = append(out, field)
		}
	}
	return out, nil
}

// AutoNames returns the IDs of n shards sized by "shards: auto".
func AutoNames(n int) []Shard {
	out := make([]Shard, n)
	for i := range out {
		out[i] = Shard{ID: AutoID(i)}
	}
	return out
}

// AutoID is the ID of the i-th shard that "auto" makes.
func AutoID(i int) string { return fmt.Sprintf("%s%d", autoPrefix, i) }

// AutoIndex returns i for an ID "shard-i", or -1.
func AutoIndex(id string) int {
	v, ok := strings.CutPrefix(id, autoPrefix)
	if !ok || v == "" {
		return -1
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || strconv.Itoa(n) != v || n < 0 {
		return -1
	}
	return n
}

var errAutoNeedsPlacement = errors.New(`shards: "auto" sizes the shard list from the objects placement assigns; add a "placement" key (it may be empty) to turn placement on`)
