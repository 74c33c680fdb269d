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
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// The whole app as a team uses it (issue 27): a realistic team seeded
// through the real API, every page visited at desktop (1280×800) and
// phone (375×812) width, each checked with axe-core (no serious or
// critical violation) and, at phone width, for anything the person would
// have to scroll sideways to see. With SVC_WEBUI_SHOTS=<abs dir> it writes
// the screenshots of docs/webui (<page>.png, <page>-375.png): the one
// command that regenerates them is in docs/WEBAPP.md "Screenshots".

// showcaseTeam is what seedShowcase made, for the pages to open.
type showcaseTeam struct {
	lead                 *totpUser
	backend, ops         string // channel ids
	blockedObjective     string
	agentObjective       string
	enrollCode           string
	newestBackend        string // the last message posted in #backend
	newestDM, approvalOf string
}

// showcaseViewports are the two widths issue 27 asks every page to work at.
var showcaseViewports = []struct {
	suffix        string
	width, height int64
	mobile        bool
}{
	{"", 1280, 800, false},
	{"-375", 375, 812, true},
}

// showcasePage is one page of the app: where it is, and the text that
// says it has drawn its content (stable words, not the markup, so a page
// redesigned keeps the test).
type showcasePage struct {
	name  string
	path  string
	ready []string
	// extra is a JS condition also awaited (e.g. the composer present).
	extra string
}

func TestWebUIShowcase(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	team := seedShowcase(t, p)
	shots := os.Getenv("SVC_WEBUI_SHOTS")
	if shots != "" {
		require.True(t, filepath.IsAbs(shots), "SVC_WEBUI_SHOTS must be an absolute path (the test runs in cmd/svc/e2e): %q", shots)
		require.NoError(t, os.MkdirAll(shots, 0o755))
	}

	b := browsertest.Launch(t)
	pg := b.NewPage("maya")

	// The sign-in page, before signing in.
	for _, vp := range showcaseViewports {
		pg.Do(t, "viewport", chromedp.EmulateViewport(vp.width, vp.height, chromedp.EmulateScale(1), mobileIf(vp.mobile)))
		pg.Do(t, "open sign-in", chromedp.Navigate(p.base+"/ui/signin"), chromedp.WaitVisible(chromedp.ID("signin-member")))
		checkShowcasePage(t, pg, "signin", vp.suffix, shots)
	}
	pg.Do(t, "desktop", chromedp.EmulateViewport(1280, 800, chromedp.EmulateScale(1)))
	uiSignIn(t, pg, p.base, team.lead)
	waitLive(t, pg)

	composer := `(() => { const c = document.querySelector('form.composer textarea, #compose'); return c && !c.disabled && c.getClientRects().length > 0; })()`
	pages := []showcasePage{
		{name: "chat", path: "/ui/chat?c=chan%3A" + team.backend, ready: []string{team.newestBackend, "GET /v1/orders"}, extra: composer},
		{name: "chat-ops", path: "/ui/chat?c=chan%3A" + team.ops, ready: []string{"hook:github", "Rolling restart of api"}, extra: composer},
		{name: "dm", path: "/ui/chat?c=dm%3Abeacon", ready: []string{team.newestDM, "kubectl rollout restart"}, extra: composer},
		{name: "team", path: "/ui/team", ready: []string{"priya", "atlas", "Backend agent", "Ops agent"}},
		{name: "enroll", path: "/ui/enroll?code=" + team.enrollCode, ready: []string{team.enrollCode, "Priya's laptop"}},
		{name: "objectives", path: "/ui/objectives", ready: []string{"Rotate the staging TLS certificates", "Add rate limits to the public API", "Migrate CI to the new runners", "Move sessions to SQLite WAL mode"}},
		{name: "objective-detail", path: "/ui/objectives?id=" + team.blockedObjective, ready: []string{"Rotate the staging TLS certificates", "Waiting for the new CA bundle from security"}},
		{name: "files", path: "/ui/files?path=%2Fmaya", ready: []string{"release-notes.md", "architecture.png", "uptime-october.pdf"}},
		{name: "activity", path: "/ui/activity?member=atlas", ready: []string{"claude-sonnet-4-5", "Bash"}},
		{name: "admin", path: "/ui/admin", ready: []string{"github", "GitHub"}},
		{name: "settings", path: "/ui/settings", ready: []string{"Settings"}},
	}
	for _, vp := range showcaseViewports {
		pg.Do(t, "viewport", chromedp.EmulateViewport(vp.width, vp.height, chromedp.EmulateScale(1), mobileIf(vp.mobile)))
		for _, sp := range pages {
			pg.Do(t, "open "+sp.name, chromedp.Navigate(p.base+sp.path))
			cond := `(() => { const m = document.querySelector('main') || document.body; const s = m.textContent; return ` +
				js(strings.Join(sp.ready, "\x00")) + `.split('\x00').every(w => s.includes(w)); })()`
			if sp.extra != "" {
				cond += " && " + sp.extra
			}
			pg.WaitJS(t, sp.name+" drawn", cond, uiWait)
			checkShowcasePage(t, pg, sp.name, vp.suffix, shots)
		}
	}
	requireNoExceptions(t, pg)
}

