package e2e

import (
	"bytes"
	"encoding/base64"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// The Objectives and Files pages of the web app (issue 15) in chromium
// against the real broker.

// requireNoExceptions asserts the page threw nothing.
func requireNoExceptions(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", "%s: %s", pg.Name, line)
	}
}

// cardIn is a JS expression: the board card titled title in column status.
func cardIn(status, title string) string {
	return `[...document.querySelectorAll('.column[data-status="` + status + `"] .obj-card .obj-title')].find(a => a.textContent === ` + js(title) + `)`
}

// auditKinds is a JS expression: the kinds of the audit log, in order.
const auditKinds = `[...document.querySelectorAll('ol.audit li')].map(li => li.dataset.kind).join(',')`

// Alice creates an objective for bob in her browser; bob's board shows it
// live, bob blocks it with a reason, unblocks it and completes it in his,
// and alice's board follows every step live without a reload. Title and
// body carry an XSS payload that stays text. A create the server refuses
// shows the server's error.
func TestWebUIObjectivesLive(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice", "objectives.create")
	createMember(t, d, admin, "bob")
	createMember(t, d, admin, "carol")
	alice, bob := enroll(t, d, admin, "alice"), enroll(t, d, admin, "bob")
	// A file of alice's to attach.
	r := p.do(t, http.MethodPost, "/fs/write?path=/alice/spec.txt", []byte("the spec"), withBearer(aliceTok), textPlain)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)

	b := browsertest.Launch(t)
	pa, pb := b.NewPage("alice"), b.NewPage("bob")
	uiSignIn(t, pa, p.base, alice)
	uiSignIn(t, pb, p.base, bob)
	for _, pg := range []*browsertest.Page{pa, pb} {
		navClick(t, pg, "/ui/objectives")
		pg.WaitJS(t, "board drawn", `document.querySelectorAll('.board .column').length === 4 && document.querySelector('.board').getAttribute('aria-busy') === 'false'`, uiWait)
		waitLive(t, pg)
	}
	require.Equal(t, 0, browsertest.Eval[int](t, pb, "bob cannot create", `document.querySelectorAll('details.create').length`))

	title := "Ship it " + xssPayload
	body := "Context " + xssPayload + "\nsecond line"
	fill := func(attach string) {
		click(t, pa, `details.create > summary`)
		pa.WaitJS(t, "shown", `document.querySelector(`+js(`form.new-objective input[name=title]`)+`)`, uiWait)
		setValue(t, pa, `form.new-objective input[name=title]`, title)
		setValue(t, pa, `form.new-objective textarea[name=outcome]`, "bob's part is live")
		setValue(t, pa, `form.new-objective textarea[name=body]`, body)
		pa.WaitJS(t, "members loaded", `document.querySelector('form.new-objective select[name=assignee] option[value=bob]') && document.querySelector('form.new-objective input[name=watchers][value=carol]')`, uiWait)
		setValue(t, pa, `form.new-objective select[name=assignee]`, "bob")
		click(t, pa, `form.new-objective input[name=watchers][value=carol]`)
		setValue(t, pa, `fieldset.attach input[type=text]`, attach)
		click(t, pa, `fieldset.attach .attach-add button`)
		pa.WaitJS(t, "attachment listed", `[...document.querySelectorAll('.attach-list code')].some(c => c.textContent === `+js(attach)+`)`, uiWait)
	}

	// The server refuses an attachment that does not exist: its error shows.
	fill("/alice/missing.txt")
	click(t, pa, `form.new-objective button[type=submit]`)
	pa.WaitJS(t, "server error shown", `document.querySelector('form.new-objective > .msg.error')?.textContent.includes('(bad_request)')`, uiWait)
	click(t, pa, `.attach-list button`)
	setValue(t, pa, `fieldset.attach input[type=text]`, "/alice/spec.txt")
	click(t, pa, `fieldset.attach .attach-add button`)
	click(t, pa, `form.new-objective button[type=submit]`)
	pa.WaitJS(t, "created", `document.querySelector('form.new-objective > .msg.ok')?.textContent.startsWith('Created')`, uiWait)
	pa.WaitJS(t, "alice's board: active", cardIn("active", title), uiWait)
	browsertest.Eval[bool](t, pa, "mark the page", `window.__noReload = true`)

	// Bob's board shows it live: he is the assignee.
	pb.WaitJS(t, "bob's board: active, live", cardIn("active", title), uiWait)
	requireInert(t, pb, ".board")
	requireInert(t, pa, ".board")

	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		click(t, pa, `details.create > summary`)
		pa.SaveScreenshot(t, filepath.Join(dir, "objectives.png"))
	}
	pa.RequireNoCriticalA11y(t, "objectives board")

	// Bob opens it and blocks it with a reason.
	click(t, pb, `.column[data-status="active"] .obj-card .obj-title`)
	pb.WaitJS(t, "detail drawn", `document.getElementById('obj-title')?.textContent === `+js(title)+` && document.querySelector('.act-row button[data-act=block]')`, uiWait)
	require.Equal(t, body, browsertest.Eval[string](t, pb, "body text", `document.querySelector('.obj-body').textContent`))
	requireInert(t, pb, ".objective")
	pb.WaitJS(t, "attachment link", `document.querySelector('.objective ul.attachments a')?.getAttribute('href') === '/fs/read/alice/spec.txt'`, uiWait)
	got := browsertest.Eval[string](t, pb, "read the attachment", `fetch(document.querySelector('.objective ul.attachments a').href).then(r => r.text())`)
	require.Equal(t, "the spec", got, "the assignee reads the attachment through its grant")
	pb.WaitJS(t, "thread has the announcement", `[...document.querySelectorAll('ol.thread li.msg .body')].some(b => b.textContent.includes("bob's part is live"))`, uiWait)
	require.Equal(t, "assigned", browsertest.Eval[string](t, pb, "audit", auditKinds))

	openAct(t, pb, "block")
	setValue(t, pb, `dialog.act-block textarea`, "waiting on the vendor <i>")
	submitAct(t, pb, "block")
	pb.WaitJS(t, "blocked in the audit log", auditKinds+` === 'assigned,blocked' && document.querySelector('.obj-status').textContent === 'Blocked'`, uiWait)
	require.Equal(t, "bob", browsertest.Eval[string](t, pb, "actor", `document.querySelector('ol.audit li[data-kind=blocked] .actor').textContent`))
	require.Equal(t, "blocked: waiting on the vendor <i>", browsertest.Eval[string](t, pb, "reason", `document.querySelector('ol.audit li[data-kind=blocked] .what').textContent`))
	pa.WaitJS(t, "alice's board: blocked, live", cardIn("blocked", title), uiWait)
	pa.WaitJS(t, "alice sees the reason", `[...document.querySelectorAll('.column[data-status=blocked] .reason')].some(p => p.textContent === 'Blocked: waiting on the vendor <i>')`, uiWait)

	click(t, pb, `.act-row button[data-act=unblock]`)
	pb.WaitJS(t, "unblocked in the audit log", auditKinds+` === 'assigned,blocked,unblocked' && document.querySelector('.obj-status').textContent === 'Active'`, uiWait)
	pa.WaitJS(t, "alice's board: active again", cardIn("active", title), uiWait)

	// A post in the thread reaches alice's session too (she originated it).
	setValue(t, pb, "#discuss-body", "on it")
	click(t, pb, `form.composer button[type=submit]`)
	pb.WaitJS(t, "post shown", `[...document.querySelectorAll('ol.thread li.msg .body')].some(b => b.textContent === 'on it')`, uiWait)

	openAct(t, pb, "complete")
	setValue(t, pb, `dialog.act-complete textarea`, "shipped")
	submitAct(t, pb, "complete")
	pb.WaitJS(t, "completed in the audit log", auditKinds+` === 'assigned,blocked,unblocked,completed' && document.querySelector('.obj-status').textContent === 'Done'`, uiWait)
	pb.WaitJS(t, "no more lifecycle actions", `!document.querySelector('[data-act=block], [data-act=unblock], [data-act=complete]')`, uiWait)
	pa.WaitJS(t, "alice's board: done, live", cardIn("done", title)+` && !(`+cardIn("active", title)+`)`, uiWait)
	require.True(t, browsertest.Eval[bool](t, pa, "no reload", `window.__noReload === true`), "the board followed live, without a reload")
	pb.RequireNoCriticalA11y(t, "objective detail")

	// Alice's detail: the whole log, the thread post, and as originator
	// she manages watchers (carol, then removed).
	click(t, pa, `.column[data-status="done"] .obj-card .obj-title`)
	pa.WaitJS(t, "alice's detail", auditKinds+` === 'assigned,blocked,unblocked,completed'`, uiWait)
	pa.WaitJS(t, "thread post seen", `[...document.querySelectorAll('ol.thread li.msg .body')].some(b => b.textContent === 'on it')`, uiWait)
	openAct(t, pa, "watchers")
	click(t, pa, `dialog.act-watchers button[aria-label="Remove watcher carol"]`)
	pa.WaitJS(t, "watcher removed", auditKinds+`.endsWith(',watcher_removed') && document.querySelector('ol.audit li[data-kind=watcher_removed] .what').textContent === 'removed watcher carol'`, uiWait)
	requireInert(t, pa, ".objective")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pb.SaveScreenshot(t, filepath.Join(dir, "objective-detail.png"))
		pb.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))

		navClick(t, pb, "/ui/objectives")
		pb.WaitJS(t, "board drawn", cardIn("done", title), uiWait)
		pb.SaveScreenshot(t, filepath.Join(dir, "objectives-375.png"))
	}
	pa.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))

	pa.WaitJS(t, "detail fits 375 px", `document.documentElement.scrollWidth <= 375`, uiWait)
	navClick(t, pa, "/ui/objectives")
	pa.WaitJS(t, "board fits 375 px, one column per status stacked", cardIn("done", title)+` && document.documentElement.scrollWidth <= 375 && (() => { const c = [...document.querySelectorAll('.board .column')].map(e => e.getBoundingClientRect()); return c.every((r, i) => i === 0 || r.top >= c[i-1].bottom); })()`, uiWait)
	requireNoExceptions(t, pa)
	requireNoExceptions(t, pb)
}

