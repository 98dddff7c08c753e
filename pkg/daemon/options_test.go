package daemon

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

// The command line that v0.1.0's README gave for Flux names
// kustomize-controller, which the flux preset clones now: the daemon
// starts, and says at start what to remove.
func TestV010FluxCommandLineStartsWithAWarning(t *testing.T) {
	lines := captureLog(t, "info", 2)
	o := &Options{}
	fs := flag.NewFlagSet("shardkeeper", flag.ContinueOnError)
	o.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{
		"--log-format=json",
		"--preset", "flux",
		"--source", "flux-system/kustomize-controller:manager=--watch-label-selector=sharding.fluxcd.io/key={shard}",
		"--source-required-arg", "flux-system/kustomize-controller=--watch-label-selector=!sharding.fluxcd.io/key",
	}))
	require.NoError(t, o.Complete())
	assert.Len(t, o.set.Sources, 6, "the flux preset's controllers, kustomize-controller once")
	got := entries(t, lines())
	require.Len(t, got, 2)
	for _, e := range got {
		assert.Equal(t, "warning", e["level"])
	}
	assert.Contains(t, got[0]["msg"], `--source "flux-system/kustomize-controller:manager=--watch-label-selector=sharding.fluxcd.io/key={shard}" is ignored`)
	assert.Contains(t, got[1]["msg"], `--source-required-arg "flux-system/kustomize-controller=--watch-label-selector=!sharding.fluxcd.io/key" repeats what preset flux sets`)
}

// The reader flags: each value, its default, and the refusal of any other.
func TestReaderFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		list   wire.InitialList
		reader string
		err    string
	}{
		{nil, wire.InitialListAuto, readerSkim, ""},
		{[]string{"--initial-list=pages"}, wire.InitialListPages, readerSkim, ""},
		{[]string{"--initial-list=stream"}, wire.InitialListStream, readerSkim, ""},
		{[]string{"--initial-list=watch"}, "", "", `--initial-list: initial list "watch": want auto, pages or stream`},
		{[]string{"--mapped-reader=stock"}, wire.InitialListAuto, readerStock, ""},
		{[]string{"--mapped-reader=json"}, "", "", `--mapped-reader "json": want skim or stock`},
	} {
		o := &Options{}
		fs := flag.NewFlagSet("shardkeeper", flag.ContinueOnError)
		o.AddFlags(fs)
		require.NoError(t, fs.Parse(tc.args))
		err := o.Complete()
		if tc.err != "" {
			require.EqualError(t, err, tc.err)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.list, o.initialList, "%v", tc.args)
		assert.Equal(t, tc.reader, o.mappedReader, "%v", tc.args)
	}
}
