package daemon

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardkeeper/shardkeeper/pkg/wire"
)

func TestInitialListFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want wire.InitialList
		err  string
	}{
		{nil, wire.InitialListAuto, ""},
		{[]string{"--initial-list=pages"}, wire.InitialListPages, ""},
		{[]string{"--initial-list=stream"}, wire.InitialListStream, ""},
		{[]string{"--initial-list=watch"}, "", `--initial-list: initial list "watch": want auto, pages or stream`},
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
		assert.Equal(t, tc.want, o.initialList, "%v", tc.args)
	}
}

func TestMappedReaderFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		err  string
	}{
		{nil, readerSkim, ""},
		{[]string{"--mapped-reader=stock"}, readerStock, ""},
		{[]string{"--mapped-reader=json"}, "", `--mapped-reader "json": want skim or stock`},
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
		assert.Equal(t, tc.want, o.mappedReader, "%v", tc.args)
	}
}
