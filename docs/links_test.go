// Package docs_test checks the links of the documentation: a page moved or a
// heading renamed must not leave a link, an alert's runbook_url or an
// Event's pointer leading nowhere.
package docs_test

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, seen from this package's directory, where
// go test runs its tests.
const root = ".."

// repoURL is how the alerts, the Events and the chart's pages, which are
// read outside the repository, link into it.
const repoURL = "https://github.com/shardkeeper/shardkeeper/"

// alertsFile holds the alert rules whose runbook_url must name a runbook.
const alertsFile = "charts/shardkeeper/files/alerts.yaml"

// runbooks is the page whose headings are the alerts' names.
const runbooks = "docs/operations.md"

var (
	heading     = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	fence       = regexp.MustCompile("^[ \t]*(```|~~~)")
	inlineCode  = regexp.MustCompile("`+[^`]*`+")
	mdLink      = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:[ \t]+"[^"]*")?\)`)
	repoLink    = regexp.MustCompile(regexp.QuoteMeta(repoURL) + `(?:blob|tree)/main/([^\s)"'>\x60]+)`)
	alertName   = regexp.MustCompile(`^\s*-\s*alert:\s*(\S+)\s*$`)
	runbookLine = regexp.MustCompile(`^\s*runbook_url:\s*(\S+)\s*$`)
)

// link is one link of a file: where it is, and where it leads.
type link struct {
	file   string // relative to root
	line   int
	target string
}

func (l link) String() string { return fmt.Sprintf("%s:%d: %s", l.file, l.line, l.target) }

// markdown is what a Markdown file offers and asks: the anchors of its
// headings, and its links outside code.
type markdown struct {
	anchors map[string]bool
	links   []link
}

// parseMarkdown reads a Markdown file, relative to root. Code blocks and
// code spans are skipped: a "#" there is no heading, and a "[x](y)" no link.
func parseMarkdown(t *testing.T, file string) markdown {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	require.NoError(t, err)
	defer f.Close()
	md := markdown{anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			md.anchors[uniqueSlug(slug(m[1]), seen)] = true
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, "``"), -1) {
			md.links = append(md.links, link{file: file, line: n, target: m[1]})
		}
	}
	require.NoError(t, sc.Err())
	return md
}

