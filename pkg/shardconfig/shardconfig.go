// Package shardconfig parses and validates the shardkeeper ConfigMap: the
// list of shard IDs in data.shards (or "auto"), the placement settings in
// data.placement, and the force-delete and drain annotations.
//
// Parsing is all-or-nothing: a value either yields a complete, valid Config
// or an error that says what to fix, so a bad edit can never be mistaken for
// an empty shard list.
//
// The ConfigMap's format is shardkeeper's interface; the Go package is the
// daemon's own: not a supported API, and it may change in any release.
package shardconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

const (
	// ShardsKey is the ConfigMap data key that lists the shards.
	ShardsKey = "shards"
	// ForceDeleteAnnotation lists shard IDs (or "*") whose deletion may go
	// ahead although objects are still mapped to them.
	ForceDeleteAnnotation = "shardkeeper.io/force-delete"
	// forceAll in the force-delete annotation forces every pending removal.
	forceAll = "*"

	// maxShards bounds the shard list: every shard costs one Deployment per
	// source controller, and a typo such as a pasted object list must not
	// turn into thousands of Deployments.
	maxShards = 500
	// maxValueBytes bounds data.shards before it is parsed at all.
	maxValueBytes = 256 * 1024
	// maxIDLength keeps "<source>-shard-<id>" a valid Deployment name and
	// the ID a valid label value.
	maxIDLength = 40
	// maxReplicas bounds a shard's replica count.
	maxReplicas = 100
)

// Shard is one configured shard and the placement settings an operator may
// set for it. Nothing else is accepted per shard: whoever may edit the
// ConfigMap must not gain the power to change what the controllers run.
type Shard struct {
	// ID is the shard ID, the value of the objects' shard label.
	ID string `json:"id"`
	// NodeSelector is merged over the source's pod node selector.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations are appended to the source's pod tolerations.
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Resources replace the resources of the shard's controller container.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Replicas overrides the source's replica count.
	Replicas *int32 `json:"replicas,omitempty"`
}

// Config is a parsed, valid shardkeeper ConfigMap.
type Config struct {
	// Shards in the order they were listed, IDs unique. With Auto they are
	// filled in later, from the objects' count.
	Shards []Shard
	// Auto is set by "shards: auto".
	Auto bool
	// Force is the parsed force-delete annotation.
	Force Force
	// Placement is the parsed data.placement.
	Placement Placement
	// Drain is the parsed drain annotation.
	Drain []string
}

// Draining reports whether the drain annotation names id.
func (c Config) Draining(id string) bool {
	return slices.Contains(c.Drain, id)
}

// IDs returns the configured shard IDs as a set.
func (c Config) IDs() map[string]bool {
	ids := make(map[string]bool, len(c.Shards))
	for _, s := range c.Shards {
		ids[s.ID] = true
	}
	return ids
}

// Force is the set of shards whose deletion is forced.
type Force struct {
	// All is set by "*".
	All bool
	// IDs are the named shards, sorted.
	IDs []string
}

// Allows reports whether the deletion of shard id is forced.
func (f Force) Allows(id string) bool {
	return f.All || slices.Contains(f.IDs, id)
}

// Empty reports whether nothing is forced.
func (f Force) Empty() bool { return !f.All && len(f.IDs) == 0 }

// String renders the annotation value for f.
func (f Force) String() string {
	parts := append([]string(nil), f.IDs...)
	if f.All {
		parts = append([]string{forceAll}, parts...)
	}
	return strings.Join(parts, ",")
}

// Without returns f less the given IDs; consumed reports whether "*" goes too.
func (f Force) Without(ids []string, consumeAll bool) Force {
	drop := make(map[string]bool, len(ids))
	for _, id := range ids {
		drop[id] = true
	}
	out := Force{All: f.All && !consumeAll}
	for _, id := range f.IDs {
		if !drop[id] {
			out.IDs = append(out.IDs, id)
		}
	}
	return out
}

// errMissingShards is returned when the ConfigMap has no shards key. It is
// not an empty list: a missing key must never read as "delete every shard".
var errMissingShards = errors.New(`the ConfigMap has no "shards" key; set data.shards to a list of shard IDs, e.g. "shard0,shard1"`)

