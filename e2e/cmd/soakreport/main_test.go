package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"a_test.go:1: step 1 of a pass\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":1.5}`,
		`{"Action":"run","Package":"p","Test":"TestB/seed=7"}`,
		`{"Action":"output","Package":"p","Test":"TestB/seed=7","Output":"b_test.go:9: replay with SEEDS=7\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB/seed=7","Output":"b_test.go:20: range is full\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestB/seed=7","Elapsed":0.4}`,
		`{"Action":"run","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"c_test.go:3: waiting\n"}`,
		`# a build line`,
		`{"Action":"output","Package":"p","Output":"panic: test timed out after 1m\n"}`,
		`{"Action":"fail","Package":"p","Elapsed":60}`,
	}, "\n")
	var out strings.Builder
	failed, err := report(strings.NewReader(in), &out)
	require.NoError(t, err)
	assert.True(t, failed)
	got := out.String()
	assert.Contains(t, got, "--- PASS: TestA (1.5s)\n")
	assert.Contains(t, got, "# a build line\n")
	assert.NotContains(t, got, "step 1 of a pass", "a passing test's output is dropped")
	assert.Contains(t, got, "===== output of TestB/seed=7\nb_test.go:9: replay with SEEDS=7\nb_test.go:20: range is full\n")
	assert.Contains(t, got, "===== output of package p\npanic: test timed out after 1m\n")
	assert.Contains(t, got, "===== output of TestC (did not end)\nc_test.go:3: waiting\n")
	assert.Contains(t, got, "1 passed, 3 failed\n")
}

func TestReportAllPassed(t *testing.T) {
	in := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":2}
{"Action":"output","Package":"p","Output":"ok  \tp\t2s\n"}
{"Action":"pass","Package":"p","Elapsed":2}
`
	var out strings.Builder
	failed, err := report(strings.NewReader(in), &out)
	require.NoError(t, err)
	assert.False(t, failed)
	assert.Equal(t, "=== RUN   TestA\n--- PASS: TestA (2.0s)\n\n1 passed, 0 failed\n", out.String())
}
