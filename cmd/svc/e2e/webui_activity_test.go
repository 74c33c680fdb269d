package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// The Activity and Admin pages of the web app (issue 15, items 6 and 7) in
// chromium against a real broker.

// uiSignInAdmin enrolls the broker's first member (the admin token's) and
// signs it in on pg; it returns its name.
func uiSignInAdmin(t *testing.T, p *proc, d driver, admin cred, pg *browsertest.Page) string {
	t.Helper()
	r := p.do(t, http.MethodGet, "/session", nil, withAuthorization(admin.authorization))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	name, _ := r.body["member"].(string)
	require.NotEmpty(t, name)
	uiSignIn(t, pg, p.base, enroll(t, d, admin, name))
	return name
}

// uiSelect chooses value in the <select> with id, as a change by the user.
func uiSelect(t *testing.T, pg *browsertest.Page, id, value string) {
	t.Helper()
	pg.WaitJS(t, "option "+value+" in #"+id,
		`[...(document.getElementById(`+js(id)+`)?.options || [])].some(o => o.value === `+js(value)+`)`, uiWait)
	require.True(t, browsertest.Eval[bool](t, pg, "select "+value, `(() => { const s = document.getElementById(`+js(id)+`);
		s.value = `+js(value)+`; s.dispatchEvent(new Event('change', {bubbles: true})); return s.value === `+js(value)+`; })()`))
}

// recordResponses makes the page keep the text of every API answer it
// gets from now on, in window.__answers.
func recordResponses(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	browsertest.Eval[bool](t, pg, "record answers", `(() => {
		if (window.__answers) return true;
		window.__answers = [];
		const orig = window.fetch;
		window.fetch = async (...args) => {
			const res = await orig(...args);
			try { res.clone().text().then((s) => window.__answers.push(String(args[0]) + ' ' + s)); } catch (e) {}
			return res;
		};
		return true;
	})()`)
}

// requireNowhere asserts secret is in no text, attribute or field value
// of the page and in no API answer the page got.
func requireNowhere(t *testing.T, pg *browsertest.Page, secret string) {
	t.Helper()
	require.False(t, browsertest.Eval[bool](t, pg, "secret in the DOM", `document.documentElement.outerHTML.includes(`+js(secret)+`)`), "the secret is in the page's DOM")
	require.False(t, browsertest.Eval[bool](t, pg, "secret in a field", `[...document.querySelectorAll('input, textarea, select')].some(e => String(e.value).includes(`+js(secret)+`))`), "the secret is left in a field")
	answers := browsertest.Eval[[]string](t, pg, "answers", `window.__answers || []`)
	require.NotEmpty(t, answers)
	for _, a := range answers {
		require.NotContains(t, a, secret, "an API answer carried the secret")
	}
}

