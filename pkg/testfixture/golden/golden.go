// Package golden compares what a test produces with a file checked in
// under the test's testdata/golden, and rewrites those files when the tests
// run with -update:
//
//	go test ./pkg/render ./pkg/status -update
//
// It is a package of its own, not part of testfixture, because the -update
// flag is registered on the command line of every binary that imports it:
// the bench and the e2e tools import testfixture and parse their own flags.
package golden

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Dir is where the golden files live, relative to the test's package.
const Dir = "testdata/golden"

// update is defined once, here, so that every package whose tests use
// golden files accepts the same flag.
var update = flag.Bool("update", false, "rewrite the golden files under "+Dir+" with what the tests produce")

// contextLines is how many unchanged lines Diff shows around a change.
const contextLines = 3

// Assert fails tb unless got equals the golden file Dir/name; with -update
// it writes got to that file instead. It returns after each Fatalf for a
// tb that records failures instead of stopping the test.
func Assert(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join(Dir, name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // checked-in test data, as readable as the tree
			tb.Fatalf("creating %s: %v", filepath.Dir(path), err)
			return
		}
		if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // checked-in test data, as readable as the tree
			tb.Fatalf("updating %s: %v", path, err)
			return
		}
		return
	}
	want, err := fs.ReadFile(os.DirFS(Dir), name)
	if errors.Is(err, fs.ErrNotExist) {
		tb.Fatalf("%s does not exist; run the test with -update to write it, and review it", path)
		return
	}
	if err != nil {
		tb.Fatalf("reading %s: %v", path, err)
		return
	}
	if string(want) != string(got) {
		tb.Errorf("%s differs from what the test produced (- golden, + got); run the test with -update if the change is intended:\n%s",
			path, Diff(string(want), string(got)))
	}
}

// Diff returns a line diff of want and got: changed lines prefixed with
// "-" (want) and "+" (got), with up to three unchanged lines around each
// change, and "@@ line N @@" where a hunk starts in want. It is "" when
// they are equal.
func Diff(want, got string) string {
	ops := diffLines(splitLines(want), splitLines(got))
	// keep marks the ops shown: the changes and their context.
	keep := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind == ' ' {
			continue
		}
		for j := max(0, i-contextLines); j <= min(len(ops)-1, i+contextLines); j++ {
			keep[j] = true
		}
	}
	var b strings.Builder
	for i, op := range ops {
		if !keep[i] {
			continue
		}
		if i == 0 || !keep[i-1] {
			fmt.Fprintf(&b, "@@ line %d @@\n", op.wantLine)
		}
		fmt.Fprintf(&b, "%c %s\n", op.kind, op.text)
	}
	return b.String()
}

// lineOp is one line of a diff: kept (' '), removed ('-') or added ('+');
// wantLine is its 1-based position in want (for an added line, of the
// next line of want).
type lineOp struct {
	kind     byte
	text     string
	wantLine int
}

// diffLines aligns a and b on a longest common subsequence of lines. The
// table is quadratic, which the files a test compares (a few hundred
// lines) afford.
func diffLines(a, b []string) []lineOp {
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i, line := range slices.Backward(a) {
		for j := len(b) - 1; j >= 0; j-- {
			if line == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []lineOp
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, lineOp{' ', a[i], i + 1})
			i, j = i+1, j+1
		case j == len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, lineOp{'-', a[i], i + 1})
			i++
		default:
			ops = append(ops, lineOp{'+', b[j], i + 1})
			j++
		}
	}
	return ops
}

// splitLines splits s into lines; a missing final newline shows as a last
// line of its own, so that it is not lost in the diff.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		return lines[:len(lines)-1]
	}
	lines[len(lines)-1] += " (no newline at end)"
	return lines
}
