package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	pngenc "image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"svc/cmd/svc/internal/browsertest"
)

// Chat, the rest of issue 15 item 2: channel administration seen by the
// other browser, attachments, unread counts kept in the browser, and the
// session ending while a page is open.

// chanWait bounds waits on channel changes made in the other browser: the
// channel list is refetched every 5 s (channels have no stream events).
const chanWait = 40 * time.Second

// convSel is the conversation list's link to key.
func convSel(key string) string {
	return `nav.convs a[href="/ui/chat?c=` + strings.ReplaceAll(key, ":", "%3A") + `"]`
}

// openDetails opens a <details> by its summary text.
func openDetails(t *testing.T, pg *browsertest.Page, summary string) {
	t.Helper()
	pg.WaitJS(t, "summary "+summary, `[...document.querySelectorAll('summary')].some(s => s.textContent.startsWith(`+js(summary)+`))`, uiWait)
	browsertest.Eval[bool](t, pg, "open "+summary, `(() => { const s = [...document.querySelectorAll('summary')].find(s => s.textContent.startsWith(`+js(summary)+`)); if (!s.parentElement.open) s.click(); return true; })()`)
}

// clickButton clicks the button whose text or label is text, within scope.
func clickButton(t *testing.T, pg *browsertest.Page, scope, text string) {
	t.Helper()
	find := `[...document.querySelectorAll(` + js(scope+` button`) + `)].find(b => !b.disabled && (b.textContent === ` + js(text) + ` || b.getAttribute('aria-label') === ` + js(text) + `))`
	pg.WaitJS(t, "button "+text, find, uiWait)
	browsertest.Eval[bool](t, pg, "click "+text, `(() => { `+find+`.click(); return true; })()`)
}