// The timeline shows what a member's agent exported over OTLP (an exchange
// with its messages as text, a tool action), live; the usage chart has a
// bar per bucket; an objective's trace shows the GenAI record uploaded.
func TestWebUIActivity(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")

	xss := `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`
	now := time.Now()
	sess := "sess-webui"
	u := otUsage{in: 1200, out: 340, cacheRead: 50, cost: 0.0421, durationMs: 900}
	export := otHTTPExport(otCTJSON, false)
	require.Zero(t, export(t, p, aliceTok, otLogsReq(otNamings[0],
		otReqBody(now, sess, 1, "claude-webui-1", otAnthropicRequest(t, "claude-webui-1", nil, []obj{{"role": "user", "content": "please list " + xss}}, "Bash")),
		otAcct(now, sess, 2, "claude-webui-1", "req_webui_1", u),
		otRespBody(now, sess, 3, "claude-webui-1", "req_webui_1", otAnthropicResponse(t, "claude-webui-1", "msg_webui_1", []obj{{"type": "text", "text": "done listing"}}, "end_turn", u)),
		otRec{agent: otAgentClaude, name: "tool_result", at: now, attrs: append(otClaudeAttrs(sess, 4),
			otStr("tool_name", "Bash"), otStr("tool_use_id", "toolu_w1"), otStr("success", "true"), otInt("duration_ms", 12),
			otStr("tool_input", `{"command":"ls `+strings.ReplaceAll(xss, `"`, `\"`)+`"}`))},
	)))

	b := browsertest.Launch(t)
	pg := b.NewPage("lead")
	uiSignInAdmin(t, p, d, admin, pg)
	pg.Do(t, "open activity", chromedp.Navigate(p.base+"/ui/activity?member=alice"))
	pg.WaitJS(t, "exchange shown", `[...document.querySelectorAll('ol.timeline li.kind-llm_exchange .model')].some(e => e.textContent === 'claude-webui-1')`, uiWait)
	pg.WaitJS(t, "tool action shown", `[...document.querySelectorAll('ol.timeline li.kind-tool_action .model')].some(e => e.textContent === 'Bash')`, uiWait)
	facts := browsertest.Eval[string](t, pg, "exchange facts", `document.querySelector('ol.timeline li.kind-llm_exchange .facts').textContent`)
	require.Contains(t, facts, "1,200 in")
	require.Contains(t, facts, "340 out")
	require.Contains(t, facts, "$0.04")
	require.Contains(t, facts, "stop: end_turn")
	pg.Click(t, "expand the exchange", `ol.timeline li.kind-llm_exchange details > summary`)
	msgs := browsertest.Eval[string](t, pg, "exchange messages", `document.querySelector('ol.timeline li.kind-llm_exchange details').textContent`)
	require.Contains(t, msgs, "please list "+xss, "the prompt is shown as text")
	require.Contains(t, msgs, "done listing")
	toolText := browsertest.Eval[string](t, pg, "tool input", `document.querySelector('ol.timeline li.kind-tool_action').textContent`)
	require.Contains(t, toolText, "<img src=x")
	require.Equal(t, "undefined", browsertest.Eval[string](t, pg, "xss flag", `typeof window.__xss`))
	require.Equal(t, 0, browsertest.Eval[int](t, pg, "elements from data", `document.querySelectorAll('ol.timeline img, ol.timeline script, pre.payload *').length`))

	// Live: a row stored now appears without a reload, on top.
	pg.WaitJS(t, "activity stream live", `document.querySelector('.act-live')?.dataset.state === 'live'`, uiWait)
	require.Zero(t, export(t, p, aliceTok, otLogsReq(otNamings[0],
		otRec{agent: otAgentClaude, name: "tool_decision", at: time.Now(), attrs: append(otClaudeAttrs(sess, 5),
			otStr("decision", "accept"), otStr("source", "config"), otStr("tool_name", "LiveTool"), otStr("tool_use_id", "toolu_w2"))})))
	pg.WaitJS(t, "live row on top", `document.querySelector('ol.timeline li.act .model')?.textContent === 'LiveTool'`, uiWait)

	// Usage: a bar per bucket (7 days by default, 24 hours), the
	// exchange's tokens in one of them, and the table beside.
	pg.WaitJS(t, "a bar per day", `document.querySelectorAll('svg.chart rect.bar').length === 7`, uiWait)
	pg.WaitJS(t, "usage drawn", `[...document.querySelectorAll('svg.chart rect.bar')].some(r => Number(r.dataset.value) === 1590)`, uiWait)
	require.Contains(t, browsertest.Eval[string](t, pg, "usage summary", `document.getElementById('usage-summary').textContent`), "1 exchange,")
	uiSelect(t, pg, "usage-range", "24h")
	pg.WaitJS(t, "a bar per hour", `document.querySelectorAll('svg.chart rect.bar').length === 24 &&
		[...document.querySelectorAll('svg.chart rect.bar')].filter(r => Number(r.dataset.value) > 0).length === 1`, uiWait)
	require.Equal(t, 24, browsertest.Eval[int](t, pg, "table rows", `document.querySelectorAll('.usage-table tbody tr').length`))

	// An objective of alice: creating it opened it on her stream; her
	// runner uploads a GenAI record while she holds it.
	o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Ship <b>it</b>", "outcome": "shipped", "assignee": "alice"})
	oid, _ := o["id"].(string)
	require.NotEmpty(t, oid)
	reqJSON := `{"model": "gpt-webui", "messages": [{"role": "user", "content": "trace me <script>window.__xss=3</script>"}],
		"tools": [{"type": "function", "function": {"name": "lookup_<b>x</b>", "description": "finds <img src=x onerror=window.__xss=4>", "parameters": {"type": "object"}}}]}`
	respJSON := `{"id": "chatcmpl-webui", "object": "chat.completion", "created": 1, "model": "gpt-webui",
		"choices": [{"index": 0, "message": {"role": "assistant", "content": "traced"}, "finish_reason": "stop"}],
		"usage": {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}}`
	mustUploadGenAI(t, p, d, bearer(aliceTok), "alice", genaiBodyOf(t, time.Now().UnixMilli(), reqJSON, respJSON))
	pg.Do(t, "reload for the new objective", chromedp.Navigate(p.base+"/ui/activity?member=alice"))
	uiSelect(t, pg, "trace-objective", oid)
	pg.WaitJS(t, "trace with the GenAI record", `[...document.querySelectorAll('.trace .inference .facts')].some(e => e.textContent.includes('gpt-webui') && e.textContent.includes('chatcmpl-webui'))`, uiWait)
	pg.WaitJS(t, "trace with the open marker", `!!document.querySelector('.trace li.kind-objective_open')`, uiWait)
	pg.Click(t, "expand the record", `.trace .inference details > summary`)
	ctx := browsertest.Eval[string](t, pg, "record context", `document.querySelector('.trace .inference details').textContent`)
	require.Contains(t, ctx, "trace me <script>window.__xss=3</script>")
	require.Contains(t, ctx, "traced")
	require.Contains(t, ctx, "Tools offered (1)", "the tools the request offered")
	require.Contains(t, ctx, "lookup_<b>x</b> — finds <img src=x onerror=window.__xss=4>")
	require.Equal(t, "undefined", browsertest.Eval[string](t, pg, "xss flag", `typeof window.__xss`))
	require.Equal(t, 0, browsertest.Eval[int](t, pg, "elements from data", `document.querySelectorAll('.trace script, .trace img, .trace h3 b').length`))
	require.Equal(t, oid, browsertest.Eval[string](t, pg, "url", `new URL(location.href).searchParams.get('objective')`))

	pg.RequireNoCriticalA11y(t, "activity page")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.Do(t, "desktop", chromedp.EmulateViewport(1280, 900))
		pg.SaveScreenshot(t, filepath.Join(dir, "activity.png"))
	}
	pg.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	pg.WaitJS(t, "fits 375 px", `document.documentElement.scrollWidth <= 375`, uiWait)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "activity-375.png"))
	}
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", "%s", line)
	}
}

