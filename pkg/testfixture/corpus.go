package testfixture

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/pkg/balance"
	"github.com/shardkeeper/shardkeeper/pkg/shardconfig"
)

// CorpusPath is the corpus's path from the module's root. The shard
// ConfigMap is read in four languages: Go (pkg/shardconfig, pkg/plan,
// pkg/stamp), the chart's CEL (its admission and stamping policies), its
// Helm templates and the UI's TypeScript. Each is tested against this one
// file, so that a rule changed in one language and not in another fails a
// unit test, not an e2e run.
const CorpusPath = "pkg/shardconfig/testdata/corpus.json"

// Corpus is the shared corpus: ConfigMaps with the daemon's verdict, edits
// with the shards a removal keeps, and new objects with the shard they are
// stamped with.
type Corpus struct {
	Configs  []ConfigCase  `json:"configs"`
	Removals []RemovalCase `json:"removals"`
	Stamps   []StampCase   `json:"stamps"`
}

// ConfigCase is a shard ConfigMap and what the daemon says of it.
type ConfigCase struct {
	Name string `json:"name"`
	// Shards is data.shards, nil for no key, repeated Repeat times when
	// Repeat is set (so that a value of 256 KiB stays one line), then
	// followed by Suffix.
	Shards *string `json:"shards"`
	Repeat int     `json:"repeat"`
	Suffix string  `json:"suffix"`
	// Placement is data.placement, nil for no key.
	Placement *string `json:"placement"`
	// BinaryData are the keys set in binaryData.
	BinaryData []string `json:"binaryData"`
	// Force and Drain are the force-delete and drain annotations.
	Force string `json:"force"`
	Drain string `json:"drain"`

	// Error is shardconfig.Parse's error, word for word; when it is
	// empty, the ConfigMap parses to IDs, Auto, Forced and ForceAll.
	Error    string   `json:"error"`
	IDs      []string `json:"ids"`
	Auto     bool     `json:"auto"`
	Forced   []string `json:"forced"`
	ForceAll bool     `json:"forceAll"`
	// IDLimitError is the daemon's error for a ConfigMap that parses but
	// names an ID too long for the names that the chart's default
	// sources (Fleet's preset) derive from it.
	IDLimitError string `json:"idLimitError"`
	// Policy is "admits" where the chart's admission policy knowingly
	// leaves the refusal to the daemon (a YAML list, text outside
	// printable ASCII, data.placement, the drain annotation). Otherwise
	// the policy refuses exactly what the daemon refuses, with the same
	// sentence.
	Policy string `json:"policy"`
	// Chart is what the chart's own check of .Values.shards does where it
	// parts from the daemon: "none" where it reads the value as no shards
	// and renders "[]" (an empty or blank value), "refuses" where it
	// refuses at install a value the daemon accepts (its schema's \s is
	// ASCII, the daemon trims any space around the list). Otherwise the
	// chart refuses what the daemon refuses and renders what it accepts.
	Chart string `json:"chart"`
}

// ShardsValue returns data.shards and whether the key is there.
func (c ConfigCase) ShardsValue() (string, bool) {
	if c.Shards == nil {
		return "", false
	}
	return strings.Repeat(*c.Shards, max(c.Repeat, 1)) + c.Suffix, true
}

// ConfigMap returns the case's data, binaryData and annotations.
func (c ConfigCase) ConfigMap() (data map[string]string, binaryData map[string][]byte, annotations map[string]string) {
	data, binaryData, annotations = map[string]string{}, map[string][]byte{}, map[string]string{}
	if v, ok := c.ShardsValue(); ok {
		data[shardconfig.ShardsKey] = v
	}
	if c.Placement != nil {
		data[shardconfig.PlacementKey] = *c.Placement
	}
	for _, k := range c.BinaryData {
		binaryData[k] = []byte("a")
	}
	if c.Force != "" {
		annotations[shardconfig.ForceDeleteAnnotation] = c.Force
	}
	if c.Drain != "" {
		annotations[shardconfig.DrainAnnotation] = c.Drain
	}
	return data, binaryData, annotations
}

