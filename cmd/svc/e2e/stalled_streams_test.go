package e2e

// End-to-end test of gRPC streams whose client stops reading
// (docs/PERFORMANCE.md "Streams that stop reading"): a member fills its
// stream cap with Broker/Subscribe streams that never read past the ready
// event, over a connection with small flow-control windows, and is sent
// far more than a stream's queue holds, four times over. Every stream must
// end, and what it held (goroutines, heap) must be released, whatever the
// client does.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	apiv1 "svc/gen/svc/v1"
)

var pprofListeningRE = regexp.MustCompile(`msg="pprof listening" addr=(127\.0\.0\.1:[0-9]+)`)

// processFigures are what /metrics says of the broker's process.
type processFigures struct {
	goroutines, heapMB, rssMB float64
}

func figuresOf(fams map[string]*dto.MetricFamily) processFigures {
	return processFigures{
		goroutines: metricValue(fams, "go_goroutines", nil),
		heapMB:     metricValue(fams, "go_memstats_heap_inuse_bytes", nil) / (1 << 20),
		rssMB:      metricValue(fams, "process_resident_memory_bytes", nil) / (1 << 20),
	}
}

// collectGarbage has the broker run a garbage collection (the profiler's
// heap endpoint does, with gc=1), so the heap /metrics shows next is what
// is still referenced rather than what the collector has not reached yet.
//
// Two collections: what sync.Pools hold (gRPC's buffers among it) survives
// the first.
func collectGarbage(t *testing.T, pprofAddr string) {
	t.Helper()
	for range 2 {
		resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

// pprofText is the broker's profile name in its text form (debug=1).
func pprofText(t *testing.T, pprofAddr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/" + name + "?debug=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	require.NoError(t, err)
	return string(b)
}

// heapProfileTop is the broker's heap profile cut to what a failure needs:
// the records holding the most live memory, largest first, each with its
// call stack. The profile's text form lists records in no useful order,
// most of them with nothing in use.
func heapProfileTop(t *testing.T, pprofAddr string) string {
	t.Helper()
	return topInUse(pprofText(t, pprofAddr, "heap"), 12)
}

// goroutinesIn is how many of the broker's goroutines have fn in their
// stacks, from its goroutine profile.
func goroutinesIn(t *testing.T, pprofAddr, fn string) int {
	t.Helper()
	return countGoroutinesIn(pprofText(t, pprofAddr, "goroutine"), fn)
}

// goroutineRecordRE is a record's first line in a debug=1 goroutine
// profile: "count @ pcs".
var goroutineRecordRE = regexp.MustCompile(`^(\d+) @`)

// countGoroutinesIn sums the counts of the profile's records whose frames
// name fn.
func countGoroutinesIn(profile, fn string) int {
	total, count, seen := 0, 0, false
	for line := range strings.Lines(profile) {
		if m := goroutineRecordRE.FindStringSubmatch(line); m != nil {
			count, _ = strconv.Atoi(m[1])
			seen = false
			continue
		}
		if strings.HasPrefix(line, "#\t") && !seen && strings.Contains(line, fn) {
			total += count
			seen = true
		}
	}
	return total
}

// heapRecordRE is a record's first line in a debug=1 heap profile:
// "objects in use: bytes in use [objects allocated: bytes allocated] @ pcs".
var heapRecordRE = regexp.MustCompile(`^(\d+): (\d+) \[(\d+): (\d+)\] @`)

// topInUse is the profile's header and its n records with the most bytes
// in use, largest first, each with its stack's functions and lines;
// records with nothing in use are left out.
func topInUse(profile string, n int) string {
	type record struct {
		inUse int64
		text  strings.Builder
	}
	var (
		header  string
		records []*record
		cur     *record
	)
	for line := range strings.Lines(profile) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "# runtime.MemStats") {
			break
		}
		if strings.HasPrefix(line, "heap profile:") {
			header = line
			continue
		}
		if m := heapRecordRE.FindStringSubmatch(line); m != nil {
			cur = &record{}
			cur.inUse, _ = strconv.ParseInt(m[2], 10, 64)
			alloc, _ := strconv.ParseInt(m[4], 10, 64)
			fmt.Fprintf(&cur.text, "%s objects, %.1f MB in use (%s objects, %.1f MB allocated)\n",
				m[1], float64(cur.inUse)/(1<<20), m[3], float64(alloc)/(1<<20))
			records = append(records, cur)
			continue
		}
		// A frame: "#\t0xADDR\tfunc+0xOFF\tfile:line"; the address is noise.
		if cur != nil && strings.HasPrefix(line, "#\t") {
			if f := strings.Fields(line); len(f) >= 4 {
				fmt.Fprintf(&cur.text, "\t%s %s\n", f[2], f[3])
			}
			continue
		}
		cur = nil
	}
	slices.SortStableFunc(records, func(a, b *record) int { return cmp.Compare(b.inUse, a.inUse) })
	var out strings.Builder
	out.WriteString(header + "\n")
	for i, r := range records {
		if i == n || r.inUse == 0 {
			break
		}
		out.WriteString(r.text.String())
	}
	return out.String()
}

