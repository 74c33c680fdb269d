package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/browsertest"
	"svc/server/webpush/webpushtest"
)

// Browser push (issue 15 item 8) in chromium against the real broker.
//
// Headless chromium has no push service offline, so PushManager.subscribe
// cannot reach one. The test stands in for that one piece only: a stub of
// PushManager (installed through the DevTools protocol, which the CSP does
// not govern) hands the page a subscription whose endpoint is a fake push
// service (webpushtest) and whose keys that service holds. Everything else
// is real: the page's opt-in (permission, service worker registration,
// subscribe with the broker's VAPID key, POST /push/subscriptions), the
// broker's RFC 8291 encryption and VAPID signature (the fake service
// verifies and decrypts them independently), and the service worker's push
// handler, which gets the decrypted bytes through
// ServiceWorker.deliverPushMessage and shows the notification.

// pushStub replaces PushManager's subscription calls with one subscription
// to endpoint with the keys p256dh and auth, recording the
// applicationServerKey the page passed.
func pushStub(endpoint, p256dh, auth string) string {
	return `(() => {
  if (typeof PushManager === 'undefined') return;
  const b64 = (u8) => btoa(String.fromCharCode(...u8)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  let current = null;
  const make = (key) => ({
    endpoint: ` + js(endpoint) + `, expirationTime: null,
    options: {userVisibleOnly: true, applicationServerKey: key.buffer},
    toJSON() { return {endpoint: this.endpoint, expirationTime: null, keys: {p256dh: ` + js(p256dh) + `, auth: ` + js(auth) + `}}; },
    unsubscribe() {
      current = null;
      localStorage.setItem('stub.unsubscribed', '1');
      localStorage.setItem('stub.unsubscribes', String(Number(localStorage.getItem('stub.unsubscribes') || 0) + 1));
      return Promise.resolve(true);
    },
  });
  const saved = localStorage.getItem('stub.key');
  if (saved && !localStorage.getItem('stub.unsubscribed')) current = make(Uint8Array.from(atob(saved.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - saved.length % 4) % 4)), (c) => c.charCodeAt(0)));
  PushManager.prototype.subscribe = function (opts) {
    const key = new Uint8Array(opts.applicationServerKey);
    localStorage.setItem('stub.key', b64(key));
    localStorage.removeItem('stub.unsubscribed');
    current = make(key);
    return Promise.resolve(current);
  };
  PushManager.prototype.getSubscription = function () { return Promise.resolve(current); };
})();`
}

// swRegistrations collects the page's service worker registrations as the
// DevTools protocol reports them.
type swRegistrations struct {
	mu  sync.Mutex
	ids map[string]serviceworker.RegistrationID // scope URL → id
}

func watchServiceWorkers(t *testing.T, pg *browsertest.Page) *swRegistrations {
	t.Helper()
	w := &swRegistrations{ids: map[string]serviceworker.RegistrationID{}}
	require.NoError(t, chromedp.Listen(pg.Ctx, func(ev any) {
		if e, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated); ok {
			w.mu.Lock()
			for _, r := range e.Registrations {
				if !r.IsDeleted {
					w.ids[r.ScopeURL] = r.RegistrationID
				}
			}
			w.mu.Unlock()
		}
	}))
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	defer cancel()
	_, err := chromedp.Call(ctx, serviceworker.Enable, struct{}{})
	require.NoError(t, err)
	return w
}

func (w *swRegistrations) id(scope string) (serviceworker.RegistrationID, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	id, ok := w.ids[scope]
	return id, ok
}

// installStub makes pushStub run in every document pg loads.
func installStub(t *testing.T, pg *browsertest.Page, stub string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	defer cancel()
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: stub})
	require.NoError(t, err)
}

// closeTab closes pg's tab, as the person closing it would (its stream
// ends; a page only navigated away may stay alive in the back/forward
// cache with its stream open).
func closeTab(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	defer cancel()
	_, err := chromedp.Call(ctx, page.Close, cdp.Empty{})
	require.NoError(t, err)
}