// RemovalCase is an edit of data.shards from Old to New while objects are
// mapped to shards, and the shards that the daemon then keeps for their
// objects: the ones the chart's removal warning names.
type RemovalCase struct {
	Name string `json:"name"`
	Old  string `json:"old"`
	New  string `json:"new"`
	// Placement is data.placement in both, nil for no key.
	Placement *string `json:"placement"`
	// Force is the force-delete annotation of the edited ConfigMap.
	Force string `json:"force"`
	// Mapped counts the objects per shard and kind before the edit, and
	// Placed says that placement labelled them (else a person did).
	Mapped map[string]map[string]int `json:"mapped"`
	Placed bool                      `json:"placed"`
	// Kept are the shards kept for their objects, in ID order, and State
	// their state: Blocked unless said.
	Kept  []string `json:"kept"`
	State string   `json:"state"`
}

// ConfigMaps returns the data of the ConfigMap before and after the edit,
// and the annotations after it.
func (c RemovalCase) ConfigMaps() (old, cur, annotations map[string]string) {
	data := func(shards string) map[string]string {
		d := map[string]string{shardconfig.ShardsKey: shards}
		if c.Placement != nil {
			d[shardconfig.PlacementKey] = *c.Placement
		}
		return d
	}
	annotations = map[string]string{}
	if c.Force != "" {
		annotations[shardconfig.ForceDeleteAnnotation] = c.Force
	}
	return data(c.Old), data(c.New), annotations
}

// KeptState returns the state of the kept shards.
func (c RemovalCase) KeptState() string {
	if c.State == "" {
		return "Blocked"
	}
	return c.State
}

// StampCase is a placement round and a new object created after it: the
// shard the object is stamped with at its creation.
type StampCase struct {
	Name string `json:"name"`
	// Placement is data.placement, nil for placement off, and
	// GroupedKinds the kinds placed by namespace ("<resource>.<group>").
	Placement    *string  `json:"placement"`
	GroupedKinds []string `json:"groupedKinds"`
	// Targets, Draining and Objects are the round's input.
	Targets  []string      `json:"targets"`
	Draining []string      `json:"draining"`
	Objects  []RoundObject `json:"objects"`
	// New is the object created.
	New NewObject `json:"new"`
	// Stamp is the shard the policy labels New with, "" for none. Where
	// the daemon publishes no shard for New's group, it is the entry of
	// the daemon's sequence that the policy's hash picks.
	Stamp string `json:"stamp"`
}

// Setting returns the parsed placement setting, off when Placement is nil.
func (c StampCase) Setting() (shardconfig.Placement, error) {
	if c.Placement == nil {
		return shardconfig.Placement{}, nil
	}
	return shardconfig.ParsePlacement(*c.Placement)
}

// Round returns the round's input.
func (c StampCase) Round() balance.Input {
	in := balance.Input{Targets: c.Targets, Draining: c.Draining}
	for _, o := range c.Objects {
		in.Objects = append(in.Objects, balance.Object{Key: o.Key, Shard: o.Shard, Group: o.Group, Weight: max(o.Weight, 1), Movable: !o.Pinned})
	}
	return in
}

// RoundObject is an object of the round (a balance.Object).
type RoundObject struct {
	Key    string `json:"key"`
	Shard  string `json:"shard"`
	Group  string `json:"group"`
	Weight int    `json:"weight"`
	// Pinned is set for an object that placement may not move.
	Pinned bool `json:"pinned"`
}

// NewObject is an object in its create request.
type NewObject struct {
	Group        string            `json:"group"`
	Resource     string            `json:"resource"`
	Namespace    string            `json:"namespace"`
	Name         string            `json:"name"`
	GenerateName string            `json:"generateName"`
	Labels       map[string]string `json:"labels"`
	Spec         map[string]any    `json:"spec"`
}

// ReadCorpus reads the corpus at path.
func ReadCorpus(tb testing.TB, path string) Corpus {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("reading the corpus: %v", err)
	}
	var c Corpus
	if err := json.Unmarshal(b, &c); err != nil {
		tb.Fatalf("reading the corpus %s: %v", path, err)
	}
	return c
}
