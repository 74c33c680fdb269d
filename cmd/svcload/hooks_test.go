package main

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// GitHub's documented vector ("Validating webhook deliveries").
func TestGithubSignature(t *testing.T) {
	require.Equal(t, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		githubSignature([]byte("It's a Secret to Everybody"), []byte("Hello, World!")))
	require.NotEqual(t, githubSignature([]byte("k"), []byte("a")), githubSignature([]byte("k"), []byte("a ")))
}

func TestEndpointsFor(t *testing.T) {
	tests := []struct {
		rate int
		d    time.Duration
		want int
	}{
		{5000, 10 * time.Second, 417},
		{5000, 2 * time.Second, 84},
		{1000, time.Second, 9},
		{1000, 5 * time.Second, 42},
		{120, time.Second, 1},
		{121, time.Second, 2},
	}
	for _, tc := range tests {
		got := endpointsFor(tc.rate, tc.d)
		require.Equal(t, tc.want, got, "%d/s for %s", tc.rate, tc.d)
		require.GreaterOrEqual(t, got*hookPerEndpoint, int(float64(tc.rate)*tc.d.Seconds()))
	}
	for _, p := range []plan{fullPlan, quickPlan} {
		hp := p.hookPlan()
		// The sustained run can reach the target over its whole cap, and
		// the paced run sends no endpoint more than the limit.
		require.GreaterOrEqual(t, float64(hp.sustainEndpoints*hookPerEndpoint), targetHookRate*hp.sustainDur.Seconds(), p.name)
		paced := int(hookPacedRate * hp.pacedDur.Seconds())
		require.LessOrEqual(t, (paced+hp.pacedEndpoints-1)/hp.pacedEndpoints, hookPerEndpoint, p.name)
		require.Less(t, hp.sustainDur+hp.pacedDur, time.Minute, "%s: runs stay inside one window of the limit", p.name)
	}
}

func TestPacedLoop(t *testing.T) {
	t.Run("on schedule, failures counted", func(t *testing.T) {
		var calls atomic.Int64
		start := time.Now()
		s := pacedLoop(context.Background(), 100, 1000, 16, func(_ context.Context, i int) error {
			calls.Add(1)
			if i%4 == 0 {
				return errors.New("no")
			}
			return nil
		})
		require.Equal(t, int64(100), calls.Load())
		require.Equal(t, 100, s.started)
		require.Equal(t, 0, s.skipped)
		require.Equal(t, 25, s.fails)
		require.Len(t, s.lats, 75)
		require.Len(t, s.pairs, 75)
		require.GreaterOrEqual(t, time.Since(start), 99*time.Millisecond, "the last send is due at 99 ms")
		for i, lag := range s.lags {
			require.GreaterOrEqual(t, lag, time.Duration(0), i)
		}
		require.Len(t, s.fromSchedule(), 75)
	})
	t.Run("an open loop does not wait for slow answers", func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		go func() { time.Sleep(300 * time.Millisecond); once.Do(func() { close(release) }) }()
		start := time.Now()
		s := pacedLoop(context.Background(), 50, 1000, 4, func(ctx context.Context, _ int) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		require.Equal(t, 4, s.started, "only maxInFlight start while answers hang")
		require.Equal(t, 46, s.skipped)
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
		for _, l := range s.fromSchedule() {
			require.GreaterOrEqual(t, l, 250*time.Millisecond, "latency counts the hang")
		}
	})
	t.Run("ends with its context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		s := pacedLoop(ctx, 10000, 100, 16, func(context.Context, int) error { return nil })
		require.Less(t, s.started, 20)
	})
}