// fileRow is a JS expression: the listing row whose name is name.
func fileRow(name string) string {
	return `[...document.querySelectorAll('.listing tbody tr')].find(tr => tr.querySelector('.fname')?.textContent === ` + js(name) + `)`
}

// Alice uploads a binary file (every byte value) through the page's file
// input and downloads it byte-identical through the page's link; a file
// dropped on the listing with an XSS payload as its name shows the name as
// text and downloads as an attachment under that name; mkdir, move and
// delete (confirmed) work; a file bob shares with her is listed under
// "Shared with me" and "All homes".
func TestWebUIFilesUploadDownload(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	alice := enroll(t, d, admin, "alice")
	r := p.do(t, http.MethodPost, "/fs/write?path=/bob/notes/for-alice.txt", []byte("from bob"), withBearer(bobTok), textPlain)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	r = p.do(t, http.MethodPost, "/push", obj{"to": "alice", "body": "see attached", "attachments": []string{"/bob/notes/for-alice.txt"}}, withBearer(bobTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)

	content := make([]byte, 0, 4*256)
	for i := 0; i < 4; i++ {
		for c := 0; c < 256; c++ {
			content = append(content, byte(c))
		}
	}
	dir := t.TempDir()
	local := filepath.Join(dir, "bytes.bin")
	require.NoError(t, os.WriteFile(local, content, 0o600))

	b := browsertest.Launch(t)
	pa := b.NewPage("alice")
	uiSignIn(t, pa, p.base, alice)
	navClick(t, pa, "/ui/files")
	pa.WaitJS(t, "own home listed", `document.querySelector('.listing')?.getAttribute('aria-busy') === 'false' && document.querySelector('.listing .empty')?.textContent === 'This folder is empty.'`, uiWait)

	// A folder, entered by its link.
	setValue(t, pa, "#mkdir-name", "docs")
	click(t, pa, `form.inline-form button[type=submit]`)
	pa.WaitJS(t, "folder listed", fileRow("docs"), uiWait)
	click(t, pa, `.listing a.fname.dir`)
	pa.WaitJS(t, "in docs", `new URL(location.href).searchParams.get('path') === '/alice/docs' && document.querySelector('.listing .empty')`, uiWait)

	// Upload through the file input; download through the page's link.
	pa.Do(t, "upload", chromedp.SetUploadFiles(chromedp.ID("upload-input"), []string{local}))

	pa.WaitJS(t, "uploaded", fileRow("bytes.bin")+` && document.querySelector('.files > .msg.ok')?.textContent === 'Uploaded 1 file.' && document.querySelector('.uploads li[data-state=done] .up-name')?.textContent === 'bytes.bin'`, uiWait)
	require.Equal(t, "1.0 KiB", browsertest.Eval[string](t, pa, "size", fileRow("bytes.bin")+`.querySelector('td[data-label=Size]').textContent`))
	link := fileRow("bytes.bin") + `.querySelector('a.download')`
	require.Equal(t, "/fs/read/alice/docs/bytes.bin", browsertest.Eval[string](t, pa, "href", link+`.getAttribute('href')`))
	require.Equal(t, "bytes.bin", browsertest.Eval[string](t, pa, "download name", link+`.getAttribute('download')`))
	b64 := browsertest.Eval[string](t, pa, "download", `fetch(`+link+`.href).then(r => r.arrayBuffer()).then(buf => { let s = ''; for (const x of new Uint8Array(buf)) s += String.fromCharCode(x); return btoa(s); })`)
	downloaded, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	require.True(t, bytes.Equal(content, downloaded), "downloaded %d bytes, not the %d uploaded", len(downloaded), len(content))

	// A hostile name, dropped on the listing: text only, and the server
	// sends HTML as an attachment under exactly that name.
	evil := `<img src=x onerror="window.__xss=1">".html`
	browsertest.Eval[bool](t, pa, "drop a file", `(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(['<script>window.__xss=3</script>'], `+js(evil)+`, {type: 'text/html'}));
		const zone = document.querySelector('.dropzone');
		for (const type of ['dragenter', 'dragover', 'drop']) zone.dispatchEvent(new DragEvent(type, {dataTransfer: dt, bubbles: true, cancelable: true}));
		return true;
	})()`)
	pa.WaitJS(t, "dropped file listed", fileRow(evil), uiWait)
	// Dropped beside the listing, a file is refused by the page (the
	// browser would otherwise leave the app to show it) and not uploaded.
	require.Equal(t, "true,true,false", browsertest.Eval[string](t, pa, "drop beside", `(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(['x'], 'beside.txt', {type: 'text/plain'}));
		const h1 = document.querySelector('.files h1');
		const over = new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true});
		const drop = new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true});
		h1.dispatchEvent(over);
		h1.dispatchEvent(drop);
		const uploading = [...document.querySelectorAll('.files .msg')].some(m => m.textContent.includes('beside'));
		return over.defaultPrevented + ',' + drop.defaultPrevented + ',' + uploading;
	})()`))
	requireInert(t, pa, ".files")
	disp := browsertest.Eval[string](t, pa, "disposition", `fetch(`+fileRow(evil)+`.querySelector('a.download').href).then(r => r.headers.get('content-disposition') || '')`)
	kind, params, err := mime.ParseMediaType(disp)
	require.NoError(t, err, "%q", disp)
	require.Equal(t, "attachment", kind)
	require.Equal(t, evil, params["filename"])
	require.Equal(t, evil, browsertest.Eval[string](t, pa, "download attr", fileRow(evil)+`.querySelector('a.download').getAttribute('download')`))
	require.Equal(t, "undefined", browsertest.Eval[string](t, pa, "xss flag", `typeof window.__xss`))

	// Move (rename) through the dialog, then delete with confirmation.
	click(t, pa, `button[aria-label="Move or rename bytes.bin"]`)
	pa.WaitJS(t, "shown", `document.querySelector(`+js(`dialog form.move input`)+`)`, uiWait)
	setValue(t, pa, `dialog form.move input`, "/alice/docs/renamed.bin")
	click(t, pa, `dialog form.move button[type=submit]`)
	pa.WaitJS(t, "renamed", fileRow("renamed.bin")+` && !`+fileRow("bytes.bin"), uiWait)
	browsertest.Eval[bool](t, pa, "focus delete", `(() => { document.querySelector('button[aria-label="Delete renamed.bin"]').focus(); return true; })()`)
	click(t, pa, `button[aria-label="Delete renamed.bin"]`)
	pa.WaitJS(t, "shown", `document.querySelector(`+js(`dialog.confirm button.danger`)+`)`, uiWait)
	click(t, pa, `dialog.confirm button.quiet`)
	require.True(t, browsertest.Eval[bool](t, pa, "still there", `!!`+fileRow("renamed.bin")))
	require.Equal(t, "Delete renamed.bin", browsertest.Eval[string](t, pa, "focus back", `document.activeElement.getAttribute('aria-label') || document.activeElement.tagName`),
		"a cancelled dialog gives focus back to the button that opened it")
	click(t, pa, `button[aria-label="Delete renamed.bin"]`)
	pa.WaitJS(t, "shown", `document.querySelector(`+js(`dialog.confirm button.danger`)+`)`, uiWait)
	click(t, pa, `dialog.confirm button.danger`)
	pa.WaitJS(t, "deleted", `!`+fileRow("renamed.bin")+` && `+fileRow(evil), uiWait)
	pa.RequireNoCriticalA11y(t, "files page")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pa.SaveScreenshot(t, filepath.Join(dir, "files.png"))
	}

	// Shared with her: bob's attachment, readable, not changeable.
	click(t, pa, `nav.tabs a[href="/ui/files?view=shared"]`)
	pa.WaitJS(t, "shared listed", fileRow("/bob/notes/for-alice.txt"), uiWait)
	require.Equal(t, 0, browsertest.Eval[int](t, pa, "no move/delete", fileRow("/bob/notes/for-alice.txt")+`.querySelectorAll('button').length`))
	require.Equal(t, "from bob", browsertest.Eval[string](t, pa, "read shared", `fetch(`+fileRow("/bob/notes/for-alice.txt")+`.querySelector('a.download').href).then(r => r.text())`))
	click(t, pa, `nav.tabs a[href="/ui/files?path=%2F"]`)
	pa.WaitJS(t, "homes", fileRow("alice")+` && `+fileRow("bob"), uiWait)
	click(t, pa, `.listing a.fname.dir[href="/ui/files?path=%2Fbob"]`)
	pa.WaitJS(t, "bob's shared folder only, read-only", fileRow("notes")+` && !document.getElementById('upload-input')`, uiWait)

	pa.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))

	click(t, pa, `nav.tabs a[href="/ui/files?path=%2Falice"]`)
	click(t, pa, `.listing a.fname.dir`)
	pa.WaitJS(t, "fits 375 px", fileRow(evil)+` && document.documentElement.scrollWidth <= 375`, uiWait)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pa.SaveScreenshot(t, filepath.Join(dir, "files-375.png"))
	}
	requireInert(t, pa, ".files")
	requireNoExceptions(t, pa)
}