// setInput sets the value of the input sel as typing would.
func setInput(t *testing.T, pg *browsertest.Page, sel, value string) {
	t.Helper()
	pg.WaitJS(t, "input "+sel, `document.querySelector(`+js(sel)+`)`, uiWait)
	browsertest.Eval[bool](t, pg, "type into "+sel, `(() => { const e = document.querySelector(`+js(sel)+`); e.focus(); e.value = `+js(value)+`; e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
}

// confirm answers the open confirm dialog with its yes button.
func confirm(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	pg.WaitJS(t, "dialog", `document.querySelector('dialog.confirm[open]')`, uiWait)
	browsertest.Eval[bool](t, pg, "confirm", `(() => { document.querySelector('dialog.confirm[open] .actions button:last-child').click(); return true; })()`)
}

// channelIDBySlug reads a channel's id from the broker.
func channelIDBySlug(t *testing.T, p *proc, tok, slug string) string {
	t.Helper()
	r := p.do(t, http.MethodGet, "/channels/"+slug, nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	ch, _ := r.body["channel"].(map[string]any)
	id, _ := ch["id"].(string)
	require.NotEmpty(t, id, "%s", r.raw)
	return id
}

// Channel admin in two browsers: alice creates a channel, bob finds and
// joins it, alice renames it and bob's page follows, bob posts, bob
// leaves, alice archives it and the page stops taking posts.
func TestWebUIChat2Channels(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	createMember(t, d, admin, "bob")
	alice, bob := enroll(t, d, admin, "alice"), enroll(t, d, admin, "bob")

	b := browsertest.Launch(t)
	pa, pb := b.NewPage("alice"), b.NewPage("bob")
	uiSignIn(t, pa, p.base, alice)
	uiSignIn(t, pb, p.base, bob)
	waitLive(t, pa)
	waitLive(t, pb)

	// A bad name is refused in the page with the grammar.
	openDetails(t, pa, "New channel")
	pa.Do(t, "bad slug", chromedp.SendKeys(chromedp.ID("new-channel"), "Bad--Name"))
	clickButton(t, pa, ".chan-tools", "Create channel")
	pa.WaitJS(t, "refused", `document.querySelector('.chan-tools .msg.error')?.textContent.includes('lowercase letters')`, uiWait)
	browsertest.Eval[bool](t, pa, "clear", `(() => { document.getElementById('new-channel').value = ''; return true; })()`)
	pa.Do(t, "slug", chromedp.SendKeys(chromedp.ID("new-channel"), "dev"))
	clickButton(t, pa, ".chan-tools", "Create channel")
	pa.WaitJS(t, "in the new channel", `document.getElementById('conv-title')?.textContent === '#dev'`, uiWait)
	id := channelIDBySlug(t, p, aliceTok, "dev")
	key := "chan:" + id
	require.Equal(t, key, browsertest.Eval[string](t, pa, "url", `new URL(location.href).searchParams.get('c')`))

	// Bob sees it in the browser's list without a reload, and joins.
	pb.WaitJS(t, "dev offered", `[...document.querySelectorAll('.chan-browse .name')].some(e => e.textContent === '#dev')`, chanWait)
	openDetails(t, pb, "Browse channels")
	clickButton(t, pb, ".chan-browse", "Join #dev")
	pb.WaitJS(t, "bob in dev", `document.getElementById('conv-title')?.textContent === '#dev' && !document.querySelector('form.composer').hidden`, uiWait)
	pb.WaitJS(t, "listed", `document.querySelector(`+js(convSel(key))+`)`, uiWait)

	// Alice's member list shows bob.
	openDetails(t, pa, "Channel settings")
	pa.WaitJS(t, "bob listed", `[...document.querySelectorAll('.chan-members .name')].some(e => e.textContent === 'bob')`, chanWait)

	// Rename: bob's title and list follow.
	setInput(t, pa, `.chan-admin input[name=slug]`, "dev-team")
	clickButton(t, pa, ".chan-admin", "Rename")
	pa.WaitJS(t, "renamed here", `document.getElementById('conv-title')?.textContent === '#dev-team'`, uiWait)
	pb.WaitJS(t, "renamed there", `document.getElementById('conv-title')?.textContent === '#dev-team' && document.querySelector(`+js(convSel(key))+`)?.textContent.startsWith('#dev-team')`, chanWait)

	// A post each way.
	uiSend(t, pb, "bob in dev-team")
	waitShown(t, pa, "bob in dev-team")

	// Bob leaves: gone from his list, and from alice's members.
	openDetails(t, pb, "Channel settings")
	clickButton(t, pb, ".chan-admin", "Leave channel")
	confirm(t, pb)
	pb.WaitJS(t, "back in general", `new URL(location.href).searchParams.get('c') === 'general' && !document.querySelector(`+js(convSel(key))+`)`, uiWait)
	r := p.do(t, http.MethodGet, "/channels/"+id, nil, withBearer(aliceTok))
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, string(r.raw), `"bob"`, "bob left on the broker")

	// Alice archives: the composer goes, the note says why, bob's browse
	// list shows it as archived.
	clickButton(t, pa, ".chan-admin", "Archive channel")
	confirm(t, pa)
	pa.WaitJS(t, "to general", `new URL(location.href).searchParams.get('c') === 'general'`, uiWait)
	pa.Do(t, "reopen archived", chromedp.Navigate(p.base+"/ui/chat?c="+key))
	pa.WaitJS(t, "archived note", `!document.querySelector('.conv-note').hidden && document.querySelector('.conv-note').textContent.includes('archived') && document.querySelector('form.composer').hidden`, uiWait)
	waitShown(t, pa, "bob in dev-team")
	pb.WaitJS(t, "archived there", `[...document.querySelectorAll('.chan-browse a')].some(e => e.textContent === '#dev-team')`, chanWait)
	r = p.do(t, http.MethodPost, "/push", obj{"body": "late", "data": obj{"thread": key}}, withBearer(aliceTok))
	require.Equal(t, http.StatusGone, r.status, "%s", r.raw)

	pa.RequireNoCriticalA11y(t, "chat page, archived channel with settings")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pb.Do(t, "general", chromedp.Navigate(p.base+"/ui/chat?c=general"))
		openDetails(t, pb, "New channel")
		openDetails(t, pb, "Browse channels")
		pb.SaveScreenshot(t, filepath.Join(dir, "chat-channels.png"))
	}
	noExceptions(t, pa, pb)
}

// noExceptions fails on any exception a page threw.
func noExceptions(t *testing.T, pages ...*browsertest.Page) {
	t.Helper()
	for _, pg := range pages {
		for _, line := range pg.Console() {
			require.NotContains(t, line, "exception", "%s: %s", pg.Name, line)
		}
	}
}

// A file uploaded in the composer and one named by path travel with a DM;
// the other side downloads both byte-identical from links named by the
// file names, shown as text.
func TestWebUIChat2Attachments(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	createMember(t, d, admin, "bob")
	alice, bob := enroll(t, d, admin, "alice"), enroll(t, d, admin, "bob")

	// A file already stored, named by path.
	stored := "report, final.txt"
	r := p.do(t, http.MethodPost, "/fs/write?path=/alice/"+strings.ReplaceAll(stored, " ", "%20")+"", []byte("stored bytes\n"), withBearer(aliceTok))
	require.Less(t, r.status, 300, "%s", r.raw)

	// A file to upload, with a hostile name.
	upName := `<img src=x onerror="window.__xss=1">.bin`
	upBytes := []byte("\x00\x01binary\xffpayload\n")
	dir := t.TempDir()
	upPath := filepath.Join(dir, upName)
	require.NoError(t, os.WriteFile(upPath, upBytes, 0o644))

	b := browsertest.Launch(t)
	pa, pb := b.NewPage("alice"), b.NewPage("bob")
	uiSignIn(t, pa, p.base, alice)
	uiSignIn(t, pb, p.base, bob)
	waitLive(t, pa)
	waitLive(t, pb)
	openConv(t, pa, "dm:bob")
	openConv(t, pb, "dm:alice")

	openDetails(t, pa, "Attach")
	pa.Do(t, "upload", chromedp.SetUploadFiles(chromedp.ID("attach-file"), []string{upPath}))
	pa.WaitJS(t, "uploaded", `document.querySelectorAll('ul.pending li').length === 1`, uiWait)
	pa.Do(t, "by path", chromedp.SendKeys(chromedp.ID("attach-path"), "/alice/"+stored))
	clickButton(t, pa, ".attach", "Add")
	pa.WaitJS(t, "added", `document.querySelectorAll('ul.pending li').length === 2`, uiWait)
	uiSend(t, pa, "two files")
	pa.WaitJS(t, "picker cleared", `document.querySelectorAll('ul.pending li').length === 0`, uiWait)

	waitShown(t, pb, "two files")
	pb.WaitJS(t, "links", `document.querySelectorAll('li.msg a.attachment').length === 2`, uiWait)
	names := browsertest.Eval[[]string](t, pb, "link names", `[...document.querySelectorAll('li.msg a.attachment')].map(a => a.textContent)`)
	require.ElementsMatch(t, []string{upName, stored}, names, "the file names, as text")
	require.Equal(t, "undefined", browsertest.Eval[string](t, pb, "xss", `typeof window.__xss`))
	require.Equal(t, 0, browsertest.Eval[int](t, pb, "no elements", `document.querySelectorAll('li.msg .attachments img').length`))
	// Each link downloads the bytes (fetched as the browser would, with
	// bob's cookie: his read grant comes from the message).
	got := browsertest.Eval[[]string](t, pb, "download", `Promise.all([...document.querySelectorAll('li.msg a.attachment')].map(async a => {
		const r = await fetch(a.href, {credentials: 'same-origin'});
		if (!r.ok) return 'status ' + r.status;
		const b = new Uint8Array(await r.arrayBuffer());
		return a.textContent + '=' + [...b].map(x => x.toString(16).padStart(2, '0')).join('');
	}))`)
	hex := func(b []byte) string {
		var s strings.Builder
		for _, c := range b {
			s.WriteString(strings.ToLower(string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])))
		}
		return s.String()
	}
	require.ElementsMatch(t, []string{upName + "=" + hex(upBytes), stored + "=" + hex([]byte("stored bytes\n"))}, got)
	require.Equal(t, upName, browsertest.Eval[string](t, pb, "download name", `[...document.querySelectorAll('li.msg a.attachment')].find(a => a.textContent.endsWith('.bin')).getAttribute('download')`))

	// Chips preview what they can (issue 27): a text file's first bytes on
	// opening, as text; an image as a thumbnail.
	browsertest.Eval[bool](t, pb, "open preview", `(() => { document.querySelector('li.msg li.chip.text details summary').click(); return true; })()`)
	pb.WaitJS(t, "text preview", `document.querySelector('li.msg li.chip.text pre.preview')?.textContent === 'stored bytes\n'`, uiWait)
	var png bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	require.NoError(t, pngenc.Encode(&png, img))
	r = p.do(t, http.MethodPost, "/fs/write?path=/alice/pic.png", png.Bytes(), withBearer(aliceTok), func(r *http.Request) { r.Header.Set("Content-Type", "image/png") })
	require.Less(t, r.status, 300, "%s", r.raw)
	require.NoError(t, pushAs(p, aliceTok, map[string]any{"to": "bob", "body": "a picture", "attachments": []string{"/alice/pic.png"}}))
	waitShown(t, pb, "a picture")
	pb.WaitJS(t, "thumbnail", `document.querySelector('li.msg li.chip.image img')?.naturalWidth === 3`, uiWait)

	pb.RequireNoCriticalA11y(t, "chat page with attachments")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pa.SaveScreenshot(t, filepath.Join(dir, "chat-attachments.png"))
	}
	noExceptions(t, pa, pb)
}

// Unread counts live in the browser: they survive a reload, hold no
// message text, and clear when the conversation is read.
func TestWebUIChat2Unread(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	createMember(t, d, admin, "bob")
	bob := enroll(t, d, admin, "bob")

	b := browsertest.Launch(t)
	pb := b.NewPage("bob")
	uiSignIn(t, pb, p.base, bob)
	waitLive(t, pb)
	secret := "secret-text-of-a-dm"
	for i := 0; i < 2; i++ {
		r := p.do(t, http.MethodPost, "/push", obj{"to": "bob", "body": secret}, withBearer(aliceTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
	badge := `document.querySelector(` + js(convSel("dm:alice")+` .badge`) + `)?.textContent`
	pb.WaitJS(t, "two unread", badge+` === '2'`, uiWait)
	stored := browsertest.Eval[string](t, pb, "storage", `JSON.stringify(Object.entries(localStorage))`)
	require.Contains(t, stored, `dm:alice`)
	require.NotContains(t, stored, secret, "no message text in storage")

	pb.Do(t, "reload", chromedp.Reload())
	waitLive(t, pb)
	pb.WaitJS(t, "still two", badge+` === '2'`, uiWait)
	openConv(t, pb, "dm:alice")
	waitShown(t, pb, secret)
	pb.WaitJS(t, "cleared", `!document.querySelector(`+js(convSel("dm:alice")+` .badge`)+`)`, uiWait)
	require.NotContains(t, browsertest.Eval[string](t, pb, "storage", `JSON.stringify(Object.entries(localStorage))`), "dm:alice")
	pb.Do(t, "reload", chromedp.Navigate(p.base+"/ui/chat?c=general"))
	waitLive(t, pb)
	require.False(t, browsertest.Eval[bool](t, pb, "no badge", `!!document.querySelector(`+js(convSel("dm:alice")+` .badge`)+`)`))
	noExceptions(t, pb)
}

// sessionCookie is the browser's svc_session cookie.
func sessionCookie(t *testing.T, pg *browsertest.Page, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	require.NoError(t, err)
	for _, c := range res.Cookies {
		if c.Name == "svc_session" {
			return c.Value
		}
	}
	t.Fatal("no svc_session cookie in the browser")
	return ""
}

// When the session ends elsewhere (logged out from another tab, revoked
// by an admin, ended by re-enrolling the authenticator), the open page
// goes to sign-in instead of reconnecting forever.
func TestWebUIChat2SessionEnds(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	// One member per case: a member signs in at most twice per TOTP step.
	for _, n := range []string{"alice", "bob", "carol"} {
		createMember(t, d, admin, n)
	}
	b := browsertest.Launch(t)

	ends := []struct {
		name   string
		member string
		end    func(t *testing.T, cookie string)
	}{
		{"logout elsewhere", "alice", func(t *testing.T, cookie string) {
			r := p.do(t, http.MethodPost, "/session/logout", nil, withSession(cookie), withHeader("Origin", p.base))
			require.Less(t, r.status, 300, "%s", r.raw)
		}},
		{"session revoked", "bob", func(t *testing.T, _ string) {
			r := p.do(t, http.MethodGet, "/members/bob/sessions", nil, withAuthorization(admin.authorization))
			require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
			list, _ := r.body["sessions"].([]any)
			require.NotEmpty(t, list, "%s", r.raw)
			for _, s := range list {
				id, _ := s.(map[string]any)["id"].(string)
				r := p.do(t, http.MethodDelete, "/members/bob/sessions/"+id, nil, withAuthorization(admin.authorization))
				require.Less(t, r.status, 300, "%s", r.raw)
			}
		}},
		{"authenticator re-enrolled", "carol", func(t *testing.T, _ string) {
			enroll(t, d, admin, "carol")
		}},
	}
	for _, e := range ends {
		pg := b.NewPage(e.member)
		uiSignIn(t, pg, p.base, enroll(t, d, admin, e.member))
		waitLive(t, pg)
		e.end(t, sessionCookie(t, pg, p.base))
		pg.WaitJS(t, e.name+": signed out", `location.pathname === '/ui/signin' && !!document.getElementById('signin-member')`, uiWait)
		require.Equal(t, "Offline", browsertest.Eval[string](t, pg, "no stream", `document.querySelector('.live')?.textContent || 'Offline'`))
	}
}

// ?next= that resolves outside /ui/ is not followed: sign-in lands on a
// page of the app.
func TestWebUIChat2NextStaysInApp(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	b := browsertest.Launch(t)
	pg := b.NewPage("browser")
	for i, next := range []string{"/ui/%2e%2e/x", "/ui/%2E%2E/%2E%2E/healthz", "//evil.example/ui/chat", "/ui/chat?c=general"} {
		pg.Do(t, "open sign-in", chromedp.Navigate(p.base+"/ui/signin?next="+strings.NewReplacer("%", "%25", "?", "%3F", "=", "%3D", "/", "%2F").Replace(next)))
		pg.WaitJS(t, "next kept", `new URL(location.href).searchParams.get('next') === `+js(next), uiWait)
		// A member per sign-in: at most two per TOTP step each.
		name := fmt.Sprintf("m%d", i)
		createMember(t, d, admin, name)
		alice := enroll(t, d, admin, name)
		pg.Do(t, "sign in",
			chromedp.WaitVisible(chromedp.ID("signin-member")),
			chromedp.SendKeys(chromedp.ID("signin-member"), alice.name),
			chromedp.SendKeys(chromedp.ID("signin-code"), alice.next(t)),
			chromedp.Click(chromedp.CSS("form.card button[type=submit]")))
		pg.WaitJS(t, "landed in the app: "+next, `location.origin === `+js(p.base)+` && location.pathname === '/ui/chat' && !!document.querySelector('.me .who')`, uiWait)
		pg.Click(t, "sign out", ".me button")
		pg.WaitJS(t, "signed out", `location.pathname === '/ui/signin'`, uiWait)
	}
}

// Scrollback: a conversation longer than several pages loads older pages
// on request until it is whole, every message exactly once and in order.
// The messages are posted concurrently, so many share a millisecond: pages
// chained by the ms cursor would skip those on a page boundary. Loading
// older keeps the reader's place; a message arriving while the reader is
// scrolled back does not move the list.
func TestWebUIChat2Scrollback(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	alice := enroll(t, d, admin, "alice")

	const n = 170
	post := func(tok, body string) error {
		enc, _ := json.Marshal(map[string]string{"body": body})
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
			return fmt.Errorf("push %q: %s", body, res.Status)
		}
		return nil
	}
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error { return post(bobTok, fmt.Sprintf("m-%03d", i)) })
	}
	require.NoError(t, g.Wait())
	// The broker's order, newest first, is what the page must show oldest first.
	var want []string
	cursor := ""
	for {
		q := "/history?limit=500"
		if cursor != "" {
			q += "&beforeId=" + cursor
		}
		r := p.do(t, http.MethodGet, q, nil, withBearer(aliceTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		msgs, _ := r.body["messages"].([]any)
		for _, m := range msgs {
			mm := m.(map[string]any)
			want = append([]string{mm["body"].(string)}, want...)
			cursor = mm["id"].(string)
		}
		if len(msgs) < 500 {
			break
		}
	}
	require.Len(t, want, n)

	b := browsertest.Launch(t)
	pa := b.NewPage("alice")
	uiSignIn(t, pa, p.base, alice)
	waitLive(t, pa)
	pa.WaitJS(t, "first page", `document.querySelectorAll('ol.messages li.msg').length === 50`, uiWait)
	require.True(t, browsertest.Eval[bool](t, pa, "at the newest", `(() => { const l = document.querySelector('ol.messages'); return l.scrollHeight - l.scrollTop - l.clientHeight < 40; })()`))

	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the older button never went away")
		if browsertest.Eval[bool](t, pa, "older hidden", `document.querySelector('button.older').hidden`) {
			break
		}
		before := browsertest.Eval[int](t, pa, "shown", `document.querySelectorAll('ol.messages li.msg').length`)
		top := browsertest.Eval[string](t, pa, "top shown", `document.querySelector('ol.messages li.msg').dataset.id`)
		dy := `(() => { const l = document.querySelector('ol.messages'); return l.querySelector('li.msg[data-id="` + top + `"]').getBoundingClientRect().top - l.getBoundingClientRect().top; })()`
		// Scrolling to the top loads the page before (issue 27).
		at := browsertest.Eval[float64](t, pa, "to the top", `(() => { const l = document.querySelector('ol.messages'); l.scrollTop = 0; l.dispatchEvent(new Event('scroll')); return `+dy+`; })()`)
		pa.WaitJS(t, "older page", `document.querySelectorAll('ol.messages li.msg').length > `+fmt.Sprint(before)+
			` || document.querySelector('button.older').hidden`, uiWait)
		pa.WaitJS(t, "older loaded", `!document.querySelector('button.older').disabled`, uiWait)
		// The message that was on top is still where the reader left it
		// (give or take its own header, which the run above it now carries).
		require.InDelta(t, at, browsertest.Eval[float64](t, pa, "place kept", dy), 40, "after page %d the reader's message moved", pages)
		require.Positive(t, browsertest.Eval[float64](t, pa, "scrolled", `document.querySelector('ol.messages').scrollTop`))
	}
	require.Equal(t, want, shownBodies(t, pa), "every message once, oldest first")

	// Scrolled back to the start, a new message does not move the list.
	browsertest.Eval[bool](t, pa, "to the top", `(() => { document.querySelector('ol.messages').scrollTop = 0; return true; })()`)
	require.NoError(t, post(bobTok, "late"))
	waitShown(t, pa, "late")
	require.Equal(t, 0, browsertest.Eval[int](t, pa, "still at the top", `document.querySelector('ol.messages').scrollTop`))
	noExceptions(t, pa)
}
