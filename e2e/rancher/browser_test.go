//go:build rancher

package rancher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// actionTimeout bounds one browser action: a wait for what a page shows
// includes Rancher's own loading.
const actionTimeout = 90 * time.Second

// browser is headless Chromium on Rancher's dashboard. Every step of the
// story ends with a screenshot in the artifacts folder, named after it.
type browser struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	shot int

	// console is the browser's console, every message, as a log file
	// kept beside Rancher's and the daemon's.
	console *os.File

	mu sync.Mutex
	// problems are what the pages reported while the story ran: script
	// errors, failed requests and server errors of Rancher's API.
	problems []string

	// failure, when set, receives a failing step's name and error, for
	// the test to say again at its end.
	failure *[]string
}

func newBrowser(t *testing.T, cfg config) *browser {
	t.Helper()
	dir := filepath.Join(cfg.artifacts, "screenshots")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0],
		chromedp.ExecPath(cfg.chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	console, err := os.Create(filepath.Join(cfg.artifacts, "browser-console.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = console.Close() })
	b := &browser{t: t, ctx: ctx, dir: dir, console: console}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	go b.watchConsole()
	go b.watchResponses()
	return b
}

// operationLogs is the log stream of a Helm operation's pod.
var operationLogs = regexp.MustCompile(`WebSocket connection to '[^']*/v1/catalog\.cattle\.io\.operations/[^']*/logs\?`)

// watchConsole records script errors and console errors.
func (b *browser) watchConsole() {
	var logSocketFailed time.Time
	for msg, err := range chromedp.Console(b.ctx) {
		if err != nil {
			return
		}
		fmt.Fprintf(b.console, "%s %s: %s (%s:%d)\n", msg.Time.Format(time.RFC3339), msg.Type, msg.Text, msg.URL, msg.Line)
		if msg.Type != chromedp.ConsoleException && msg.Type != "error" {
			continue
		}
		switch {
		case strings.HasPrefix(msg.Text, "Failed to load resource"):
			// The browser logs each failed request too; watchResponses
			// judges them by their status.
			continue
		case operationLogs.MatchString(msg.Text):
			// The Helm operation's log window streams its pod's logs
			// through the kubelet, which the stand-in pod has not: its
			// socket fails, and the socket library says so once more.
			logSocketFailed = time.Now()
			continue
		case msg.Text == "Connect Error a {isTrusted: false}" && time.Since(logSocketFailed) < time.Second:
			continue
		case strings.HasPrefix(msg.Text, "TypeError: Cannot read properties of undefined (reading 'getters')") &&
			!strings.Contains(msg.Text, "shardkeeper-extension"):
			// The dashboard's own: useIsNewDetailPageEnabled
			// (@rancher/shell composables/useIsNewDetailPageEnabled.ts)
			// calls useStore inside a computed, which finds no store when
			// it runs again as its page is left. The extension's stack
			// would name its script.
			continue
		case strings.HasPrefix(msg.Text, "Error occurred reading dynamic content"):
			// The dashboard asks updates.rancher.io for release news,
			// which the test's network cannot reach.
			continue
		}
		b.problem(fmt.Sprintf("console %s: %s (%s:%d)", msg.Type, msg.Text, msg.URL, msg.Line))
	}
}

// watchResponses records Rancher's server errors and failed requests.
func (b *browser) watchResponses() {
	for ev, err := range chromedp.Events(b.ctx, network.ResponseReceived) {
		if err != nil {
			return
		}
		// A chart's icon is fetched by Rancher from the address in
		// Chart.yaml (GitHub), which the test's network cannot reach:
		// Rancher answers 500, as it would in any air-gapped install.
		if ev.Response.Status >= 500 && !strings.Contains(ev.Response.URL, "link=icon") {
			b.problem(fmt.Sprintf("HTTP %d from %s", ev.Response.Status, ev.Response.URL))
		}
	}
}

func (b *browser) problem(p string) {
	b.mu.Lock()
	b.problems = append(b.problems, time.Now().Format("15:04:05 ")+p)
	b.mu.Unlock()
}

// step runs one step of the story and takes its screenshot; a failing step
// is named, with what the page showed, and ends the test.
func (b *browser) step(name string, fn func() error) {
	b.t.Helper()
	b.t.Logf("step: %s", name)
	err := fn()
	b.shot++
	file := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shot, slug(name)))
	b.screenshot(file)
	if err != nil {
		if b.failure != nil {
			*b.failure = append(*b.failure, fmt.Sprintf("step %q: %v (screenshot %s)", name, err, file))
		}
		b.t.Fatalf("step %q failed: %v\nthe page showed (screenshot %s; the browser's console in %s):\n%s",
			name, err, file, b.console.Name(), b.pageText())
	}
}

