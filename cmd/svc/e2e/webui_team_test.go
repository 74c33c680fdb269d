package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// The Team page (roster, live presence and activity, member admin,
// tokens) and the device enrollment page (/ui/enroll) in chromium against
// a real broker; enrollment approval completes a real `svc login`.

// memberRow is the roster row of name, as a JavaScript expression.
func memberRow(name string) string {
	return `document.querySelector('li.member[data-member=` + js(name) + `]')`
}

// sessionMember is the member the bearer token authenticates as.
func sessionMember(t *testing.T, p *proc, tok string) string {
	t.Helper()
	r := p.do(t, http.MethodGet, "/session", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	name, _ := r.body["member"].(string)
	require.NotEmpty(t, name)
	return name
}

// uiOpen follows the main navigation's link to path (a pushState
// navigation, as a user's click).
func uiOpen(t *testing.T, pg *browsertest.Page, path string) {
	t.Helper()
	sel := `header nav a[href="` + path + `"]`
	pg.Do(t, "open "+path, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
	pg.WaitJS(t, "on "+path, `location.pathname === `+js(path), uiWait)
}

// openTeam opens the Team page and waits for the roster.
func openTeam(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	uiOpen(t, pg, "/ui/team")
	pg.WaitJS(t, "roster loaded", `document.getElementById('roster')?.dataset.loaded === 'true'`, uiWait)
}

// openCreateMember opens the Team page's "Add a member" form. The page
// draws the approvals section above the form only after GET /approvals
// answers, which may come after the roster: the click waits for that
// draw, so it is not aimed at a summary that then moves, and the form is
// used once it is open.
func openCreateMember(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	pg.WaitJS(t, "approvals drawn", `document.querySelector('.approvals-slot')?.dataset.waiting !== undefined`, uiWait)
	pg.Click(t, "open the new member form", "#create-member summary")
	pg.WaitJS(t, "new member form open", `document.getElementById('create-member')?.open === true && document.getElementById('nm-name')?.offsetWidth > 0`, uiWait)
}

// confirmYes presses the confirming button of the open confirm dialog.
func confirmYes(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	pg.Do(t, "confirm", chromedp.WaitVisible(chromedp.CSS("dialog.confirm[open]")),
		chromedp.Click(chromedp.CSS("dialog.confirm[open] .actions button:not(.quiet)")))
	pg.WaitJS(t, "dialog closed", `!document.querySelector('dialog.confirm')`, uiWait)
}

// requireFits asserts the page does not scroll sideways at 375 px.
func requireFits(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	pg.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	pg.WaitJS(t, "fits 375 px", `document.documentElement.scrollWidth <= 375`, uiWait)
}

// The roster shows a member going online, working, blocked and offline
// without a reload; the member's instructions and role (XSS payloads)
// are text; the page passes axe.
func TestWebUITeamRosterLive(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	adminName := sessionMember(t, p, adminTok)
	r := p.do(t, http.MethodPost, "/members", obj{
		"name": "bob", "role": obj{"title": "Builder " + xssPayload, "description": "writes code"},
		"instructions": "Ship small changes.\n" + xssPayload, "permissions": []string{"operator"},
	}, withBearer(adminTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	bobTok, _ := r.body["token"].(string)
	require.Regexp(t, tokenRE, bobTok)
	createMember(t, d, admin, "carol")
	au := enroll(t, d, admin, adminName)

	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	uiSignIn(t, pg, p.base, au)
	openTeam(t, pg)
	bob := memberRow("bob")
	pg.WaitJS(t, "bob offline and idle", bob+`?.querySelector('.presence').dataset.state === 'offline' && `+bob+`.querySelector('.activity').dataset.state === 'idle'`, uiWait)

	// The payloads are text: the instructions (shown to a manager) and the
	// role title read literally, and nothing ran.
	require.Equal(t, "Ship small changes.\n"+xssPayload, browsertest.Eval[string](t, pg, "instructions", bob+`.querySelector('.instructions .text').textContent`))
	require.Equal(t, "Builder "+xssPayload, browsertest.Eval[string](t, pg, "role", bob+`.querySelector('.role').textContent`))
	requireInert(t, pg, "#roster")
	pg.RequireNoCriticalA11y(t, "team page")

	// bob's stream attaches: online, live.
	s := p.subscribeSSE(t, bobTok, "bob", "")
	pg.WaitJS(t, "bob online", bob+`.querySelector('.presence').dataset.state === 'online'`, uiWait)
	presence := func(state string) {
		t.Helper()
		r := p.do(t, http.MethodPost, "/presence/activity", obj{"state": state}, withBearer(bobTok))
		require.Equal(t, http.StatusNoContent, r.status, "%s", r.raw)
	}
	presence("working")
	pg.WaitJS(t, "bob working", bob+`.querySelector('.activity').dataset.state === 'working'`, uiWait)
	require.Contains(t, browsertest.Eval[string](t, pg, "activity text", bob+`.querySelector('.activity').textContent`), "Working")
	presence("blocked")
	pg.WaitJS(t, "bob blocked", bob+`.querySelector('.activity').dataset.state === 'blocked'`, uiWait)
	require.Contains(t, browsertest.Eval[string](t, pg, "activity text", bob+`.querySelector('.activity').textContent`), "waiting for a person")
	require.Equal(t, "idle", browsertest.Eval[string](t, pg, "carol untouched", memberRow("carol")+`.querySelector('.activity').dataset.state`))
	presence("idle")
	pg.WaitJS(t, "bob idle", bob+`.querySelector('.activity').dataset.state === 'idle'`, uiWait)
	s.close()
	pg.WaitJS(t, "bob offline", bob+`.querySelector('.presence').dataset.state === 'offline'`, uiWait)
	presence("working")
	pg.WaitJS(t, "bob working while offline", bob+`.querySelector('.activity').dataset.state === 'working'`, uiWait)

	// A member added elsewhere redraws the roster; the button a keyboard
	// user is on keeps focus, and each row's buttons name their member.
	require.Equal(t, "Delete bob", browsertest.Eval[string](t, pg, "delete label", bob+`.querySelector('[data-action=delete]').getAttribute('aria-label')`))
	require.True(t, browsertest.Eval[bool](t, pg, "focus bob's edit", `(`+bob+`.querySelector('[data-action=edit]').focus(), document.activeElement.dataset.action === 'edit')`))
	createMember(t, d, admin, "dave")
	pg.WaitJS(t, "dave listed", `!!`+memberRow("dave"), uiWait)
	require.True(t, browsertest.Eval[bool](t, pg, "focus kept", `document.activeElement === `+bob+`.querySelector('[data-action=edit]')`),
		"focus after the redraw: %s", browsertest.Eval[string](t, pg, "focused", `document.activeElement?.outerHTML.slice(0, 80)`))

	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "team.png"))
	}
	requireFits(t, pg)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "team-375.png"))
	}
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", line)
	}
}

