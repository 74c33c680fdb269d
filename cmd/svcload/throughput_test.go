package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// msg is the SSE data of a broadcast carrying body.
func msg(body string) []byte {
	return []byte(`{"id":"0000000000000001","from":"tpub0","to":null,"body":"` + body + `","level":"info","createdAt":1}`)
}

func TestPushCheck(t *testing.T) {
	b := func(pub, seq int) []byte { return msg(pushBody("rest", pub, seq)) }
	tests := []struct {
		name                   string
		in                     [][]byte
		acked                  []int
		lost, unacked          int
		dup, ooo, stray, fresh int
	}{
		{
			name:  "every push once in order, publishers interleaved",
			in:    [][]byte{b(0, 0), b(1, 0), b(0, 1), b(1, 1), b(0, 2)},
			acked: []int{3, 2}, fresh: 5,
		},
		{
			name:  "a dropped push is lost",
			in:    [][]byte{b(0, 0), b(0, 2), b(1, 0)},
			acked: []int{3, 1}, lost: 1, fresh: 3,
		},
		{
			name:  "a reordered push is out of order",
			in:    [][]byte{b(0, 1), b(0, 0), b(0, 2)},
			acked: []int{3, 0}, ooo: 1, fresh: 3,
		},
		{
			name:  "order is per publisher: another's lower seq is no reorder",
			in:    [][]byte{b(0, 5), b(1, 0)},
			acked: []int{6, 1}, lost: 5, fresh: 2,
		},
		{
			name:  "a duplicate counts once as a duplicate",
			in:    [][]byte{b(0, 0), b(0, 1), b(0, 1), b(0, 0)},
			acked: []int{2, 0}, dup: 2, fresh: 2,
		},
		{
			name:  "the last acknowledged push missing is lost",
			in:    [][]byte{b(0, 0)},
			acked: []int{2, 0}, lost: 1, fresh: 1,
		},
		{
			name:  "a push delivered without its answer is unacknowledged, not lost",
			in:    [][]byte{b(0, 0), b(0, 1)},
			acked: []int{1, 0}, unacked: 1, fresh: 2,
		},
		{
			name: "strays: other run, unknown publisher, bad numbers, not ours, not JSON",
			in: [][]byte{
				msg(pushBody("grpc", 0, 0)), msg(pushBody("grpc-warm", 0, 0)),
				msg(pushBody("rest", 2, 0)), msg(pushBody("rest", -1, 0)),
				msg("tp|rest|0|-1|x"), msg("tp|rest|0|99999999999|x"), msg("tp|rest|0|16777216|x"),
				msg("tp|rest|0|1e3|x"), msg("tp|rest|0"), msg("load"), []byte(`{"body":`), []byte(`[]`),
			},
			acked: []int{0, 0}, stray: 12,
		},
		{
			name:  "this run's warm-up, fanned out after the attach, is no stray",
			in:    [][]byte{msg(pushBody("rest-warm", 0, 2)), msg(pushBody("rest-warm", 1, 2)), b(0, 0)},
			acked: []int{1, 0}, fresh: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newPushCheck("rest", 2)
			for _, data := range tc.in {
				c.observe(data)
			}
			lost, unacked := c.settle(tc.acked)
			require.Equal(t, tc.lost, lost, "lost")
			require.Equal(t, tc.unacked, unacked, "unacked")
			require.Equal(t, tc.dup, c.dup, "dup")
			require.Equal(t, tc.ooo, c.ooo, "ooo")
			require.Equal(t, tc.stray, c.stray, "stray")
			require.Equal(t, int64(tc.fresh), c.fresh.Load(), "fresh")
		})
	}
}

func TestPushBody(t *testing.T) {
	require.Equal(t, "tp|grpc|15|123456|"+strings.Repeat("x", pushBodySize-18), pushBody("grpc", 15, 123456))
	long := strings.Repeat("r", pushBodySize)
	require.Equal(t, "tp|"+long+"|15|9|", pushBody(long, 15, 9), "a header past the size is not cut")
}

