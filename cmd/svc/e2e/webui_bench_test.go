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
//     messages sent one after another.
//
// Run: go test -tags sqlite_omit_load_extension -run '^$' -bench BenchmarkWebUI -benchtime 1x ./cmd/svc/e2e/
// (part of `make bench`). The figures are in docs/WEBAPP.md.

const benchMessages = 200

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
	cancel()
	if err != nil {
		b.Fatal(err)
	}

	var bytes, tti, p50, p99 []float64
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
	b.ReportMetric(0, "ns/op")
}