// textPlain makes a request's body text/plain (do sets JSON).
func textPlain(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }

// click waits until sel matches an enabled element and clicks it, as a
// user would (the element's own click(): chromedp's node queries can
// miss an element the page has just redrawn).
// navClick follows the main navigation's link to path. On a phone the
// navigation folds behind the menu button, which is opened first.
func navClick(t *testing.T, pg *browsertest.Page, path string) {
	t.Helper()
	sel := `nav[aria-label=Main] a[href="` + path + `"]`
	pg.WaitJS(t, "navigation drawn", `document.querySelector(`+js(sel)+`) !== null`, uiWait)
	browsertest.Eval[bool](t, pg, "open the menu when folded", `(() => {
		const a = document.querySelector(`+js(sel)+`), b = document.querySelector('button.menu-toggle');
		if (a.getClientRects().length === 0 && b && b.getClientRects().length > 0 && b.getAttribute('aria-expanded') !== 'true') b.click();
		return true;
	})()`)
	click(t, pg, sel)
}

func click(t *testing.T, pg *browsertest.Page, sel string) {
	t.Helper()
	q := `document.querySelector(` + js(sel) + `)`
	pg.WaitJS(t, "clickable: "+sel, q+` && !`+q+`.disabled && `+q+`.getClientRects().length > 0`, uiWait)
	browsertest.Eval[bool](t, pg, "click "+sel, `(() => { `+q+`.click(); return true; })()`)
}

