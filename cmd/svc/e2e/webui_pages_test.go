package e2e

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// Issue 27's pages in chromium against the real broker, each at desktop
// (1280×800) and phone (375×812) width: device approval that cannot hand
// out an admin token in one click, objective actions in dialogs, file
// previews and uploads with progress, and Settings.

// widths are the two viewports every page is checked at.
var widths = []struct {
	name   string
	w, h   int64
	mobile bool
}{
	{"1280", 1280, 800, false},
	{"375", 375, 812, true},
}

// atWidth sets pg's viewport to one of widths.
func atWidth(t *testing.T, pg *browsertest.Page, w int64, hgt int64, mobile bool) {
	t.Helper()
	if mobile {
		pg.Do(t, "viewport", chromedp.EmulateViewport(w, hgt, chromedp.EmulateMobile))
	} else {
		pg.Do(t, "viewport", chromedp.EmulateViewport(w, hgt))
	}
	pg.WaitJS(t, fmt.Sprintf("no sideways scroll at %d px", w), fmt.Sprintf(`innerWidth === %d && document.documentElement.scrollWidth <= %d`, w, w), uiWait)
}

// shot saves a screenshot under $SVC_WEBUI_SHOTS when set.
func shot(t *testing.T, pg *browsertest.Page, name string) {
	t.Helper()
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, name+".png"))
	}
}

// pendingStatus is the status of the enrollment with code, as the broker
// lists it ("" when it is not listed).
func pendingStatus(t *testing.T, p *proc, admin, code string) string {
	t.Helper()
	r := p.do(t, http.MethodGet, "/enroll/pending", nil, withBearer(admin))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	for _, e := range listOf(t, r.body, "pending") {
		if e["userCode"] == code {
			s, _ := e["status"].(string)
			return s
		}
	}
	return ""
}

// Device approval defaults to a new member with no member preselected, so
// one click on Approve approves nothing; approving into a member who
// holds members.manage asks first, naming the member and the admin power,
// and a No leaves the device waiting. Checked at both widths, with axe.
func TestWebUIPagesEnrollNoOneClickAdmin(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	adminName := sessionMember(t, p, adminTok)
	createMember(t, d, admin, "bob")
	au := enroll(t, d, admin, adminName)

	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	uiSignIn(t, pg, p.base, au)
	for _, w := range widths {
		c, code, cache := loginChild(t, p, "build box "+w.name)
		atWidth(t, pg, w.w, w.h, w.mobile)
		pg.Do(t, "open the link", chromedp.Navigate(p.base+"/ui/enroll?code="+code))
		pg.WaitJS(t, "what is asking", `document.querySelector('#enroll-detail .user-code')?.textContent === `+js(code)+` && document.getElementById('enroll-approve')`, uiWait)
		require.Equal(t, "create,,true", browsertest.Eval[string](t, pg, "defaults",
			`[document.querySelector('input[name=how]:checked').value, document.getElementById('enroll-member').value, document.querySelector('.bind-box').hidden].join(',')`),
			"a new member is the default and no member is preselected")
		pg.RequireNoSeriousA11y(t, "enrollment "+w.name)
		shot(t, pg, "pages-enroll-"+w.name)

		// One click on Approve: nothing is approved (a new member needs a name).
		click(t, pg, "#enroll-approve")
		pg.WaitJS(t, "asks for a name", `document.querySelector('form.decide .msg.error')?.textContent.startsWith('Enter a member name')`, uiWait)
		require.Equal(t, "pending", pendingStatus(t, p, adminTok, code))

		// An existing member who holds members.manage: asked, refused, still pending.
		click(t, pg, "#how-bind")
		setValue(t, pg, "#enroll-member", adminName)
		click(t, pg, "#enroll-approve")
		pg.WaitJS(t, "confirm names the member and the power", `(() => { const d = document.querySelector('dialog.confirm[open]'); return d && d.textContent.includes(`+js(adminName+" holds members.manage")+`) && d.textContent.includes('full admin power') && d.querySelector('button.danger'); })()`, uiWait)
		shot(t, pg, "pages-enroll-confirm-"+w.name)
		pg.RequireNoSeriousA11y(t, "enrollment admin confirm "+w.name)
		click(t, pg, "dialog.confirm button.quiet")
		pg.WaitJS(t, "dialog gone", `!document.querySelector('dialog.confirm') && !document.getElementById('enroll-done')`, uiWait)
		require.Equal(t, "pending", pendingStatus(t, p, adminTok, code), "declining the confirmation approves nothing")

		if w.mobile {
			// A plain member needs no confirmation.
			setValue(t, pg, "#enroll-member", "bob")
			click(t, pg, "#enroll-approve")
			pg.WaitJS(t, "approved as bob", `(document.getElementById('enroll-done')?.textContent || '').startsWith('Approved '+`+js(code)+`+' as bob')`, uiWait)
			require.Equal(t, 0, browsertest.Eval[int](t, pg, "no dialog", `document.querySelectorAll('dialog').length`))
			require.Equal(t, 0, c.wait(t), "stdout:\n%s\nstderr:\n%s", c.stdout, c.stderr)
			require.Equal(t, "bob", sessionMember(t, p, cachedToken(t, p, cache)))
		} else {
			// Confirmed, the admin binding goes through.
			click(t, pg, "#enroll-approve")
			confirmYes(t, pg)
			pg.WaitJS(t, "approved as admin", `(document.getElementById('enroll-done')?.textContent || '').startsWith('Approved '+`+js(code)+`+' as '+`+js(adminName)+`)`, uiWait)
			require.Equal(t, 0, c.wait(t), "stdout:\n%s\nstderr:\n%s", c.stdout, c.stderr)
			require.Equal(t, adminName, sessionMember(t, p, cachedToken(t, p, cache)))
		}
	}
	requireNoExceptions(t, pg)
}