// Paging the timeline skips and repeats nothing: more rows than a page
// share one millisecond (the route's cursor is an inclusive ts), and a
// live row with an old ts arriving before "Load older" neither moves the
// cursor past unread rows nor lands on top.
func TestWebUIActivityPaging(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	alice := bearer(createMember(t, d, admin, "alice"))
	at := time.Now().Add(-time.Hour).UnixMilli()
	var evs []obj
	for i := range 60 {
		evs = append(evs, actEv("tool_action", at, obj{"tool": fmt.Sprintf("same-ms-%02d", i)}))
	}
	for i := range 3 {
		evs = append(evs, actEv("tool_action", at-1000, obj{"tool": fmt.Sprintf("older-%d", i)}))
	}
	mustUpload(t, d, alice, "alice", evs...)

	b := browsertest.Launch(t)
	pg := b.NewPage("lead")
	uiSignInAdmin(t, p, d, admin, pg)
	pg.Do(t, "open activity", chromedp.Navigate(p.base+"/ui/activity?member=alice"))
	rows := `document.querySelectorAll('ol.timeline li.act')`
	pg.WaitJS(t, "first page", rows+`.length === 50`, uiWait)
	pg.WaitJS(t, "activity stream live", `document.querySelector('.act-live')?.dataset.state === 'live'`, uiWait)
	mustUpload(t, d, alice, "alice", actEv("tool_action", at-2000, obj{"tool": "late-old"}))
	pg.WaitJS(t, "late row shown last", `[...`+rows+`].at(-1)?.querySelector('.model')?.textContent === 'late-old'`, uiWait)

	olderBtn := `[...document.querySelectorAll('.act-sec button')].find(x => x.textContent === 'Load older activity')`
	for i := 0; i < 5 && browsertest.Eval[bool](t, pg, "more to load", `!`+olderBtn+`.hidden`); i++ {
		n := browsertest.Eval[int](t, pg, "rows", rows+`.length`)
		browsertest.Eval[bool](t, pg, "load older", `(`+olderBtn+`.click(), true)`)
		pg.WaitJS(t, "page answered", `!`+olderBtn+`.disabled && (`+olderBtn+`.hidden || `+rows+`.length > `+fmt.Sprint(n)+`)`, uiWait)
	}
	tools := browsertest.Eval[[]string](t, pg, "tools shown", `[...`+rows+`].map(li => li.querySelector('.model').textContent)`)
	require.Len(t, tools, 64, "every row once: %v", tools)
	seen := map[string]bool{}
	for _, tool := range tools {
		require.False(t, seen[tool], "%s shown twice", tool)
		seen[tool] = true
	}
	require.Equal(t, []string{"older-2", "older-1", "older-0", "late-old"}, tools[60:], "oldest last, newest id first within a ms")
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", "%s", line)
	}
}