func (b *browser) screenshot(file string) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", file, err)
		return
	}
	if err := os.WriteFile(file, png, 0o600); err != nil {
		b.t.Logf("screenshot %s: %v", file, err)
	}
}

func (b *browser) run(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// open loads a dashboard page by its path, as a bookmark or the address
// bar would.
func (b *browser) open(path string) error {
	return b.run(chromedp.Navigate(rancherURL + path))
}

// reload loads the page shown again, as the browser's reload button does.
func (b *browser) reload() error {
	return b.run(chromedp.Reload())
}

// click clicks the first element that matches the CSS selector, once it is
// visible and enabled: a button that the page keeps disabled until it has
// read what the button acts on takes no click before then.
func (b *browser) click(sel string) error {
	return b.clickWithin(sel, actionTimeout)
}

// typeInto types text into the input that matches sel, replacing what it
// held, key by key as a person would.
func (b *browser) typeInto(sel, text string) error {
	if err := b.run(chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(sel))); err != nil {
		return err
	} else if v != "" {
		// Select what the field holds, so that typing replaces it.
		if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(sel)), chromedp.Evaluate[chromedp.Void](`document.activeElement.select()`)); err != nil {
			return err
		}
	}
	return chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(sel), text))
}

// pageText is the page's visible text.
func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return text
}

// eval evaluates a script in the page.
func eval[T any](b *browser, script string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, actionTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](script))
}

func (b *browser) takeProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.problems
	b.problems = nil
	return p
}

var nonWord = regexp.MustCompile(`[^a-z0-9]+`)

