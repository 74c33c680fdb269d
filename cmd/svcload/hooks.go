package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The hooks group: verified inbound deliveries, POST /hooks/<slug>, from
// ingress to receipt and message. Endpoints are created first with the
// admin API, each with an hmac-sha256 secret (GitHub's defaults) and one
// member target; the targets hold SSE streams, so every delivery is
// delivered at once (an offline member would be dropped). The ingress
// limit is 120 a minute per endpoint, so each run spreads its deliveries
// round robin over enough endpoints that none sends more than 120: a
// delivery answered 429 is a failure of the run, not a figure.
//
// Two runs: closed-loop senders as fast as the broker answers (bounded
// by count and time), and an open loop paced at 1,000/s for the 202
// latency. Afterwards every delivery is checked durable: the receipts
// listed per endpoint as delivered are exactly the 202s answered
// delivered, each names one message, that message reached the target's
// stream carrying the delivery's id, and it is in the target's history
// of the hook:<slug> thread.
const (
	hookTargets      = 8   // target members, one stream each; endpoint k targets k mod 8
	hookPerEndpoint  = 120 // the ingress limit per endpoint per minute (hooks.md: Limits)
	hookSenders      = 32  // closed-loop senders of the sustained run
	hookPacedRate    = 1000
	hookMaxInFlight  = 256 // open-loop requests outstanding; a send beyond is skipped
	hookSetupWorkers = 8
	hookWarmup       = 50 // unmeasured deliveries on their own endpoint
	hookDrainWait    = 15 * time.Second
	targetHookRate   = 5000                 // verified deliveries/s sustained
	targetHookP99    = 5 * time.Millisecond // 202 latency at the paced rate
	hookSignHeader   = "X-Hub-Signature-256"
	hookIDHeader     = "X-GitHub-Delivery"
)

// hookPlan sizes the runs of a plan.
type hookPlan struct {
	sustainDur       time.Duration // cap of the sustained run
	sustainEndpoints int
	pacedDur         time.Duration
	pacedEndpoints   int
}

// hookPlan: the sustained run gets endpoints enough for targetHookRate
// over its whole cap; the paced run for hookPacedRate over its duration.
func (p plan) hookPlan() hookPlan {
	sustain, paced := 10*time.Second, 5*time.Second
	if p.name == "quick" {
		sustain, paced = 2*time.Second, time.Second
	}
	return hookPlan{
		sustainDur: sustain, sustainEndpoints: endpointsFor(targetHookRate, sustain),
		pacedDur: paced, pacedEndpoints: endpointsFor(hookPacedRate, paced),
	}
}

// endpointsFor is how many endpoints carry rate deliveries/s for d with
// none over hookPerEndpoint.
func endpointsFor(rate int, d time.Duration) int {
	n := int(float64(rate) * d.Seconds())
	return (n + hookPerEndpoint - 1) / hookPerEndpoint
}

// hookEndpoint is one endpoint of a run and what its sender knows.
type hookEndpoint struct {
	slug, member string
	secret       []byte
}

// githubSignature is the X-Hub-Signature-256 value for body: "sha256="
// and the hex HMAC-SHA256 keyed with secret.
func githubSignature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// hookSent is one delivery sent: what the ingress answered.
type hookSent struct {
	sent     bool  // the request was made
	endpoint int   // index into the run's endpoints
	at       int64 // request start, ns since the loadgen start
	id       string
	status   string
	err      error
}

// hookArrival is a delivery's message read on a target stream.
type hookArrival struct {
	at       int64 // ns since the loadgen start
	msgID    string
	from     string
	member   string
	messages int // messages read naming this delivery
}

// hookRun is the state of the group.
type hookRun struct {
	lg     *loadgen
	client *http.Client

	mu       sync.Mutex
	arrivals map[string]*hookArrival // by delivery id
	streamed atomic.Int64
	strays   atomic.Int64 // hook messages naming no single delivery
}