func TestStalledGRPCSubscribersAreReleased(t *testing.T) {
	t.Parallel()
	const (
		// streams is the member's stream cap (the default).
		streams = 64
		rounds  = 4
		// bodySize is a DM near the largest body: a stream's queue of 256
		// of them is 15 MB.
		bodySize = 60 << 10
		// window is the client's flow-control window, stream and
		// connection: the broker can put one message or so on the wire
		// before its Send blocks.
		window = 64 << 10
		// maxPushes bounds a round: the hub cuts a stream 256 messages
		// behind, a few more sit in the transport.
		maxPushes = 600
		// releaseTimeout is how long the streams may take to end once
		// cut: the send timeout (10 s) with room for a loaded machine.
		releaseTimeout = time.Minute
		// goroutineSlack is how many goroutines above the baseline count
		// as back to it: the test's own connection holds a few.
		goroutineSlack = 24
		// heapSlackMB is how much live heap above the baseline counts as
		// back to it; one stuck round held several hundred MB.
		heapSlackMB = 48
		// rssSlackMB is how much resident memory above the baseline
		// counts as back to it: the runtime returns freed pages to the
		// system in the background, a few MB stay in its caches.
		rssSlackMB = 64
	)
	dir := t.TempDir()
	// A file store: the in-memory one would hold every pushed body in the
	// heap the test measures.
	p := mustStartSvc(t, procOpts{dbPath: dir + "/svc.db", env: []string{"SVC_PPROF_ADDR=127.0.0.1:0"}})
	var pprofAddr string
	require.Eventually(t, func() bool {
		m := pprofListeningRE.FindStringSubmatch(p.stderr.String())
		if m != nil {
			pprofAddr = m[1]
		}
		return m != nil
	}, callTimeout, 10*time.Millisecond, "the broker logs its profiler's address")
	admin := p.adminToken(t)
	stuckTok := createMember(t, restDriver{p}, bearer(admin), "stuck")

	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	broker := apiv1.NewBrokerClient(conn)
	pusher := p.broker(t)
	adminCtx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+admin)
	stuckCtx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+stuckTok)

	liveGRPC := func(fams map[string]*dto.MetricFamily) float64 {
		return metricValue(fams, "svc_live_streams", map[string]string{"kind": "grpc"})
	}
	cut := func(fams map[string]*dto.MetricFamily) float64 {
		return metricValue(fams, "svc_streams_cut_total", map[string]string{"stream": "chat"})
	}

	collectGarbage(t, pprofAddr)
	before := scrape(t, p)
	base := figuresOf(before)
	t.Logf("baseline: goroutines %.0f, live heap %.1f MB, RSS %.1f MB", base.goroutines, base.heapMB, base.rssMB)

	body := strings.Repeat("x", bodySize)
	peak := base
	for round := 1; round <= rounds; round++ {
		ctx, cancel := context.WithCancel(stuckCtx)
		t.Cleanup(cancel)
		for range streams {
			// WaitForReady: the broker may have closed the previous round's
			// connection; the client dials a new one.
			s, err := broker.Subscribe(ctx, &apiv1.SubscribeRequest{Name: "stuck"}, grpc.WaitForReady(true))
			require.NoError(t, err)
			first, err := s.Recv()
			require.NoError(t, err, "round %d: the stream opens", round)
			require.NotNil(t, first.GetReady(), "round %d: the stream opens with its ready event", round)
			// ... and is never read again.
		}
		cutBefore := cut(scrape(t, p))
		for n := 1; n <= maxPushes; n++ {
			_, err := pusher.Push(adminCtx, &apiv1.PushRequest{To: new("stuck"), Body: body})
			require.NoError(t, err)
			if n%32 != 0 {
				continue
			}
			fams := scrape(t, p)
			if f := figuresOf(fams); f.heapMB > peak.heapMB {
				peak = f
			}
			// Cut counts each stream once: when it ends, or (before the
			// fix) when the hub cut it while it stayed live.
			if liveGRPC(fams) == 0 || cut(fams)-cutBefore >= streams {
				break
			}
		}
		fams := scrape(t, p)
		require.Positive(t, cut(fams)-cutBefore, "round %d: the broker cut the stalled streams", round)
		t.Logf("round %d: %.0f grpc streams live, %.0f cut in all", round, liveGRPC(fams), cut(fams))
	}
	during := figuresOf(scrape(t, p))
	if during.heapMB > peak.heapMB {
		peak = during
	}
	t.Logf("after %d rounds: goroutines %.0f, heap in use %.1f MB, RSS %.1f MB (peak heap %.1f MB)",
		rounds, during.goroutines, during.heapMB, during.rssMB, peak.heapMB)

	// Every stream ends within the send timeout, whatever its client does,
	// and releases what it held. The heap is measured after garbage
	// collections until it is back or the time is up: a stream's last
	// buffers can still be on their way out (its connection's writer
	// drops them after the stream's goroutine has gone) when the
	// goroutine count is already back; a leak stays for the whole minute.
	deadline := time.Now().Add(releaseTimeout)
	var (
		after map[string]*dto.MetricFamily
		end   processFigures
	)
	for {
		after = scrape(t, p)
		end = figuresOf(after)
		if liveGRPC(after) == 0 && end.goroutines <= base.goroutines+goroutineSlack {
			collectGarbage(t, pprofAddr)
			after = scrape(t, p)
			if end = figuresOf(after); end.heapMB <= base.heapMB+heapSlackMB {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("released: goroutines %.0f, live heap %.1f MB, RSS %.1f MB", end.goroutines, end.heapMB, end.rssMB)
	require.Zero(t, liveGRPC(after), "every stalled gRPC stream has ended")
	require.LessOrEqual(t, end.goroutines, base.goroutines+goroutineSlack, "the stalled streams' goroutines are gone")
	if end.heapMB > base.heapMB+heapSlackMB {
		t.Logf("what holds the heap:\n%s", heapProfileTop(t, pprofAddr))
		// Whether the test's connection holds it: the broker's side of a
		// connection keeps what it queued for streams that have ended.
		t.Logf("client connection: %s; connections the broker's gRPC server holds (loopy writers): %d",
			conn.GetState(), goroutinesIn(t, pprofAddr, "transport.(*loopyWriter).run"))
		_ = conn.Close()
		time.Sleep(time.Second)
		collectGarbage(t, pprofAddr)
		t.Logf("live heap once the client's connection is closed: %.1f MB", figuresOf(scrape(t, p)).heapMB)
		// What is still running, for what might hold an ended transport.
		t.Logf("the broker's goroutines:\n%s", pprofText(t, pprofAddr, "goroutine"))
	}
	require.LessOrEqual(t, end.heapMB, base.heapMB+heapSlackMB, "the stalled streams' memory is released")

	// What was released goes back to the system: the runtime's scavenger
	// returns the freed pages within seconds. Under the race detector the
	// RSS holds its shadow memory for good, so only a build without it
	// (make test runs this test once so) can say.
	if raceEnabled {
		t.Logf("race detector on: RSS (%.1f MB) not checked", end.rssMB)
		return
	}
	rss := end.rssMB
	for deadline := time.Now().Add(releaseTimeout); rss > base.rssMB+rssSlackMB && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		rss = figuresOf(scrape(t, p)).rssMB
	}
	t.Logf("RSS back to %.1f MB (baseline %.1f MB, peak during the fill %.1f MB)", rss, base.rssMB, during.rssMB)
	require.LessOrEqual(t, rss, base.rssMB+rssSlackMB, "the stalled streams' memory goes back to the system")
	cuts := cut(after) - cut(before)
	require.LessOrEqual(t, cuts, float64(rounds*streams), "each stream is counted at most once")
}