// setValue waits for the control sel and gives it value, firing input and
// change as typing and choosing do.
func setValue(t *testing.T, pg *browsertest.Page, sel, value string) {
	t.Helper()
	q := `document.querySelector(` + js(sel) + `)`
	pg.WaitJS(t, "control: "+sel, q, uiWait)
	browsertest.Eval[bool](t, pg, "set "+sel, `(() => { const e = `+q+`; e.focus(); e.value = `+js(value)+`;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
}

// A manager's detail page offers what members.manage allows: reassign
// (the new assignee in the audit log), add a watcher, cancel with a
// reason; a terminal objective offers no lifecycle action any more. A
// member without rights sees no actions, and an unknown id says so.
func TestWebUIObjectivesManage(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	createMember(t, d, admin, "bob")
	createMember(t, d, admin, "carol")
	createMember(t, d, admin, "dave")
	adminU, dave := enroll(t, d, admin, "admin"), enroll(t, d, admin, "dave")
	r := p.do(t, http.MethodPost, "/objectives", obj{"title": "Rotate keys", "outcome": "new keys live", "assignee": "bob"}, withBearer(adminTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	id, _ := r.body["id"].(string)
	require.NotEmpty(t, id)

	b := browsertest.Launch(t)
	pg, pd := b.NewPage("admin"), b.NewPage("dave")
	uiSignIn(t, pg, p.base, adminU)
	uiSignIn(t, pd, p.base, dave)
	waitLive(t, pg)
	navClick(t, pg, "/ui/objectives")

	// A new objective with a file uploaded from the form and attached.
	local := filepath.Join(t.TempDir(), "brief.txt")
	require.NoError(t, os.WriteFile(local, []byte("the brief"), 0o600))
	click(t, pg, `details.create > summary`)
	pg.Do(t, "upload an attachment", chromedp.SetUploadFiles(chromedp.ID("attach-upload"), []string{local}))
	pg.WaitJS(t, "uploaded and attached", `[...document.querySelectorAll('.attach-list code')].some(c => c.textContent === '/admin/attachments/brief.txt')`, uiWait)
	setValue(t, pg, `form.new-objective input[name=title]`, "Read the brief")
	setValue(t, pg, `form.new-objective textarea[name=outcome]`, "read")
	pg.WaitJS(t, "members loaded", `document.querySelector('form.new-objective select[name=assignee] option[value=dave]')`, uiWait)
	setValue(t, pg, `form.new-objective select[name=assignee]`, "dave")
	click(t, pg, `form.new-objective button[type=submit]`)
	pg.WaitJS(t, "created", cardIn("active", "Read the brief"), uiWait)
	r = p.do(t, http.MethodGet, "/objectives?assignee=dave", nil, withBearer(adminTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	mine := listOf(t, r.body, "objectives")
	require.Len(t, mine, 1)
	atts, _ := mine[0]["attachments"].([]any)
	require.Len(t, atts, 1)
	require.Equal(t, "/admin/attachments/brief.txt", atts[0].(map[string]any)["path"])

	// The members (GET /roster) answer only after the Reassign dialog is
	// open, as on a slow link: the dialog fills its choices when they come.
	require.True(t, browsertest.Eval[bool](t, pg, "hold the roster", `(() => {
		const fetch0 = window.fetch;
		let release;
		const held = new Promise((r) => { release = r; });
		window.__releaseRoster = release;
		window.fetch = (url, opts) => new URL(String(url), location.href).pathname === '/roster' ? held.then(() => fetch0(url, opts)) : fetch0(url, opts);
		return true;
	})()`))
	click(t, pg, `.obj-card[data-id="`+id+`"] .obj-title`)
	pg.WaitJS(t, "detail", `document.getElementById('obj-title')?.textContent === 'Rotate keys' && document.querySelector('.act-row button[data-act=reassign]')`, uiWait)
	require.False(t, browsertest.Eval[bool](t, pg, "no complete for a non-assignee", `!!document.querySelector('[data-act=complete]')`))

	openAct(t, pg, "reassign")
	require.Equal(t, []string{"Loading members…"}, browsertest.Eval[[]string](t, pg, "choices before the members",
		`[...document.querySelectorAll('dialog.act-reassign select option')].map(o => o.textContent)`))
	browsertest.Eval[bool](t, pg, "release the roster", `(window.__releaseRoster(), true)`)
	pg.WaitJS(t, "choices", `document.querySelector('dialog.act-reassign select option[value=carol]')`, uiWait)
	setValue(t, pg, `dialog.act-reassign select`, "carol")
	setValue(t, pg, `dialog.act-reassign input`, "bob is away")
	submitAct(t, pg, "reassign")
	pg.WaitJS(t, "reassigned", auditKinds+` === 'assigned,reassigned' && document.querySelector('ol.audit li[data-kind=reassigned] .what').textContent === 'reassigned from bob to carol: bob is away'`, uiWait)
	pg.WaitJS(t, "assignee shown", `[...document.querySelectorAll('.facts dt')].find(dt => dt.textContent === 'Assignee')?.nextElementSibling.textContent === 'carol'`, uiWait)

	openAct(t, pg, "watchers")
	pg.WaitJS(t, "watcher choices", `document.querySelector('dialog.act-watchers select option[value=dave]')`, uiWait)
	setValue(t, pg, `dialog.act-watchers select`, "dave")
	click(t, pg, `dialog.act-watchers form button[type=submit]`)
	pg.WaitJS(t, "watcher added", auditKinds+` === 'assigned,reassigned,watcher_added' && document.querySelector('dialog.act-watchers button[aria-label="Remove watcher dave"]')`, uiWait)
	click(t, pg, `dialog.act-watchers .dlg-close`)
	pg.WaitJS(t, "closed, focus back", `!document.querySelector('dialog.act-watchers') && document.activeElement?.dataset.act === 'watchers'`, uiWait)

	// Dave, now a watcher, opens it: no actions for him, but the thread
	// (from his joining on: the broker keeps history per recipient).
	navClick(t, pd, "/ui/objectives")
	click(t, pd, `.obj-card[data-id="`+id+`"] .obj-title`)
	pd.WaitJS(t, "dave's detail", `document.getElementById('obj-title')?.textContent === 'Rotate keys' && document.querySelector('.obj-actions .hint')?.textContent === 'You have no actions on this objective.'`, uiWait)
	pd.WaitJS(t, "dave reads the thread", `[...document.querySelectorAll('ol.thread li.msg .body')].some(b => b.textContent.includes('added dave as a watcher'))`, uiWait)

	openAct(t, pg, "cancel")
	setValue(t, pg, `dialog.act-cancel input`, "superseded")
	submitAct(t, pg, "cancel")
	pg.WaitJS(t, "cancelled", auditKinds+` === 'assigned,reassigned,watcher_added,cancelled' && document.querySelector('.obj-status').textContent === 'Cancelled'`, uiWait)
	pg.WaitJS(t, "no lifecycle actions", `!document.querySelector('[data-act=block], [data-act=cancel], [data-act=reassign]') && document.querySelector('[data-act=watchers]')`, uiWait)
	pd.WaitJS(t, "dave sees it cancelled, live", `document.querySelector('.obj-status')?.textContent === 'Cancelled' && document.querySelector('ol.audit li[data-kind=cancelled] .what')?.textContent === 'cancelled: superseded'`, uiWait)
	pg.RequireNoCriticalA11y(t, "objective detail (manager)")

	pg.Do(t, "unknown id", chromedp.Navigate(p.base+"/ui/objectives?id=00000000-0000-0000-0000-000000000000"))
	pg.WaitJS(t, "not found shown", `document.getElementById('obj-title')?.textContent === 'Objective not available' && document.querySelector('.objective > .msg.error')?.textContent.includes('(not_found)')`, uiWait)
	requireNoExceptions(t, pg)
	requireNoExceptions(t, pd)
}

// openAct opens an objective action's dialog from the detail page's row.
func openAct(t *testing.T, pg *browsertest.Page, key string) {
	t.Helper()
	click(t, pg, `.act-row button[data-act=`+key+`]`)
	pg.WaitJS(t, "dialog "+key, `document.querySelector('dialog.act-`+key+`[open]')`, uiWait)
}

// submitAct presses an action dialog's submit button and waits for the
// dialog to close (it closes only once the server accepted).
func submitAct(t *testing.T, pg *browsertest.Page, key string) {
	t.Helper()
	click(t, pg, `dialog.act-`+key+` button[type=submit]`)
	pg.WaitJS(t, "dialog "+key+" closed", `!document.querySelector('dialog.act-`+key+`')`, uiWait)
}
