package capture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// benchStream is a streamed Responses answer of realistic size: created,
// one message of 200 text deltas, done, completed with usage.
func benchStream() []string {
	evs := []string{
		`{"type":"response.created","response":{"id":"resp_b","object":"response","status":"in_progress","model":"gpt-5","output":[]}}`,
		`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","role":"assistant","id":"msg_b","content":[]}}`,
	}
	for i := range 200 {
		evs = append(evs, fmt.Sprintf(`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"token %d "}`, i))
	}
	evs = append(evs,
		`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","role":"assistant","id":"msg_b","content":[{"type":"output_text","text":"…"}]}}`,
		`{"type":"response.completed","response":{"id":"resp_b","object":"response","status":"completed","model":"gpt-5","output":[],"usage":{"input_tokens":9000,"output_tokens":200}}}`,
	)
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = sse(e)
	}
	return out
}

// BenchmarkProxy times one streamed Responses call (a 40 KB request, 204
// events flushed one by one) against a local upstream, direct and through
// the capturing proxy with a sink; ttfb-ns is the time to the first byte of
// the answer. The difference of the two is what the proxy adds per call.
func BenchmarkProxy(b *testing.B) {
	events := benchStream()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, e := range events {
			_, _ = io.WriteString(w, e)
			f.Flush()
		}
	}))
	defer up.Close()
	u, err := url.Parse(up.URL + "/v1")
	if err != nil {
		b.Fatal(err)
	}
	var captured atomic.Int64
	p, err := Start(Options{Upstream: u, Sink: func(Exchange) { captured.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	req := `{"model":"gpt-5","stream":true,"input":"` + strings.Repeat("context ", 5000) + `"}`

	for _, tc := range []struct {
		name string
		base string
	}{{"direct", up.URL + "/v1"}, {"proxy", p.URL()}} {
		b.Run(tc.name, func(b *testing.B) {
			tr := &http.Transport{DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			var ttfb time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				resp, err := c.Post(tc.base+"/responses", "application/json", strings.NewReader(req))
				if err != nil {
					b.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				if _, err := br.ReadByte(); err != nil {
					b.Fatal(err)
				}
				ttfb += time.Since(start)
				if _, err := io.Copy(io.Discard, br); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			b.ReportMetric(float64(ttfb.Nanoseconds())/float64(b.N), "ttfb-ns")
		})
	}
	if captured.Load() == 0 {
		b.Fatal("the proxy captured nothing")
	}
}

// messagesStream is a streamed Anthropic Messages answer as Claude Code
// gets it: message_start, a text block of 100 deltas, a tool_use block of
// 20 input_json_delta fragments, message_delta with usage, message_stop.
func messagesStream() []string {
	evs := []string{
		`{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":22000,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	}
	for i := range 100 {
		evs = append(evs, fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"token %d "}}`, i))
	}
	evs = append(evs, `{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_b","name":"Bash","input":{}}}`)
	for i := range 20 {
		frag := `{\"command\": \"echo `
		if i > 0 {
			frag = fmt.Sprintf("part%d ", i)
		}
		if i == 19 {
			frag = `\"}`
		}
		evs = append(evs, `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"`+frag+`"}}`)
	}
	evs = append(evs, `{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":180}}`,
		`{"type":"message_stop"}`)
	out := make([]string, len(evs))
	for i, e := range evs {
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(e), &typ)
		out[i] = "event: " + typ.Type + "\n" + sse(e)
	}
	return out
}

// messagesRequest is a request of Claude Code's size with the svc toolbox
// loaded: about 88 KB, 69 KB of it tool definitions.
func messagesRequest() string {
	var tools []string
	for i := range 60 {
		tools = append(tools, fmt.Sprintf(`{"name":"tool_%d","description":"%s","input_schema":{"type":"object","properties":{"x":{"type":"string"}}}}`, i, strings.Repeat("d", 1070)))
	}
	return `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"` + strings.Repeat("s", 12000) +
		`"}],"messages":[{"role":"user","content":"` + strings.Repeat("m", 7000) + `"}],"tools":[` + strings.Join(tools, ",") + `]}`
}

// BenchmarkProxyMessages times one streamed Anthropic Messages call, as
// Claude Code makes it (an 88 KB request, 127 SSE events flushed one by
// one), against a local upstream: direct, through the capturing proxy
// with a sink (each call's capture, reassembly included, finishes before
// the next call, as an agent's calls follow one another), and through a
// proxy that only forwards. Besides the mean it reports the 50th and 99th
// percentiles of the whole call and of the time to the answer's first
// byte: the proxy's added latency is the difference of the sub-benchmarks.
func BenchmarkProxyMessages(b *testing.B) {
	events := messagesStream()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Request-Id", "req_bench")
		f := w.(http.Flusher)
		for _, e := range events {
			_, _ = io.WriteString(w, e)
			f.Flush()
		}
	}))
	defer up.Close()
	u, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	var captured atomic.Int64
	sunk := make(chan struct{}, 1)
	p, err := Start(Options{Upstream: u, Sink: func(e Exchange) {
		if len(e.Response) > 0 {
			captured.Add(1)
		}
		sunk <- struct{}{}
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	// The same proxy with no sink: what forwarding alone costs, without
	// the capture's copy and its reassembly after each call.
	fwd, err := Start(Options{Upstream: u})
	if err != nil {
		b.Fatal(err)
	}
	defer fwd.Close()
	req := messagesRequest()

	for _, tc := range []struct {
		name string
		base string
	}{{"direct", up.URL}, {"proxy", p.URL()}, {"forward-only", fwd.URL()}} {
		b.Run(tc.name, func(b *testing.B) {
			tr := &http.Transport{DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}
			var total, first []time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(len(req)))
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				resp, err := c.Post(tc.base+"/v1/messages?beta=true", "application/json", strings.NewReader(req))
				if err != nil {
					b.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				if _, err := br.ReadByte(); err != nil {
					b.Fatal(err)
				}
				first = append(first, time.Since(start))
				if _, err := io.Copy(io.Discard, br); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				total = append(total, time.Since(start))
				if tc.name == "proxy" {
					// An agent reads the answer before its next call, so the
					// capture of one call is done before the next starts.
					select {
					case <-sunk:
					case <-time.After(10 * time.Second):
						b.Fatal("the call was not captured")
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(percentile(total, 50).Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(percentile(total, 99).Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(percentile(first, 50).Nanoseconds()), "ttfb-p50-ns")
			b.ReportMetric(float64(percentile(first, 99).Nanoseconds()), "ttfb-p99-ns")
		})
	}
	if captured.Load() == 0 {
		b.Fatal("the proxy captured nothing")
	}
}

// percentile is the q-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (q*len(s) + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)]
}