// auditFixture is two endpoints with two good deliveries each.
func auditFixture() ([]hookEndpoint, []hookSent, map[int][]hookReceipt, map[string]*hookArrival, map[int][]hookMessage) {
	eps := []hookEndpoint{{slug: "a", member: "m0"}, {slug: "b", member: "m1"}}
	var sent []hookSent
	receipts := map[int][]hookReceipt{}
	arrivals := map[string]*hookArrival{}
	history := map[int][]hookMessage{}
	for i, id := range []string{"d0", "d1", "d2", "d3"} {
		k := i % 2
		msg := "000" + id
		sent = append(sent, hookSent{sent: true, endpoint: k, id: id, status: "delivered"})
		receipts[k] = append(receipts[k], hookReceipt{ID: id, Status: "delivered", MessageIDs: []string{msg}})
		arrivals[id] = &hookArrival{msgID: msg, from: "hook:" + eps[k].slug, member: eps[k].member, messages: 1}
		m := hookMessage{ID: msg, From: "hook:" + eps[k].slug}
		m.Data.Kind, m.Data.DeliveryIDs = "hook_delivery", []string{id}
		history[k] = append(history[k], m, hookMessage{ID: "reg" + id, From: "admin"}) // registry events are ignored
	}
	return eps, sent, receipts, arrivals, history
}