// slug is the anchor GitHub gives a heading: its text, lower-cased, with
// spaces turned into '-' and every punctuation mark but '-' and '_' dropped.
// The text of a link in the heading counts, not its address.
func slug(text string) string {
	text = mdLink.ReplaceAllStringFunc(text, func(l string) string {
		return l[strings.Index(l, "[")+1 : strings.Index(l, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// uniqueSlug numbers a repeated heading's anchor as GitHub does: the second
// "x" is "x-1", the third "x-2".
func uniqueSlug(s string, seen map[string]int) string {
	n := seen[s]
	seen[s] = n + 1
	if n == 0 {
		return s
	}
	return fmt.Sprintf("%s-%d", s, n)
}

// docs are the Markdown files whose relative links are checked, relative to
// root.
func docs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages, "no docs/*.md")
	files := []string{"README.md", "CONTRIBUTING.md", "SECURITY.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		require.NoError(t, err)
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// checker resolves links to files of the repository, reading each Markdown
// target once.
type checker struct {
	t     *testing.T
	pages map[string]markdown
}

func newChecker(t *testing.T) *checker {
	t.Helper()
	return &checker{t: t, pages: map[string]markdown{}}
}

func (c *checker) page(file string) markdown {
	md, ok := c.pages[file]
	if !ok {
		md = parseMarkdown(c.t, file)
		c.pages[file] = md
	}
	return md
}

// check returns why target, a path relative to root with an optional
// "#anchor", leads nowhere, or "" when it leads to a file or directory of
// the repository and, for an anchor, to a heading of that Markdown file.
func (c *checker) check(target string) string {
	path, anchor, _ := strings.Cut(target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return err.Error()
	}
	if path == ".." || strings.HasPrefix(path, "../") {
		return "it leads out of the repository"
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil {
		return "no file " + path
	}
	switch {
	case anchor == "":
		return ""
	case !strings.HasSuffix(path, ".md"):
		return fmt.Sprintf("an anchor into %s, which has no headings to check", path)
	case !c.page(path).anchors[anchor]:
		return fmt.Sprintf("%s has no heading whose anchor is #%s", path, anchor)
	}
	return ""
}

// relative resolves a link of file to a path relative to root, and reports
// whether it is one to check: a link with a scheme, or an address such as
// mailto:, leads outside the repository.
func relative(file, target string) (string, bool) {
	if u, err := url.Parse(target); err != nil || u.Scheme != "" || u.Host != "" {
		return "", false
	}
	if strings.HasPrefix(target, "#") {
		return file + target, true
	}
	path, anchor, hasAnchor := strings.Cut(target, "#")
	if fromRoot, ok := strings.CutPrefix(path, "/"); ok {
		path = fromRoot // GitHub resolves it from the repository's root
	} else {
		path = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
	}
	if hasAnchor {
		path += "#" + anchor
	}
	return path, true
}

// TestRelativeLinks follows every relative link of the README, the
// contributing and security pages and docs/: its file must exist, and its
// anchor must name a heading there.
func TestRelativeLinks(t *testing.T) {
	c := newChecker(t)
	checked := 0
	for _, file := range docs(t) {
		for _, l := range c.page(file).links {
			target, ok := relative(file, l.target)
			if !ok {
				continue
			}
			checked++
			if why := c.check(target); why != "" {
				t.Errorf("%s: %s", l, why)
			}
		}
	}
	assert.Positive(t, checked, "no relative link found: is the parser broken?")
}

// TestRepositoryURLs follows the absolute links into this repository's
// main branch from the files that are read outside it: the alerts' runbook
// URLs, the Events' pointers into the docs, and the chart's pages, which
// Rancher and Artifact Hub show.
func TestRepositoryURLs(t *testing.T) {
	files := append(docs(t), alertsFile, "e2e/testdata/alerts-test.yaml", "pkg/status/status.go",
		"charts/shardkeeper/README.md", "charts/shardkeeper/app-readme.md", "charts/shardkeeper/values.yaml",
		"charts/shardkeeper/Chart.yaml", "charts/shardkeeper/questions.yaml")
	c := newChecker(t)
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		require.NoError(t, err)
		for n, line := range strings.Split(string(b), "\n") {
			for _, m := range repoLink.FindAllStringSubmatch(line, -1) {
				checked++
				if why := c.check(strings.TrimRight(m[1], ".,;:")); why != "" {
					t.Errorf("%s: %s", link{file: file, line: n + 1, target: m[0]}, why)
				}
			}
		}
	}
	assert.Positive(t, checked, "no link into the repository found: is the pattern broken?")
}

// TestRunbookURLs holds every alert to its runbook: the runbook_url is the
// heading of docs/operations.md named after the alert, and that heading
// exists.
func TestRunbookURLs(t *testing.T) {
	f, err := os.Open(filepath.Join(root, alertsFile))
	require.NoError(t, err)
	defer f.Close()
	urls := map[string][]string{} // by alert
	var alerts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := alertName.FindStringSubmatch(sc.Text()); m != nil {
			alerts = append(alerts, m[1])
		}
		if m := runbookLine.FindStringSubmatch(sc.Text()); m != nil {
			require.NotEmpty(t, alerts, "a runbook_url before the first alert")
			last := alerts[len(alerts)-1]
			urls[last] = append(urls[last], m[1])
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, alerts, "no alert found in %s", alertsFile)

	c := newChecker(t)
	for _, alert := range alerts {
		want := repoURL + "blob/main/" + runbooks + "#" + strings.ToLower(alert)
		if assert.Len(t, urls[alert], 1, "alert %s: one runbook_url", alert) {
			assert.Equal(t, want, urls[alert][0], "alert %s", alert)
		}
		assert.True(t, c.page(runbooks).anchors[strings.ToLower(alert)], "%s has no runbook: the heading %q", runbooks, alert)
	}
}

// TestSlug pins the slug rules to GitHub's on headings these docs use.
func TestSlug(t *testing.T) {
	for text, want := range map[string]string{
		"ShardkeeperObjectsStranded":                                     "shardkeeperobjectsstranded",
		"Flux: the main controller must leave the shards' objects alone": "flux-the-main-controller-must-leave-the-shards-objects-alone",
		"`shards: auto`": "shards-auto",
		"Dashboard and alerts (Rancher Monitoring)": "dashboard-and-alerts-rancher-monitoring",
		"Handing over shards from Fleet's chart":    "handing-over-shards-from-fleets-chart",
		"A [linked](other.md#x) heading_with-marks": "a-linked-heading_with-marks",
	} {
		assert.Equal(t, want, slug(text), text)
	}
	seen := map[string]int{}
	assert.Equal(t, []string{"status", "status-1", "status-2"},
		[]string{uniqueSlug("status", seen), uniqueSlug("status", seen), uniqueSlug("status", seen)})
}
