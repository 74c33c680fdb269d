package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// Issue 27's Admin and Activity pages in chromium: endpoint presets whose
// endpoint verifies a real signed delivery, targets shown by name, the
// verification profiles section, and the trace read as a conversation.

// admOffRight lists the visible elements of the page's main part whose
// right edge passes the viewport's (a table scrolling inside its own box
// excepted; the navigation is the app shell's, tested with it).
const admOffRight = `(() => {
	const w = document.documentElement.clientWidth, out = [];
	for (const el of document.querySelectorAll('main *')) {
		if (el.closest('.table-wrap') && !el.matches('.table-wrap')) continue;
		const r = el.getBoundingClientRect();
		if (r.width === 0 || r.height === 0) continue;
		if (r.right > w + 1) out.push(el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + '.' + String(el.className) + ' ' + Math.round(r.right));
	}
	return out.slice(0, 10);
})()`

// admRequireFits asserts nothing runs off the right edge at the current width.
func admRequireFits(t *testing.T, pg *browsertest.Page, what string) {
	t.Helper()
	pg.WaitJS(t, what+": no sideways scroll", `document.documentElement.scrollWidth <= document.documentElement.clientWidth`, uiWait)
	require.Empty(t, browsertest.Eval[[]string](t, pg, what+": elements off the right edge", admOffRight), "%s", what)
}

