// Command soakreport reads the output of `go test -json` on standard input
// and shows one line as each test starts and ends; at the end it prints the
// whole output of every test that failed, and of a package that failed
// outside any test (a timeout, a failed TestMain). A soak runs for hours:
// the output of a test that passed is dropped as soon as it ends, and a
// failure still says why without anyone reading the whole run.
//
// Lines that are not JSON (a build error) are passed through. It exits 1 if
// any test or package failed or a test never ended.
//
// Usage:
//
//	go test -json ./e2e/ 2>&1 | soakreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

func main() {
	failed, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soakreport:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// failure is the output of one test, or of a package outside its tests.
type failure struct {
	name   string
	output string
}

// report copies the progress of the run read from in to out, then the
// output of each failure. It reports whether anything failed.
func report(in io.Reader, out io.Writer) (bool, error) {
	r := &run{out: out, running: map[string]*strings.Builder{}}
	sc := bufio.NewScanner(in)
	// A test's output line may be long: a dumped log, a YAML object.
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		r.record(ev)
	}
	if err := sc.Err(); err != nil {
		return true, fmt.Errorf("read the test output: %w", err)
	}
	return r.summarize(), nil
}

// run is what report knows of the run so far.
type run struct {
	out io.Writer
	// running holds the output of each test (or package) that has not
	// ended yet, by name.
	running  map[string]*strings.Builder
	failures []failure
	passed   int
}

// record takes one event: it shows a test's start and end, keeps the
// output of a test until it ends, and keeps it for the end only if the
// test failed.
func (r *run) record(ev event) {
	name := ev.Test
	if name == "" {
		name = "package " + ev.Package
	}
	switch ev.Action {
	case "run":
		fmt.Fprintf(r.out, "=== RUN   %s\n", name)
	case "output":
		b := r.running[name]
		if b == nil {
			b = &strings.Builder{}
			r.running[name] = b
		}
		b.WriteString(ev.Output)
	case "pass", "skip":
		if ev.Test != "" {
			fmt.Fprintf(r.out, "--- %s: %s (%.1fs)\n", strings.ToUpper(ev.Action), name, ev.Elapsed)
			if ev.Action == "pass" {
				r.passed++
			}
		}
		delete(r.running, name)
	case "fail":
		fmt.Fprintf(r.out, "--- FAIL: %s (%.1fs)\n", name, ev.Elapsed)
		var output string
		if b := r.running[name]; b != nil {
			output = b.String()
		}
		r.failures = append(r.failures, failure{name: name, output: output})
		delete(r.running, name)
	}
}

// summarize prints the output of every failure, then the counts and the
// names of the failures, and reports whether anything failed.
func (r *run) summarize() bool {
	// A test that never ended is where a run that timed out or was killed
	// hung.
	for _, name := range slices.Sorted(maps.Keys(r.running)) {
		r.failures = append(r.failures, failure{name: name + " (did not end)", output: r.running[name].String()})
	}
	for _, f := range r.failures {
		fmt.Fprintf(r.out, "\n===== output of %s\n%s", f.name, f.output)
	}
	fmt.Fprintf(r.out, "\n%d passed, %d failed\n", r.passed, len(r.failures))
	for _, f := range r.failures {
		fmt.Fprintf(r.out, "FAIL %s\n", f.name)
	}
	return len(r.failures) > 0
}
