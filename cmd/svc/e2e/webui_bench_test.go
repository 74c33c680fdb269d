package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"svc/cmd/svc/internal/browsertest"
)

// The web app's performance (issue 15 "Performance"), in chromium against
// the real broker on loopback:
//
//   - first-load-bytes: bytes chromium transferred (headers included,
//     gzip as served, cache off) loading the signed-in chat page;
//   - tti-ms: from navigation start to the chat page interactive (its
//     stream live and the composer present), on the browser's clock;
//   - push-p50-ms / push-p99-ms: a message POSTed to /push by another
//     member (fetch from the page with that member's bearer token) until
//     its element is in the open conversation's DOM (a MutationObserver's
//     performance.now()), both on the browser's clock, over benchMessages
//     messages sent one after another;
//   - chat-1k-usable-ms: from navigation start to a channel of
//     bench1kMessages messages being usable: the composer's textarea
//     rendered and enabled, and the newest message's text on screen (not
//     covered, not scrolled away), checked every animation frame, on the
//     browser's clock. Issue 27's budget is under 1 s on this machine.
//
// Run: go test -tags sqlite_omit_load_extension -run '^$' -bench BenchmarkWebUI -benchtime 1x ./cmd/svc/e2e/
// (part of `make bench`). The figures are in docs/WEBAPP.md.

const benchMessages = 200

// bench1kMessages is the size of the channel chat-1k-usable-ms opens.
const bench1kMessages = 1000

// usableProbe records when the open conversation is usable: its composer
// (a textarea) rendered and enabled, and the newest message's text on
// screen. It keys on those two, not on the page's markup, which changes.
// That the composer is on screen without scrolling is the chat page's own
// test (issue 27); here it is timing, not layout.
const usableProbe = `(() => {
  const want = %s;
  const inView = (r) => r.width > 0 && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth;
  const shown = (node, r) => { const e = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2); return !!e && (node.contains(e) || e.contains(node)); };
  const usable = () => {
    const c = document.querySelector('form.composer textarea, textarea#compose');
    if (!c || c.disabled) return false;
    if (!c.getClientRects().length) return false;
    const x = document.evaluate('(//text()[contains(., ' + JSON.stringify(want) + ')])[last()]', document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
    if (!x) return false;
    const range = document.createRange();
    range.selectNodeContents(x);
    const r = range.getBoundingClientRect();
    return inView(r) && shown(x.parentElement, r);
  };
  const tick = () => {
    if (window.__usable) return;
    try { if (usable()) { window.__usable = performance.now(); return; } } catch (e) {}
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();`

// ttiProbe records when the chat page becomes interactive.
const ttiProbe = `new MutationObserver((_, o) => {
  if (document.querySelector('.live[data-state="live"]') && document.getElementById('compose') && document.querySelector('ol.messages li')) {
    window.__tti = performance.now(); o.disconnect();
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeFilter: ['data-state']});`