// mobileIf is chromedp's phone emulation (touch, mobile viewport) when on.
func mobileIf(on bool) chromedp.EmulateViewportOption {
	if on {
		return chromedp.EmulateMobile
	}
	return chromedp.EmulateScale(1)
}

// checkShowcasePage runs the checks every page owes at this width and
// writes its screenshot; it reports every finding (t.Errorf) and goes on,
// so one run lists what every page needs.
func checkShowcasePage(t *testing.T, pg *browsertest.Page, name, suffix string, shots string) {
	t.Helper()
	// Let pending renders and fonts settle: axe and the layout measure
	// what the person sees, not a half-drawn page.
	pg.WaitJS(t, name+" settled", `document.fonts.status === 'loaded' && new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, uiWait)
	where := name + suffix
	for _, v := range pg.SeriousA11y(t, where) {
		t.Errorf("axe on %s: %s", where, v)
	}
	// Nothing to scroll sideways for, at either width (issue 27 asks it
	// of 375 px; a desktop page that does is as wrong).
	sw, vw, offenders := pg.Overflow(t)
	if sw > vw {
		t.Errorf("%s scrolls sideways: document %d px wide in a %d px viewport", where, sw, vw)
	}
	for _, o := range offenders {
		t.Errorf("%s: past the right edge: %s", where, o)
	}
	if shots != "" {
		pg.SaveViewport(t, filepath.Join(shots, where+".png"))
	}
}

// seedShowcase makes a team as one would find it on a working day, all
// through the API: people and agents with roles, channels with a
// conversation (markdown, a code block), DMs, an approval request from an
// agent, objectives in every state with watchers, files of three kinds, a
// GitHub delivery into #ops, and an agent's activity with a trace.
func seedShowcase(t *testing.T, p *proc) showcaseTeam {
	t.Helper()
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	member := func(name, title, desc string, perms ...string) cred {
		t.Helper()
		if perms == nil {
			perms = []string{}
		}
		body := mustCall(t, d, admin, "CreateMember", obj{"name": name, "role": obj{"title": title, "description": desc}, "permissions": perms})
		tok, _ := body["token"].(string)
		require.NotEmpty(t, tok)
		return bearer(tok)
	}
	maya := member("maya", "Engineering lead", "Runs the platform team; approves production changes.", "admin")
	priya := member("priya", "Backend engineer", "Orders and billing services.", "operator")
	tom := member("tom", "SRE", "On call this week; owns CI and the clusters.", "operator")
	atlas := member("atlas", "Backend agent", "Writes and reviews Go changes in the orders service.")
	beacon := member("beacon", "Ops agent", "Watches deploys and rotates certificates.")
	lead := enroll(t, d, admin, "maya")
	var out showcaseTeam
	out.lead = lead

	post := func(c cred, thread, body string) {
		t.Helper()
		req := obj{"body": body}
		if thread != "" {
			req["data"] = obj{"thread": thread}
		}
		mustPush(t, d, c, req)
	}
	dm := func(c cred, to, body string) {
		t.Helper()
		mustPush(t, d, c, obj{"to": to, "body": body})
	}
	channel := func(slug string, members ...string) string {
		t.Helper()
		ch := mustCall(t, d, maya, "CreateChannel", obj{"slug": slug})
		id, _ := ch["id"].(string)
		require.NotEmpty(t, id, "%v", ch)
		for _, m := range members {
			mustCall(t, d, maya, "AddChannelMember", obj{"channel": slug, "member": m})
		}
		return id
	}
	out.backend = channel("backend", "priya", "atlas", "tom")
	out.ops = channel("ops", "tom", "beacon", "priya")

	post(maya, "", "Good morning! Release **2.14** goes out Thursday. Freeze starts Wednesday 18:00 UTC; anything not merged by then waits for 2.15.")
	post(tom, "", "Reminder: the staging cluster is being upgraded today between 14:00 and 15:00. Expect a few minutes of downtime.")
	post(priya, "", "Thanks — I'll hold the billing migration until after the upgrade.")

	b := "chan:" + out.backend
	post(priya, b, "The new `/v1/orders` endpoint is up on staging. @atlas can you add pagination before we ship it?")
	post(atlas, b, "On it. I'll use a cursor on `(created_at, id)` so pages stay stable while orders come in.")
	post(atlas, b, "Done in `orders/list.go`. The handler now reads the cursor like this:\n\n```go\nfunc parseCursor(s string) (time.Time, string, error) {\n\tts, id, ok := strings.Cut(s, \".\")\n\tif !ok {\n\t\treturn time.Time{}, \"\", errBadCursor\n\t}\n\tms, err := strconv.ParseInt(ts, 10, 64)\n\treturn time.UnixMilli(ms), id, err\n}\n```\n\nTests: `go test ./orders/...` passes; p99 for `GET /v1/orders?limit=50` is 12 ms on staging.")
	post(priya, b, "Nice. Two things:\n\n1. Cap `limit` at 200.\n2. Return `next` as an opaque string, not the raw timestamp.")
	out.newestBackend = "Both fixed and pushed. Review is open as PR #482."
	post(atlas, b, out.newestBackend)

	o := "chan:" + out.ops
	post(tom, o, "Rolling restart of api in prod at 16:00 to pick up the new connection pool settings.")
	post(beacon, o, "Watching the rollout. Error rate is flat at 0.02 %; I'll post if it moves.")

	dm(priya, "maya", "Do you have ten minutes after stand-up to go through the rate-limit numbers?")
	dm(maya, "priya", "Sure, 10:15 in the small room.")
	dm(beacon, "maya", "The staging certificates expire in 6 days. I can rotate them as soon as security sends the new CA bundle.")
	out.newestDM = "I need to restart the api deployment in prod to apply the pool settings; approval request below."
	dm(beacon, "maya", out.newestDM)
	mustCall(t, d, admin, "SetApprovers", obj{"name": "beacon", "approvers": []string{"maya"}})
	ap := mustCall(t, d, beacon, "CreateApproval", obj{"tool": "Bash", "input": obj{"command": "kubectl rollout restart deployment/api -n prod", "description": "Apply the new connection pool settings"}})
	out.approvalOf, _ = ap["id"].(string)

	// Objectives, one in each state, watched.
	create := func(title, outcome, body, assignee string, watchers ...string) string {
		t.Helper()
		o := mustCall(t, d, maya, "CreateObjective", obj{"title": title, "outcome": outcome, "body": body, "assignee": assignee, "watchers": watchers})
		id, _ := o["id"].(string)
		require.NotEmpty(t, id)
		return id
	}
	out.agentObjective = create("Move sessions to SQLite WAL mode", "Session writes no longer block reads; p99 login under 50 ms.",
		"Sessions still use the rollback journal. Switch to WAL, keep `synchronous=FULL`, and measure login latency before and after.", "atlas", "priya")
	out.blockedObjective = create("Rotate the staging TLS certificates", "Staging serves certificates from the new CA; nothing expires within 60 days.",
		"The current staging certificates expire next week. Rotate them for api, web and the ingress.", "beacon", "tom", "priya")
	mustCall(t, d, beacon, "UpdateObjective", obj{"id": out.blockedObjective, "status": "blocked", "blockReason": "Waiting for the new CA bundle from security"})
	mustCall(t, d, tom, "DiscussObjective", obj{"id": out.blockedObjective, "body": "I've pinged security; they promised the bundle by tomorrow noon."})
	done := create("Add rate limits to the public API", "Every public route answers 429 with Retry-After past 100 requests a minute per key.", "", "priya", "tom")
	mustCall(t, d, priya, "CompleteObjective", obj{"id": done, "result": "Shipped in 2.13: token bucket per API key, limits in config, dashboards updated."})
	cancelled := create("Migrate CI to the new runners", "All pipelines run on the new runner pool.", "", "tom", "priya")
	mustCall(t, d, maya, "CancelObjective", obj{"id": cancelled, "reason": "The vendor contract changed; we stay on the current runners this quarter."})

	// Files in maya's home: notes, a diagram, a report.
	write := func(c cred, path, ctype string, body []byte) {
		t.Helper()
		r := p.do(t, http.MethodPost, "/fs/write?path="+path, body, withAuthorization(c.authorization), setHeader("Content-Type", ctype))
		require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.raw)
	}
	write(maya, "/maya/release-notes.md", "text/markdown", []byte("# Release 2.14\n\n- Orders: cursor pagination on `GET /v1/orders`\n- Billing: invoices in PDF\n- Ops: new connection pool settings\n"))
	write(maya, "/maya/architecture.png", "image/png", showcasePNG(t))
	write(maya, "/maya/uptime-october.pdf", "application/pdf", showcasePDF("Uptime report, October: 99.97 %"))
	write(maya, "/maya/notes/one-on-ones.md", "text/markdown", []byte("Priya: wants to lead the billing rewrite.\n"))

	// A GitHub endpoint into #ops, with one signed delivery.
	mustCall(t, d, admin, "CreateNotificationEndpoint", obj{
		"slug": "github", "displayName": "GitHub", "targets": []any{obj{"channel": "ops"}},
		"auth": obj{"kind": "hmac-sha256"}, "dedupeHeader": "X-GitHub-Delivery",
	})
	secret := hookSecret(t)
	mustCall(t, d, admin, "SetNotificationEndpointSecret", obj{"slug": "github", "secret": secret})
	payload := []byte(`{"action":"opened","number":482,"pull_request":{"title":"orders: cursor pagination for GET /v1/orders","user":{"login":"atlas-bot"},"html_url":"https://github.com/acme/shop/pull/482","additions":214,"deletions":37}}`)
	r := p.do(t, http.MethodPost, "/hooks/github", payload, withHeader("X-Hub-Signature-256", sign(secret, payload)), withHeader("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), withHeader("X-GitHub-Event", "pull_request"))
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
	require.Equal(t, "delivered", r.body["status"], "%s", r.raw)

	// atlas at work: an exchange and a tool action over OTLP, a GenAI
	// record on its objective, and its state.
	now := time.Now()
	sess := "sess-orders-pagination"
	u := otUsage{in: 18420, out: 1260, cacheRead: 12000, cost: 0.0734, durationMs: 4200}
	atlasTok := strings.TrimPrefix(atlas.authorization, "Bearer ")
	export := otHTTPExport(otCTJSON, false)
	require.Zero(t, export(t, p, atlasTok, otLogsReq(otNamings[0],
		otReqBody(now.Add(-3*time.Minute), sess, 1, "claude-sonnet-4-5", otAnthropicRequest(t, "claude-sonnet-4-5", nil, []obj{{"role": "user", "content": "Add cursor pagination to GET /v1/orders; cap limit at 200."}}, "Bash", "Edit")),
		otAcct(now.Add(-3*time.Minute), sess, 2, "claude-sonnet-4-5", "req_01orders", u),
		otRespBody(now.Add(-3*time.Minute), sess, 3, "claude-sonnet-4-5", "req_01orders", otAnthropicResponse(t, "claude-sonnet-4-5", "msg_01orders", []obj{{"type": "text", "text": "I'll add a (created_at, id) cursor and run the package tests."}}, "tool_use", u)),
		otRec{agent: otAgentClaude, name: "tool_result", at: now.Add(-2 * time.Minute), attrs: append(otClaudeAttrs(sess, 4),
			otStr("tool_name", "Bash"), otStr("tool_use_id", "toolu_01tests"), otStr("success", "true"), otInt("duration_ms", 8400),
			otStr("tool_input", `{"command":"go test ./orders/..."}`))},
	)))
	reqJSON := `{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "Switch the session store to WAL and measure login latency."}]}`
	respJSON := `{"id": "chatcmpl-wal-1", "object": "chat.completion", "created": 1, "model": "claude-sonnet-4-5",
		"choices": [{"index": 0, "message": {"role": "assistant", "content": "WAL enabled; p99 login went from 84 ms to 31 ms."}, "finish_reason": "stop"}],
		"usage": {"prompt_tokens": 5210, "completion_tokens": 312, "total_tokens": 5522}}`
	mustUploadGenAI(t, p, d, atlas, "atlas", genaiBodyOf(t, time.Now().UnixMilli(), reqJSON, respJSON))
	mustCall(t, d, atlas, "SetActivity", obj{"state": "working"})
	// Both agents' runners are connected, as on a real team: the app
	// shows them online and as agents (a runner's stream marks one).
	p.subscribeSSE(t, atlasTok, "atlas", "&runner=1")
	p.subscribeSSE(t, strings.TrimPrefix(beacon.authorization, "Bearer "), "beacon", "&runner=1")

	// A device asking to join, for the enrollment page.
	r = p.do(t, http.MethodPost, "/enroll", obj{"labelHint": "Priya's laptop"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	out.enrollCode, _ = r.body["userCode"].(string)
	require.NotEmpty(t, out.enrollCode)
	return out
}

// showcasePNG is a small bar chart, as a diagram in someone's home would
// be.
func showcasePNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 320, 200))
	bg := color.RGBA{0xf7, 0xf8, 0xfa, 0xff}
	bars := []color.RGBA{{0x3b, 0x6e, 0xd8, 0xff}, {0x2f, 0x9e, 0x6b, 0xff}, {0xe0, 0x8a, 0x1e, 0xff}, {0x8a, 0x5c, 0xd6, 0xff}}
	heights := []int{120, 160, 90, 140}
	for y := 0; y < 200; y++ {
		for x := 0; x < 320; x++ {
			img.Set(x, y, bg)
		}
	}
	for i, h := range heights {
		for y := 180 - h; y < 180; y++ {
			for x := 30 + i*70; x < 80+i*70; x++ {
				img.Set(x, y, bars[i])
			}
		}
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

// showcasePDF is a one-page PDF showing line, with a correct xref table so
// the browser's viewer opens it.
func showcasePDF(line string) []byte {
	content := fmt.Sprintf("BT /F1 18 Tf 72 720 Td (%s) Tj ET", line)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// Full-page loads in one tab (a reload, a URL typed, a file opened in the
// tab and Back) leave the app working: chromium keeps the pages it left in
// its back/forward cache, and one whose message stream stayed open held
// one of the six HTTP/1.1 connections the browser allows per origin; a
// few loads on, the new page's own requests queued behind those streams
// and it hung at "Loading…". The stream now closes when the page is
// hidden, and a page brought back from the cache resumes it: a message
// posted while it was away is shown.
func TestWebUIShowcaseFullLoads(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	createMember(t, d, admin, "maya")
	priya := bearer(createMember(t, d, admin, "priya"))
	lead := enroll(t, d, admin, "maya")

	b := browsertest.Launch(t)
	pg := b.NewPage("maya")
	uiSignIn(t, pg, p.base, lead)
	waitLive(t, pg)
	mustPush(t, d, priya, obj{"to": "maya", "body": "Morning! Stand-up moved to 9:45."})

	// Eight full loads, each live with its own stream (each its own URL:
	// a load of the same URL replaces the entry, and caches nothing).
	for i := range 8 {
		pg.Do(t, fmt.Sprintf("full load %d", i+1), chromedp.Navigate(fmt.Sprintf("%s/ui/chat?c=general&load=%d", p.base, i+1)))
		waitLive(t, pg)
	}
	pg.Do(t, "open the DM", chromedp.Navigate(p.base+"/ui/chat?c=dm%3Apriya"))
	waitLive(t, pg)
	waitShown(t, pg, "Morning! Stand-up moved to 9:45.")
	browsertest.Eval[bool](t, pg, "note a restore", `(addEventListener('pageshow', (e) => { if (e.persisted) window.__restored = true; }), true)`)
	// A page whose module was never loaded in this tab.
	pg.Do(t, "open settings", chromedp.Navigate(p.base+"/ui/settings"))
	pg.WaitJS(t, "settings drawn", `document.querySelector('main h1')?.textContent === 'Settings'`, uiWait)

	// Back to the DM: from the back/forward cache when chromium kept it,
	// its stream resumed; a fresh load otherwise. Either way the message
	// sent meanwhile is there and the stream is live.
	mustPush(t, d, priya, obj{"to": "maya", "body": "Room 4B, not the usual one."})
	// history.back(), not chromedp's NavigateBack: a page restored from
	// the cache fires no load event for it to wait on.
	browsertest.Eval[bool](t, pg, "back to the DM", `(history.back(), true)`)
	pg.WaitJS(t, "back on the DM", `new URL(location.href).searchParams.get('c') === 'dm:priya'`, uiWait)
	waitLive(t, pg)
	waitShown(t, pg, "Room 4B, not the usual one.")
	t.Logf("restored from the back/forward cache: %v", browsertest.Eval[bool](t, pg, "restored", `window.__restored === true`))
	requireNoExceptions(t, pg)
}
