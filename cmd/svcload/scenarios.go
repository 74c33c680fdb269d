package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	callTimeout  = 10 * time.Second
	readyTimeout = 30 * time.Second
	attachBatch  = 100             // streams opened at once, so the accept queue never overflows
	drainIdle    = 3 * time.Second // a delivery run ends this long after its last receipt
	listeners    = 32              // members whose streams receive the broadcasts: 1000 streams stay under 64 a member
	manySubs     = 1000            // subscribers of the big fan-out and memory runs
	publisher    = "pub"
)

// Targets, reported beside the figures.
const (
	targetP99    = 15 * time.Millisecond // delivery at 1000 subs × 100 msg/s
	targetReach  = 20 * time.Millisecond // one broadcast to all 1000 subs
	targetMemKiB = 16.0                  // per idle subscriber
)

// loadgen holds the clients and tokens of one run and the rows it reports.
type loadgen struct {
	plan
	b      *broker
	base   string       // http://127.0.0.1:port
	http   *http.Client // requests, over a pool of keep-alive connections
	sse    *http.Client // streams, one TCP connection each
	tokens map[string]string
	t0     time.Time
	seq    int // next sequence number put in data.lg
	rows   []row
	broken []error // errors that make the run non-zero after the report
}

func newLoadgen(p plan, b *broker) *loadgen {
	return &loadgen{
		plan: p, b: b, base: "http://" + b.addr, t0: time.Now(),
		tokens: map[string]string{"admin": b.token},
		http: &http.Client{Timeout: callTimeout, Transport: &http.Transport{
			MaxIdleConnsPerHost: 64, DisableCompression: true,
		}},
		sse: &http.Client{Transport: &http.Transport{
			MaxConnsPerHost: 0, DisableCompression: true, ResponseHeaderTimeout: callTimeout,
		}},
	}
}

func (lg *loadgen) close() {
	lg.http.CloseIdleConnections()
	lg.sse.CloseIdleConnections()
}

// now is the monotonic time since the run started, in ns.
func (lg *loadgen) now() int64 { return int64(time.Since(lg.t0)) }

func (lg *loadgen) brokenErr() error { return errors.Join(lg.broken...) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "svcload: "+format+"\n", args...)
}

// all runs every scenario in order; memory goes first, on a fresh heap.
func (lg *loadgen) all(ctx context.Context) error {
	names := []string{publisher}
	for i := range listeners {
		names = append(names, fmt.Sprintf("listen%d", i))
	}
	for _, n := range names {
		if err := lg.createMember(ctx, n); err != nil {
			return err
		}
	}
	if err := lg.push(ctx, lg.nextSeqs(1)); err != nil { // warm the path
		return err
	}
	if lg.runs("memory") {
		if err := lg.memory(ctx); err != nil {
			return err
		}
	}
	if lg.runs("delivery") {
		for _, n := range []int{1, 100, manySubs} {
			count := int(lg.fanoutDur.Seconds() * float64(lg.rate))
			if err := lg.fanout(ctx, n, count, time.Second/time.Duration(lg.rate), false); err != nil {
				return err
			}
		}
	}
	if lg.runs("reach") {
		if err := lg.fanout(ctx, manySubs, lg.reachCount, lg.reachGap, true); err != nil {
			return err
		}
	}
	if lg.runs("throughput") {
		if _, err := lg.throughput(ctx); err != nil {
			return err
		}
	}
	if lg.runs("files") {
		if err := lg.files(ctx); err != nil {
			return err
		}
	}
	if lg.runs("objectives") {
		if err := lg.objectives(ctx); err != nil {
			return err
		}
	}
	if lg.runs("telemetry") {
		if err := lg.telemetry(ctx); err != nil {
			return err
		}
	}
	return nil
}

// runs reports whether the scenario group is selected (--only).
func (lg *loadgen) runs(group string) bool {
	return len(lg.only) == 0 || slices.Contains(lg.only, group)
}

func (lg *loadgen) nextSeqs(n int) int {
	base := lg.seq
	lg.seq += n
	return base
}