func TestAuditHooks(t *testing.T) {
	type fx struct {
		eps      []hookEndpoint
		sent     []hookSent
		receipts map[int][]hookReceipt
		arrivals map[string]*hookArrival
		history  map[int][]hookMessage
	}
	tests := []struct {
		name    string
		spoil   func(f *fx)
		ok      bool
		problem string
	}{
		{name: "all durable", spoil: func(*fx) {}, ok: true},
		{name: "a receipt missing", spoil: func(f *fx) { f.receipts[1] = f.receipts[1][:1] }, problem: "3 receipts listed delivered, 4 deliveries"},
		{name: "a receipt no 202 answered", spoil: func(f *fx) {
			f.receipts[0] = append(f.receipts[0], hookReceipt{ID: "x", Status: "delivered", MessageIDs: []string{"9"}})
		}, problem: "receipt x delivered but not answered"},
		{name: "a receipt on another endpoint", spoil: func(f *fx) {
			f.receipts[1] = append(f.receipts[1], f.receipts[0][0])
			f.receipts[0] = f.receipts[0][1:]
		}, problem: "b: receipt d0"},
		{name: "a rejected receipt", spoil: func(f *fx) {
			f.receipts[0] = append(f.receipts[0], hookReceipt{ID: "r", Status: "rejected"})
		}, problem: "receipt r is rejected"},
		{name: "a receipt without its message", spoil: func(f *fx) { f.receipts[0][0].MessageIDs = nil }, problem: "names 0 messages"},
		{name: "never streamed", spoil: func(f *fx) { delete(f.arrivals, "d2") }, problem: "d2 never reached m0's stream"},
		{name: "streamed twice", spoil: func(f *fx) { f.arrivals["d1"].messages = 2 }, problem: "d1 streamed"},
		{name: "streamed as another message", spoil: func(f *fx) { f.arrivals["d1"].msgID = "x" }, problem: "d1 streamed"},
		{name: "streamed to another member", spoil: func(f *fx) { f.arrivals["d0"].member = "m1" }, problem: "d0 streamed"},
		{name: "not in history", spoil: func(f *fx) { f.history[1] = f.history[1][2:] }, problem: "message 000d1 of delivery d1 not in m1's history"},
		{name: "history names another delivery", spoil: func(f *fx) { f.history[0][0].Data.DeliveryIDs = []string{"d2"} }, problem: "history message 000d0"},
		{name: "a 202 failed", spoil: func(f *fx) { f.sent[0].err = errors.New("x"); f.receipts[0] = f.receipts[0][1:] }, ok: true},
		{name: "nothing accepted", spoil: func(f *fx) { f.sent, f.receipts = nil, map[int][]hookReceipt{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f fx
			f.eps, f.sent, f.receipts, f.arrivals, f.history = auditFixture()
			tc.spoil(&f)
			a := auditHooks(f.eps, f.sent, f.receipts, f.arrivals, f.history)
			require.Equal(t, tc.ok, a.ok(), "%+v", a)
			if tc.problem != "" {
				require.NotEmpty(t, a.problems)
				require.Contains(t, strings.Join(a.problems, "\n"), tc.problem)
			}
			if tc.ok {
				require.Empty(t, a.problems)
			}
		})
	}
}

// TestHookSender drives the sender against a fake ingress that checks
// the signature and answers as told.
func TestHookSender(t *testing.T) {
	eps := []hookEndpoint{{slug: "e-0", secret: []byte("s0")}, {slug: "e-1", secret: []byte("s1")}}
	var mu sync.Mutex
	seen := map[string]string{} // delivery header → slug
	answer := func(slug string, i int) (int, string) {
		return http.StatusAccepted, `{"id":"id-` + slug + `","status":"delivered"}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slug, ok := strings.CutPrefix(r.URL.Path, "/hooks/")
		body, _ := io.ReadAll(r.Body)
		var e *hookEndpoint
		for k := range eps {
			if eps[k].slug == slug {
				e = &eps[k]
			}
		}
		if !ok || r.Method != http.MethodPost || e == nil {
			http.NotFound(w, r)
			return
		}
		if !hmac.Equal([]byte(r.Header.Get("X-Hub-Signature-256")), []byte(githubSignature(e.secret, body))) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var payload struct{ Number int }
		if json.Unmarshal(body, &payload) != nil {
			http.Error(w, "not json", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[r.Header.Get("X-GitHub-Delivery")] = slug
		status, out := answer(slug, payload.Number)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	defer srv.Close()
	lg := &loadgen{base: srv.URL, t0: time.Now()}
	h := &hookRun{lg: lg, client: srv.Client(), arrivals: map[string]*hookArrival{}}

	sent := make([]hookSent, 4)
	op := h.sender(eps, sent)
	for i := range sent {
		require.NoError(t, op(context.Background(), i))
	}
	mu.Lock()
	got := maps.Clone(seen)
	mu.Unlock()
	require.Equal(t, map[string]string{"e-0-0": "e-0", "e-1-1": "e-1", "e-0-2": "e-0", "e-1-3": "e-1"}, got, "round robin, a delivery id each")
	for i, s := range sent {
		require.True(t, s.sent)
		require.Equal(t, i%2, s.endpoint)
		require.Equal(t, "id-"+eps[i%2].slug, s.id)
		require.Equal(t, "delivered", s.status)
		require.Positive(t, s.at)
	}

	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{http.StatusTooManyRequests, `{"error":"rate_limited","message":"m"}`, "429"},
		{http.StatusAccepted, `{"id":"x","status":"dropped"}`, "answered 202 dropped"},
		{http.StatusAccepted, `{"status":"delivered"}`, "without an id"},
		{http.StatusAccepted, `not json`, "decode"},
	} {
		mu.Lock()
		answer = func(string, int) (int, string) { return tc.status, tc.body }
		mu.Unlock()
		err := op(context.Background(), 0)
		require.ErrorContains(t, err, tc.want)
		require.Equal(t, err, sent[0].err)
	}
	op = h.sender([]hookEndpoint{{slug: "e-1", secret: []byte("not the one")}}, sent)
	require.ErrorContains(t, op(context.Background(), 0), "401")
}

func TestHookOnMessage(t *testing.T) {
	h := &hookRun{arrivals: map[string]*hookArrival{}}
	h.onMessage("m0", []byte(`{"id":"1","from":"admin","data":{"kind":"notification_endpoint"}}`), 1)
	h.onMessage("m0", []byte(`not json`), 1)
	require.Empty(t, h.arrivals)
	h.onMessage("m0", []byte(`{"id":"2","from":"hook:a","data":{"kind":"hook_delivery","deliveryIds":["d"]}}`), 5)
	h.onMessage("m1", []byte(`{"id":"3","from":"hook:a","data":{"kind":"hook_delivery","deliveryIds":["d"]}}`), 9)
	h.onMessage("m0", []byte(`{"id":"4","from":"hook:a","data":{"kind":"hook_delivery","deliveryIds":["x","y"]}}`), 9)
	require.Equal(t, map[string]*hookArrival{"d": {at: 5, msgID: "2", from: "hook:a", member: "m0", messages: 2}}, h.arrivals)
	require.Equal(t, int64(1), h.streamed.Load())
	require.Equal(t, int64(1), h.strays.Load())
}
