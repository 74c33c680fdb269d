package e2e

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
)

// tabStreams is one tab of the tabs test with the stream requests it sent.
type tabStreams struct {
	pg        *browsertest.Page
	subscribe *atomic.Int64
	team      *atomic.Int64
	closed    bool
}

// sumStreams adds up the /subscribe and /team/stream requests of the open
// tabs.
func sumStreams(tabs []*tabStreams) (sub, team int64) {
	for _, tb := range tabs {
		if !tb.closed {
			sub += tb.subscribe.Load()
			team += tb.team.Load()
		}
	}
	return sub, team
}

// isLeader reports whether pg's tab holds the shared streams.
func isLeader(t *testing.T, pg *browsertest.Page) bool {
	t.Helper()
	return browsertest.Eval[bool](t, pg, "leading", `import('/ui/static/js/tabshare.js').then((m) => m.leading())`)
}

// requireShownOnce waits until body is shown in every open tab and asserts
// it is shown there exactly once.
func requireShownOnce(t *testing.T, tabs []*tabStreams, body string) {
	t.Helper()
	for _, tb := range tabs {
		if tb.closed {
			continue
		}
		waitShown(t, tb.pg, body)
	}
	for _, tb := range tabs {
		if tb.closed {
			continue
		}
		n := 0
		for _, b := range shownBodies(t, tb.pg) {
			if b == body {
				n++
			}
		}
		require.Equal(t, 1, n, "%s shows %q %d times", tb.pg.Name, body, n)
	}
}