// An admin creates a member with a preset through the page; its token,
// shown once, works until revoked there; a rotation shows a new one once,
// and leaving the page drops it. A member without members.manage sees no
// admin action, and the enrollment page shows the server's refusal.
func TestWebUITeamAdminTokens(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	adminName := sessionMember(t, p, adminTok)
	createMember(t, d, admin, "bob", "operator")
	au, bu := enroll(t, d, admin, adminName), enroll(t, d, admin, "bob")

	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	uiSignIn(t, pg, p.base, au)
	openTeam(t, pg)

	// Create carol: the operator preset, a role, instructions.
	openCreateMember(t, pg)
	pg.Do(t, "fill the new member",
		chromedp.SendKeys(chromedp.ID("nm-name"), "carol"),
		chromedp.SendKeys(chromedp.ID("nm-role-title"), "Reviewer"),
		chromedp.Click(chromedp.CSS(`#create-member input[type=checkbox][value="operator"]`)),
		chromedp.SendKeys(chromedp.ID("nm-instructions"), "Review every change."),
		chromedp.Click(chromedp.CSS("#create-member form button[type=submit]")))
	pg.WaitJS(t, "token shown", `/^svc_[A-Za-z0-9_-]{43}$/.test(document.querySelector('.once .token-plain')?.textContent || '')`, uiWait)
	tok := browsertest.Eval[string](t, pg, "token", `document.querySelector('.once .token-plain').textContent`)
	pg.WaitJS(t, "carol listed", memberRow("carol")+`?.querySelector('.role')?.textContent === 'Reviewer'`, uiWait)
	r := p.do(t, http.MethodGet, "/briefing", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "the token shown works: %s", r.raw)
	me, _ := r.body["member"].(obj)
	require.Equal(t, "carol", me["name"])
	require.ElementsMatch(t, operatorLeaves, strs(t, me["permissions"]))
	require.Equal(t, "Review every change.", me["instructions"])
	require.Equal(t, "", browsertest.Eval[string](t, pg, "storage",
		`JSON.stringify(localStorage).includes(`+js(tok)+`) || JSON.stringify(sessionStorage).includes(`+js(tok)+`) ? 'stored' : ''`), "never stored")
	pg.Click(t, "hide the token", ".once .actions button.quiet")
	pg.WaitJS(t, "token gone", `!document.querySelector('.token-plain') && !document.body.textContent.includes(`+js(tok)+`)`, uiWait)

	// carol's tokens: the one token, revoked from the page.
	pg.Click(t, "open carol's tokens", `li.member[data-member="carol"] button[data-action=tokens]`)
	pg.WaitJS(t, "one token listed", `document.querySelectorAll('#tokens-panel tbody tr').length === 1 && document.getElementById('tokens-title').textContent === 'Tokens of carol'`, uiWait)
	pg.Click(t, "revoke", "#tokens-panel tbody button[data-token-id]")
	confirmYes(t, pg)
	pg.WaitJS(t, "no token left", `document.querySelectorAll('#tokens-panel tbody tr').length === 0 && document.querySelector('#tokens-panel .empty')`, uiWait)
	r = p.do(t, http.MethodGet, "/briefing", nil, withBearer(tok))
	require.Equal(t, http.StatusUnauthorized, r.status, "a revoked token fails: %s", r.raw)

	// Rotate: a new token shown once, working; leaving the page drops it.
	pg.Do(t, "rotate", chromedp.Click(chromedp.ID("rotate-token")))
	confirmYes(t, pg)
	pg.WaitJS(t, "new token shown", `/^svc_[A-Za-z0-9_-]{43}$/.test(document.querySelector('#tokens-panel .once .token-plain')?.textContent || '')`, uiWait)
	tok2 := browsertest.Eval[string](t, pg, "token", `document.querySelector('#tokens-panel .once .token-plain').textContent`)
	require.NotEqual(t, tok, tok2)
	pg.WaitJS(t, "rotated token listed", `document.querySelectorAll('#tokens-panel tbody tr').length === 1`, uiWait)
	r = p.do(t, http.MethodGet, "/session", nil, withBearer(tok2))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.Equal(t, "carol", r.body["member"])
	uiOpen(t, pg, "/ui/chat")
	openTeam(t, pg)
	require.False(t, browsertest.Eval[bool](t, pg, "token after leaving",
		`!!document.querySelector('.token-plain') || document.body.textContent.includes(`+js(tok2)+`)`), "the plaintext is gone once the page is left")

	// The server's refusal is shown as it answers: a taken name.
	openCreateMember(t, pg)
	pg.Do(t, "create bob again",
		chromedp.SendKeys(chromedp.ID("nm-name"), "bob"),
		chromedp.Click(chromedp.CSS("#create-member form button[type=submit]")))
	pg.WaitJS(t, "conflict shown", `(document.querySelector('#create-member .msg.error')?.textContent || '').includes('(conflict)')`, uiWait)

	// Edit carol: role and instructions saved, as the broker now answers.
	pg.Do(t, "edit carol",
		chromedp.Click(chromedp.CSS(`li.member[data-member="carol"] button[data-action=edit]`)),
		chromedp.WaitVisible(chromedp.ID("ed-instructions")),
		chromedp.SetValue(chromedp.ID("ed-role-title"), "Docs reviewer"),
		chromedp.SetValue(chromedp.ID("ed-instructions"), "Review the docs only."),
		chromedp.Click(chromedp.CSS("form.edit-member button[type=submit]")))
	pg.WaitJS(t, "saved", `document.querySelector('form.edit-member .msg.ok')?.textContent === 'Saved carol.' && `+memberRow("carol")+`?.querySelector('.role')?.textContent === 'Docs reviewer'`, uiWait)
	carol := memberByName(t, d, admin, "carol")
	require.Equal(t, "Review the docs only.", carol["instructions"])
	require.ElementsMatch(t, operatorLeaves, strs(t, carol["permissions"]), "permissions kept")

	// The last members.manage holder cannot lose it: the server refuses,
	// the page shows its answer.
	pg.Do(t, "edit the admin",
		chromedp.Click(chromedp.CSS(`li.member[data-member=`+js(adminName)+`] button[data-action=edit]`)),
		chromedp.WaitVisible(chromedp.ID("ed-permissions")),
		chromedp.SetValue(chromedp.ID("ed-permissions"), "operator"),
		chromedp.Click(chromedp.CSS("form.edit-member button[type=submit]")))
	pg.WaitJS(t, "refusal shown", `(document.querySelector('form.edit-member .msg.error')?.textContent || '').includes('members.manage')`, uiWait)
	require.Contains(t, strs(t, memberByName(t, d, admin, adminName)["permissions"]), "members.manage")

	// Deleting carol works, and ends her token.
	pg.Click(t, "delete carol", `li.member[data-member="carol"] button[data-action=delete]`)
	confirmYes(t, pg)
	pg.WaitJS(t, "carol gone", `!`+memberRow("carol"), uiWait)
	r = p.do(t, http.MethodGet, "/session", nil, withBearer(tok2))
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.raw)

	// bob, without members.manage: the roster, his own tokens, no admin
	// action; the enrollment page shows the server's refusal.
	pb := b.NewPage("bob")
	uiSignIn(t, pb, p.base, bu)
	openTeam(t, pb)
	pb.WaitJS(t, "roster", memberRow(adminName), uiWait)
	require.True(t, browsertest.Eval[bool](t, pb, "no admin actions", `!document.getElementById('create-member') && !!document.getElementById('not-admin') &&
		document.querySelectorAll('[data-action=delete]').length === 0 &&
		document.querySelectorAll('[data-action=tokens]').length === 1 &&
		!!`+memberRow("bob")+`.querySelector('[data-action=tokens]')`))
	require.False(t, browsertest.Eval[bool](t, pb, "no instructions", `!!document.querySelector('#roster .instructions')`), "instructions are private to managers")
	pb.Do(t, "my tokens", chromedp.Click(chromedp.CSS(`li.member[data-member="bob"] button[data-action=tokens]`)))
	pb.WaitJS(t, "my tokens listed", `document.getElementById('tokens-title')?.textContent === 'My tokens' && document.querySelectorAll('#tokens-panel tbody tr').length === 1`, uiWait)
	pb.Do(t, "enrollment page", chromedp.Navigate(p.base+"/ui/enroll?code=BCDF-GHJK"))
	pb.WaitJS(t, "refused", `!!document.getElementById('enroll-not-admin') && !document.getElementById('enroll-code') &&
		(document.querySelector('.enroll .msg.error')?.textContent || '').includes('members.manage')`, uiWait)
	pb.RequireNoCriticalA11y(t, "enrollment page, not an admin")
}