func slug(s string) string {
	return strings.Trim(nonWord.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// clickXPath clicks the first visible element that matches the XPath, once
// it is enabled.
func (b *browser) clickXPath(xp string) error {
	return b.clickXPathWithin(xp, actionTimeout)
}

// clickOptional clicks the element that matches sel if it shows within a
// few seconds: a dialog's Close button, say, which shows only while there
// is something left to read, and may go as it is clicked.
func (b *browser) clickOptional(sel string) error {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		return nil
	}
	_ = chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
	return nil
}

// waitXPathText waits until the visible text of the first element that
// matches the XPath matches pattern.
func (b *browser) waitXPathText(xp, pattern string) error {
	return b.waitXPathTextWithin(xp, pattern, actionTimeout)
}

// waitXPathTextWithin is waitXPathText with its own time limit.
func (b *browser) waitXPathTextWithin(xp, pattern string, d time.Duration) error {
	return b.waitScriptWithin(xp, xpathTextScript(xp), pattern, d)
}

// absent is what xpathTextScript returns when nothing matches.
const absent = "<absent>"

// xpathTextScript returns a script that gives the visible text of the
// first element that matches the XPath, or absent.
func xpathTextScript(xp string) string {
	return fmt.Sprintf(`(() => { const n = document.evaluate(%q, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue; return n ? n.innerText : %q; })()`, xp, absent)
}

// waitScript waits until what script returns matches pattern.
func (b *browser) waitScript(what, script, pattern string) error {
	return b.waitScriptWithin(what, script, pattern, actionTimeout)
}

// waitScriptWithin is waitScript with its own time limit.
func (b *browser) waitScriptWithin(what, script, pattern string, d time.Duration) error {
	re := regexp.MustCompile(pattern)
	deadline := time.Now().Add(d)
	for {
		got, err := eval[string](b, script)
		if err == nil && re.MatchString(got) {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: wanted %q, the page showed %q: %w", what, pattern, got, err)
			}
			return fmt.Errorf("%s: wanted %q, the page showed %q", what, pattern, got)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// rowXPath is the row of a Rancher list (SortableTable) whose name link is
// name; list is the data-testid around the table, or "" for any.
func rowXPath(list, name string) string {
	scope := "/"
	if list != "" {
		scope = fmt.Sprintf(`//*[@data-testid=%q]/`, list)
	}
	return fmt.Sprintf(`%s/tr[contains(@class,"main-row")][.//td[contains(@class,"col-link-detail")]//a[normalize-space()=%q]]`, scope, name)
}

// rowState is the state badge of that row.
func rowState(list, name string) string {
	return rowXPath(list, name) + `//span[contains(@class,"badge-state")]`
}

// cellScript returns the text of the cell under the column header in the
// row whose name link is name, in the page's list.
func cellScript(name, header string) string {
	return fmt.Sprintf(`(() => {
  const table = document.querySelector("table.sortable-table");
  if (!table) return "<no table>";
  const heads = [...table.querySelectorAll("thead th")].map(th => th.innerText.trim());
  const col = heads.indexOf(%q);
  if (col < 0) return "<no column %s among " + JSON.stringify(heads) + ">";
  for (const tr of table.querySelectorAll("tbody tr.main-row")) {
    const link = tr.querySelector("td.col-link-detail a");
    if (link && link.innerText.trim() === %q) return tr.children[col] ? tr.children[col].innerText : "<no cell>";
  }
  return "<no row %s>";
})()`, header, header, name, name)
}

// allNamespaces sets the header's namespace filter to All Namespaces:
// Rancher shows only user namespaces by default, and shardkeeper lives in
// a system one (cattle-fleet-system).
func (b *browser) allNamespaces() error {
	label, err := eval[string](b, `(document.querySelector('[data-testid="namespaces-dropdown"]') || {}).innerText || ""`)
	if err != nil || strings.TrimSpace(label) == "All Namespaces" {
		return err
	}
	if err := b.click(`[data-testid="namespaces-dropdown"]`); err != nil {
		return err
	}
	if err := b.click(`[data-testid="namespaces-option-0"]`); err != nil {
		return err
	}
	// The menu stays open for more choices; a click on the page closes it.
	if err := b.click(`h1`); err != nil {
		return err
	}
	return b.waitXPathText(`//*[@data-testid="namespaces-dropdown"]`, "All Namespaces")
}

// closeGrowls closes Rancher's notifications in the page's corner.
func (b *browser) closeGrowls() error {
	_, err := eval[int](b, `(() => { const c = [...document.querySelectorAll(".growl .close, .growl .icon-close")]; c.forEach(x => x.click()); return c.length; })()`)
	return err
}

// clickTries is how many times retry runs its function.
const clickTries = 3

// retry runs fn up to clickTries times, pressing Escape between tries to
// close whatever a missed click opened, and returns its last error.
func (b *browser) retry(fn func() error) error { return b.retryFrom(nil, fn) }

// retryFrom is retry that, before each try after the first, also runs
// again (when not nil): to bring back the page the tries start from.
func (b *browser) retryFrom(again, fn func() error) error {
	var err error
	for i := range clickTries {
		if i > 0 {
			b.t.Logf("again after: %v", err)
			_ = b.run(chromedp.KeyEvent(kb.Escape))
			time.Sleep(time.Second)
			if again != nil {
				if err = again(); err != nil {
					continue
				}
			}
		}
		if err = fn(); err == nil {
			return nil
		}
	}
	return err
}

// clickWithin is click with its own time limit.
func (b *browser) clickWithin(sel string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.WaitEnabled(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// clickXPathWithin is clickXPath with its own time limit.
func (b *browser) clickXPathWithin(xp string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Do(ctx, chromedp.WaitVisible(xp), chromedp.WaitEnabled(xp), chromedp.Click(xp))
}

// closeMainMenu closes Rancher's main menu if it is open. Open, it lies
// over the page behind a glass pane that takes any click meant for the
// page and only closes the menu (shell's components/nav/TopLevelMenu.vue).
func (b *browser) closeMainMenu() error {
	const open = `[data-testid="side-menu"].menu-open`
	shown, err := eval[bool](b, `!!document.querySelector('`+open+`')`)
	if err != nil || !shown {
		return err
	}
	b.t.Log("Rancher's main menu is open over the page: closing it")
	if err := b.click(`.side-menu-glass`); err != nil {
		return fmt.Errorf("closing Rancher's main menu: %w", err)
	}
	return b.run(chromedp.WaitNotPresent(chromedp.CSS(open)))
}

// closeDialog closes the page's open dialog, if any, with its Close (or
// Cancel) button, and waits until it is gone.
func (b *browser) closeDialog() error {
	open, err := eval[bool](b, `!!document.querySelector('[role="dialog"]')`)
	if err != nil || !open {
		return err
	}
	if err := b.clickXPath(`//*[@role="dialog"]//button[normalize-space()="Close" or normalize-space()="Cancel"]`); err != nil {
		return err
	}
	return b.run(chromedp.WaitNotPresent(chromedp.CSS(`[role="dialog"]`)))
}