// Eight tabs of one member in one browser share one /subscribe and one
// /team/stream (docs/WEBAPP.md, "Tabs share one stream"): every tab loads
// and is live, the broker sees one stream of each for the member, a
// message reaches every tab once, and when the leading tab closes another
// takes the streams over, resuming so that a message sent in between
// reaches every remaining tab exactly once. Another member's presence
// changing shows in a follower tab. Signing out in one tab signs them all
// out.
func TestWebUITabsShareOneStream(t *testing.T) {
	t.Parallel()
	const nTabs = 8
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	alice := enroll(t, d, admin, "alice")
	post := func(body string) {
		t.Helper()
		r := p.do(t, http.MethodPost, "/push", obj{"body": body}, withBearer(bobTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
	connected := func() float64 {
		v, _ := presenceOf(t, p, admin, "alice")["connected"].(float64)
		return v
	}

	// The browser goes through a proxy that can cut its connections.
	px := startCutProxy(t, p.addr)

	b := browsertest.Launch(t)
	first := b.NewPage("alice-1")
	tabs := []*tabStreams{{pg: first,
		subscribe: countRequests(t, first, "GET", "/subscribe"),
		team:      countRequests(t, first, "GET", "/team/stream")}}
	uiSignIn(t, first, px.base, alice)
	waitLive(t, first)
	for i := 2; i <= nTabs; i++ {
		pg := first.NewTab(fmt.Sprintf("alice-%d", i))
		tabs = append(tabs, &tabStreams{pg: pg,
			subscribe: countRequests(t, pg, "GET", "/subscribe"),
			team:      countRequests(t, pg, "GET", "/team/stream")})
		pg.Do(t, "open chat", chromedp.Navigate(px.base+"/ui/chat"))
	}
	// Every tab loads and is usable: signed in, live, its composer there.
	for _, tb := range tabs {
		tb.pg.WaitJS(t, "signed in", `document.querySelector('.me .who')?.textContent === 'alice'`, uiWait)
		waitLive(t, tb.pg)
		tb.pg.Do(t, "composer", chromedp.WaitVisible(chromedp.ID("compose")))
	}
	sub, team := sumStreams(tabs)
	require.Equal(t, int64(1), sub, "one /subscribe for %d tabs", nTabs)
	require.Equal(t, int64(1), team, "one /team/stream for %d tabs", nTabs)
	require.Equal(t, 1.0, connected(), "the broker sees one stream of alice's")

	post("to every tab")
	requireShownOnce(t, tabs, "to every tab")
	// The last tab opened can still send: its requests are not queued
	// behind other tabs' streams.
	uiSend(t, tabs[nTabs-1].pg, "sent from the last tab")

	// The network drops, the leader closes, and messages are sent (one in
	// the conversation on screen, one DM elsewhere) before any tab holds
	// the streams again: only the new leader's resuming after the last
	// message it was handed brings the DM.
	var leader *tabStreams
	for _, tb := range tabs {
		if tb.subscribe.Load() == 1 {
			leader = tb
		}
	}
	require.NotNil(t, leader)
	px.cut()
	leader.pg.WaitJS(t, "drop noticed", `document.querySelector('.live')?.dataset.state === 'reconnecting'`, uiWait)
	for _, tb := range tabs {
		tb.subscribe.Store(0)
		tb.team.Store(0)
	}
	closeTab(t, leader.pg)
	leader.closed = true
	closed := time.Now()
	post("during the handover")
	r := p.do(t, http.MethodPost, "/push", obj{"to": "alice", "body": "dm during the handover"}, withBearer(bobTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	deadline := time.Now().Add(uiWait)
	for {
		sub, team = sumStreams(tabs)
		if sub >= 1 && team >= 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no tab took the streams over (subscribe %d, team %d)", sub, team)
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("streams taken over %v after the leading tab closed", time.Since(closed).Round(time.Millisecond))
	px.restore()
	requireShownOnce(t, tabs, "during the handover")
	for _, tb := range tabs {
		if !tb.closed {
			tb.pg.WaitJS(t, "DM counted once", `document.querySelector(`+js(convSel("dm:bob")+` .badge`)+`)?.textContent === '1'`, uiWait)
		}
	}
	post("after the handover")
	requireShownOnce(t, tabs, "after the handover")
	holders := 0
	for _, tb := range tabs {
		if !tb.closed {
			waitLive(t, tb.pg)
			if tb.subscribe.Load() > 0 || tb.team.Load() > 0 {
				holders++
			}
		}
	}
	require.Equal(t, 1, holders, "one tab holds the streams after the handover")
	deadline = time.Now().Add(uiWait)
	for connected() != 1.0 {
		require.True(t, time.Now().Before(deadline), "alice's streams: %v, want 1", connected())
		time.Sleep(50 * time.Millisecond)
	}
	for _, tb := range tabs {
		tb.subscribe.Store(0)
		tb.team.Store(0)
	}

	// bob's presence changes show in a tab that does not hold the streams.
	var follower *tabStreams
	for _, tb := range tabs {
		if !tb.closed && tb.pg != tabs[nTabs-1].pg && !isLeader(t, tb.pg) {
			follower = tb
			break
		}
	}
	require.NotNil(t, follower)
	openTeam(t, follower.pg)
	row := memberRow("bob")
	follower.pg.WaitJS(t, "bob offline", row+`?.querySelector('.presence').dataset.state === 'offline'`, uiWait)
	run := p.subscribeSSE(t, bobTok, "bob", "&runner=1")
	follower.pg.WaitJS(t, "bob online", row+`.querySelector('.presence').dataset.state === 'online'`, uiWait)
	mustCall(t, d, bearer(bobTok), "SetActivity", obj{"state": "working"})
	follower.pg.WaitJS(t, "bob working", row+`.querySelector('.activity').dataset.state === 'working'`, uiWait)
	run.close()
	follower.pg.WaitJS(t, "bob offline again", row+`.querySelector('.presence').dataset.state === 'offline'`, uiWait)
	sub, team = sumStreams(tabs)
	require.Equal(t, []int64{0, 0}, []int64{sub, team}, "no stream opened for the presence changes")

	// Signing out in one tab signs every tab out and ends the streams.
	out := tabs[nTabs-1].pg
	browsertest.Eval[bool](t, out, "sign out", `(() => { [...document.querySelectorAll('button')].find((b) => b.textContent === 'Sign out').click(); return true; })()`)
	for _, tb := range tabs {
		if !tb.closed {
			tb.pg.WaitJS(t, "signed out", `location.pathname === '/ui/signin' && !document.querySelector('.me .who')`, uiWait)
		}
	}
	deadline = time.Now().Add(uiWait)
	for connected() != 0 {
		require.True(t, time.Now().Before(deadline), "alice's streams after signing out: %v, want 0", connected())
		time.Sleep(50 * time.Millisecond)
	}

	for _, tb := range tabs {
		if tb.closed {
			continue
		}
		for _, line := range tb.pg.Console() {
			require.NotContains(t, line, "exception", "%s: %s", tb.pg.Name, line)
		}
	}
}