// Receipts page without a skip or a repeat where more receipts than a
// page share one millisecond. The broker cannot be made to stamp receipts
// in one ms on demand, so the page's fetch of the deliveries route is
// answered from 70 receipts (60 in one ms) with the route's own rules:
// newest first then latest stored, before exclusive, limit.
func TestWebUIAdminReceiptsPaging(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	me := uiSignInAdmin(t, p, d, admin, pg)
	mustCall(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "gh", "targets": []obj{{"member": me}}})
	pg.Do(t, "open admin", chromedp.Navigate(p.base+"/ui/admin"))
	pg.WaitJS(t, "endpoint listed", `!!document.querySelector('#adm-notif button[aria-label="Receipts of gh"]')`, uiWait)
	browsertest.Eval[bool](t, pg, "stub the deliveries route", `(() => {
		const at = Date.now() - 3600e3;
		const all = [];
		for (let i = 0; i < 70; i++) all.push({id: 'r' + String(i).padStart(2, '0'), endpoint: 'gh', status: 'delivered', size: 2, receivedAt: i < 10 ? at - 1 : at});
		all.reverse(); // newest first: the latest stored first within a ms
		const orig = window.fetch;
		window.__asked = [];
		window.fetch = async (url, opts) => {
			const u = new URL(String(url), location.origin);
			if (!u.pathname.endsWith('/deliveries')) return orig(url, opts);
			window.__asked.push(u.search);
			const before = u.searchParams.has('before') ? Number(u.searchParams.get('before')) : Infinity;
			const limit = Number(u.searchParams.get('limit') || 50);
			const deliveries = all.filter((r) => r.receivedAt < before).slice(0, limit);
			return new Response(JSON.stringify({deliveries}), {status: 200, headers: {'Content-Type': 'application/json'}});
		};
		return true;
	})()`)
	pg.Click(t, "open receipts", `#adm-notif button[aria-label="Receipts of gh"]`)
	rows := `document.querySelectorAll('.adm-receipts tbody tr')`
	pg.WaitJS(t, "first page", rows+`.length === 50`, uiWait)
	more := `[...document.querySelectorAll('.adm-receipts button')].find(x => x.textContent === 'Load older receipts')`
	for i := 0; i < 5 && browsertest.Eval[bool](t, pg, "more to load", `!`+more+`.hidden`); i++ {
		n := browsertest.Eval[int](t, pg, "rows", rows+`.length`)
		browsertest.Eval[bool](t, pg, "load older", `(`+more+`.click(), true)`)
		pg.WaitJS(t, "page answered", `!`+more+`.disabled && (`+more+`.hidden || `+rows+`.length > `+fmt.Sprint(n)+`)`, uiWait)
	}
	ids := browsertest.Eval[[]string](t, pg, "receipts shown", `[...document.querySelectorAll('.adm-receipts tbody button[data-replay]')].map(b => b.dataset.replay)`)
	require.Len(t, ids, 70, "every receipt once: %v (asked %v)", ids, browsertest.Eval[[]string](t, pg, "asked", `window.__asked`))
	seen := map[string]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "%s shown twice", id)
		seen[id] = true
	}
}