func BenchmarkWebUI(b *testing.B) {
	p := mustStartSvc(b, procOpts{})
	admin := bearer(p.adminToken(b))
	d := restDriver{p}
	createMember(b, d, admin, "alice")
	bobTok := createMember(b, d, admin, "bob")
	alice := enroll(b, d, admin, "alice")
	r := p.do(b, http.MethodPost, "/push", obj{"to": "alice", "body": "first"}, withBearer(bobTok))
	if r.status != http.StatusOK {
		b.Fatalf("push: %s", r.raw)
	}

	// A channel of bench1kMessages messages, the newest one known.
	ch := mustCall(b, d, admin, "CreateChannel", obj{"slug": "bench1k"})
	chanID, _ := ch["id"].(string)
	for _, m := range []string{"alice", "bob"} {
		mustCall(b, d, admin, "AddChannelMember", obj{"channel": "bench1k", "member": m})
	}
	newest := ""
	for i := 1; i <= bench1kMessages; i++ {
		body := fmt.Sprintf("Message %d of %d: the nightly build of orders-api passed all checks.", i, bench1kMessages)
		if i == bench1kMessages {
			body = "The newest message: deploy of 2.14 finished at 16:04."
			newest = body
		}
		r := p.do(b, http.MethodPost, "/push", obj{"body": body, "data": obj{"thread": "chan:" + chanID}}, withBearer(bobTok))
		if r.status != http.StatusOK {
			b.Fatalf("push %d: %s", i, r.raw)
		}
	}

	br := browsertest.Launch(b)
	pg := br.NewPage("alice")
	pg.Do(b, "sign in",
		chromedp.Navigate(p.base+"/ui/signin"),
		chromedp.WaitVisible(chromedp.ID("signin-member")),
		chromedp.SendKeys(chromedp.ID("signin-member"), alice.name),
		chromedp.SendKeys(chromedp.ID("signin-code"), alice.next(b)),
		chromedp.Click(chromedp.CSS("form.card button[type=submit]")))
	pg.WaitJS(b, "signed in", `location.pathname === '/ui/chat'`, uiWait)

	ctx, cancel := context.WithTimeout(pg.Ctx, browsertest.ActionTimeout)
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	if err == nil {
		_, err = chromedp.Call(ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
	}
	if err == nil {
		_, err = chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: ttiProbe})
	}
	if err == nil {
		_, err = chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fmt.Sprintf(usableProbe, js(newest))})
	}
	cancel()
	if err != nil {
		b.Fatal(err)
	}

	var bytes, tti, p50, p99, usable1k []float64
	b.ResetTimer()
	for range b.N {
		pg.Do(b, "open chat", chromedp.Navigate(p.base+"/ui/chat?c=dm%3Abob"))
		pg.WaitJS(b, "interactive", `window.__tti > 0`, uiWait)
		tti = append(tti, browsertest.Eval[float64](b, pg, "tti", `window.__tti`))
		bytes = append(bytes, browsertest.Eval[float64](b, pg, "transfer", `performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))
			.filter(e => new URL(e.name).pathname.startsWith('/ui/')).reduce((n, e) => n + e.transferSize, 0)`))

		var lat []float64
		for done := 0; done < benchMessages; done += 50 {
			batch := browsertest.Eval[[]float64](b, pg, "push to render", fmt.Sprintf(`(async () => {
  const list = document.querySelector('ol.messages');
  const out = [];
  for (let i = 0; i < 50; i++) {
    const body = 'bench-%d-' + i + '-' + Math.random();
    const seen = new Promise((resolve) => {
      const o = new MutationObserver((muts) => {
        for (const m of muts) for (const n of m.addedNodes) {
          if (n.querySelector && n.querySelector('.body')?.textContent === body) { o.disconnect(); resolve(performance.now()); return; }
        }
      });
      o.observe(list, {childList: true});
    });
    const t0 = performance.now();
    const res = await fetch('/push', {method: 'POST', credentials: 'omit', headers: {'Authorization': 'Bearer ' + %s, 'Content-Type': 'application/json', 'X-SVC-Protocol': '1'}, body: JSON.stringify({to: 'alice', body})});
    if (!res.ok) throw new Error('push ' + res.status);
    out.push(await seen - t0);
  }
  return out;
})()`, done, js(bobTok)))
			lat = append(lat, batch...)
		}
		slices.Sort(lat)
		p50 = append(p50, lat[len(lat)*50/100])
		p99 = append(p99, lat[len(lat)*99/100])

		pg.Do(b, "open the 1,000-message channel", chromedp.Navigate(p.base+"/ui/chat?c=chan%3A"+chanID))
		pg.WaitJS(b, "channel usable", `window.__usable > 0`, uiWait)
		usable1k = append(usable1k, browsertest.Eval[float64](b, pg, "usable", `window.__usable`))
	}
	b.StopTimer()
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	b.ReportMetric(mean(bytes), "first-load-bytes")
	b.ReportMetric(mean(tti), "tti-ms")
	b.ReportMetric(mean(p50), "push-p50-ms")
	b.ReportMetric(mean(p99), "push-p99-ms")
	b.ReportMetric(mean(usable1k), "chat-1k-usable-ms")
	b.ReportMetric(0, "ns/op")
}