// A new endpoint from the GitHub preset: the preset fills the folded
// verification and dedupe fields; #ops picked by name stays #ops after
// saving (in the editor and the list); a delivery signed as GitHub signs
// it is verified and posted to the channel, its redelivery a duplicate. A
// shared profile is created with a write-only secret in its own section.
func TestWebUIAdminPresets(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	ops := mustCall(t, d, admin, "CreateChannel", obj{"slug": "ops"})
	opsID, _ := ops["id"].(string)
	require.NotEmpty(t, opsID)
	createMember(t, d, admin, "bob")

	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	me := uiSignInAdmin(t, p, d, admin, pg)
	pg.Do(t, "desktop", chromedp.EmulateViewport(1280, 800))
	pg.Do(t, "open admin", chromedp.Navigate(p.base+"/ui/admin"))
	pg.WaitJS(t, "admin page", `!!document.querySelector('#adm-notif .empty') && !!document.querySelector('#adm-profiles .empty')`, uiWait)
	recordResponses(t, pg)

	pg.Do(t, "new endpoint", chromedp.Click(chromedp.CSS(`#adm-notif > button`)), chromedp.WaitVisible(chromedp.ID("ep-slug")))
	field := func(id string) string {
		return browsertest.Eval[string](t, pg, id, `document.getElementById(`+js(id)+`).value`)
	}
	radio := func(label string) string {
		return `[...document.querySelectorAll('#adm-notif fieldset.radios .radio')].find(r => r.querySelector('label').textContent === ` + js(label) + `).querySelector('input')`
	}
	require.True(t, browsertest.Eval[bool](t, pg, "GitHub preselected", radio("GitHub")+`.checked`))
	require.False(t, browsertest.Eval[bool](t, pg, "advanced folded", `document.querySelector('#adm-notif details.advanced').open`), "the advanced fields start folded")
	require.False(t, browsertest.Eval[bool](t, pg, "header hidden", `document.getElementById('ep-header').checkVisibility()`), "the header field is not shown until Advanced opens")
	for _, c := range []struct{ preset, kind, dedupe string }{
		{"Stripe", "stripe", ""}, {"Standard Webhooks", "standard-webhooks", "webhook-id"}, {"Generic HMAC", "hmac-sha256", ""}, {"GitHub", "hmac-sha256", "x-github-delivery"},
	} {
		browsertest.Eval[bool](t, pg, "pick "+c.preset, `(`+radio(c.preset)+`.click(), true)`)
		require.Equal(t, c.kind, browsertest.Eval[string](t, pg, "kind", `document.querySelector('#adm-notif select[name=authKind]').value`), c.preset)
		require.Equal(t, c.dedupe, field("ep-dedupe"), c.preset)
	}
	require.Equal(t, "x-hub-signature-256", field("ep-header"))
	require.Equal(t, "sha256=", field("ep-prefix"))
	require.Contains(t, browsertest.Eval[string](t, pg, "setup text", `document.querySelector('#adm-notif .preset-setup').textContent`), "Settings → Webhooks")
	require.True(t, browsertest.Eval[bool](t, pg, "advanced opened by Generic HMAC", `document.querySelector('#adm-notif details.advanced').open`))
	browsertest.Eval[bool](t, pg, "fold advanced", `(document.querySelector('#adm-notif details.advanced').open = false, true)`)

	secret := hookSecret(t)
	pg.Do(t, "fill the endpoint", chromedp.SendKeys(chromedp.ID("ep-slug"), "gh"), chromedp.SendKeys(chromedp.ID("ep-display"), "GitHub <b>repo</b>"))
	require.Equal(t, p.base+"/hooks/gh", browsertest.Eval[string](t, pg, "ingress URL", `document.querySelector('#adm-notif .ingress-url').textContent`))
	addTarget := func(value string) {
		uiSelect(t, pg, "ep-targets", value)
		pg.Click(t, "add target "+value, `#adm-notif .multipick button`)
	}
	require.Equal(t, "#ops", browsertest.Eval[string](t, pg, "channel option", `[...document.getElementById('ep-targets').options].find(o => o.value === `+js("c:"+opsID)+`).textContent`))
	addTarget("c:" + opsID)
	addTarget("m:" + me)
	chips := `[...document.querySelectorAll('#adm-notif .multipick .chips li span')].map(s => s.textContent)`
	require.Equal(t, []string{"#ops", "@" + me}, browsertest.Eval[[]string](t, pg, "chips", chips))
	pg.Do(t, "secret and create", chromedp.SendKeys(chromedp.ID("ep-secret"), secret), chromedp.Click(chromedp.CSS(`#adm-notif .adm-editor form button[type=submit]`)))
	pg.WaitJS(t, "created", `document.querySelector('#adm-notif .adm-editor .msg.ok')?.textContent.includes('Secret stored')`, uiWait)

	// Shown by name after saving: in the reopened editor and the list.
	require.Equal(t, []string{"#ops", "@" + me}, browsertest.Eval[[]string](t, pg, "chips after saving", chips))
	pg.WaitJS(t, "listed with #ops", `[...document.querySelectorAll('#adm-notif tbody tr')].some(tr => tr.querySelector('td[data-label="Targets"]')?.textContent === `+js("#ops, @"+me)+`)`, uiWait)
	require.False(t, browsertest.Eval[bool](t, pg, "no channel id shown", `document.getElementById('adm-notif').textContent.includes(`+js(opsID)+`)`), "the channel's id is not shown")
	require.Equal(t, "GitHub", browsertest.Eval[string](t, pg, "verification column", `document.querySelector('#adm-notif tbody td[data-label="Verification"]').textContent`))
	require.True(t, browsertest.Eval[bool](t, pg, "GitHub still chosen", radio("GitHub")+`.checked`))
	requireNowhere(t, pg, secret)

	ep := mustCall(t, d, admin, "GetNotificationEndpoint", obj{"slug": "gh"})
	require.Equal(t, "hmac-sha256", ep["auth"].(obj)["kind"])
	require.Equal(t, "x-github-delivery", strings.ToLower(ep["dedupeHeader"].(string)))
	require.Equal(t, []any{obj{"channel": opsID}, obj{"member": me}}, ep["targets"])
	require.Equal(t, "GitHub <b>repo</b>", ep["displayName"])

	// A delivery signed as GitHub signs it (sign: the hook tests' signer).
	body := []byte(`{"action":"opened","repository":{"full_name":"acme/<script>x</script>"}}`)
	post := func(id string) httpResp {
		return p.do(t, http.MethodPost, "/hooks/gh", body, withHeader("X-Hub-Signature-256", sign(secret, body)), withHeader("X-GitHub-Delivery", id),
			withHeader("X-GitHub-Event", "pull_request"), withHeader("Content-Type", "application/json"))
	}
	r := post("gh-delivery-1")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, "delivered", r.body["status"], "%s", r.raw)
	hist := listOf(t, mustCall(t, d, admin, "History", obj{"channel": opsID}), "messages")
	require.NotEmpty(t, hist)
	require.Equal(t, "hook:gh", hist[0]["from"])
	require.Contains(t, hist[0]["body"], "acme/<script>x</script>")
	r = post("gh-delivery-1")
	require.Equal(t, http.StatusAccepted, r.status)
	require.Equal(t, "duplicate", r.body["status"], "the preset's dedupe header is in use")
	pg.Click(t, "open receipts", `#adm-notif button[aria-label="Receipts of gh"]`)
	pg.WaitJS(t, "receipts", `[...document.querySelectorAll('.adm-receipts tbody .rstatus')].map(e => e.textContent).join() === 'duplicate,delivered'`, uiWait)

	// A shared verification profile with a write-only secret.
	profSecret := "prof-S3CRET-" + randomSecret(t)[:16]
	pg.Do(t, "new profile",
		chromedp.Click(chromedp.CSS(`#adm-profiles > button`)),
		chromedp.WaitVisible(chromedp.ID("pr-slug")),
		chromedp.SendKeys(chromedp.ID("pr-slug"), "github-org"),
		chromedp.SendKeys(chromedp.ID("pr-desc"), "Every repository of the org"),
		chromedp.SendKeys(chromedp.ID("pr-secret"), profSecret),
		chromedp.Click(chromedp.CSS(`#adm-profiles .adm-editor form button[type=submit]`)))
	pg.WaitJS(t, "profile created", `document.querySelector('#adm-profiles .adm-editor .msg.ok')?.textContent.includes('Secret stored') &&
		[...document.querySelectorAll('#adm-profiles tbody tr')].some(tr => tr.textContent.includes('github-org') && tr.querySelector('td[data-label="Secret"]').textContent === 'set')`, uiWait)
	profs := listOf(t, mustCall(t, d, admin, "ListNotificationProfiles", obj{}), "profiles")
	require.Len(t, profs, 1)
	require.Equal(t, true, profs[0]["hasSecret"])
	require.Equal(t, "hmac-sha256", profs[0]["auth"].(obj)["kind"])
	requireNowhere(t, pg, profSecret)

	// The endpoint editor offers the profile by name.
	pg.Click(t, "edit gh", `#adm-notif button[aria-label="Edit gh"]`)
	pg.WaitJS(t, "profile offered", `[...(document.getElementById('ep-profile')?.options || [])].some(o => o.value === 'github-org')`, uiWait)

	pg.RequireNoSeriousA11y(t, "admin presets, 1280")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "admin-presets.png"))
	}
	admRequireFits(t, pg, "admin at 1280")
	pg.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	browsertest.Eval[bool](t, pg, "open advanced", `(document.querySelector('#adm-notif details.advanced').open = true, true)`)
	admRequireFits(t, pg, "admin at 375")
	pg.RequireNoSeriousA11y(t, "admin presets, 375")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		browsertest.Eval[bool](t, pg, "scroll to the editor", `(document.querySelector('#adm-notif .adm-editor').scrollIntoView(), true)`)
		pg.SaveScreenshot(t, filepath.Join(dir, "admin-presets-375.png"))
	}
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", "%s", line)
	}
}

