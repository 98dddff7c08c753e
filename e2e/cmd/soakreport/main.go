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
	running := map[string]*strings.Builder{}
	var failures []failure
	passed := 0
	sc := bufio.NewScanner(in)
	// A test's output line may be long: a dumped log, a YAML object.
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Action == "" {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		name := ev.Test
		if name == "" {
			name = "package " + ev.Package
		}
		switch ev.Action {
		case "run":
			fmt.Fprintf(out, "=== RUN   %s\n", name)
		case "output":
			b := running[name]
			if b == nil {
				b = &strings.Builder{}
				running[name] = b
			}
			b.WriteString(ev.Output)
		case "pass", "skip":
			if ev.Test != "" {
				fmt.Fprintf(out, "--- %s: %s (%.1fs)\n", strings.ToUpper(ev.Action), name, ev.Elapsed)
				if ev.Action == "pass" {
					passed++
				}
			}
			delete(running, name)
		case "fail":
			fmt.Fprintf(out, "--- FAIL: %s (%.1fs)\n", name, ev.Elapsed)
			var output string
			if b := running[name]; b != nil {
				output = b.String()
			}
			failures = append(failures, failure{name: name, output: output})
			delete(running, name)
		}
	}
	if err := sc.Err(); err != nil {
		return true, fmt.Errorf("read the test output: %w", err)
	}
	// A test that never ended is where a run that timed out or was killed
	// hung.
	for _, name := range slices.Sorted(maps.Keys(running)) {
		failures = append(failures, failure{name: name + " (did not end)", output: running[name].String()})
	}
	for _, f := range failures {
		fmt.Fprintf(out, "\n===== output of %s\n%s", f.name, f.output)
	}
	fmt.Fprintf(out, "\n%d passed, %d failed\n", passed, len(failures))
	for _, f := range failures {
		fmt.Fprintf(out, "FAIL %s\n", f.name)
	}
	return len(failures) > 0, nil
}