func (lg *loadgen) hooks(ctx context.Context) error {
	hp := lg.hookPlan()
	h := &hookRun{lg: lg, arrivals: map[string]*hookArrival{}, client: &http.Client{
		Timeout: callTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: hookMaxInFlight, DisableCompression: true},
	}}
	defer h.client.CloseIdleConnections()
	for i := range hookTargets {
		if err := lg.createMember(ctx, hookTarget(i)); err != nil {
			return err
		}
	}
	progress("hooks: creating %d endpoints", 1+hp.sustainEndpoints+hp.pacedEndpoints)
	t0 := time.Now()
	warm, err := h.createEndpoints(ctx, "hw", 1)
	if err != nil {
		return err
	}
	sustained, err := h.createEndpoints(ctx, "hs", hp.sustainEndpoints)
	if err != nil {
		return err
	}
	paced, err := h.createEndpoints(ctx, "hp", hp.pacedEndpoints)
	if err != nil {
		return err
	}
	made := 1 + len(sustained) + len(paced)
	setup := time.Since(t0)
	lg.rows = append(lg.rows, row{
		name: fmt.Sprintf("hook setup: %d endpoints (hmac-sha256, 1 member target each), %d target streams", made, hookTargets),
		result: fmt.Sprintf("created with their secrets in %.1f s, %.0f endpoints/s (%d admin clients)",
			setup.Seconds(), float64(made)/setup.Seconds(), hookSetupWorkers),
	})

	sctx, stopStreams := context.WithCancel(ctx)
	streams, err := h.openStreams(sctx)
	defer func() {
		stopStreams()
		for _, s := range streams {
			<-s.done
		}
	}()
	if err != nil {
		return err
	}

	warmSent := make([]hookSent, hookWarmup)
	if s := closedLoop(ctx, hookWarmup, 4, toolPhaseCap, h.sender(warm, warmSent)); s.fails > 0 {
		return fmt.Errorf("hooks warm-up: %d of %d failed, first: %w", s.fails, s.n, s.firstErr)
	}

	// Sustained: closed loop, each endpoint at most hookPerEndpoint.
	n := hp.sustainEndpoints * hookPerEndpoint
	sSent := make([]hookSent, n)
	progress("hooks: sustained run, %d senders, up to %d deliveries or %s", hookSenders, n, hp.sustainDur)
	cpu := lg.startCPU()
	s := closedLoop(ctx, n, hookSenders, hp.sustainDur, h.sender(sustained, sSent))
	cpuUse := cpu()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	rate := s.rate()
	lg.rows = append(lg.rows, row{
		name: fmt.Sprintf("hook deliveries sustained, %d senders over %d endpoints (≤ %d each, cap %s)",
			hookSenders, len(sustained), hookPerEndpoint, hp.sustainDur),
		result: fmt.Sprintf("%.0f verified deliveries/s answered 202 (%d of %d sent), 202 %s",
			rate, len(s.lats), n-s.skipped, pctls(s.lats)),
		target: fmt.Sprintf("≥ %d/s", targetHookRate), met: verdict(rate >= targetHookRate), cpu: cpuUse,
	})
	sDone := sentOnly(sSent, len(warm))
	h.failRows("sustained", sDone)

	// Paced: an open loop at hookPacedRate.
	pn := int(float64(hookPacedRate) * hp.pacedDur.Seconds())
	pSent := make([]hookSent, pn)
	progress("hooks: paced run, %d/s for %s over %d endpoints", hookPacedRate, hp.pacedDur, len(paced))
	cpu = lg.startCPU()
	ps := pacedLoop(ctx, pn, hookPacedRate, hookMaxInFlight, h.sender(paced, pSent))
	cpuUse = cpu()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	slices.Sort(ps.lats)
	p99 := percentile(ps.lats, 99)
	result := fmt.Sprintf("202 %s from send", pctls(ps.lats))
	slices.Sort(ps.lags)
	result += fmt.Sprintf("; %.0f/s achieved, schedule lag p99 %s (latency from the scheduled time: p99 %s)",
		ps.rate(), ms(percentile(ps.lags, 99)), ms(percentile(ps.fromSchedule(), 99)))
	lg.rows = append(lg.rows, row{
		name:   fmt.Sprintf("hook 202 latency paced at %d/s over %d endpoints (%d deliveries)", hookPacedRate, len(paced), pn),
		result: result,
		target: "p99 ≤ " + ms(targetHookP99), met: verdict(len(ps.lats) > 0 && p99 <= targetHookP99), cpu: cpuUse,
	})
	if ps.skipped > 0 {
		lg.rows = append(lg.rows, row{name: "    skipped", result: fmt.Sprintf("%d sends skipped: %d requests in flight", ps.skipped, hookMaxInFlight),
			target: "0", met: verdict(false)})
		lg.broken = append(lg.broken, fmt.Errorf("hooks paced: %d of %d sends skipped", ps.skipped, pn))
	}
	pDone := sentOnly(pSent, len(warm)+len(sustained))
	h.failRows("paced", pDone)

	// Every delivered 202 must reach its stream; then the audit, over
	// the endpoints of all runs (sent's endpoint indices are into eps).
	all := slices.Concat(sentOnly(warmSent, 0), sDone, pDone)
	eps := slices.Concat(warm, sustained, paced)
	h.awaitStreams(ctx, all)
	h.latencyRow("  sustained: send → message on the target's stream", sDone)
	h.latencyRow("  paced: send → message on the target's stream", pDone)
	return h.verify(ctx, eps, all)
}

