package capture

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