// Parse validates a ConfigMap's data, binaryData and annotations and returns
// the shard configuration, or an error that names the problem.
func Parse(data map[string]string, binaryData map[string][]byte, annotations map[string]string) (Config, error) {
	if _, ok := binaryData[ShardsKey]; ok {
		return Config{}, errors.New(`"shards" must be in data, not binaryData`)
	}
	if _, ok := binaryData[PlacementKey]; ok {
		return Config{}, errors.New(`"placement" must be in data, not binaryData`)
	}
	value, ok := data[ShardsKey]
	if !ok {
		return Config{}, errMissingShards
	}
	var cfg Config
	if strings.TrimSpace(value) == auto {
		cfg.Auto = true
	} else {
		shards, err := ParseShards(value)
		if err != nil {
			return Config{}, err
		}
		cfg.Shards = shards
	}
	var err error
	if cfg.Force, err = parseForce(annotations[ForceDeleteAnnotation]); err != nil {
		return Config{}, err
	}
	if raw, ok := data[PlacementKey]; ok {
		if cfg.Placement, err = ParsePlacement(raw); err != nil {
			return Config{}, err
		}
	}
	if cfg.Drain, err = parseDrain(annotations[DrainAnnotation]); err != nil {
		return Config{}, err
	}
	if cfg.Auto && !cfg.Placement.Enabled {
		return Config{}, errAutoNeedsPlacement
	}
	if len(cfg.Drain) > 0 && !cfg.Placement.Enabled {
		return Config{}, fmt.Errorf("annotation %s: draining moves objects, which only placement does; add a \"placement\" key (it may be empty) or remove the annotation", DrainAnnotation)
	}
	return cfg, nil
}

// ParseShards parses the value of data.shards: either IDs separated by
// commas, spaces or newlines, or a YAML list whose items are IDs or shard
// objects.
func ParseShards(value string) ([]Shard, error) {
	if len(value) > maxValueBytes {
		return nil, fmt.Errorf("shards: value is %d bytes, more than the %d allowed", len(value), maxValueBytes)
	}
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return nil, errors.New(`shards: the list is empty; to remove every shard, list none explicitly with "[]"`)
	}
	var shards []Shard
	var err error
	if strings.HasPrefix(trimmed, "-") || strings.HasPrefix(trimmed, "[") {
		shards, err = parseYAML(trimmed)
	} else {
		shards, err = parseList(trimmed)
	}
	if err != nil {
		return nil, err
	}
	if err := validateShards(shards); err != nil {
		return nil, err
	}
	return shards, nil
}

func parseList(value string) ([]Shard, error) {
	fields := strings.FieldsFunc(value, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r'
	})
	if len(fields) == 0 {
		// Only separators: as empty as an empty value, and as likely a slip.
		return nil, errors.New(`shards: the list has separators but no shard ID; to remove every shard, list none explicitly with "[]"`)
	}
	if len(fields) > maxShards {
		return nil, fmt.Errorf("shards: %d shards listed, at most %d are allowed", len(fields), maxShards)
	}
	shards := make([]Shard, 0, len(fields))
	for _, f := range fields {
		shards = append(shards, Shard{ID: f})
	}
	return shards, nil
}

// rawItem accepts a bare ID or a shard object, so that both forms can be
// mixed in one YAML list.
type rawItem struct {
	shard Shard
}

// UnmarshalJSON takes only a string as an ID. The YAML has been turned into
// JSON by then, with YAML 1.1's reading of plain scalars: left to the
// decoder, "- 010" would name shard "8" and "- yes" shard "true", while the
// plain list, the chart and the UI read "010" and "yes".
func (r *rawItem) UnmarshalJSON(b []byte) error {
	var id string
	if err := json.Unmarshal(b, &id); err == nil {
		r.shard = Shard{ID: id}
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return fmt.Errorf("%s is neither a shard ID nor a shard object: write IDs as strings, quoted where YAML would read a number or a boolean", b)
	}
	if v, ok := fields["id"]; ok && json.Unmarshal(v, &id) != nil {
		return fmt.Errorf("id %s is not a string: quote it where YAML would read a number or a boolean", v)
	}
	return yaml.UnmarshalStrict(b, &r.shard)
}

