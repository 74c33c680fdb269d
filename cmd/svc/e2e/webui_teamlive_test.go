package e2e

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// countRequests counts the page's requests of method to path, as the
// DevTools protocol reports them (every request the page sends, fetch and
// EventSource alike).
func countRequests(t *testing.T, pg *browsertest.Page, method, path string) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	require.NoError(t, chromedp.Listen(pg.Ctx, func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok || e.Request == nil || e.Request.Method != method {
			return
		}
		if u, err := url.Parse(e.Request.URL); err == nil && u.Path == path {
			n.Add(1)
		}
	}))
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	defer cancel()
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	return &n
}

// The Team page is live without polling: a second member's runner
// connecting and disconnecting, its activity, and its becoming an agent
// show on the page with no GET /roster after the first load, at both
// widths, and the page passes axe.
func TestWebUITeamLiveNoPolling(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	adminName := sessionMember(t, p, adminTok)
	bobTok := createMember(t, d, admin, "bob")
	createMember(t, d, admin, "carol")
	au := enroll(t, d, admin, adminName)

	b := browsertest.Launch(t)
	pg := b.NewPage("admin")
	rosterGets := countRequests(t, pg, "GET", "/roster")
	streams := countRequests(t, pg, "GET", "/team/stream")
	uiSignIn(t, pg, p.base, au)
	openTeam(t, pg)
	bob := memberRow("bob")
	pg.WaitJS(t, "bob offline, idle, a person", bob+`?.querySelector('.presence').dataset.state === 'offline' && `+
		bob+`.querySelector('.activity').dataset.state === 'idle' && `+bob+`.dataset.kind === 'person' && `+bob+`.querySelector('.tag.agent').hidden`, uiWait)
	loaded := rosterGets.Load()
	require.GreaterOrEqual(t, loaded, int64(1), "the first load reads the roster")

	// bob's runner connects: online, and an agent.
	run := p.subscribeSSE(t, bobTok, "bob", "&runner=1")
	pg.WaitJS(t, "bob online", bob+`.querySelector('.presence').dataset.state === 'online'`, uiWait)
	pg.WaitJS(t, "bob an agent", bob+`.dataset.kind === 'agent' && !`+bob+`.querySelector('.tag.agent').hidden`, uiWait)
	require.Equal(t, "Agent", browsertest.Eval[string](t, pg, "badge", bob+`.querySelector('.tag.agent').textContent`))
	require.Equal(t, "person", browsertest.Eval[string](t, pg, "carol", memberRow("carol")+`.dataset.kind`))

	activity := func(state string) {
		t.Helper()
		mustCall(t, d, bearer(bobTok), "SetActivity", obj{"state": state})
		pg.WaitJS(t, "bob "+state, bob+`.querySelector('.activity').dataset.state === `+js(state), uiWait)
	}
	activity("working")
	activity("blocked")
	pg.RequireNoCriticalA11y(t, "team page, live")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "team-live.png"))
	}

	// The runner goes: offline and idle at once, still an agent.
	run.close()
	pg.WaitJS(t, "bob offline and idle", bob+`.querySelector('.presence').dataset.state === 'offline' && `+
		bob+`.querySelector('.activity').dataset.state === 'idle' && `+bob+`.dataset.kind === 'agent'`, uiWait)

	// On a phone: the same, nothing scrolls sideways.
	requireFits(t, pg)
	run = p.subscribeSSE(t, bobTok, "bob", "&runner=1")
	pg.WaitJS(t, "bob online on a phone", bob+`.querySelector('.presence').dataset.state === 'online'`, uiWait)
	activity("working")
	pg.WaitJS(t, "still fits", `document.documentElement.scrollWidth <= 375`, uiWait)
	pg.RequireNoCriticalA11y(t, "team page on a phone")
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "team-live-375.png"))
	}
	run.close()
	pg.WaitJS(t, "bob offline on a phone", bob+`.querySelector('.presence').dataset.state === 'offline'`, uiWait)

	require.Equal(t, loaded, rosterGets.Load(), "no GET /roster after the first load: presence came from the team stream")
	require.Equal(t, int64(1), streams.Load(), "one team stream, held open")
	for _, line := range pg.Console() {
		require.NotContains(t, line, "exception", line)
	}
}