func hookTarget(i int) string { return "hooktgt" + strconv.Itoa(i) }

// createEndpoints creates n endpoints prefix-0000... with a random
// secret each, targets spread over the target members.
func (h *hookRun) createEndpoints(ctx context.Context, prefix string, n int) ([]hookEndpoint, error) {
	eps := make([]hookEndpoint, n)
	for i := range eps {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
		eps[i] = hookEndpoint{slug: fmt.Sprintf("%s-%04d", prefix, i), member: hookTarget(i % hookTargets),
			secret: []byte(hex.EncodeToString(secret))}
	}
	admin := h.lg.tokens["admin"]
	s := closedLoop(ctx, n, hookSetupWorkers, toolPhaseCap, func(ctx context.Context, i int) error {
		e := eps[i]
		body, _ := json.Marshal(map[string]any{
			"slug": e.slug, "targets": []any{map[string]string{"member": e.member}},
			"auth": map[string]string{"kind": "hmac-sha256"}, "dedupeHeader": hookIDHeader,
		})
		if err := h.lg.send(ctx, http.MethodPost, "/notifications/endpoints", admin, body, nil); err != nil {
			return err
		}
		body, _ = json.Marshal(map[string]string{"secret": string(e.secret)})
		return h.lg.send(ctx, http.MethodPut, "/notifications/endpoints/"+e.slug+"/secret", admin, body, nil)
	})
	if s.fails > 0 || s.skipped > 0 {
		return nil, fmt.Errorf("hooks setup: %d of %d endpoints failed, %d not made; first: %v", s.fails, n, s.skipped, s.firstErr)
	}
	return eps, nil
}

// hookBody is delivery i's payload, a GitHub-like event.
func hookBody(slug string, i int) []byte {
	return fmt.Appendf(nil, `{"action":"opened","number":%d,"repository":{"full_name":"svcload/%s"},"sender":{"login":"svcload"}}`, i, slug)
}

// sender returns the op that sends delivery i to endpoint i mod
// len(eps), signed with its secret, and records the answer in sent[i]. A
// 202 that is not delivered counts as a failure: every target streams.
func (h *hookRun) sender(eps []hookEndpoint, sent []hookSent) func(ctx context.Context, i int) error {
	return func(ctx context.Context, i int) error {
		k := i % len(eps)
		e := eps[k]
		body := hookBody(e.slug, i)
		rec := &sent[i]
		rec.endpoint, rec.sent = k, true
		rec.at = h.lg.now()
		rec.err = h.post(ctx, e, body, e.slug+"-"+strconv.Itoa(i), rec)
		if rec.err == nil && rec.status != "delivered" {
			rec.err = fmt.Errorf("delivery %s answered 202 %s, want delivered", rec.id, rec.status)
		}
		return rec.err
	}
}

// post sends one signed delivery and reads the 202 {id, status}.
func (h *hookRun) post(ctx context.Context, e hookEndpoint, body []byte, deliveryID string, rec *hookSent) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.lg.base+"/hooks/"+e.slug, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(hookSignHeader, githubSignature(e.secret, body))
	req.Header.Set(hookIDHeader, deliveryID)
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return statusError(resp)
	}
	var out struct{ ID, Status string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("decode the 202: %w", err)
	}
	if out.ID == "" {
		return errors.New("a 202 without an id")
	}
	rec.id, rec.status = out.ID, out.Status
	return nil
}

// sentOnly is the entries of sent that were sent, with off added to
// their endpoint indices.
func sentOnly(sent []hookSent, off int) []hookSent {
	var out []hookSent
	for _, s := range sent {
		if s.sent {
			s.endpoint += off
			out = append(out, s)
		}
	}
	return out
}

