// Package browsertest drives Debian's chromium with chromedp for the web
// app's end-to-end tests: a fresh headless browser per test, isolated
// browser contexts (separate cookie jars) per page, screenshots of every
// failure, and axe-core accessibility checks. It never skips: a missing
// browser fails the test with how to install it (make chromium).
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package installs the browser.
const ChromiumPath = "/usr/bin/chromium"

// ActionTimeout bounds one Run of a page.
const ActionTimeout = 20 * time.Second

// Browser is one headless chromium process.
type Browser struct {
	t      testing.TB
	ctx    context.Context // the browser's first tab: parent of every page
	cancel context.CancelFunc
	shots  string

	mu    sync.Mutex
	pages []*Page
}

// Launch starts chromium with a fresh profile under the test's temp dir.
// Cleanup closes it, after screenshots of every page when the test failed.
func Launch(t testing.TB) *Browser {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("chromium is not installed at %s (run `make chromium`, or apt-get install -y chromium): %v", ChromiumPath, err)
	}
	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b := &Browser{t: t, ctx: ctx, shots: filepath.Join(dir, "screenshots")}
	b.cancel = func() { cancelCtx(); cancelAlloc() }
	// The first call starts the browser and ties it to the context it is
	// given: the long-lived one, not a timeout.
	if err := chromedp.Do(ctx); err != nil {
		b.cancel()
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b.mu.Lock()
			pages := append([]*Page(nil), b.pages...)
			b.mu.Unlock()
			for _, p := range pages {
				p.Screenshot("at-failure")
			}
		}
		b.cancel()
	})
	return b
}

// Page is one tab in a browser context of its own: its cookies and
// storage are its own, as another person's browser would be.
type Page struct {
	Name string
	Ctx  context.Context
	b    *Browser

	mu      sync.Mutex
	console []string
}

// NewPage opens a tab in a new browser context. name labels screenshots.
func (b *Browser) NewPage(name string) *Page {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	return b.open(name, ctx, cancel)
}

// NewTab opens another tab in p's browser context: same cookies, storage
// and service workers, as a second tab of the same person would be.
func (p *Page) NewTab(name string) *Page {
	p.b.t.Helper()
	ctx, cancel := chromedp.NewContext(p.Ctx)
	return p.b.open(name, ctx, cancel)
}

func (b *Browser) open(name string, ctx context.Context, cancel context.CancelFunc) *Page {
	b.t.Helper()
	p := &Page{Name: name, Ctx: ctx, b: b}
	// Listen creates the tab (on the long-lived context, as above).
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *cdpruntime.EventConsoleAPICalled:
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value))
			}
			p.log(fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(parts, " ")))
		case *cdpruntime.EventExceptionThrown:
			d := ev.ExceptionDetails
			text := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				text += " " + d.Exception.Description
			}
			p.log(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, text))
		}
	})
	if err != nil {
		cancel()
		b.t.Fatalf("opening page %s: %v", name, err)
	}
	b.t.Cleanup(cancel)
	b.mu.Lock()
	b.pages = append(b.pages, p)
	b.mu.Unlock()
	return p
}

func (p *Page) log(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.console) < 200 {
		p.console = append(p.console, line)
	}
}

// Console is what the page logged and threw so far.
func (p *Page) Console() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// Do runs actions within ActionTimeout; on an error it takes a
// screenshot and fails the test, naming the screenshot and the page's
// console.
func (p *Page) Do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := p.TryDo(ActionTimeout, actions...); err != nil {
		p.Fail(t, what, err)
	}
}

// Fail fails the test with err, a screenshot and the page's console.
func (p *Page) Fail(t testing.TB, what string, err error) {
	t.Helper()
	shot := p.Screenshot(what)
	t.Fatalf("%s: %s: %v\nscreenshot: %s\nconsole:\n%s", p.Name, what, err, shot, strings.Join(p.Console(), "\n"))
}

// Click clicks the element the CSS selector sel names once it is visible.
// The app re-renders a list (the conversations, the messages) as events
// arrive, so the node found may be replaced before the click lands; the
// click is then tried again on the node that replaced it, within
// ActionTimeout.
func (p *Page) Click(t testing.TB, what, sel string) {
	t.Helper()
	deadline := time.Now().Add(ActionTimeout)
	for {
		err := p.TryDo(time.Until(deadline), chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
		if err == nil {
			return
		}
		if !replacedNode(err) || time.Now().After(deadline) {
			p.Fail(t, what, err)
		}
	}
}

// replacedNode says err is the DevTools protocol's answer about a node
// that left the document between being found and being acted on.
func replacedNode(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") ||
		strings.Contains(msg, "No node with given id found") ||
		strings.Contains(msg, "Node is detached from document")
}

// TryDo runs actions within timeout and returns their error.
func (p *Page) TryDo(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(p.Ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// into T (awaiting a promise). Evaluation goes through the DevTools
// protocol, which the page's CSP does not govern; chromedp's Poll is not
// used because it compiles its predicate with new Function, which the
// app's CSP (rightly) refuses.
func Eval[T any](t testing.TB, p *Page, what, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, ActionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.Fail(t, what, err)
	}
	return v
}

// WaitJS waits until expr is truthy in the page, checking every 25 ms for
// at most timeout.
func (p *Page) WaitJS(t testing.TB, what, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(p.Ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last == nil {
				last = fmt.Errorf("%w: %s stayed false for %s", ErrNotFound, expr, timeout)
			}
			p.Fail(t, what, last)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Screenshot saves a full-page PNG under the test's temp dir, copies it to
// $SVC_TEST_ARTIFACTS when set, and returns where it is (both paths).
func (p *Page) Screenshot(label string) string {
	ctx, cancel := context.WithTimeout(p.Ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		return fmt.Sprintf("(no screenshot: %v)", err)
	}
	name := unsafeName.ReplaceAllString(p.b.t.Name()+"-"+p.Name+"-"+label, "_")
	if len(name) > 150 {
		name = name[:150]
	}
	name += fmt.Sprintf("-%d.png", time.Now().UnixNano())
	if err := os.MkdirAll(p.b.shots, 0o755); err != nil {
		return fmt.Sprintf("(no screenshot: %v)", err)
	}
	path := filepath.Join(p.b.shots, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		return fmt.Sprintf("(no screenshot: %v)", err)
	}
	where := path
	if dir := os.Getenv("SVC_TEST_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err == nil {
			cp := filepath.Join(dir, name)
			if err := os.WriteFile(cp, buf, 0o644); err == nil {
				where += " (copied to " + cp + ")"
			}
		}
	}
	p.b.t.Logf("screenshot of %s: %s", p.Name, where)
	return where
}

// SaveScreenshot writes the page as it is now to path (for docs).
func (p *Page) SaveScreenshot(t testing.TB, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		p.Fail(t, "screenshot", err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// SaveViewport writes what the viewport shows now to path: the screen as
// the person sees it at the emulated size, not the whole scrollable page
// (docs' screenshots; a full-page capture also includes a scrollbar's
// gutter at desktop width).
func (p *Page) SaveViewport(t testing.TB, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, 10*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.Fail(t, "screenshot", err)
	}
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ErrNotFound is returned by helpers waiting for something that never came.
var ErrNotFound = errors.New("not found")