// do sends one JSON request with a bearer token and decodes a 2xx answer
// into out (when not nil).
func (lg *loadgen) do(ctx context.Context, path, token string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lg.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := lg.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(resp)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (lg *loadgen) createMember(ctx context.Context, name string) error {
	body, _ := json.Marshal(map[string]any{"name": name, "permissions": []string{}})
	var out struct {
		Token string `json:"token"`
	}
	if err := lg.do(ctx, "/members", lg.tokens["admin"], body, &out); err != nil {
		return fmt.Errorf("create member %s: %w", name, err)
	}
	if out.Token == "" {
		return fmt.Errorf("create member %s: no token in the answer", name)
	}
	lg.tokens[name] = out.Token
	return nil
}

// push broadcasts one message from the publisher carrying seq in data.lg.
func (lg *loadgen) push(ctx context.Context, seq int) error {
	body := []byte(`{"body":"load","data":{"lg":` + strconv.Itoa(seq) + `}}`)
	return lg.do(ctx, "/push", lg.tokens[publisher], body, nil)
}

// attach opens n streams spread over the listener members, each recording
// the window [base, base+count), and waits until all are ready.
func (lg *loadgen) attach(ctx context.Context, n, base, count int) ([]*subscriber, error) {
	subs := make([]*subscriber, n)
	for i := range subs {
		m := fmt.Sprintf("listen%d", i%listeners)
		subs[i] = newSubscriber(m, lg.tokens[m], base, count)
	}
	deadline := time.After(readyTimeout)
	for i := 0; i < n; i += attachBatch {
		batch := subs[i:min(i+attachBatch, n)]
		for _, s := range batch {
			go s.run(ctx, lg.sse, lg.base, lg.now)
		}
		for _, s := range batch {
			select {
			case <-s.ready:
			case <-s.done:
				return subs, s.err
			case <-deadline:
				return subs, fmt.Errorf("%d subscribers not ready within %s", n, readyTimeout)
			case <-ctx.Done():
				return subs, context.Cause(ctx)
			}
		}
	}
	return subs, nil
}

// detach ends the streams and waits for their goroutines.
func detach(cancel context.CancelFunc, subs []*subscriber) {
	cancel()
	for _, s := range subs {
		if s != nil {
			<-s.done
		}
	}
}

// memory reports the broker's VmRSS growth per idle, ready subscriber.
func (lg *loadgen) memory(ctx context.Context) error {
	progress("memory: %d idle subscribers", manySubs)
	if err := sleep(ctx, lg.settle); err != nil {
		return err
	}
	before, err := lg.b.vmRSS()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	subs, err := lg.attach(sctx, manySubs, 0, 0)
	if err == nil {
		err = sleep(ctx, lg.settle)
	}
	after, rssErr := lg.b.vmRSS()
	detach(cancel, subs)
	if err = errors.Join(err, rssErr); err != nil {
		return err
	}
	per := float64(after-before) / manySubs
	lg.rows = append(lg.rows, row{
		name:   fmt.Sprintf("memory per idle subscriber (%d)", manySubs),
		result: fmt.Sprintf("%.1f KiB (VmRSS %d → %d KiB)", per, before, after),
		target: fmt.Sprintf("≤ %.0f KiB", targetMemKiB), met: verdict(per <= targetMemKiB),
	})
	return nil
}

// fanout attaches n subscribers, broadcasts count messages on an open-loop
// schedule spaced gap apart, waits for the deliveries to drain, and reports
// delivery latency (or, with reach, the time until the last subscriber got
// each message) with ordering and loss.
func (lg *loadgen) fanout(ctx context.Context, n, count int, gap time.Duration, reach bool) error {
	_, err := lg.fanoutAs(ctx, "", n, count, gap, reach)
	return err
}

// fanoutAs is fanout with its rows named name (a name of its own when
// empty); it returns the p99 of the figures it reports, 0 when none.
func (lg *loadgen) fanoutAs(ctx context.Context, name string, n, count int, gap time.Duration, reach bool) (time.Duration, error) {
	switch {
	case name != "":
	case reach:
		name = fmt.Sprintf("broadcast reach %s (%d × %s apart)", subsN(n), count, gap)
	default:
		name = fmt.Sprintf("delivery %s × %d msg/s", subsN(n), int(time.Second/gap))
	}
	progress("%s", name)
	base := lg.nextSeqs(count)
	sctx, cancel := context.WithCancel(ctx)
	subs, err := lg.attach(sctx, n, base, count)
	if err != nil {
		detach(cancel, subs)
		return 0, fmt.Errorf("%s: %w", name, err)
	}

	sent := make([]int64, count) // send time; -1: the push failed
	var (
		wg       sync.WaitGroup
		failures atomic.Int64
		firstErr atomic.Pointer[error]
	)
	cpu := lg.startCPU()
	start := time.Now()
	for i := range count {
		if err := sleep(ctx, time.Until(start.Add(time.Duration(i)*gap))); err != nil {
			break
		}
		wg.Go(func() {
			sent[i] = lg.now()
			if err := lg.push(ctx, base+i); err != nil {
				sent[i] = -1
				failures.Add(1)
				firstErr.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	ok := count - int(failures.Load())
	lg.drain(ctx, subs, int64(n*ok))
	cpuUse := cpu()
	detach(cancel, subs)
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}

	var lat, spread []time.Duration
	var ooo, bad, lost, reconnects int
	var subErrs []error
	last := make([]int64, count) // latest receipt of each message
	for _, s := range subs {
		ooo, bad, reconnects = ooo+s.ooo, bad+s.bad, reconnects+s.reconnects
		if s.err != nil {
			subErrs = append(subErrs, s.err)
		}
		for k, at := range s.recv {
			switch {
			case sent[k] < 0:
			case at == 0:
				lost++
				last[k] = -1
			default:
				lat = append(lat, time.Duration(at-sent[k]))
				if last[k] >= 0 {
					last[k] = max(last[k], at)
				}
			}
		}
	}
	for k, at := range last {
		if sent[k] >= 0 && at > 0 {
			spread = append(spread, time.Duration(at-sent[k]))
		}
	}

	figures, target := lat, time.Duration(0)
	switch {
	case reach:
		figures, target = spread, targetReach
	case n == manySubs:
		target = targetP99
	}
	r := row{name: name, result: pctls(figures), cpu: cpuUse} // sorts figures
	p99 := percentile(figures, 99)
	if target > 0 {
		r.target, r.met = "p99 ≤ "+ms(target), verdict(len(figures) > 0 && p99 <= target)
	}
	extra := ""
	if reconnects > 0 {
		extra = fmt.Sprintf(", %d resumed streams", reconnects)
	}
	if bad > 0 {
		extra += fmt.Sprintf(", %d ids not decimal", bad)
	}
	lg.rows = append(lg.rows, r, row{
		name:   "  order/loss",
		result: fmt.Sprintf("out-of-order %d, lost %d of %d%s", ooo, lost, n*ok, extra),
		target: "0 / 0", met: verdict(ooo == 0 && lost == 0),
	})
	if failures.Load() > 0 {
		lg.broken = append(lg.broken, fmt.Errorf("%s: %d of %d pushes failed, first: %w", name, failures.Load(), count, *firstErr.Load()))
	}
	if len(subErrs) > 0 {
		lg.broken = append(lg.broken, fmt.Errorf("%s: %d subscribers failed, first: %w", name, len(subErrs), subErrs[0]))
	}
	return p99, nil
}

// drain waits until the subscribers hold want receipts, or none arrived for
// drainIdle.
func (lg *loadgen) drain(ctx context.Context, subs []*subscriber, want int64) {
	drainCount(ctx, func() int64 {
		var got int64
		for _, s := range subs {
			got += s.got.Load()
		}
		return got
	}, want)
}

// drainCount waits until count reaches want, or it did not move for
// drainIdle.
func drainCount(ctx context.Context, count func() int64, want int64) {
	var prev int64 = -1
	idleSince := time.Now()
	for time.Since(idleSince) < drainIdle && ctx.Err() == nil {
		got := count()
		if got >= want {
			return
		}
		if got != prev {
			prev, idleSince = got, time.Now()
		}
		_ = sleep(ctx, 5*time.Millisecond)
	}
}

// startCPU starts measuring CPU use; the returned func formats the cores
// busy on average since the start in the broker, in svcload and in the rest
// of the machine, so a reader can tell whether the broker was the limit.
func (lg *loadgen) startCPU() func() string {
	b0, s0, m0, t0 := cpuTime(lg.b.pid), cpuTime(os.Getpid()), machineCPU(), time.Now()
	return func() string {
		wall := time.Since(t0).Seconds()
		b, s := (cpuTime(lg.b.pid) - b0).Seconds(), (cpuTime(os.Getpid()) - s0).Seconds()
		other := max((machineCPU()-m0).Seconds()-b-s, 0)
		return fmt.Sprintf("%.2f / %.2f / %.2f", b/wall, s/wall, other/wall)
	}
}

// USER_HZ, the unit of /proc CPU times: 100 on Linux.
const tick = time.Second / 100

// cpuTime is a process's user+system time from /proc/<pid>/stat (all its
// threads), or 0 when unreadable.
func cpuTime(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// utime and stime are fields 14 and 15; the text after the ")" that ends
	// comm starts at field 3.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * tick
}

// machineCPU is the busy time of all CPUs from /proc/stat: everything but
// idle and iowait (guest time is already inside user).
func machineCPU() time.Duration {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	var busy int64
	for i, v := range strings.Fields(string(line))[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 8 { // user nice system [idle iowait] irq softirq steal
			busy += n
		}
	}
	return time.Duration(busy) * tick
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted values, or 0 when there are none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted))/100)) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// pctls sorts ds in place and formats p50/p99/max.
func pctls(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	slices.Sort(ds)
	return fmt.Sprintf("p50 %s  p99 %s  max %s", ms(percentile(ds, 50)), ms(percentile(ds, 99)), ms(ds[len(ds)-1]))
}

func subsN(n int) string {
	if n == 1 {
		return "1 sub"
	}
	return strconv.Itoa(n) + " subs"
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
