package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"svc/cmd/svc/internal/browsertest"
)

// Chat as people know it (issue 27): the layout at phone and desktop
// width, grouping, day separators, the new-messages line, scroll-up
// paging, markdown (and hostile markdown staying inert), mention
// completion, and a message going from one browser to the other.

// pushAs posts msg (a /push body) with tok.
func pushAs(p *proc, tok string, msg map[string]any) error {
	enc, _ := json.Marshal(msg)
	req, err := http.NewRequest(http.MethodPost, p.base+"/push", bytes.NewReader(enc))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-SVC-Protocol", "1")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("push %v: %s", msg["body"], res.Status)
	}
	return nil
}

// inViewport is a JS expression: the element sel is wholly on screen and
// the page itself neither scrolled nor wider than the window.
func inViewport(sel string) string {
	return `(() => { const e = document.querySelector(` + js(sel) + `); if (!e) return false; const r = e.getBoundingClientRect();
		return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth
			&& document.documentElement.scrollWidth <= innerWidth && (document.scrollingElement.scrollTop === 0); })()`
}

func TestWebUIChatUX(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	alice, bob := enroll(t, d, admin, "alice"), enroll(t, d, admin, "bob")

	// 200 messages from bob in #general: one sender, minutes apart at most.
	const n = 200
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return pushAs(p, bobTok, map[string]any{"body": fmt.Sprintf("g-%03d", i)}) })
	}
	require.NoError(t, g.Wait())

	b := browsertest.Launch(t)
	pa, pb := b.NewPage("alice"), b.NewPage("bob")
	pa.Do(t, "desktop", chromedp.EmulateViewport(1280, 800))
	pb.Do(t, "desktop", chromedp.EmulateViewport(1280, 800))
	uiSignIn(t, pa, p.base, alice)
	uiSignIn(t, pb, p.base, bob)
	waitLive(t, pa)
	waitLive(t, pb)
	openConv(t, pb, "dm:alice")

	// Desktop: the first page, grouped under one header, one day separator
	// before it, the composer and Send in view.
	pa.WaitJS(t, "first page", `document.querySelectorAll('ol.messages li.msg').length >= 50`, uiWait)
	pa.WaitJS(t, "send visible at 1280x800", inViewport("form.composer button.send"), uiWait)
	require.True(t, browsertest.Eval[bool](t, pa, "composer visible", inViewport("#compose")))
	require.Equal(t, "Message #general", browsertest.Eval[string](t, pa, "placeholder", `document.getElementById('compose').placeholder`))
	shown := browsertest.Eval[int](t, pa, "shown", `document.querySelectorAll('ol.messages li.msg').length`)
	require.Equal(t, shown-1, browsertest.Eval[int](t, pa, "grouped", `document.querySelectorAll('ol.messages li.msg.cont').length`),
		"one sender's run shows its name once")
	require.Equal(t, []string{"Today"}, browsertest.Eval[[]string](t, pa, "day separators", `[...document.querySelectorAll('ol.messages li.day-sep')].map(e => e.textContent)`))
	require.True(t, browsertest.Eval[bool](t, pa, "separator first", `document.querySelector('ol.messages li.day-sep').nextElementSibling.classList.contains('msg')`))

	// Scrolling up loads the page before, keeping the reader's place.
	top := browsertest.Eval[string](t, pa, "top message", `document.querySelector('ol.messages li.msg').dataset.id`)
	dy := `(() => { const l = document.querySelector('ol.messages'); return l.querySelector('li.msg[data-id="` + top + `"]').getBoundingClientRect().top - l.getBoundingClientRect().top; })()`
	before := browsertest.Eval[float64](t, pa, "place before", `(() => { document.querySelector('ol.messages').scrollTop = 0; return `+dy+`; })()`)
	pa.WaitJS(t, "older page", `document.querySelectorAll('ol.messages li.msg').length > `+fmt.Sprint(shown), uiWait)
	pa.WaitJS(t, "older drawn", `!document.querySelector('button.older').disabled`, uiWait)
	// It may move by its own header, which a run above it now carries.
	after := browsertest.Eval[float64](t, pa, "place after", dy)
	require.Positive(t, browsertest.Eval[float64](t, pa, "scrolled", `document.querySelector('ol.messages').scrollTop`))
	require.InDelta(t, before, after, 40, "the message that was on top stays where it was")
	require.Equal(t, []string{"Today"}, browsertest.Eval[[]string](t, pa, "one day", `[...document.querySelectorAll('ol.messages li.day-sep')].map(e => e.textContent)`))

	// Mention completion: "@bo" offers bob; Enter takes him.
	pa.Do(t, "type a mention", chromedp.Click(chromedp.ID("compose")), chromedp.SendKeys(chromedp.ID("compose"), "hi @bo"))
	pa.WaitJS(t, "completion", `!document.getElementById('mention-list').hidden && [...document.querySelectorAll('#mention-list [role=option]')].map(o => o.textContent).includes('@bob')`, uiWait)
	// Enter as the page sees it (a keydown): DevTools' key event would
	// also type its character, which a real browser's cancelled keydown does not.
	enter := `document.getElementById('compose').dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter', bubbles: true, cancelable: true}))`
	browsertest.Eval[bool](t, pa, "pick", enter)
	require.Equal(t, "hi @bob ", browsertest.Eval[string](t, pa, "completed", `document.getElementById('compose').value`))
	require.True(t, browsertest.Eval[bool](t, pa, "closed", `document.getElementById('mention-list').hidden`))
	// Shift+Enter is a new line, Enter sends.
	pa.Do(t, "newline", chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)))
	pa.Do(t, "more", chromedp.SendKeys(chromedp.ID("compose"), "are you there?"))
	require.Equal(t, "hi @bob \nare you there?", browsertest.Eval[string](t, pa, "two lines", `document.getElementById('compose').value`))
	browsertest.Eval[bool](t, pa, "send", enter)
	pa.WaitJS(t, "sent", `document.getElementById('compose').value === ''`, uiWait)
	mention := `[...document.querySelectorAll('ol.messages li.msg')].some(li => li.querySelector('.mention')?.textContent === '@bob' && li.querySelector('.body').textContent.includes('are you there?'))`
	pa.WaitJS(t, "mention shown", mention, uiWait)
	require.False(t, browsertest.Eval[bool](t, pa, "own message heads its group", `[...document.querySelectorAll('ol.messages li.msg')].pop().classList.contains('cont')`))

	// Bob, reading his DM, gets the message live in the other browser; on
	// opening #general the new-messages line sits before it, and the
	// mention of him stands out.
	pb.WaitJS(t, "unread", `document.querySelector(`+js(convSel("general")+" .badge")+`)?.textContent === '1'`, uiWait)
	openConv(t, pb, "general")
	pb.WaitJS(t, "mention shown to bob", mention, uiWait)
	pb.WaitJS(t, "new line", `(() => { const n = document.getElementById('new-line'); const m = n && n.nextElementSibling; return !!m && m.querySelector('.mention.me')?.textContent === '@bob'; })()`, uiWait)

	// Markdown, rendered from tokens; hostile markdown inert.
	md := "**bold** `a<b` [site](https://example.com/x) see obj:obj-123\n- one\n- two\n\n> quoted\n\n```\nx < y && <b>z</b>\n```"
	require.NoError(t, pushAs(p, aliceTok, map[string]any{"body": md, "level": "warning"}))
	pb.WaitJS(t, "markdown", `[...document.querySelectorAll('ol.messages li.msg .body')].some(b => b.querySelector('strong')?.textContent === 'bold')`, uiWait)
	require.True(t, browsertest.Eval[bool](t, pb, "markdown parts", `(() => {
		const b = [...document.querySelectorAll('ol.messages li.msg .body')].find(b => b.querySelector('strong')?.textContent === 'bold');
		const a = b.querySelector('a[href="https://example.com/x"]');
		const o = b.querySelector('a.objref');
		return b.querySelector('p > code').textContent === 'a<b' && !!a && a.rel.includes('noopener') && o.getAttribute('href') === '/ui/objectives/obj-123'
			&& b.querySelectorAll('ul > li').length === 2 && b.querySelector('blockquote').textContent.trim() === 'quoted'
			&& b.querySelector('pre > code').textContent === 'x < y && <b>z</b>' && !b.querySelector('pre b')
			&& b.closest('li.msg').querySelector('.meta .level').textContent === 'warning';
	})()`), "bold, code, link, objective link, list, quote, code block, level tag")

	hostile := []string{
		`<img src=x onerror="window.__xss=1">`,
		`<script>window.__xss=2</script>`,
		`[click](javascript:window.__xss=3)`,
		`[click](JaVaScRiPt:window.__xss=4)`,
		`[click](&#106;avascript:window.__xss=5)`,
		`[click](  javascript:window.__xss=6)`,
		`![img](javascript:window.__xss=7)`,
		`[data](data:text/html,<script>window.__xss=8</script>)`,
		`[vb](vbscript:msgbox)`,
		`<a href="javascript:window.__xss=9">a</a>`,
		`<iframe src="javascript:window.__xss=10"></iframe>`,
		`<javascript:window.__xss=11>`,
		`[x]: javascript:window.__xss=12` + "\n\n[x]",
		`<svg onload="window.__xss=13">`,
		"```\n<img src=x onerror=window.__xss=14>\n```",
		strings.Repeat(">", 5000) + " deep",
		strings.Repeat("- ", 3000) + "deep",
		strings.Repeat("*", 20000) + "x" + strings.Repeat("*", 20000),
		strings.Repeat("[", 10000) + "x" + strings.Repeat("](", 10000),
		strings.Repeat("`", 30000),
	}
	for i, body := range hostile {
		require.NoError(t, pushAs(p, aliceTok, map[string]any{"body": body, "title": fmt.Sprintf("hostile-%02d", i)}))
	}
	// Bob reads them (the sender's own REST posts are not echoed to her tab).
	for _, pg := range []*browsertest.Page{pb} {
		pg.WaitJS(t, "hostile shown", `[...document.querySelectorAll('ol.messages li.msg .title')].filter(e => e.textContent.startsWith('hostile-')).length === `+fmt.Sprint(len(hostile)), uiWait)
		require.Equal(t, "undefined", browsertest.Eval[string](t, pg, "xss flag", `typeof window.__xss`), "%s ran a payload", pg.Name)
		require.Equal(t, "", browsertest.Eval[string](t, pg, "payload elements", `[...document.querySelectorAll('ol.messages img, ol.messages script, ol.messages iframe, ol.messages svg, ol.messages [onerror], ol.messages [onload], ol.messages .body b')].map(e => e.outerHTML).join()`))
		require.Equal(t, "", browsertest.Eval[string](t, pg, "unsafe links", `[...document.querySelectorAll('ol.messages a[href]')].map(a => a.getAttribute('href')).filter(h => !h.startsWith('/ui/') && !/^(https?:\/\/|mailto:)/i.test(h)).join()`))
	}
	noExceptions(t, pa, pb)
	pb.RequireNoCriticalA11y(t, "chat at 1280 px")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pb.SaveScreenshot(t, filepath.Join(dir, "chatux-1280.png"))
	}

	// Phone: 375x812. The composer is on screen without scrolling in a
	// channel of 200 messages, the navigation is a menu that reaches
	// Admin and Settings, the conversation list is a drawer.
	pp := b.NewPage("alice-phone")
	uiSignIn(t, pp, p.base, alice)
	pp.Do(t, "phone", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile), chromedp.Navigate(p.base+"/ui/chat?c=general"))
	waitLive(t, pp)
	pp.WaitJS(t, "messages", `document.querySelectorAll('ol.messages li.msg').length >= 50`, uiWait)
	pp.WaitJS(t, "composer visible at 375x812", inViewport("#compose"), uiWait)
	require.True(t, browsertest.Eval[bool](t, pp, "send visible", inViewport("form.composer button.send")))
	require.True(t, browsertest.Eval[bool](t, pp, "at the newest", `(() => { const l = document.querySelector('ol.messages'); return l.scrollHeight - l.scrollTop - l.clientHeight < 40; })()`))
	require.False(t, browsertest.Eval[bool](t, pp, "drawer closed", `getComputedStyle(document.getElementById('convs')).visibility === 'visible'`))
	pp.RequireNoCriticalA11y(t, "chat at 375 px")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pp.SaveScreenshot(t, filepath.Join(dir, "chatux-375.png"))
	}
	pp.Click(t, "menu", "button.menu-toggle")
	for _, page := range []string{"/ui/admin", "/ui/settings"} {
		pp.WaitJS(t, "menu shows "+page, inViewport(`#main-nav a[href="`+page+`"]`), uiWait)
	}
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pp.SaveScreenshot(t, filepath.Join(dir, "chatux-375-menu.png"))
	}
	pp.Click(t, "close menu", "button.menu-toggle")
	pp.Click(t, "drawer", "button.drawer-toggle")
	pp.WaitJS(t, "drawer open", inViewport(convSel("dm:bob")), uiWait)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pp.SaveScreenshot(t, filepath.Join(dir, "chatux-375-drawer.png"))
	}
	pp.Click(t, "open dm", convSel("dm:bob"))
	pp.WaitJS(t, "dm open", `document.getElementById('conv-title').textContent === '@bob' && `+inViewport("#compose"), uiWait)
	noExceptions(t, pp)
}