// waitNoStream waits until member has no live stream on the broker.
func waitNoStream(t *testing.T, p *proc, tok, member string) {
	t.Helper()
	deadline := time.Now().Add(uiWait)
	for streamsOf(t, p, tok, member) > 0 {
		require.True(t, time.Now().Before(deadline), "%s's stream did not end", member)
		time.Sleep(50 * time.Millisecond)
	}
}

// streamsOf is how many live streams member has on the broker.
func streamsOf(t *testing.T, p *proc, tok, member string) int {
	t.Helper()
	r := p.do(t, http.MethodGet, "/roster", nil, withBearer(tok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	conns, _ := r.body["connected"].([]any)
	for _, c := range conns {
		m, _ := c.(map[string]any)
		if m["name"] == member {
			n, _ := m["connected"].(float64)
			return int(n)
		}
	}
	return 0
}

func TestWebUIPushOptInNotifyOptOut(t *testing.T) {
	t.Parallel()
	fake := webpushtest.NewService(t)
	p := mustStartSvc(t, procOpts{env: []string{"SVC_WEBPUSH_ALLOW_HTTP=1"}})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	alice := enroll(t, d, admin, "alice")
	sub := fake.NewSubscriber("/alice-browser")
	r := p.do(t, http.MethodGet, "/push/vapid-public-key", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	vapid, _ := r.body["publicKey"].(string)
	require.NotEmpty(t, vapid)

	b := browsertest.Launch(t)
	pg := b.NewPage("alice")
	// The notification permission, as a person would grant it at the prompt.
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	_, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: p.base, BrowserContextID: chromedp.FromContext(pg.Ctx).BrowserContextID,
	})
	require.NoError(t, err)
	cancel()
	stub := pushStub(sub.Endpoint(), sub.P256dh(), sub.Auth())
	installStub(t, pg, stub)

	uiSignIn(t, pg, p.base, alice)
	waitLive(t, pg)
	pg.Click(t, "settings", `nav a[href="/ui/settings"]`)
	pg.WaitJS(t, "off", `document.getElementById('push-state')?.dataset.state === 'off' && !document.getElementById('push-on').hidden`, uiWait)
	pg.RequireNoCriticalA11y(t, "settings page")
	pg.Do(t, "turn on", chromedp.Click(chromedp.ID("push-on")))
	pg.WaitJS(t, "on", `document.getElementById('push-state')?.dataset.state === 'on' && document.activeElement?.id === 'push-off'`, uiWait)
	require.Equal(t, vapid, browsertest.Eval[string](t, pg, "key used", `localStorage.getItem('stub.key')`), "subscribed with the broker's VAPID key")
	require.Equal(t, "activated", browsertest.Eval[string](t, pg, "worker", `navigator.serviceWorker.getRegistration('/ui/').then(r => r?.active?.state || 'none')`))
	if dir := os.Getenv("SVC_WEBUI_SHOTS"); dir != "" {
		pg.SaveScreenshot(t, filepath.Join(dir, "settings.png"))
	}

	// The tab is closed (its stream ends): a DM from bob goes to the push
	// service, encrypted to this browser's keys. A second tab of the same
	// browser stays (about:blank) to drive the service worker.
	tab := pg.NewTab("alice-tab2")
	installStub(t, tab, stub)
	sws := watchServiceWorkers(t, tab)
	closeTab(t, pg)
	waitNoStream(t, p, aliceTok, "alice")
	dm := `hello <b>alice</b> & "friends"`
	r = p.do(t, http.MethodPost, "/push", obj{"to": "alice", "title": "Lunch?", "body": dm}, withBearer(bobTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	got := waitPushes(t, fake, 1)
	require.NoError(t, got[0].Err, "the broker's push passes VAPID and decrypts")
	require.Equal(t, "/alice-browser", got[0].Path)
	var payload map[string]any
	require.NoError(t, json.Unmarshal(got[0].Plaintext, &payload))
	require.Equal(t, "bob", payload["from"])
	require.Equal(t, dm, payload["body"])

	// The service worker gets those bytes (as the browser's push stack
	// would hand them over after decrypting) and shows them.
	scope := p.base + "/ui/"
	deadline := time.Now().Add(uiWait)
	for _, ok := sws.id(scope); !ok; _, ok = sws.id(scope) {
		require.True(t, time.Now().Before(deadline), "no service worker registration for %s", scope)
		time.Sleep(50 * time.Millisecond)
	}
	regID, _ := sws.id(scope)
	ctx, cancel = context.WithTimeout(tab.Ctx, browsertest.ActionTimeout)
	_, err = chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: p.base, RegistrationID: regID, Data: string(got[0].Plaintext)})
	cancel()
	require.NoError(t, err)

	// Reopen the app and read what the worker showed.
	pg = tab
	pg.Do(t, "reopen", chromedp.Navigate(p.base+"/ui/settings"))
	pg.WaitJS(t, "notification shown", `navigator.serviceWorker.getRegistration('/ui/').then(r => r.getNotifications()).then(ns => ns.length === 1)`, uiWait)
	type note struct {
		Title string `json:"title"`
		Body  string `json:"body"`
		Tag   string `json:"tag"`
		URL   string `json:"url"`
	}
	n := browsertest.Eval[note](t, pg, "notification", `navigator.serviceWorker.getRegistration('/ui/').then(r => r.getNotifications()).then(([n]) => ({title: n.title, body: n.body, tag: n.tag, url: n.data.url}))`)
	require.Equal(t, note{Title: "bob: Lunch?", Body: dm, Tag: "dm:bob", URL: "/ui/chat?c=dm%3Abob"}, n)

	// An objective event: shown with a link to the objective.
	ctx, cancel = context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	_, err = chromedp.Call(ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{Origin: p.base, RegistrationID: regID,
		Data: `{"id":"9","from":"bob","title":"Ship it","body":"completed","thread":"obj:abc-123"}`})
	cancel()
	require.NoError(t, err)
	pg.WaitJS(t, "objective notification", `navigator.serviceWorker.getRegistration('/ui/').then(r => r.getNotifications({tag: 'obj:abc-123'})).then(ns => ns.length === 1 && ns[0].data.url === '/ui/objectives?id=abc-123' && ns[0].title === 'Objective: Ship it (bob)')`, uiWait)

	// Opt out: the broker forgets the subscription (a DM while the tab is
	// closed goes nowhere) and the browser unsubscribes.
	waitLive(t, pg)
	pg.WaitJS(t, "on", `document.getElementById('push-state')?.dataset.state === 'on'`, uiWait)
	pg.Do(t, "turn off", chromedp.Click(chromedp.ID("push-off")))
	pg.WaitJS(t, "off", `document.getElementById('push-state')?.dataset.state === 'off' && document.activeElement?.id === 'push-on'`, uiWait)
	require.Equal(t, "1", browsertest.Eval[string](t, pg, "unsubscribed", `localStorage.getItem('stub.unsubscribed') || ''`))
	last := pg.NewTab("alice-tab3")
	closeTab(t, pg)
	waitNoStream(t, p, aliceTok, "alice")
	r = p.do(t, http.MethodPost, "/push", obj{"to": "alice", "body": "after opting out"}, withBearer(bobTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	// A later DM to bob's subscription is a marker: once it arrives, a push
	// queued for alice before it would have been sent by now too (the
	// broker queues no push at all for a member without subscriptions).
	bobSub := fake.NewSubscriber("/bob-browser")
	subscribeBrowser(t, d, bearer(bobTok), bobSub)
	r = p.do(t, http.MethodPost, "/push", obj{"to": "bob", "body": "marker"}, withBearer(aliceTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	waitPushes(t, fake, 2)
	require.Equal(t, 1, pushesTo(fake, "/alice-browser"), "no push to alice after opting out")
	noExceptions(t, last)
}

// grantNotifications grants pg's origin the notification permission, as a
// person would at the prompt.
func grantNotifications(t *testing.T, pg *browsertest.Page, origin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	defer cancel()
	_, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
		Origin: origin, BrowserContextID: chromedp.FromContext(pg.Ctx).BrowserContextID,
	})
	require.NoError(t, err)
}

// uiPushOn turns browser notifications on from Settings.
func uiPushOn(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	uiOpen(t, pg, "/ui/settings")
	pg.WaitJS(t, "off", `document.getElementById('push-state')?.dataset.state === 'off' && !document.getElementById('push-on').hidden`, uiWait)
	pg.Do(t, "turn on", chromedp.Click(chromedp.ID("push-on")))
	pg.WaitJS(t, "on", `document.getElementById('push-state')?.dataset.state === 'on'`, uiWait)
}

// A browser signed out shows nobody's messages: Sign out turns push off
// for the member first (the broker sends alice's DMs nowhere after). And a
// browser whose subscription was made for someone whose session just
// ended (no sign-out) does not hand that subscription to the next member:
// opting in starts a new one and forgets the old member's id.
func TestWebUIPushSignOut(t *testing.T) {
	t.Parallel()
	fake := webpushtest.NewService(t)
	p := mustStartSvc(t, procOpts{env: []string{"SVC_WEBPUSH_ALLOW_HTTP=1"}})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	createMember(t, d, admin, "carol")
	alice, carol := enroll(t, d, admin, "alice"), enroll(t, d, admin, "carol")
	sub := fake.NewSubscriber("/shared-browser")

	b := browsertest.Launch(t)
	pg := b.NewPage("shared")
	grantNotifications(t, pg, p.base)
	installStub(t, pg, pushStub(sub.Endpoint(), sub.P256dh(), sub.Auth()))

	uiSignIn(t, pg, p.base, alice)
	waitLive(t, pg)
	uiPushOn(t, pg)
	require.NotEmpty(t, browsertest.Eval[string](t, pg, "id kept", `localStorage.getItem('svc.push.v1.alice') || ''`))
	pg.Click(t, "sign out", `.me button`)
	pg.WaitJS(t, "signed out", `location.pathname === '/ui/signin'`, uiWait)
	require.Equal(t, "", browsertest.Eval[string](t, pg, "id forgotten", `localStorage.getItem('svc.push.v1.alice') || ''`))
	require.Equal(t, "1", browsertest.Eval[string](t, pg, "unsubscribed", `localStorage.getItem('stub.unsubscribes') || ''`))
	waitNoStream(t, p, aliceTok, "alice")
	r := p.do(t, http.MethodPost, "/push", obj{"to": "alice", "body": "after signing out"}, withBearer(bobTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	// A push to bob after it is the marker: alice's would have gone first.
	subscribeBrowser(t, d, bearer(bobTok), fake.NewSubscriber("/bob-browser"))
	r = p.do(t, http.MethodPost, "/push", obj{"to": "bob", "body": "marker"}, withBearer(aliceTok))
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	waitPushes(t, fake, 1)
	require.Equal(t, 0, pushesTo(fake, "/shared-browser"), "no push to a signed-out browser")

	// Alice on again, then her session ends without signing out (cookies
	// cleared); carol signs in at the same browser and turns push on.
	uiSignIn(t, pg, p.base, alice)
	uiPushOn(t, pg)
	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	_, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{})
	cancel()
	require.NoError(t, err)
	uiSignIn(t, pg, p.base, carol)
	uiPushOn(t, pg)
	require.Equal(t, "2", browsertest.Eval[string](t, pg, "alice's subscription dropped", `localStorage.getItem('stub.unsubscribes') || ''`))
	require.Equal(t, "", browsertest.Eval[string](t, pg, "alice's id forgotten", `localStorage.getItem('svc.push.v1.alice') || ''`))
	require.NotEmpty(t, browsertest.Eval[string](t, pg, "carol's id", `localStorage.getItem('svc.push.v1.carol') || ''`))
	noExceptions(t, pg)
}