// An admin creates a notification endpoint with a secret the page never
// shows nor gets back; a delivery carrying an XSS payload is shown inert
// in the receipts and replays; a tool source and a secret take write-only
// credentials and a binding. A member without the permissions is told why
// the page is empty.
func TestWebUIAdmin(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	createMember(t, d, admin, "bob")
	bob := enroll(t, d, admin, "bob")

	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	me := uiSignInAdmin(t, p, d, admin, pg)
	pg.Do(t, "open admin", chromedp.Navigate(p.base+"/ui/admin"))
	pg.WaitJS(t, "admin page", `!!document.getElementById('adm-notif-h') && !!document.querySelector('#adm-notif .empty')`, uiWait)
	// The hook's target is this member: online (its stream attached), so
	// deliveries are not dropped (ifOffline drop).
	waitLive(t, pg)
	recordResponses(t, pg)

	// A notification endpoint with a secret.
	hookSecret := "hook-S3CRET-" + randomSecret(t)[:16]
	pg.Do(t, "new endpoint",
		chromedp.Click(chromedp.CSS(`#adm-notif > button`)),
		chromedp.WaitVisible(chromedp.ID("ep-slug")),
		chromedp.SendKeys(chromedp.ID("ep-slug"), "gh"),
		chromedp.SendKeys(chromedp.ID("ep-display"), "GitHub"),
		chromedp.SendKeys(chromedp.ID("ep-secret"), hookSecret))
	uiSelect(t, pg, "ep-targets", "m:"+me)
	pg.Do(t, "add the target and create",
		chromedp.Click(chromedp.CSS(`#adm-notif .multipick button`)),
		chromedp.Click(chromedp.CSS(`.adm-editor form button[type=submit]`)))
	pg.WaitJS(t, "created with a secret", `document.querySelector('.adm-editor .msg.ok')?.textContent.includes('Secret stored') &&
		[...document.querySelectorAll('#adm-notif tbody tr')].some(tr => tr.textContent.includes('gh') && tr.textContent.includes('set'))`, uiWait)
	require.True(t, browsertest.Eval[bool](t, pg, "focus after saving", `document.activeElement?.matches('#adm-notif .adm-editor .msg.ok')`),
		"focus stays with the saved form, not on the body: %s", browsertest.Eval[string](t, pg, "focused", `document.activeElement?.outerHTML.slice(0, 80)`))
	requireNowhere(t, pg, hookSecret)
	r := p.do(t, http.MethodGet, "/notifications/endpoints/gh", nil, withAuthorization(admin.authorization))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, true, r.body["hasSecret"])
	require.NotContains(t, string(r.raw), hookSecret)

	// A signed delivery with an XSS payload: delivered, shown as text.
	payload := `{"action":"opened","title":"<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>"}`
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write([]byte(payload))
	r = p.do(t, http.MethodPost, "/hooks/gh", []byte(payload), setHeader("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil))))
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	pg.Click(t, "open receipts", `#adm-notif button[aria-label="Receipts of gh"]`)
	pg.WaitJS(t, "receipt delivered", `document.querySelectorAll('.adm-receipts tbody tr').length === 1 &&
		document.querySelector('.adm-receipts tbody .rstatus')?.textContent === 'delivered'`, uiWait)
	pg.Click(t, "show the body", `.adm-receipts tbody button[aria-label^="Show the body"]`)
	pg.WaitJS(t, "body shown", `document.querySelector('.adm-receipts pre.external-payload')?.textContent === `+js(payload), uiWait)
	require.Equal(t, "undefined", browsertest.Eval[string](t, pg, "xss flag", `typeof window.__xss`))
	require.Equal(t, 0, browsertest.Eval[int](t, pg, "elements from the payload", `document.querySelectorAll('.adm-receipts img, .adm-receipts script, pre.external-payload *').length`))

	// Replay: a fresh receipt, named as the replay of the first.
	pg.Click(t, "replay", `.adm-receipts tbody button[data-replay]`)
	pg.WaitJS(t, "replayed", `document.querySelector('.adm-receipts .msg.ok')?.textContent.startsWith('Replayed: the fresh receipt is delivered') &&
		document.querySelectorAll('.adm-receipts tbody tr').length === 2`, uiWait)
	receipts := listOf(t, mustCall(t, d, admin, "ListNotificationDeliveries", obj{"slug": "gh"}), "deliveries")
	require.Len(t, receipts, 2)
	require.Equal(t, "delivered", receipts[0]["status"])
	first, _ := receipts[1]["id"].(string)
	require.Contains(t, receipts[0]["reason"], "replay of "+first)
	pg.WaitJS(t, "replay shown", `[...document.querySelectorAll('.adm-receipts tbody tr')].some(tr => tr.querySelector('td[data-label="Reason"]')?.textContent.includes(`+js("replay of "+first)+`))`, uiWait)
	require.Equal(t, "undefined", browsertest.Eval[string](t, pg, "xss flag", `typeof window.__xss`))

	// A tool source with a write-only credential, then a binding.
	toolSecret := "tool-S3CRET-" + randomSecret(t)[:16]
	pg.Do(t, "new tool source",
		chromedp.Click(chromedp.CSS(`#adm-tools > button`)),
		chromedp.WaitVisible(chromedp.ID("ts-slug")),
		chromedp.SendKeys(chromedp.ID("ts-slug"), "gitx"),
		chromedp.SendKeys(chromedp.ID("ts-url"), "https://mcp.example.com/mcp"),
		chromedp.SendKeys(chromedp.ID("ts-secret"), toolSecret),
		chromedp.Click(chromedp.CSS(`#adm-tools .adm-editor form button[type=submit]`)))
	pg.WaitJS(t, "source created", `document.querySelector('#adm-tools .adm-editor .msg.ok')?.textContent.includes('Credential stored') &&
		[...document.querySelectorAll('#adm-tools tbody tr')].some(tr => tr.textContent.includes('gitx') && tr.textContent.includes('set (bearer)'))`, uiWait)
	uiSelect(t, pg, browsertest.Eval[string](t, pg, "bind picker", `document.querySelector('#adm-tools .bindings select').id`), "bob")
	pg.Click(t, "bind bob", `#adm-tools .bindings .inline > button`)
	pg.WaitJS(t, "bob bound", `[...document.querySelectorAll('#adm-tools .bindings .chips li span')].some(e => e.textContent === 'bob')`, uiWait)
	src := mustCall(t, d, admin, "GetToolSource", obj{"slug": "gitx"})
	require.Equal(t, true, src["hasCredential"])
	require.Equal(t, []string{"bob"}, strs(t, src["boundMembers"]))

	// An environment secret with a write-only value.
	envSecret := "env-S3CRET-" + randomSecret(t)[:16]
	pg.Do(t, "new secret",
		chromedp.Click(chromedp.CSS(`#adm-secrets > button`)),
		chromedp.WaitVisible(chromedp.ID("sec-slug")),
		chromedp.SendKeys(chromedp.ID("sec-slug"), "gh-token"),
		chromedp.SendKeys(chromedp.ID("sec-env"), "GH_TOKEN"),
		chromedp.SendKeys(chromedp.ID("sec-value"), envSecret),
		chromedp.Click(chromedp.CSS(`#adm-secrets .adm-editor form button[type=submit]`)))
	pg.WaitJS(t, "secret created", `document.querySelector('#adm-secrets .adm-editor .msg.ok')?.textContent.includes('Value stored') &&
		[...document.querySelectorAll('#adm-secrets tbody tr')].some(tr => tr.textContent.includes('GH_TOKEN') && tr.textContent.includes('set'))`, uiWait)
	for _, s := range []string{hookSecret, toolSecret, envSecret} {
		requireNowhere(t, pg, s)
	}

	pg.RequireNoCriticalA11y(t, "admin page")
	pg.Do(t, "close the editors",
		chromedp.Click(chromedp.CSS(`#adm-notif .adm-editor > button.quiet`)),
		chromedp.Click(chromedp.CSS(`#adm-tools .adm-editor > button.quiet`)),
		chromedp.Click(chromedp.CSS(`#adm-secrets .adm-editor > button.quiet`)))
	pg.WaitJS(t, "editors closed", `!document.querySelector('.adm-editor form') && document.activeElement?.textContent === 'New secret'`, uiWait)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.Do(t, "desktop", chromedp.EmulateViewport(1280, 900))
		pg.SaveScreenshot(t, filepath.Join(dir, "admin.png"))
	}
	pg.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	pg.WaitJS(t, "fits 375 px", `document.documentElement.scrollWidth <= 375`, uiWait)
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "admin-375.png"))
	}

	// bob holds none of the permissions: told so, shown nothing else.
	pb := b.NewPage("bob")
	uiSignIn(t, pb, p.base, bob)
	pb.Do(t, "open admin", chromedp.Navigate(p.base+"/ui/admin"))
	pb.WaitJS(t, "told why not", `document.getElementById('admin-denied')?.textContent.includes('notifications.manage')`, uiWait)
	require.Equal(t, 0, browsertest.Eval[int](t, pb, "no sections", `document.querySelectorAll('.adm-sec').length`))
	pb.RequireNoCriticalA11y(t, "admin page, no permission")
	for _, pg := range []*browsertest.Page{pg, pb} {
		for _, line := range pg.Console() {
			require.NotContains(t, line, "exception", "%s: %s", pg.Name, line)
		}
	}
}