// The rows carry the verdicts: a run that lost, reordered or duplicated a
// push, or got a stray, is not met, whatever its rate.
func TestPushRows(t *testing.T) {
	clean := func() *pushResult {
		return &pushResult{mode: "gRPC", pubs: 16, accepted: 200000, elapsed: 10 * time.Second,
			rtt: []time.Duration{time.Millisecond, 2 * time.Millisecond}, serverCPU: 4 * time.Second,
			conns: 16, check: newPushCheck("grpc", 16), cores: "1.00 / 0.50 / 0.10"}
	}
	tests := []struct {
		name      string
		spoil     func(r *pushResult)
		rateMet   bool
		orderMet  bool
		orderText string
	}{
		{name: "clean and fast", spoil: func(*pushResult) {}, rateMet: true, orderMet: true,
			orderText: "out-of-order 0, duplicated 0, lost 0 of 200000, stray 0, id regressions 0"},
		{name: "slow", spoil: func(r *pushResult) { r.accepted = 1000 }, orderMet: true},
		{name: "nothing accepted", spoil: func(r *pushResult) { r.accepted, r.elapsed = 0, 0 }, orderMet: true},
		{name: "lost", spoil: func(r *pushResult) { r.lost = 1 }, rateMet: true, orderText: "lost 1 of 200000"},
		{name: "reordered", spoil: func(r *pushResult) { r.check.ooo = 1 }, rateMet: true, orderText: "out-of-order 1"},
		{name: "duplicated", spoil: func(r *pushResult) { r.check.dup = 1 }, rateMet: true, orderText: "duplicated 1"},
		{name: "stray", spoil: func(r *pushResult) { r.check.stray = 1 }, rateMet: true, orderText: "stray 1"},
		{name: "id regression", spoil: func(r *pushResult) { r.idRegress = 1 }, rateMet: true, orderText: "id regressions 1"},
		{name: "resumed and unacknowledged are reported, not faults", spoil: func(r *pushResult) { r.resumed, r.unacked = 2, 1 },
			rateMet: true, orderMet: true, orderText: ", 2 resumed streams, 1 delivered unacknowledged"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := clean()
			tc.spoil(r)
			rows := pushRows(r)
			require.Len(t, rows, 3)
			require.Equal(t, "throughput gRPC 16 publishers, broadcast, 1 sub", rows[0].name)
			require.Equal(t, tc.rateMet, *rows[0].met, rows[0].result)
			require.Equal(t, "≥ 17160/s (Centrifugo REST)", rows[0].target)
			require.Equal(t, "1.00 / 0.50 / 0.10", rows[0].cpu)
			require.Nil(t, rows[1].met)
			require.Equal(t, tc.orderMet, *rows[2].met, rows[2].result)
			require.Contains(t, rows[2].result, tc.orderText)
		})
	}
	r := clean()
	rows := pushRows(r)
	require.Equal(t, "20000 pushes/s (200000 in 10.0 s, 16 HTTP/2 conns), round trip p50 1.00 ms  p99 2.00 ms  max 2.00 ms", rows[0].result)
	require.Equal(t, "0.020 ms (4.00 s over 200000 pushes)", rows[1].result)
	r.mode = "REST"
	require.Equal(t, "≥ 7248/s (3x ntfy)", pushRows(r)[0].target)
	require.Contains(t, pushRows(r)[0].result, "16 HTTP/1.1 conns")
}

// svcBinary is bin/svc built once per test binary for the tests that need
// a real broker.
var svcBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if svcBinary.dir != "" {
		_ = os.RemoveAll(svcBinary.dir)
	}
	os.Exit(code)
}

func mustSvcBinary(t *testing.T) string {
	t.Helper()
	svcBinary.once.Do(func() {
		svcBinary.dir, svcBinary.err = os.MkdirTemp("", "svcload-test-")
		if svcBinary.err != nil {
			return
		}
		svcBinary.path = filepath.Join(svcBinary.dir, "svc")
		cmd := exec.Command("go", "build", "-tags", "sqlite_omit_load_extension", "-o", svcBinary.path, "svc/cmd/svc")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			svcBinary.err = &buildError{err: err, out: string(out)}
		}
	})
	require.NoError(t, svcBinary.err)
	return svcBinary.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build svc: " + e.err.Error() + "\n" + e.out }

// brokerBroadcasts reads svc_pushes_total{kind="broadcast"} from the
// broker's /metrics (open to loopback).
func brokerBroadcasts(t *testing.T, lg *loadgen) int {
	t.Helper()
	resp, err := lg.http.Get(lg.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `svc_pushes_total{kind="broadcast"} `); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	require.NoError(t, sc.Err())
	t.Fatal("no svc_pushes_total{kind=\"broadcast\"} in /metrics")
	return 0
}

// Both modes against a real broker: each publishes, the subscriber gets
// every acknowledged push once and in order, the broker committed exactly
// the pushes made, and the gRPC mode's pushes went through grpc-go over
// one connection per publisher while the REST mode's did not.
func TestThroughputGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := startBroker(ctx, mustSvcBinary(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.stop()) })
	p := quickPlan
	p.pushDur = 300 * time.Millisecond
	lg := newLoadgen(p, b)
	t.Cleanup(lg.close)

	before := brokerBroadcasts(t, lg)
	results, err := lg.throughput(ctx)
	require.NoError(t, err)
	require.NoError(t, lg.brokenErr())
	after := brokerBroadcasts(t, lg)

	require.Len(t, results, 2)
	require.Len(t, lg.rows, 6)
	made := 0
	for i, r := range results {
		require.Equal(t, pushModes[i], r.mode)
		require.Equal(t, pushPubs, r.pubs)
		require.Positive(t, r.accepted, r.mode)
		require.Len(t, r.rtt, r.accepted)
		require.Equal(t, int64(pushPubs), r.conns, "%s: one connection per publisher", r.mode)
		require.Positive(t, r.serverCPU, r.mode)
		require.True(t, r.clean(), "%s: %+v", r.mode, lg.rows[3*i+2])
		require.Zero(t, r.unacked, r.mode)
		require.Equal(t, r.accepted, int(r.check.fresh.Load()), r.mode)
		require.True(t, *lg.rows[3*i+2].met, lg.rows[3*i+2].result)
		made += r.accepted + pushPubs*pushWarmup
	}
	rest, grpc := results[0], results[1]
	require.Zero(t, rest.grpcPushes, "REST mode spoke gRPC")
	require.Equal(t, int64(grpc.accepted+pushPubs*pushWarmup), grpc.grpcPushes, "every gRPC-mode push went through grpc-go")
	require.Equal(t, made, after-before, "the broker committed exactly the broadcasts made")
}
