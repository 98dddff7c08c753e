package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name, want, got, diff string
	}{
		{name: "equal", want: "a\nb\n", got: "a\nb\n", diff: ""},
		{
			name: "changed line with context",
			want: "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			got:  "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			diff: "@@ line 2 @@\n  2\n  3\n  4\n- 5\n+ five\n  6\n  7\n  8\n",
		},
		{
			name: "two hunks apart",
			want: "a\n1\n2\n3\n4\n5\n6\n7\nb\n",
			got:  "A\n1\n2\n3\n4\n5\n6\n7\nB\n",
			diff: "@@ line 1 @@\n- a\n+ A\n  1\n  2\n  3\n@@ line 6 @@\n  5\n  6\n  7\n- b\n+ B\n",
		},
		{
			name: "added line",
			want: "kind: Deployment\nreplicas: 1\n",
			got:  "kind: Deployment\nreplicas: 1\nnodeSelector: {}\n",
			diff: "@@ line 1 @@\n  kind: Deployment\n  replicas: 1\n+ nodeSelector: {}\n",
		},
		{
			name: "missing final newline",
			want: "a\n",
			got:  "a",
			diff: "@@ line 1 @@\n- a\n+ a (no newline at end)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Diff(tt.want, tt.got); got != tt.diff {
				t.Errorf("Diff:\n%s\nwant:\n%s", got, tt.diff)
			}
		})
	}
}

// A golden file that differs, or is missing, fails the test and says which
// file and which line; an equal one passes.
func TestAssert(t *testing.T) {
	if *update {
		t.Skip("with -update, Assert writes instead of comparing")
	}
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(Dir, "case.txt"), []byte("replicas: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, got string
		// report is what the failure must say; "" means no failure.
		report []string
	}{
		{"equal", "case.txt", "replicas: 1\n", nil},
		{"differs", "case.txt", "replicas: 2\n", []string{"case.txt", "- replicas: 1\n+ replicas: 2\n"}},
		{"missing", "other.txt", "x\n", []string{"other.txt does not exist", "-update"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			Assert(rec, tt.file, []byte(tt.got))
			if rec.failed != (tt.report != nil) {
				t.Fatalf("failed: %v, want %v (%s)", rec.failed, tt.report != nil, rec.msg)
			}
			for _, s := range tt.report {
				if !strings.Contains(rec.msg, s) {
					t.Errorf("the failure %q does not say %q", rec.msg, s)
				}
			}
		})
	}
}

// recorder records the failure that Assert reports instead of failing the
// test that runs it.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }
