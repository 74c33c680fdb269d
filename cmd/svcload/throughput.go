package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"

	apiv1 "svc/gen/svc/v1"
)

// The throughput group: the kit's cell 3 (16 publishers publishing
// broadcasts back to back, one SSE subscriber) against our own broker, once
// over REST and once over native gRPC, so the two transports are compared
// on the same fresh broker in the same run.
const (
	pushPubs     = 16 // the kit's -pubs in cell 3
	pushBodySize = 64 // the kit's -size: the body of every push, padded
	pushWarmup   = 2  // pushes per publisher before the subscriber attaches
	pushSub      = "tsub"
	pushTag      = "tp" // first field of every body, so strays are told apart
	// pushMaxSeq bounds the sequence numbers the checker tracks: a hostile
	// or broken broker cannot make it allocate more.
	pushMaxSeq = 1 << 24
)

// Targets of issue 16 (target 3), from the kit's reference run
// (../shared/bench/README.md): REST 3x ntfy's 2,416 accepted/s, gRPC
// Centrifugo's REST rate. Only a ratio in one compare.sh run proves them;
// these put a figure beside the measurement.
const (
	targetRESTps    = 3 * 2416
	targetGRPCps    = 17160
	refCPUPerPushMs = 0.054 // Centrifugo's server CPU per accepted push
)

// pushModes are the two publish transports, in the order they run.
var pushModes = []string{"REST", "gRPC"}

// pushResult is one mode's run.
type pushResult struct {
	mode      string // REST or gRPC
	pubs      int
	accepted  int             // pushes acknowledged inside the window
	elapsed   time.Duration   // the publish window: first push to last answer
	rtt       []time.Duration // each accepted push's round trip
	serverCPU time.Duration   // broker utime+stime from the first push to the drain's end
	cores     string          // startCPU's figure

	// conns counts the connections the publishers opened: REST dials, or
	// gRPC transports begun (stats.ConnBegin). grpcPushes counts Broker.Push
	// calls that completed without error through grpc-go's transport: it
	// proves the gRPC mode spoke gRPC and the REST mode did not.
	conns, grpcPushes int64

	check            *pushCheck
	lost, unacked    int
	idRegress        int // SSE ids that did not exceed the previous one
	resumed          int // streams resumed by Last-Event-ID
	pubErr, subErr   error
	publishersFailed int
}

// rate is accepted pushes per second of the publish window.
func (r *pushResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.accepted) / r.elapsed.Seconds()
}

// cpuPerPush is the broker's CPU per accepted push, 0 when none was.
func (r *pushResult) cpuPerPush() time.Duration {
	if r.accepted == 0 {
		return 0
	}
	return r.serverCPU / time.Duration(r.accepted)
}

// clean reports whether the subscriber got every acknowledged push exactly
// once, in each publisher's order, and nothing else.
func (r *pushResult) clean() bool {
	c := r.check
	return r.lost == 0 && c.dup == 0 && c.ooo == 0 && c.stray == 0 && r.idRegress == 0
}

// pushBody is the body publisher pub sends as its seq-th push of run:
// "tp|<run>|<pub>|<seq>|" padded with x to pushBodySize, as the kit's
// payload is. It holds nothing JSON must escape.
func pushBody(run string, pub, seq int) string {
	var b strings.Builder
	b.Grow(pushBodySize)
	b.WriteString(pushTag + "|" + run + "|" + strconv.Itoa(pub) + "|" + strconv.Itoa(seq) + "|")
	for b.Len() < pushBodySize {
		b.WriteByte('x')
	}
	return b.String()
}

// pushCheck checks the bodies one subscriber received against each
// publisher's order. A publisher has one push in flight at a time, so its
// seq k+1 was sent only after k was acknowledged: any arrival of a lower seq
// after a higher one is the broker's reordering, not a publish race.
type pushCheck struct {
	run   string
	seen  [][]bool // per publisher, per seq
	high  []int    // per publisher: one past the highest seq seen
	fresh atomic.Int64

	dup, ooo, stray int
}

func newPushCheck(run string, pubs int) *pushCheck {
	return &pushCheck{run: run, seen: make([][]bool, pubs), high: make([]int, pubs)}
}

// observe takes one SSE message's data (a Message JSON). Anything that is
// not a body of this run (or of its warm-up), from a known publisher, is a
// stray.
func (c *pushCheck) observe(data []byte) {
	var m struct {
		Body string `json:"body"`
	}
	if json.Unmarshal(data, &m) != nil {
		c.stray++
		return
	}
	pub, seq, ok := c.parse(m.Body)
	if !ok {
		// A warm-up push is acknowledged before it is fanned out, so the
		// last ones can reach a subscriber that attached after their
		// answers: expected, not a stray.
		if !strings.HasPrefix(m.Body, pushTag+"|"+c.run+"-warm|") {
			c.stray++
		}
		return
	}
	seen := c.seen[pub]
	if seq < len(seen) && seen[seq] {
		c.dup++
		return
	}
	if seq < c.high[pub] {
		c.ooo++
	}
	if seq >= len(seen) {
		seen = append(seen, make([]bool, seq+1-len(seen))...)
		c.seen[pub] = seen
	}
	seen[seq] = true
	c.high[pub] = max(c.high[pub], seq+1)
	c.fresh.Add(1)
}

func (c *pushCheck) parse(body string) (pub, seq int, ok bool) {
	f := strings.SplitN(body, "|", 5)
	if len(f) != 5 || f[0] != pushTag || f[1] != c.run {
		return 0, 0, false
	}
	pub, err1 := strconv.Atoi(f[2])
	seq, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || pub < 0 || pub >= len(c.seen) || seq < 0 || seq >= pushMaxSeq {
		return 0, 0, false
	}
	return pub, seq, true
}

// settle counts, against how many pushes each publisher had acknowledged
// (seqs 0..acked-1), those never received, and those received without an
// acknowledgement (a push whose answer failed may still have committed).
func (c *pushCheck) settle(acked []int) (lost, unacked int) {
	for pub, n := range acked {
		seen := c.seen[pub]
		for seq := range n {
			if seq >= len(seen) || !seen[seq] {
				lost++
			}
		}
		for seq := n; seq < len(seen); seq++ {
			if seen[seq] {
				unacked++
			}
		}
	}
	return lost, unacked
}

// pusher sends one body and reports the broker's acceptance.
type pusher func(ctx context.Context, body string) error

// throughput runs the group: for each transport, pushPubs closed-loop
// publishers broadcast for pushDur, one subscriber checks every push, and
// the rows say accepted/s, the round trip, server CPU per push and the
// order/loss check. It returns the runs, for the tests.
func (lg *loadgen) throughput(ctx context.Context) ([]*pushResult, error) {
	for _, n := range append(pushPublishers(pushPubs), pushSub) {
		if _, ok := lg.tokens[n]; ok {
			continue
		}
		if err := lg.createMember(ctx, n); err != nil {
			return nil, err
		}
	}
	var results []*pushResult
	for _, mode := range pushModes {
		res, err := lg.pushRun(ctx, mode, pushPubs)
		if err != nil {
			return results, err
		}
		results = append(results, res)
		lg.rows = append(lg.rows, pushRows(res)...)
		if err := errors.Join(res.pubErr, res.subErr); err != nil {
			lg.broken = append(lg.broken, fmt.Errorf("throughput %s: %w", mode, err))
		}
	}
	return results, nil
}

func pushPublishers(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("tpub%d", i)
	}
	return names
}

// pushRun is one mode's run: connect and warm the publishers, attach the
// subscriber, publish for pushDur, drain, settle the check.
func (lg *loadgen) pushRun(ctx context.Context, mode string, pubs int) (*pushResult, error) {
	name := fmt.Sprintf("throughput %s, %d publishers", mode, pubs)
	progress("%s, %s", name, lg.pushDur)
	res := &pushResult{mode: mode, pubs: pubs}
	pushers := make([]pusher, pubs)
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	gs := &grpcCounter{}
	var dials atomic.Int64
	for i, member := range pushPublishers(pubs) {
		tok := lg.tokens[member]
		switch mode {
		case "REST":
			p, closeFn := restPusher(lg.base, tok, &dials)
			pushers[i], closers = p, append(closers, closeFn)
		case "gRPC":
			p, closeFn, err := grpcPusher(lg.b.addr, tok, gs)
			if err != nil {
				return nil, err
			}
			pushers[i], closers = p, append(closers, closeFn)
		default:
			return nil, fmt.Errorf("throughput: unknown mode %q", mode)
		}
	}
	run := strings.ToLower(mode)
	// Warm every connection before the subscriber attaches: the stream
	// starts live, so these reach the check only when their fan-out
	// follows the attach (the check ignores them).
	for i, push := range pushers {
		for k := range pushWarmup {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := push(cctx, pushBody(run+"-warm", i, k))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s: warm-up push: %w", name, err)
			}
		}
	}

	check := newPushCheck(run, pubs)
	sub := newSubscriber(pushSub, lg.tokens[pushSub], 0, 0)
	sub.onData = check.observe
	sctx, cancel := context.WithCancel(ctx)
	go sub.run(sctx, lg.sse, lg.base, lg.now)
	select {
	case <-sub.ready:
	case <-sub.done:
		cancel()
		return nil, fmt.Errorf("%s: %w", name, sub.err)
	case <-time.After(readyTimeout):
		detach(cancel, []*subscriber{sub})
		return nil, fmt.Errorf("%s: subscriber not ready within %s", name, readyTimeout)
	case <-ctx.Done():
		detach(cancel, []*subscriber{sub})
		return nil, context.Cause(ctx)
	}

	acked := make([]int, pubs)
	rtts := make([][]time.Duration, pubs)
	errs := make([]error, pubs)
	var wg sync.WaitGroup
	cpu, cpu0 := lg.startCPU(), cpuTime(lg.b.pid)
	start := time.Now()
	deadline := start.Add(lg.pushDur)
	for i, push := range pushers {
		wg.Go(func() {
			for seq := 0; time.Now().Before(deadline) && ctx.Err() == nil; seq++ {
				body := pushBody(run, i, seq)
				t := time.Now()
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				err := push(cctx, body)
				cancel()
				if err != nil {
					errs[i] = fmt.Errorf("publisher %d push %d: %w", i, seq, err)
					return
				}
				rtts[i] = append(rtts[i], time.Since(t))
				acked[i]++
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	for i := range pubs {
		res.accepted += acked[i]
		res.rtt = append(res.rtt, rtts[i]...)
		if errs[i] != nil {
			res.publishersFailed++
		}
	}
	drainCount(ctx, check.fresh.Load, int64(res.accepted))
	res.serverCPU, res.cores = cpuTime(lg.b.pid)-cpu0, cpu()
	detach(cancel, []*subscriber{sub})
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	res.conns = dials.Load()
	if mode == "gRPC" {
		res.conns = gs.conns.Load()
	}
	res.grpcPushes = gs.pushes.Load()
	res.check = check
	res.lost, res.unacked = check.settle(acked)
	res.idRegress, res.resumed = sub.ooo+sub.bad, sub.reconnects
	res.subErr = sub.err
	if err := errors.Join(errs...); err != nil {
		res.pubErr = fmt.Errorf("%d of %d publishers failed: %w", res.publishersFailed, pubs, err)
	}
	return res, nil
}

// pushRows formats a run as its three rows: rate and round trip, server
// CPU per push, order and loss.
func pushRows(r *pushResult) []row {
	conn := map[string]string{"REST": "HTTP/1.1", "gRPC": "HTTP/2"}[r.mode]
	target, ref := float64(targetRESTps), "3x ntfy"
	if r.mode == "gRPC" {
		target, ref = targetGRPCps, "Centrifugo REST"
	}
	rate := r.rate()
	rtt := append([]time.Duration(nil), r.rtt...)
	main := row{
		name:   fmt.Sprintf("throughput %s %d publishers, broadcast, 1 sub", r.mode, r.pubs),
		result: fmt.Sprintf("%.0f pushes/s (%d in %.1f s, %d %s conns), round trip %s", rate, r.accepted, r.elapsed.Seconds(), r.conns, conn, pctls(rtt)),
		target: fmt.Sprintf("≥ %d/s (%s)", int(target), ref),
		met:    verdict(r.accepted > 0 && rate >= target),
		cpu:    r.cores,
	}
	cpu := row{
		name:   "  server CPU per accepted push",
		result: fmt.Sprintf("%.3f ms (%.2f s over %d pushes)", float64(r.cpuPerPush())/1e6, r.serverCPU.Seconds(), r.accepted),
		target: fmt.Sprintf("(Centrifugo %.3f ms)", refCPUPerPushMs),
	}
	c := r.check
	extra := ""
	if r.resumed > 0 {
		extra += fmt.Sprintf(", %d resumed streams", r.resumed)
	}
	if r.unacked > 0 {
		extra += fmt.Sprintf(", %d delivered unacknowledged", r.unacked)
	}
	order := row{
		name: "  order/loss per publisher",
		result: fmt.Sprintf("out-of-order %d, duplicated %d, lost %d of %d, stray %d, id regressions %d%s",
			c.ooo, c.dup, r.lost, r.accepted, c.stray, r.idRegress, extra),
		target: "0 / 0 / 0", met: verdict(r.clean()),
	}
	return []row{main, cpu, order}
}

// restPusher publishes over its own HTTP/1.1 keep-alive connection, as one
// of the kit's publishers does: POST /push with the bearer and
// X-SVC-Protocol: 1. Each dial adds to dials.
func restPusher(base, token string, dials *atomic.Int64) (pusher, func()) {
	d := &net.Dialer{Timeout: callTimeout, KeepAlive: 30 * time.Second}
	c := &http.Client{Timeout: callTimeout, Transport: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
		DisableCompression: true, ForceAttemptHTTP2: false,
	}}
	push := func(ctx context.Context, body string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/push",
			strings.NewReader(`{"body":"`+body+`"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-SVC-Protocol", "1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return statusError(resp)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return push, c.CloseIdleConnections
}

// grpcPusher publishes with Broker.Push over a ClientConn of its own (one
// HTTP/2 connection), with the bearer and x-svc-protocol in the metadata
// as the CLI sends them. counter sees its connections and calls.
func grpcPusher(addr, token string, counter *grpcCounter) (pusher, func(), error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(counter))
	if err != nil {
		return nil, nil, err
	}
	client := apiv1.NewBrokerClient(conn)
	md := metadata.Pairs("authorization", "Bearer "+token, "x-svc-protocol", "1")
	push := func(ctx context.Context, body string) error {
		_, err := client.Push(metadata.NewOutgoingContext(ctx, md), &apiv1.PushRequest{Body: body})
		return err
	}
	return push, func() { _ = conn.Close() }, nil
}

// grpcCounter is a client stats handler: it counts the transports the
// ClientConns begin and the Broker.Push calls that end without error.
type grpcCounter struct {
	conns, pushes atomic.Int64
}

type pushRPCKey struct{}

var _ stats.Handler = (*grpcCounter)(nil)

func (g *grpcCounter) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, pushRPCKey{}, info.FullMethodName == apiv1.Broker_Push_FullMethodName)
}

func (g *grpcCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if end, ok := s.(*stats.End); ok && end.Client && end.Error == nil {
		if push, _ := ctx.Value(pushRPCKey{}).(bool); push {
			g.pushes.Add(1)
		}
	}
}

func (g *grpcCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (g *grpcCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	if b, ok := s.(*stats.ConnBegin); ok && b.Client {
		g.conns.Add(1)
	}
}