// failRows reports the sends of a run that failed, by kind, and breaks
// the run when any did.
func (h *hookRun) failRows(label string, sent []hookSent) {
	fails := 0
	var first error
	for _, s := range sent {
		if s.err != nil {
			fails++
			if first == nil {
				first = s.err
			}
		}
	}
	if fails == 0 {
		return
	}
	h.lg.rows = append(h.lg.rows, row{name: "    failed", result: fmt.Sprintf("%d of %d sends failed (first: %.120v)", fails, len(sent), first),
		target: "0", met: verdict(false)})
	h.lg.broken = append(h.lg.broken, fmt.Errorf("hooks %s: %d of %d failed, first: %w", label, fails, len(sent), first))
}

// pacedStats is the outcome of an open loop.
type pacedStats struct {
	n, started, skipped, fails int
	lats                       []time.Duration    // from each send, per success
	lags                       []time.Duration    // send time behind the schedule, per success
	pairs                      [][2]time.Duration // (lag, latency) per success
	elapsed                    time.Duration
}

func (s pacedStats) rate() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(len(s.lats)) / s.elapsed.Seconds()
}

// fromSchedule is each success's latency counted from its scheduled
// time (lag + latency, pairs in order), so a stalled sender cannot hide
// a slow broker.
func (s pacedStats) fromSchedule() []time.Duration {
	out := make([]time.Duration, 0, len(s.pairs))
	for _, p := range s.pairs {
		out = append(out, p[0]+p[1])
	}
	slices.Sort(out)
	return out
}

// pacedLoop starts op(ctx, i) for i in [0, n) at rate per second on the
// schedule start + i/rate, each in its own goroutine with callTimeout,
// whatever the earlier ones do (an open loop). A send due while
// maxInFlight are outstanding is skipped and counted.
func pacedLoop(ctx context.Context, n, rate, maxInFlight int, op func(ctx context.Context, i int) error) pacedStats {
	s := pacedStats{n: n}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, maxInFlight)
	)
	gap := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * gap)
		if sleep(ctx, time.Until(due)) != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			s.skipped++
			continue
		}
		s.started++
		wg.Go(func() {
			defer func() { <-sem }()
			t := time.Now()
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := op(cctx, i)
			cancel()
			lat, lag := time.Since(t), t.Sub(due)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				s.fails++
				return
			}
			s.lats = append(s.lats, lat)
			s.lags = append(s.lags, lag)
			s.pairs = append(s.pairs, [2]time.Duration{lag, lat})
		})
	}
	wg.Wait()
	s.elapsed = time.Since(start)
	return s
}

// hookStream is one target member's SSE stream.
type hookStream struct {
	member, token string
	ready, done   chan struct{}
	once          sync.Once
	err           error
	reconnects    int
	lastID        string
}

// openStreams opens a stream per target member and waits until each is
// ready.
func (h *hookRun) openStreams(ctx context.Context) ([]*hookStream, error) {
	var out []*hookStream
	for i := range hookTargets {
		m := hookTarget(i)
		s := &hookStream{member: m, token: h.lg.tokens[m], ready: make(chan struct{}), done: make(chan struct{})}
		out = append(out, s)
		go h.runStream(ctx, s)
	}
	deadline := time.After(readyTimeout)
	for _, s := range out {
		select {
		case <-s.ready:
		case <-s.done:
			return out, fmt.Errorf("hooks: stream of %s: %w", s.member, s.err)
		case <-deadline:
			return out, fmt.Errorf("hooks: streams not ready within %s", readyTimeout)
		case <-ctx.Done():
			return out, context.Cause(ctx)
		}
	}
	return out, nil
}

// runStream reads s until ctx ends, resuming by Last-Event-ID when a
// stream that was ready breaks (a stream too far behind is closed by
// design).
func (h *hookRun) runStream(ctx context.Context, s *hookStream) {
	defer close(s.done)
	for {
		wasReady, err := h.stream(ctx, s)
		if ctx.Err() != nil {
			return
		}
		if !wasReady || s.reconnects >= maxReconnects {
			s.err = err
			return
		}
		s.reconnects++
	}
}