// loginChild starts `svc login` against p and returns it with the
// verificationUriComplete it printed.
func loginChild(t *testing.T, p *proc, label string) (*clientChild, string, string) {
	t.Helper()
	cache := filepath.Join(t.TempDir(), "auth.json")
	args := []string{"login", "--url", p.base}
	if label != "" {
		args = append(args, "--label", label)
	}
	c := startClient(t, args, []string{"SVC_AUTH_CONFIG_PATH=" + cache})
	code := waitFor(t, c, c.stdout, userCodeRE)[1]
	link := waitFor(t, c, c.stdout, regexp.MustCompile(`Or open directly: (\S+)`))[1]
	require.Equal(t, p.base+"/ui/enroll?code="+code, link)
	return c, code, cache
}

// cachedToken is the token `svc login` saved for p.
func cachedToken(t *testing.T, p *proc, cache string) string {
	t.Helper()
	raw, err := os.ReadFile(cache)
	require.NoError(t, err)
	var file struct {
		Entries []struct {
			URL   string `json:"url"`
			Token string `json:"token"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal(raw, &file))
	require.Len(t, file.Entries, 1)
	require.Equal(t, p.base, file.Entries[0].URL)
	return file.Entries[0].Token
}

// Enrollment approval completes a real `svc login`: a signed-out browser
// opening the printed link signs in and comes back, sees what is asking
// (its label an XSS payload, shown as text) and approves it as a new
// member; the login exits 0 with a working token. A code typed by hand is
// approved for an existing member; a rejection makes the login fail
// cleanly with the reason.
func TestWebUIEnrollApprove(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	adminName := sessionMember(t, p, adminTok)
	createMember(t, d, admin, "bob")
	au := enroll(t, d, admin, adminName)
	label := `laptop <img src=x onerror="window.__xss=1">`

	c, code, cache := loginChild(t, p, label)
	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	link := p.base + "/ui/enroll?code=" + code
	pg.Do(t, "open the printed link", chromedp.Navigate(link))
	pg.WaitJS(t, "sent to sign in", `location.pathname === '/ui/signin' && new URL(location.href).searchParams.get('next') === `+js("/ui/enroll?code="+code), uiWait)
	pg.Do(t, "sign in",
		chromedp.WaitVisible(chromedp.ID("signin-member")),
		chromedp.SendKeys(chromedp.ID("signin-member"), adminName),
		chromedp.SendKeys(chromedp.ID("signin-code"), au.next(t)),
		chromedp.Click(chromedp.CSS("form.card button[type=submit]")))
	pg.WaitJS(t, "back at the link", `location.pathname === '/ui/enroll' && new URL(location.href).searchParams.get('code') === `+js(code), uiWait)
	pg.WaitJS(t, "what is asking", `document.querySelector('#enroll-detail .user-code')?.textContent === `+js(code), uiWait)
	require.Equal(t, label, browsertest.Eval[string](t, pg, "label", `document.querySelector('#enroll-detail .label-hint').textContent`))
	require.Equal(t, "127.0.0.1", browsertest.Eval[string](t, pg, "address", `document.querySelector('#enroll-detail .source-ip').textContent`))
	require.NotEmpty(t, browsertest.Eval[string](t, pg, "program", `document.querySelector('#enroll-detail .user-agent').textContent`))
	requireInert(t, pg, "main")
	pg.RequireNoCriticalA11y(t, "enrollment page")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "enroll.png"))
	}

	// Approve as a new member.
	pg.Do(t, "approve as a new member",
		chromedp.Click(chromedp.ID("how-create")),
		chromedp.WaitVisible(chromedp.ID("en-name")),
		chromedp.SendKeys(chromedp.ID("en-name"), "laptop"),
		chromedp.SendKeys(chromedp.ID("en-role-title"), "Dev laptop"),
		chromedp.Click(chromedp.ID("enroll-approve")))
	pg.WaitJS(t, "approved", `(document.getElementById('enroll-done')?.textContent || '').startsWith('Approved '+`+js(code)+`+' as laptop')`, uiWait)
	require.Equal(t, 0, c.wait(t), "stdout:\n%s\nstderr:\n%s", c.stdout, c.stderr)
	require.Contains(t, c.stdout.String(), "Logged in to "+p.base+" as laptop")
	tok := cachedToken(t, p, cache)
	require.Equal(t, "laptop", sessionMember(t, p, tok), "the token svc login saved works")
	require.False(t, browsertest.Eval[bool](t, pg, "no token on the page", `document.body.textContent.includes(`+js(tok)+`)`))

	// A code typed by hand (lower case, no dash), bound to bob.
	c2, code2, cache2 := loginChild(t, p, "")
	pg.Do(t, "open the page", chromedp.Navigate(p.base+"/ui/enroll"))
	typed := strings.ToLower(strings.ReplaceAll(code2, "-", ""))
	pg.Do(t, "type the code",
		chromedp.WaitVisible(chromedp.ID("enroll-code")),
		chromedp.SendKeys(chromedp.ID("enroll-code"), typed),
		chromedp.Click(chromedp.CSS("form.lookup button[type=submit]")))
	pg.WaitJS(t, "found", `document.querySelector('#enroll-detail .user-code')?.textContent === `+js(code2)+` && document.querySelector('#enroll-detail .label-hint').textContent === '(none given)'`, uiWait)
	pg.Do(t, "bind to bob",
		chromedp.Click(chromedp.ID("how-bind")),
		chromedp.WaitVisible(chromedp.ID("enroll-member")),
		chromedp.SetValue(chromedp.ID("enroll-member"), "bob"),
		chromedp.Click(chromedp.ID("enroll-approve")))
	pg.WaitJS(t, "approved", `(document.getElementById('enroll-done')?.textContent || '').startsWith('Approved '+`+js(code2)+`+' as bob')`, uiWait)
	require.Equal(t, 0, c2.wait(t), "stdout:\n%s\nstderr:\n%s", c2.stdout, c2.stderr)
	require.Equal(t, "bob", sessionMember(t, p, cachedToken(t, p, cache2)))

	// Reject: the login fails with the reason, and saves nothing.
	c3, code3, cache3 := loginChild(t, p, "unknown box")
	pg.Do(t, "open the third link", chromedp.Navigate(p.base+"/ui/enroll?code="+code3))
	pg.WaitJS(t, "third asking", `document.querySelector('#enroll-detail .label-hint')?.textContent === 'unknown box'`, uiWait)
	pg.Do(t, "reject",
		chromedp.SendKeys(chromedp.ID("enroll-reason"), "not one of ours"),
		chromedp.Click(chromedp.ID("enroll-reject")))
	confirmYes(t, pg)
	pg.WaitJS(t, "rejected", `(document.getElementById('enroll-done')?.textContent || '').startsWith('Rejected '+`+js(code3)+`)`, uiWait)
	require.Equal(t, 1, c3.wait(t), "stdout:\n%s\nstderr:\n%s", c3.stdout, c3.stderr)
	oneLineError(t, c3.stderr.String(), "login rejected: not one of ours")
	_, err := os.Stat(cache3)
	require.True(t, os.IsNotExist(err), "no cache is written")

	// A decided code says so instead of offering the decision again.
	pg.Do(t, "reopen the rejected code", chromedp.Navigate(p.base+"/ui/enroll?code="+code3))
	pg.WaitJS(t, "already rejected", `document.querySelector('#enroll-detail .enroll-status')?.textContent === 'rejected' && !document.getElementById('enroll-approve')`, uiWait)
	requireFits(t, pg)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "enroll-375.png"))
	}
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", line)
	}
}