// A member in none of the objectives sees them appear and change on her
// board live (the team stream). An objective's page at
// /ui/objectives/<id> (where chat's obj: links land), opened directly and
// from the board: its actions are one row of buttons, no open
// forms; Cancel is set apart, opens a dialog whose submit is styled as
// destructive and which says it cannot be undone; keeping it changes
// nothing, confirming cancels. At both widths, with axe.
func TestWebUIPagesObjectiveActions(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	adminName := sessionMember(t, p, adminTok)
	createMember(t, d, admin, "bob")
	createMember(t, d, admin, "carol")
	au, carol := enroll(t, d, admin, adminName), enroll(t, d, admin, "carol")

	b := browsertest.Launch(t)
	pg, pc := b.NewPage("admin"), b.NewPage("carol")
	uiSignIn(t, pg, p.base, au)
	// Carol is in none of the objectives (not originator, assignee nor
	// watcher): her board follows them live through the team stream.
	uiSignIn(t, pc, p.base, carol)
	navClick(t, pc, "/ui/objectives")
	pc.WaitJS(t, "carol's board", `document.querySelector('.board')?.getAttribute('aria-busy') === 'false'`, uiWait)
	browsertest.Eval[bool](t, pc, "mark the page", `window.__noReload = true`)
	for _, w := range widths {
		title := "Rotate keys " + w.name + " " + xssPayload
		r := p.do(t, http.MethodPost, "/objectives", obj{"title": title, "outcome": "new keys live", "assignee": "bob"}, withBearer(adminTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		id, _ := r.body["id"].(string)
		require.NotEmpty(t, id)

		pc.WaitJS(t, "carol's board: created, live", cardIn("active", title), uiWait)
		atWidth(t, pg, w.w, w.h, w.mobile)
		card := `.obj-card[data-id="` + id + `"] a.obj-title`
		// Full page loads are few per browser: each document holds two
		// streams, and chromium keeps at most 6 connections per host.
		if !w.mobile {
			pg.Do(t, "open its path directly", chromedp.Navigate(p.base+"/ui/objectives/"+id))
		} else {
			// Within the app this time: back to the board, then the card.
			click(t, pg, `.objective a[href="/ui/objectives"]`)
			pg.WaitJS(t, "card links to the path", `document.querySelector('`+card+`')?.getAttribute('href') === '/ui/objectives/`+id+`'`, uiWait)
			click(t, pg, card)
			pg.WaitJS(t, "on the path", `location.pathname === '/ui/objectives/`+id+`'`, uiWait)
		}
		pg.WaitJS(t, "detail drawn", `document.getElementById('obj-title')?.textContent === `+js(title)+` && document.querySelector('.act-row button[data-act=cancel]')`, uiWait)
		require.Equal(t, "Objectives", browsertest.Eval[string](t, pg, "nav", `document.querySelector('nav[aria-label=Main] a[aria-current=page]').textContent`))
		require.Equal(t, 0, browsertest.Eval[int](t, pg, "no open forms", `document.querySelectorAll('.obj-actions form, .obj-actions textarea, .obj-actions select, .obj-actions input').length`))
		require.Equal(t, "block,reassign,watchers,cancel", browsertest.Eval[string](t, pg, "the row", `[...document.querySelectorAll('.act-row button')].map(b => b.dataset.act).join(',')`))
		require.True(t, browsertest.Eval[bool](t, pg, "cancel looks destructive", `(() => { const b = document.querySelector('[data-act=cancel]'); return b.classList.contains('danger-text') && getComputedStyle(b).color !== getComputedStyle(document.querySelector('[data-act=block]')).color; })()`))
		requireInert(t, pg, ".objective")
		pg.RequireNoSeriousA11y(t, "objective detail "+w.name)
		shot(t, pg, "pages-objective-"+w.name)

		openAct(t, pg, "cancel")
		require.True(t, browsertest.Eval[bool](t, pg, "danger submit and warning", `(() => { const d = document.querySelector('dialog.act-cancel'); return d.querySelector('button[type=submit]').classList.contains('danger') && d.querySelector('.dlg-warn').textContent.includes('cannot be undone') && document.activeElement === d.querySelector('input[name=reason]'); })()`))
		pg.WaitJS(t, "dialog fits", fmt.Sprintf(`document.querySelector('dialog.act-cancel').getBoundingClientRect().right <= %d && document.querySelector('dialog.act-cancel').getBoundingClientRect().left >= 0`, w.w), uiWait)
		pg.RequireNoSeriousA11y(t, "cancel dialog "+w.name)
		shot(t, pg, "pages-objective-cancel-"+w.name)
		click(t, pg, "dialog.act-cancel .dlg-close")
		pg.WaitJS(t, "kept, focus back on Cancel", `!document.querySelector('dialog.act-cancel') && document.activeElement?.dataset.act === 'cancel'`, uiWait)
		r = p.do(t, http.MethodGet, "/objectives/"+id, nil, withBearer(adminTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		require.Equal(t, "active", r.body["objective"].(map[string]any)["status"], "keeping it changes nothing")

		openAct(t, pg, "cancel")
		setValue(t, pg, "dialog.act-cancel input[name=reason]", "superseded")
		submitAct(t, pg, "cancel")
		pg.WaitJS(t, "cancelled", `document.querySelector('.obj-status')?.textContent === 'Cancelled' && document.querySelector('ol.audit li[data-kind=cancelled] .what')?.textContent === 'cancelled: superseded' && !document.querySelector('[data-act=cancel]')`, uiWait)
		pc.WaitJS(t, "carol's board: cancelled, live", cardIn("cancelled", title)+` && !(`+cardIn("active", title)+`)`, uiWait)
	}
	require.True(t, browsertest.Eval[bool](t, pc, "no reload", `window.__noReload === true`), "carol's board followed live, without a reload")
	requireNoExceptions(t, pc)
	browsertest.Eval[bool](t, pg, "unknown id by path", `(() => { history.pushState(null, '', '/ui/objectives/00000000-0000-0000-0000-000000000000'); dispatchEvent(new PopStateEvent('popstate')); return true; })()`)
	pg.WaitJS(t, "not found shown", `document.getElementById('obj-title')?.textContent === 'Objective not available' && document.querySelector('.objective > .msg.error')?.textContent.includes('(not_found)')`, uiWait)
	requireNoExceptions(t, pg)
}

// tinyPNG is a 3×2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for x := 0; x < 3; x++ {
		img.Set(x, 0, color.RGBA{R: 200, A: 255})
		img.Set(x, 1, color.RGBA{B: 200, A: 255})
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

// contentType sets a raw request body's Content-Type.
func contentType(ct string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Content-Type", ct) }
}

// A file's name is a link that opens its preview: text shown as text (an
// HTML file's source, its script never run), an image, a PDF in the
// browser's own viewer (served inline, without the sandbox that stops
// Chromium's viewer); the preview closes with Escape and gives focus back
// to the name. Files dropped on the listing upload with a row each: a
// progress bar, then the outcome, a refused one with the server's error.
// At both widths, with axe.
func TestWebUIPagesFilesPreviewUpload(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	alice := enroll(t, d, admin, "alice")
	text := "first line " + xssPayload + "\nsecond line"
	html := `<script>window.__xss=7</script><b>bold</b>`
	pdf := showcasePDF("Hello PDF")
	for _, f := range []struct {
		path, ct string
		body     []byte
	}{
		{"/alice/notes.txt", "text/plain", []byte(text)},
		{"/alice/page.html", "text/html", []byte(html)},
		{"/alice/pic.png", "image/png", tinyPNG(t)},
		{"/alice/doc.pdf", "application/pdf", pdf},
	} {
		r := p.do(t, http.MethodPost, "/fs/write?path="+f.path, f.body, withBearer(aliceTok), contentType(f.ct))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
	// The PDF goes out inline as a PDF, under a CSP that blocks scripts and
	// subresources but is no sandbox; every other type keeps the sandbox.
	r := p.do(t, http.MethodGet, "/fs/read/alice/doc.pdf", nil, withBearer(aliceTok))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "application/pdf", r.header.Get("Content-Type"))
	require.Empty(t, r.header.Get("Content-Disposition"))
	require.Equal(t, "default-src 'none'", r.header.Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	r = p.do(t, http.MethodGet, "/fs/read/alice/page.html", nil, withBearer(aliceTok))
	require.Equal(t, "default-src 'none'; sandbox", r.header.Get("Content-Security-Policy"))
	require.True(t, strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment"))

	b := browsertest.Launch(t)
	pa := b.NewPage("alice")
	uiSignIn(t, pa, p.base, alice)
	link := func(name string) string { return fileRow(name) + `.querySelector('a.fname.file')` }
	open := func(name, kind string) {
		t.Helper()
		browsertest.Eval[bool](t, pa, "click "+name, `(() => { `+link(name)+`.click(); return true; })()`)
		pa.WaitJS(t, "preview of "+name, `document.querySelector('dialog.preview[open]')?.dataset.kind === `+js(kind)+` && document.querySelector('dialog.preview .preview-name').textContent === `+js(name), uiWait)
	}
	closeByEscape := func(name string) {
		t.Helper()
		pa.Do(t, "escape", chromedp.KeyEvent("\x1b"))
		pa.WaitJS(t, "closed, focus on "+name, `!document.querySelector('dialog.preview') && document.activeElement === `+link(name), uiWait)
	}
	for _, w := range widths {
		atWidth(t, pa, w.w, w.h, w.mobile)
		pa.Do(t, "open files", chromedp.Navigate(p.base+"/ui/files"))
		pa.WaitJS(t, "listed", fileRow("notes.txt")+` && `+fileRow("doc.pdf"), uiWait)
		require.Equal(t, "/fs/read/alice/notes.txt", browsertest.Eval[string](t, pa, "name is a link", link("notes.txt")+`.getAttribute('href')`))

		open("notes.txt", "text")
		pa.WaitJS(t, "text shown as text", `document.querySelector('dialog.preview pre.preview-text')?.textContent === `+js(text), uiWait)
		requireInert(t, pa, "dialog.preview")
		pa.RequireNoSeriousA11y(t, "text preview "+w.name)
		shot(t, pa, "pages-files-preview-text-"+w.name)
		closeByEscape("notes.txt")

		open("page.html", "text")
		pa.WaitJS(t, "html source as text", `document.querySelector('dialog.preview pre.preview-text')?.textContent === `+js(html), uiWait)
		require.Equal(t, "undefined", browsertest.Eval[string](t, pa, "no script ran", `typeof window.__xss`))
		closeByEscape("page.html")

		open("pic.png", "image")
		pa.WaitJS(t, "image decoded", `(() => { const i = document.querySelector('dialog.preview img'); return i && i.complete && i.naturalWidth === 3 && i.alt === 'pic.png'; })()`, uiWait)
		closeByEscape("pic.png")

		open("doc.pdf", "pdf")
		// The frame holds the browser's PDF viewer: a document of type
		// application/pdf (a blocked or downloaded PDF leaves an error page
		// or an empty frame).
		pa.WaitJS(t, "PDF in the browser's viewer", `navigator.pdfViewerEnabled && (() => { const f = document.querySelector('dialog.preview iframe.pdf-frame'); return f && f.getAttribute('src') === '/fs/read/alice/doc.pdf' && f.contentDocument?.contentType === 'application/pdf'; })()`, uiWait)
		pa.WaitJS(t, "preview fits", fmt.Sprintf(`document.querySelector('dialog.preview').getBoundingClientRect().right <= %d`, w.w), uiWait)
		pa.RequireNoSeriousA11y(t, "pdf preview "+w.name)
		shot(t, pa, "pages-files-preview-pdf-"+w.name)
		click(t, pa, "dialog.preview .preview-close")
		pa.WaitJS(t, "closed by its button", `!document.querySelector('dialog.preview') && document.activeElement === `+link("doc.pdf"), uiWait)

		// Two files dropped: one lands, one the server refuses; each has its row.
		good := "dropped-" + w.name + ".txt"
		browsertest.Eval[bool](t, pa, "drop two files", `(() => {
			const dt = new DataTransfer();
			dt.items.add(new File(['x'.repeat(200000)], `+js(good)+`, {type: 'text/plain'}));
			dt.items.add(new File(['y'], '..', {type: 'text/plain'}));
			const zone = document.querySelector('.dropzone');
			for (const type of ['dragenter', 'dragover', 'drop']) zone.dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
			return true;
		})()`)
		pa.WaitJS(t, "outcomes shown", `(() => {
			const rows = [...document.querySelectorAll('.uploads li.upload')].slice(0, 2);
			const by = (n) => rows.find(r => r.querySelector('.up-name').textContent === n);
			const ok = by(`+js(good)+`), bad = by('..');
			return ok && bad && ok.dataset.state === 'done' && ok.querySelector('progress').value === ok.querySelector('progress').max
				&& bad.dataset.state === 'error' && bad.querySelector('.up-state').textContent.includes('(bad_request)')
				&& document.querySelector('.files > .msg.error')?.textContent === '1 of 2 uploads failed; see the list below.';
		})()`, uiWait)
		pa.WaitJS(t, "listed after upload", fileRow(good), uiWait)
		pa.RequireNoSeriousA11y(t, "files "+w.name)
		shot(t, pa, "pages-files-"+w.name)
	}
	requireNoExceptions(t, pa)
}

// Settings holds the profile (name, role, permissions), the theme (kept
// by the browser, applied on every page, surviving a reload), browser
// notifications, the member's sessions with "sign out the others" (the
// other browser lands on sign-in) and device tokens with Revoke (the
// token stops working). At both widths, with axe.
func TestWebUIPagesSettings(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice", "objectives.create")
	r := p.do(t, http.MethodPatch, "/members/alice", obj{"role": obj{"title": "Release lead " + xssPayload, "description": "ships"}}, withBearer(adminTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	alice := enroll(t, d, admin, "alice")

	b := browsertest.Launch(t)
	pa, other := b.NewPage("alice"), b.NewPage("alice-elsewhere")
	uiSignIn(t, pa, p.base, alice)
	uiSignIn(t, other, p.base, alice)
	waitLive(t, other)

	for i, w := range widths {
		atWidth(t, pa, w.w, w.h, w.mobile)
		pa.Do(t, "open settings", chromedp.Navigate(p.base+"/ui/settings"))
		pa.WaitJS(t, "settings drawn", `document.querySelector('.profile-name')?.textContent === 'alice' && document.getElementById('sessions')?.getAttribute('aria-busy') === 'false' && document.getElementById('devices')?.getAttribute('aria-busy') === 'false' && document.getElementById('push-state')?.dataset.state`, uiWait)
		require.Equal(t, "Release lead "+xssPayload, browsertest.Eval[string](t, pa, "role", `document.querySelector('.profile-role').textContent`))
		require.Contains(t, browsertest.Eval[string](t, pa, "perms", `document.querySelector('.profile-perms').textContent`), "objectives.create")
		requireInert(t, pa, ".settings")
		if i == 0 {
			require.Equal(t, 2, browsertest.Eval[int](t, pa, "two sessions", `document.querySelectorAll('#sessions li.session').length`))
			require.Equal(t, 1, browsertest.Eval[int](t, pa, "one is this browser", `document.querySelectorAll('#sessions li.session.current').length`))
		}
		pa.RequireNoSeriousA11y(t, "settings "+w.name)
		shot(t, pa, "pages-settings-"+w.name)
	}

	// Sign out the other session: that browser is back on sign-in.
	click(t, pa, "#signout-others")
	confirmYes(t, pa)
	pa.WaitJS(t, "one session left", `document.querySelectorAll('#sessions li.session').length === 1 && document.querySelector('#sessions li.session.current') && document.getElementById('signout-others').hidden`, uiWait)
	other.WaitJS(t, "the other browser is signed out", `location.pathname === '/ui/signin'`, uiWait)

	// Revoke the device token: it stops working.
	require.Equal(t, http.StatusOK, p.do(t, http.MethodGet, "/session", nil, withBearer(aliceTok)).status)
	click(t, pa, "#devices li.token button")
	confirmYes(t, pa)
	pa.WaitJS(t, "no token left", `document.querySelector('#devices li.empty')?.textContent === 'No device holds a token of yours.'`, uiWait)
	require.Equal(t, http.StatusUnauthorized, p.do(t, http.MethodGet, "/session", nil, withBearer(aliceTok)).status)

	// The theme: dark is applied at once, survives a reload and reaches
	// other pages; system removes the choice.
	bg := `getComputedStyle(document.documentElement).getPropertyValue('--bg').trim()`
	click(t, pa, "#theme-dark")
	pa.WaitJS(t, "dark", `document.documentElement.dataset.theme === 'dark' && `+bg+` === '#0f1419' && localStorage.getItem('svc.theme.v1') === 'dark'`, uiWait)
	pa.RequireNoSeriousA11y(t, "settings dark")
	shot(t, pa, "pages-settings-dark-375")
	pa.Do(t, "reload on files", chromedp.Navigate(p.base+"/ui/files"))
	pa.WaitJS(t, "still dark", `document.documentElement.dataset.theme === 'dark' && `+bg+` === '#0f1419' && document.querySelector('.files')`, uiWait)
	pa.Do(t, "back to settings", chromedp.Navigate(p.base+"/ui/settings"))
	pa.WaitJS(t, "dark is the choice shown", `document.getElementById('theme-dark')?.checked === true`, uiWait)
	click(t, pa, "#theme-light")
	pa.WaitJS(t, "light", `document.documentElement.dataset.theme === 'light' && `+bg+` === '#ffffff'`, uiWait)
	click(t, pa, "#theme-system")
	pa.WaitJS(t, "system", `!('theme' in document.documentElement.dataset) && localStorage.getItem('svc.theme.v1') === null`, uiWait)
	requireNoExceptions(t, pa)
}