func parseYAML(value string) ([]Shard, error) {
	// A coarse count before decoding keeps a list of millions of items from
	// being built only to be rejected.
	if n := strings.Count(value, "\n-") + 1; n > 4*maxShards {
		return nil, fmt.Errorf("shards: about %d items listed, at most %d are allowed", n, maxShards)
	}
	var list *[]rawItem
	if err := yaml.UnmarshalStrict([]byte(value), &list); err != nil {
		return nil, fmt.Errorf("shards: not a valid YAML list of shard IDs or shard objects {id, nodeSelector, tolerations, resources, replicas}: %w", err)
	}
	if list == nil {
		// "---" or "~" decode to null: no list at all, which must not read
		// as the empty list that removes every shard.
		return nil, errors.New(`shards: the YAML value is null, not a list; to remove every shard, list none explicitly with "[]"`)
	}
	raw := *list
	if len(raw) > maxShards {
		return nil, fmt.Errorf("shards: %d shards listed, at most %d are allowed", len(raw), maxShards)
	}
	shards := make([]Shard, 0, len(raw))
	for _, r := range raw {
		shards = append(shards, r.shard)
	}
	return shards, nil
}

func validateShards(shards []Shard) error {
	seen := make(map[string]int, len(shards))
	for i, s := range shards {
		if err := ValidateID(s.ID); err != nil {
			return fmt.Errorf("shards[%d]: %w", i, err)
		}
		if j, dup := seen[s.ID]; dup {
			return fmt.Errorf("shards[%d]: shard %q is listed twice (also shards[%d])", i, s.ID, j)
		}
		seen[s.ID] = i
		if err := validatePlacement(s); err != nil {
			return fmt.Errorf("shards[%d] (%s): %w", i, s.ID, err)
		}
	}
	return nil
}

// ValidateID checks that id can be a label value and part of a Deployment
// name: lower-case letters, digits and '-', starting and ending with a letter
// or digit, at most MaxIDLength characters.
func ValidateID(id string) error {
	if id == "" {
		return errors.New("shard ID is empty")
	}
	if len(id) > maxIDLength {
		return fmt.Errorf("shard ID %q is %d characters long, at most %d are allowed", truncate(id), len(id), maxIDLength)
	}
	if len(validation.IsDNS1123Label(id)) > 0 {
		return fmt.Errorf("shard ID %q is invalid: use lower-case letters, digits and '-', starting and ending with a letter or digit", truncate(id))
	}
	return nil
}

func validatePlacement(s Shard) error {
	for k, v := range s.NodeSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("nodeSelector key %q: %s", truncate(k), strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("nodeSelector value %q: %s", truncate(v), strings.Join(errs, "; "))
		}
	}
	for i, t := range s.Tolerations {
		if t.Key != "" {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				return fmt.Errorf("tolerations[%d].key: %s", i, strings.Join(errs, "; "))
			}
		}
		switch t.Operator {
		case "", corev1.TolerationOpEqual, corev1.TolerationOpExists:
		default:
			return fmt.Errorf("tolerations[%d].operator %q: must be Equal or Exists", i, t.Operator)
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("tolerations[%d].effect %q: must be NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
	}
	if s.Resources != nil {
		if len(s.Resources.Claims) > 0 {
			return errors.New("resources.claims is not allowed")
		}
		for _, list := range []corev1.ResourceList{s.Resources.Limits, s.Resources.Requests} {
			for name, q := range list {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
					return fmt.Errorf("resources: %q is not allowed; use cpu, memory or ephemeral-storage", name)
				}
				if q.Sign() < 0 {
					return fmt.Errorf("resources: %s must not be negative", name)
				}
			}
		}
		for name, limit := range s.Resources.Limits {
			if req, ok := s.Resources.Requests[name]; ok && req.Cmp(limit) > 0 {
				return fmt.Errorf("resources: %s request %s is above its limit %s", name, req.String(), limit.String())
			}
		}
	}
	if s.Replicas != nil && (*s.Replicas < 0 || *s.Replicas > maxReplicas) {
		return fmt.Errorf("replicas %d: must be between 0 and %d", *s.Replicas, maxReplicas)
	}
	return nil
}

// parseForce parses the force-delete annotation: shard IDs separated by
// commas or spaces, or "*".
func parseForce(value string) (Force, error) {
	var f Force
	seen := map[string]bool{}
	for _, field := range strings.FieldsFunc(value, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		if field == forceAll {
			f.All = true
			continue
		}
		if err := ValidateID(field); err != nil {
			return Force{}, fmt.Errorf("annotation %s: %w", ForceDeleteAnnotation, err)
		}
		if !seen[field] {
			seen[field] = true
			f.IDs = append(f.IDs, field)
		}
	}
	sort.Strings(f.IDs)
	return f, nil
}

// truncate shortens s for an error message: the values come from a
// ConfigMap anyone with edit rights may fill.
func truncate(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return s[:keep] + "..."
}