// anthropicExchange is an llm_exchange row's data in Anthropic Messages
// shapes.
func anthropicExchange(label, model string, system string, messages []obj, content []obj, in, out int, cost *float64) obj {
	d := obj{"label": label, "model": model, "source": "otlp", "system": system, "messages": messages, "content": content,
		"stopReason": "end_turn", "durationMs": 1500,
		"usage": obj{"inputTokens": in, "outputTokens": out, "cacheReadTokens": 0, "cacheCreationTokens": 0}}
	if cost != nil {
		d["costUsd"] = *cost
	}
	return d
}

// The trace of an objective held by a member since deleted, then by
// alice: each exchange a step showing only what it adds to the
// conversation (user, assistant, folded tool call and result), with its
// tokens and cost (reported, computed, or unpriced); the cost per model
// and the count of unpriced calls; the deleted member labelled.
func TestWebUIActivityTraceConversation(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	alice := bearer(createMember(t, d, admin, "alice"))
	dora := bearer(createMember(t, d, admin, "dora"))

	o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Fix the <b>login</b> bug", "outcome": "fixed", "assignee": "dora"})
	oid, _ := o["id"].(string)
	require.NotEmpty(t, oid)
	mustUpload(t, d, dora, "dora", actEvObj("llm_exchange", actNow(), oid,
		anthropicExchange("dora-1", "claude-sonnet-4-5", "You are dora.", []obj{{"role": "user", "content": "Look at the login bug"}},
			[]obj{{"type": "text", "text": "Dora looked first."}}, 500, 40, nil)))
	mustCall(t, d, admin, "ReassignObjective", obj{"id": oid, "to": "alice"})

	xss := `<img src=x onerror="window.__xss=1">`
	reported := 0.0123
	user := obj{"role": "user", "content": "Please fix the login bug " + xss}
	call := []obj{{"type": "text", "text": "I will look at the code."}, {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": obj{"command": "grep -rn login " + xss}}}
	result := obj{"role": "user", "content": []obj{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "auth.go:12: login()"}}}
	mustUpload(t, d, alice, "alice",
		actEvObj("llm_exchange", actNow(), oid, anthropicExchange("ex-1", "claude-sonnet-4-5", "You are alice.", []obj{user}, call, 1200, 300, &reported)),
		actEvObj("tool_action", actNow(), oid, obj{"tool": "Bash", "phase": "result", "success": true, "durationMs": 12, "callId": "toolu_1", "source": "otlp"}),
		actEvObj("llm_exchange", actNow(), oid, anthropicExchange("ex-2", "claude-sonnet-4-5", "You are alice.",
			[]obj{user, {"role": "assistant", "content": call}, result}, []obj{{"type": "text", "text": "Fixed: login() checks the token now."}}, 1600, 90, nil)),
		actEvObj("llm_exchange", actNow(), oid, anthropicExchange("ex-3", "mystery-model-9", "", []obj{{"role": "user", "content": "Summarise"}},
			[]obj{{"type": "text", "text": "Summary done."}}, 50, 10, nil)))
	mustCall(t, d, admin, "DeleteMember", obj{"name": "dora"})
	us := mustCall(t, d, admin, "GetObjectiveUsage", obj{"id": oid})
	require.Equal(t, float64(1), us["usage"].(obj)["unpricedExchanges"], "%v", us)

	b := browsertest.Launch(t)
	pg := b.NewPage("lead")
	uiSignInAdmin(t, p, d, admin, pg)
	pg.Do(t, "desktop", chromedp.EmulateViewport(1280, 800))
	pg.Do(t, "open the trace", chromedp.Navigate(p.base+"/ui/activity?member=alice&objective="+oid))
	steps := `[...document.querySelectorAll('.trace ol.conversation > li.step.exchange')]`
	pg.WaitJS(t, "four exchanges", steps+`.length === 4`, uiWait)

	type step struct {
		Who, Model, Usage string
		Roles, Texts      []string
		Calls, Results    []string
		Deleted           bool
	}
	got := browsertest.Eval[[]step](t, pg, "steps", steps+`.map(li => ({
		who: li.querySelector('.step-head .who').firstChild.textContent,
		deleted: !!li.querySelector('.step-head .tag.deleted'),
		model: li.querySelector('.step-head .model').textContent,
		usage: li.querySelector('.step-usage').textContent,
		roles: [...li.querySelectorAll('ol.turns > li .role')].map(e => e.textContent),
		texts: [...li.querySelectorAll('ol.turns .turn-text')].map(e => e.textContent),
		calls: [...li.querySelectorAll('ol.turns details.tool-call > summary')].map(e => e.textContent),
		results: [...li.querySelectorAll('ol.turns details.tool-result > summary')].map(e => e.textContent),
	}))`)
	require.Len(t, got, 4)
	// dora's step: deleted, priced by the table.
	require.Equal(t, "dora", got[0].Who)
	require.True(t, got[0].Deleted, "the deleted member is labelled")
	require.Equal(t, []string{"System", "User", "Assistant"}, got[0].Roles)
	require.Contains(t, got[0].Usage, "500 in · 40 out")
	require.Regexp(t, `\$[0-9.]+ \(computed\)`, got[0].Usage)
	// alice's first step: her system prompt, the user, the assistant with a
	// folded tool call; the cost she reported.
	require.Equal(t, "alice", got[1].Who)
	require.False(t, got[1].Deleted)
	require.Equal(t, []string{"System", "User", "Assistant"}, got[1].Roles)
	require.Equal(t, []string{"You are alice.", "Please fix the login bug " + xss, "I will look at the code."}, got[1].Texts)
	require.Equal(t, []string{"Tool call: Bash"}, got[1].Calls)
	require.Contains(t, got[1].Usage, "1,200 in · 300 out · $0.0123")
	require.NotContains(t, got[1].Usage, "computed")
	// The second: only what it adds (the tool's result, the answer), not
	// the user's message again.
	require.Equal(t, []string{"Tool", "Assistant"}, got[2].Roles)
	require.Equal(t, []string{"Tool result: Bash"}, got[2].Results)
	require.Equal(t, []string{"Fixed: login() checks the token now."}, got[2].Texts)
	require.Contains(t, got[2].Usage, "1,600 in · 90 out · $")
	require.Contains(t, got[2].Usage, "(computed)")
	// The third: a model the price table does not know.
	require.Equal(t, "mystery-model-9", got[3].Model)
	require.Contains(t, got[3].Usage, "unpriced")
	require.NotContains(t, got[3].Usage, "$")

	// The folded tool call holds its input as text.
	pg.Click(t, "unfold the call", `.trace li.step.exchange ol.turns details.tool-call > summary`)
	require.Contains(t, browsertest.Eval[string](t, pg, "call input", `document.querySelector('.trace details.tool-call[open] pre').textContent`), `"command": "grep -rn login <img src=x onerror=\"window.__xss=1\">"`, "the input as JSON text")
	require.Equal(t, "undefined", browsertest.Eval[string](t, pg, "xss flag", `typeof window.__xss`))
	require.Equal(t, 0, browsertest.Eval[int](t, pg, "elements from data", `document.querySelectorAll('.trace img, .trace h3 b').length`))
	require.Contains(t, browsertest.Eval[string](t, pg, "carried note", steps+`[2].querySelector('.carried').textContent`), "2 earlier messages carried over")

	// Cost per model, unpriced calls counted, the deleted member labelled.
	models := browsertest.Eval[[]string](t, pg, "models", `[...document.querySelectorAll('.trace-usage table')].find(t => t.caption.textContent === 'Cost per model').querySelectorAll('tbody tr').length > 0 ?
		[...[...document.querySelectorAll('.trace-usage table')].find(t => t.caption.textContent === 'Cost per model').querySelectorAll('tbody tr')].map(tr => tr.textContent) : []`)
	require.Len(t, models, 2, "%v", models)
	joined := strings.Join(models, "\n")
	require.Contains(t, joined, "claude-sonnet-4-5")
	require.Regexp(t, `mystery-model-9.*unpriced \(1 of 1\)`, joined)
	require.Contains(t, browsertest.Eval[string](t, pg, "unpriced count", `document.querySelector('.trace-usage .unpriced-count').textContent`), "1 call has no price")
	memberRows := browsertest.Eval[[]string](t, pg, "members", `[...[...document.querySelectorAll('.trace-usage table')].find(t => t.caption.textContent === 'Cost per member').querySelectorAll('tbody tr')].map(tr => tr.textContent)`)
	require.Len(t, memberRows, 2, "%v", memberRows)
	require.True(t, strings.Contains(memberRows[0], "dora") && strings.Contains(memberRows[0], "deleted member") || strings.Contains(memberRows[1], "dora") && strings.Contains(memberRows[1], "deleted member"), "%v", memberRows)

	pg.RequireNoSeriousA11y(t, "activity trace, 1280")
	admRequireFits(t, pg, "activity at 1280")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		browsertest.Eval[bool](t, pg, "scroll to the trace", `(document.getElementById('trace-h').scrollIntoView(), true)`)
		pg.SaveScreenshot(t, filepath.Join(dir, "activity-trace.png"))
	}
	pg.Do(t, "phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	admRequireFits(t, pg, "activity at 375")
	pg.RequireNoSeriousA11y(t, "activity trace, 375")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		browsertest.Eval[bool](t, pg, "scroll to the steps", `(document.querySelector('.trace ol.conversation').scrollIntoView(), true)`)
		pg.SaveScreenshot(t, filepath.Join(dir, "activity-trace-375.png"))
	}
	// dora's own timeline labels her rows as a deleted member's.
	pg.Do(t, "dora's timeline", chromedp.Navigate(p.base+"/ui/activity?member=dora"))
	pg.WaitJS(t, "dora's rows labelled", `document.querySelectorAll('ol.timeline li.kind-llm_exchange').length > 0 &&
		[...document.querySelectorAll('ol.timeline li.kind-llm_exchange')].every(li => li.querySelector('.act-head .tag.deleted'))`, uiWait)

	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", "%s", line)
	}
}
