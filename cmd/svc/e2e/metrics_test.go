package e2e

// End-to-end tests of GET /metrics (docs/PERFORMANCE.md "Metrics"): a real
// broker child is driven through a DM, a broadcast with a live SSE
// subscriber and an OTLP export, then scraped and parsed with the
// Prometheus text parser; the counters must have moved by exactly what was
// done. Access: a loopback peer is open by default, and with
// SVC_METRICS_LOOPBACK_OPEN=0 only a bearer holding metrics.read reads it.

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrape reads /metrics and parses it.
func scrape(t testing.TB, p *proc, opts ...reqOpt) map[string]*dto.MetricFamily {
	t.Helper()
	r := p.do(t, http.MethodGet, "/metrics", nil, opts...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "text/plain"), r.header.Get("Content-Type"))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.raw))
	require.NoError(t, err, "%s", r.raw)
	return fams
}

// metricValue is the value of the counter or gauge name whose labels
// include want, or a histogram's sample count, summed over every series
// that matches (as sum() would: svc_streams_cut_total{stream="chat"} is
// one series per reason); 0 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func TestMetricsCountWhatHappened(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := bearer(p.adminToken(t))
	alice := createMember(t, d, admin, "alice")
	bob := createMember(t, d, admin, "bob")

	stream := p.subscribeSSE(t, bob, "bob", "")
	before := scrape(t, p)
	require.EqualValues(t, 1, metricValue(before, "svc_live_streams", map[string]string{"kind": "sse"}), "bob's SSE stream is live")
	require.Contains(t, before, "go_goroutines", "the Go runtime collector is registered")
	require.Contains(t, before, "process_resident_memory_bytes", "the process collector is registered")

	mustPush(t, d, bearer(alice), obj{"to": "bob", "body": "dm"})
	require.Equal(t, "dm", stream.nextMessage(t)["body"])
	mustPush(t, d, bearer(alice), obj{"body": "everyone"})
	require.Equal(t, "everyone", stream.nextMessage(t)["body"])

	// One OTLP export: one record of a name svc does not use (rejected)
	// and an exchange's three records (stored, and committed as a row).
	const sess, mdl = "a1b2c3d4-7219-4ca9-a9fb-0909bf841433", "claude-sonnet-4-5"
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	u := otUsage{in: 1, out: 2, durationMs: 5}
	rej := otHTTPExport(otCTJSON, false)(t, p, alice, otLogsReq(otNamings[0],
		otOtherRec(at, sess, 0, "plugin_loaded"),
		otReqBody(at.Add(time.Second), sess, 1, mdl, otAnthropicRequest(t, mdl, []obj{{"type": "text", "text": "s"}}, []obj{{"role": "user", "content": "q"}})),
		otAcct(at.Add(2*time.Second), sess, 2, mdl, "req_M", u),
		otRespBody(at.Add(3*time.Second), sess, 3, mdl, "req_M", otAnthropicResponse(t, mdl, "msg_M", []obj{{"type": "text", "text": "a"}}, "end_turn", u)),
	))
	require.EqualValues(t, 1, rej)

	// The hub adds its deliveries up once a publish has handed the event
	// to every stream, which may be just after bob read it.
	var after map[string]*dto.MetricFamily
	delta := func(name string, labels map[string]string) float64 {
		return metricValue(after, name, labels) - metricValue(before, name, labels)
	}
	require.Eventually(t, func() bool {
		after = scrape(t, p)
		return delta("svc_deliveries_total", map[string]string{"stream": "chat"}) >= 2
	}, callTimeout, 10*time.Millisecond)
	require.EqualValues(t, 1, delta("svc_pushes_total", map[string]string{"kind": "dm"}))
	require.EqualValues(t, 1, delta("svc_pushes_total", map[string]string{"kind": "broadcast"}))
	require.EqualValues(t, 0, delta("svc_pushes_total", map[string]string{"kind": "channel"}))
	// bob is the only live stream: one delivery per push.
	require.EqualValues(t, 2, delta("svc_deliveries_total", map[string]string{"stream": "chat"}))
	// Each push was read before the next was sent: one write each.
	require.EqualValues(t, 2, delta("svc_sse_writes_total", map[string]string{"stream": "chat"}))
	require.EqualValues(t, 0, delta("svc_streams_cut_total", map[string]string{"stream": "chat"}))
	require.EqualValues(t, 1, delta("svc_otlp_records_total", map[string]string{"outcome": "rejected"}))
	require.EqualValues(t, 3, delta("svc_otlp_records_total", map[string]string{"outcome": "stored"}))
	// Each push is its own commit here (each waited for its answer);
	// batch size and latency are observed once per commit.
	require.GreaterOrEqual(t, delta("svc_commit_seconds", map[string]string{"writer": "messages"}), 2.0)
	require.Equal(t, delta("svc_commit_seconds", map[string]string{"writer": "messages"}), delta("svc_commit_batch_size", map[string]string{"writer": "messages"}))
	require.GreaterOrEqual(t, delta("svc_commit_seconds", map[string]string{"writer": "activity"}), 1.0)
	// The stores time their COMMITs: at least those of the group commits.
	require.GreaterOrEqual(t, delta("svc_store_commit_seconds", map[string]string{"store": "main"}), 2.0)
	require.GreaterOrEqual(t, delta("svc_store_commit_seconds", map[string]string{"store": "activity"}), 1.0)

	stream.close()
	require.Eventually(t, func() bool {
		return metricValue(scrape(t, p), "svc_live_streams", map[string]string{"kind": "sse"}) == 0
	}, callTimeout, 20*time.Millisecond, "a closed stream is no longer counted")
}

func TestMetricsAccess(t *testing.T) {
	t.Run("loopback open", func(t *testing.T) {
		p := mustStartSvc(t, procOpts{})
		scrape(t, p)
		// A request through a proxy names another client: not loopback.
		r := p.do(t, http.MethodGet, "/metrics", nil, withHeader("X-Forwarded-For", "203.0.113.9"))
		requireRESTError(t, r, "unauthenticated")
	})
	t.Run("loopback closed", func(t *testing.T) {
		p := mustStartSvc(t, procOpts{env: []string{"SVC_METRICS_LOOPBACK_OPEN=0"}})
		d := restDriver{p}
		admin := bearer(p.adminToken(t))
		bob := createMember(t, d, admin, "bob")
		carol := createMember(t, d, admin, "carol", "metrics.read")

		requireRESTError(t, p.do(t, http.MethodGet, "/metrics", nil), "unauthenticated")
		requireRESTError(t, p.do(t, http.MethodGet, "/metrics", nil, withBearer("svc_not-a-token")), "unauthenticated")
		requireRESTError(t, p.do(t, http.MethodGet, "/metrics", nil, withBearer(bob)), "forbidden")
		fams := scrape(t, p, withBearer(carol))
		require.Contains(t, fams, "svc_pushes_total")
		// The admin preset is the specification's leaves, without
		// metrics.read; its team.manage reads the metrics.
		scrape(t, p, withAuthorization(admin.authorization))
		dave := createMember(t, d, admin, "dave", "team.manage")
		scrape(t, p, withBearer(dave))
	})
}