func (h *hookRun) stream(ctx context.Context, s *hookStream) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.lg.base+"/subscribe?name="+url.QueryEscape(s.member), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Accept", "text/event-stream")
	if s.lastID != "" {
		req.Header.Set("Last-Event-ID", s.lastID)
	}
	resp, err := h.lg.sse.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, statusError(resp)
	}
	r := newSSEReader(resp.Body)
	ready := false
	for {
		ev, err := r.next()
		if err != nil {
			return ready, err
		}
		switch ev.event {
		case "ready":
			ready = true
			s.once.Do(func() { close(s.ready) })
		case "message":
			s.lastID = ev.id
			h.onMessage(s.member, ev.data, h.lg.now())
		}
	}
}

// hookMessage is the part of a streamed or listed message the group reads.
type hookMessage struct {
	ID   string `json:"id"`
	From string `json:"from"`
	Data struct {
		Kind        string   `json:"kind"`
		DeliveryIDs []string `json:"deliveryIds"`
	} `json:"data"`
}

// onMessage records a hook_delivery message naming one delivery; other
// messages (the endpoints' registry events) are skipped.
func (h *hookRun) onMessage(member string, data []byte, at int64) {
	var m hookMessage
	if json.Unmarshal(data, &m) != nil || m.Data.Kind != "hook_delivery" {
		return
	}
	if len(m.Data.DeliveryIDs) != 1 {
		h.strays.Add(1)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.arrivals[m.Data.DeliveryIDs[0]]
	if a == nil {
		a = &hookArrival{at: at, msgID: m.ID, from: m.From, member: member}
		h.arrivals[m.Data.DeliveryIDs[0]] = a
		h.streamed.Add(1)
	}
	a.messages++
}

// awaitStreams waits until every delivery answered 202 has its message on
// a stream, or hookDrainWait passes with none arriving.
func (h *hookRun) awaitStreams(ctx context.Context, sent []hookSent) {
	want := int64(0)
	for _, s := range sent {
		if s.err == nil && s.id != "" {
			want++
		}
	}
	last, lastAt := h.streamed.Load(), time.Now()
	for h.streamed.Load() < want && time.Since(lastAt) < hookDrainWait && ctx.Err() == nil {
		_ = sleep(ctx, 20*time.Millisecond)
		if got := h.streamed.Load(); got != last {
			last, lastAt = got, time.Now()
		}
	}
}

// latencyRow reports 202-send → message-on-stream latency of sent.
func (h *hookRun) latencyRow(name string, sent []hookSent) {
	h.mu.Lock()
	var lats []time.Duration
	for _, s := range sent {
		if a := h.arrivals[s.id]; s.err == nil && a != nil {
			lats = append(lats, time.Duration(a.at-s.at))
		}
	}
	h.mu.Unlock()
	h.lg.rows = append(h.lg.rows, row{name: name, result: fmt.Sprintf("%s (%d of %d streamed)", pctls(lats), len(lats), len(sent))})
}

// hookReceipt is the part of a listed receipt the audit reads.
type hookReceipt struct {
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	MessageIDs []string `json:"messageIds"`
}

// hookAudit is the outcome of comparing what the ingress answered with
// what the broker lists afterwards.
type hookAudit struct {
	accepted      int // 202 delivered answers
	receipts      int // receipts listed delivered
	matched       int // delivered receipts answered 202, with one message id
	streamed      int // of those, the message reached the target's stream with that id, once, from hook:<slug>
	inHistory     int // of those, the message is in the target's hook:<slug> history naming the delivery
	problems      []string
	problemsTotal int
}

func (a *hookAudit) problem(format string, args ...any) {
	a.problemsTotal++
	if len(a.problems) < 5 {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

func (a hookAudit) ok() bool {
	return a.problemsTotal == 0 && a.accepted > 0 && a.receipts == a.accepted && a.matched == a.accepted &&
		a.streamed == a.accepted && a.inHistory == a.accepted
}

// auditHooks compares, per endpoint, the 202 delivered answers in sent
// with the receipts listed delivered, the streamed arrivals and the
// target's history (receipts and history keyed by endpoint index).
func auditHooks(eps []hookEndpoint, sent []hookSent, receipts map[int][]hookReceipt, arrivals map[string]*hookArrival, history map[int][]hookMessage) hookAudit {
	var a hookAudit
	accepted := map[string]int{} // delivery id → endpoint
	for _, s := range sent {
		if s.err == nil && s.status == "delivered" {
			accepted[s.id] = s.endpoint
			a.accepted++
		}
	}
	for k, e := range eps {
		hist := map[string]hookMessage{}
		for _, m := range history[k] {
			hist[m.ID] = m
		}
		for _, r := range receipts[k] {
			if r.Status != "delivered" {
				a.problem("%s: receipt %s is %s", e.slug, r.ID, r.Status)
				continue
			}
			a.receipts++
			if ep, ok := accepted[r.ID]; !ok || ep != k {
				a.problem("%s: receipt %s delivered but not answered 202 delivered by this endpoint", e.slug, r.ID)
				continue
			}
			if len(r.MessageIDs) != 1 {
				a.problem("%s: receipt %s names %d messages, want 1", e.slug, r.ID, len(r.MessageIDs))
				continue
			}
			a.matched++
			msg := r.MessageIDs[0]
			if ar := arrivals[r.ID]; ar == nil {
				a.problem("%s: delivery %s never reached %s's stream", e.slug, r.ID, e.member)
			} else if ar.msgID != msg || ar.from != "hook:"+e.slug || ar.member != e.member || ar.messages != 1 {
				a.problem("%s: delivery %s streamed as %+v, receipt names message %s", e.slug, r.ID, *ar, msg)
			} else {
				a.streamed++
			}
			if m, ok := hist[msg]; !ok {
				a.problem("%s: message %s of delivery %s not in %s's history of hook:%s", e.slug, msg, r.ID, e.member, e.slug)
			} else if m.From != "hook:"+e.slug || m.Data.Kind != "hook_delivery" || !slices.Equal(m.Data.DeliveryIDs, []string{r.ID}) {
				a.problem("%s: history message %s is %+v, want delivery %s", e.slug, msg, m, r.ID)
			} else {
				a.inHistory++
			}
		}
	}
	if a.receipts != a.accepted {
		a.problem("%d receipts listed delivered, %d deliveries answered 202 delivered", a.receipts, a.accepted)
	}
	return a
}

// verify lists each endpoint's receipts and its target's history of the
// endpoint's thread, and audits them against the answers.
func (h *hookRun) verify(ctx context.Context, eps []hookEndpoint, sent []hookSent) error {
	progress("hooks: auditing %d endpoints", len(eps))
	var (
		mu       sync.Mutex
		receipts = map[int][]hookReceipt{}
		history  = map[int][]hookMessage{}
	)
	admin := h.lg.tokens["admin"]
	s := closedLoop(ctx, len(eps), hookSetupWorkers, toolPhaseCap, func(ctx context.Context, k int) error {
		e := eps[k]
		var rs struct {
			Deliveries []hookReceipt `json:"deliveries"`
		}
		if err := h.lg.get(ctx, "/notifications/endpoints/"+e.slug+"/deliveries?limit=500", admin, &rs); err != nil {
			return err
		}
		var hs struct {
			Messages []hookMessage `json:"messages"`
		}
		if err := h.lg.get(ctx, "/history?limit=500&thread="+url.QueryEscape("hook:"+e.slug), h.lg.tokens[e.member], &hs); err != nil {
			return err
		}
		mu.Lock()
		receipts[k], history[k] = rs.Deliveries, hs.Messages
		mu.Unlock()
		return nil
	})
	if s.fails > 0 || s.skipped > 0 {
		return fmt.Errorf("hooks audit: %d of %d endpoints unread (%d not started), first: %v", s.fails, len(eps), s.skipped, s.firstErr)
	}
	h.mu.Lock()
	a := auditHooks(eps, sent, receipts, h.arrivals, history)
	h.mu.Unlock()
	result := fmt.Sprintf("%d receipts listed delivered for %d 202s; %d name one message, %d streamed to the target with that id, %d in its hook:<slug> history",
		a.receipts, a.accepted, a.matched, a.streamed, a.inHistory)
	if n := h.strays.Load(); n > 0 {
		a.problem("%d hook messages naming other than one delivery", n)
	}
	h.lg.rows = append(h.lg.rows, row{name: "  audit: every 202 a durable receipt and message (incl. warm-up)", result: result, target: "all = 202s", met: verdict(a.ok())})
	if !a.ok() {
		h.lg.broken = append(h.lg.broken, fmt.Errorf("hooks audit: %d problems, first: %v", a.problemsTotal, a.problems))
	}
	return nil
}
