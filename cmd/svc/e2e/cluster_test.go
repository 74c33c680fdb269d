package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	apiv1 "svc/gen/svc/v1"
	"svc/server/cluster/natstest"
)

// TestE2EClusterKillUnderLoad runs two `svc serve` processes of one team on
// one PostgreSQL database and one NATS (embedded in the test process), the
// way docs/OPERATIONS.md's "Several brokers" runs them. bob's SSE and gRPC
// streams are held by broker A while publishers push on both brokers over
// REST and gRPC; NATS restarts mid-load; then A is killed with SIGKILL.
// bob's live streams on A receive what was pushed on B, in commit order;
// A's publishers see their pushes fail and go on on B; every acknowledged
// push is stored once under the id it was acknowledged with, each
// publisher's in its order; and bob's streams resumed on B (Last-Event-ID,
// gRPC last_id) deliver, with what A delivered live, every stored message
// once in id order. It always runs on PostgreSQL (the run's pgtest
// cluster), in the SQLite pass of the suite as in the PostgreSQL one.
func TestE2EClusterKillUnderLoad(t *testing.T) {
	t.Parallel()
	ns, opts := clusterOpts(t)
	a := mustStartSvc(t, opts)
	adminTok := a.adminToken(t)
	admin := bearer(adminTok)
	// Members before B starts (they live in the database: B reads them there).
	bobTok := createMember(t, restDriver{a}, admin, "bob")
	carolTok := createMember(t, restDriver{a}, admin, "carol")
	b := mustStartSvc(t, opts)

	// Everything bob's streams deliver from here on is the load's.
	_, start := mustPush(t, restDriver{b}, admin, obj{"to": "bob", "body": "start"})
	startID := start["id"].(string)
	sse := a.subscribeSSE(t, bobTok, "bob", "", withHeader("Last-Event-ID", startID))
	gs := a.subscribeGRPC(t, bobTok, "bob", startID)

	// What A's streams delivered live, read until A dies.
	var liveMu sync.Mutex
	live := map[string][]string{}
	liveDone := make(chan error, 2)
	go func() {
		for ev := range sse.events {
			if ev.event != "message" {
				continue
			}
			var m obj
			if len(ev.data) != 1 || json.Unmarshal([]byte(ev.data[0]), &m) != nil || m["id"] != ev.id {
				liveDone <- fmt.Errorf("malformed message frame %q", ev.lines)
				return
			}
			liveMu.Lock()
			live["sse"] = append(live["sse"], ev.id)
			liveMu.Unlock()
		}
		liveDone <- nil
	}()
	go func() {
		for r := range gs.events {
			m := r.GetMessage()
			if m == nil {
				continue
			}
			liveMu.Lock()
			live["grpc"] = append(live["grpc"], m.GetId())
			liveMu.Unlock()
		}
		liveDone <- nil
	}()

	dial := func(p *proc) apiv1.BrokerClient {
		conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return apiv1.NewBrokerClient(conn)
	}
	grpcOf := map[*proc]apiv1.BrokerClient{a: dial(a), b: dial(b)}

	// Four publishers: admin and carol, over REST and gRPC, half starting
	// on A. One whose push fails on A goes on on B with its next body; a
	// failed push is not acknowledged and counts for nothing (it may or may
	// not have been stored). A failure on B is a defect.
	type ack struct {
		id     string
		worker int
		onB    bool
	}
	var (
		mu    sync.Mutex
		acks  = map[string]ack{} // by body
		sent  = make([]int, 4)   // bodies tried, per worker
		onBOf = make([]int, 4)   // acknowledged on B after A's death, per worker
		bErrs []error
		dead  bool // A was killed
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers, maxPerWorker = 4, 5000
	for w := range workers {
		wg.Go(func() {
			tok := []string{adminTok, carolTok}[w%2]
			rest := w < 2
			p := []*proc{a, b, b, a}[w]
			for n := range maxPerWorker {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%05d", w, n)
				req := obj{"body": body}
				if n%2 == 1 || tok == carolTok {
					req["to"] = "bob"
				}
				mu.Lock()
				sent[w] = n + 1
				mu.Unlock()
				var id string
				var err error
				if rest {
					var m obj
					if m, err = restPush(p, tok, req); err == nil {
						id = m["id"].(string)
					}
				} else {
					pr := &apiv1.PushRequest{Body: body}
					if to, ok := req["to"].(string); ok {
						pr.To = &to
					}
					var m *apiv1.Message
					if m, err = grpcPush(grpcOf[p], tok, pr); err == nil {
						id = m.GetId()
					}
				}
				mu.Lock()
				if err != nil {
					if p == b {
						bErrs = append(bErrs, fmt.Errorf("worker %d on B, %s: %w", w, body, err))
						mu.Unlock()
						return
					}
					if !dead {
						// Not yet killed: a push on A must not fail either.
						bErrs = append(bErrs, fmt.Errorf("worker %d on A before the kill, %s: %w", w, body, err))
						mu.Unlock()
						return
					}
					p = b
					mu.Unlock()
					continue
				}
				acks[body] = ack{id: id, worker: w, onB: p == b}
				if dead && p == b {
					onBOf[w]++
				}
				mu.Unlock()
			}
		})
	}
	failLoad := func(format string, args ...any) {
		close(stop)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf(format+" (push errors: %v)", append(args, bErrs)...)
	}
	// waitFor polls cond until it holds, failing after a bound or on a
	// push that failed where none may.
	t0 := time.Now()
	waitFor := func(what string, cond func() bool) {
		defer func() { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }()
		deadline := time.Now().Add(2 * callTimeout)
		for {
			ok := cond()
			mu.Lock()
			errs := len(bErrs)
			mu.Unlock()
			if errs > 0 {
				failLoad("while waiting for %s", what)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				failLoad("%s: not within %s", what, 2*callTimeout)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// liveFromB: name's stream on A delivered a push acknowledged by B
	// with an id above after.
	liveFromB := func(name, after string) func() bool {
		return func() bool {
			mu.Lock()
			onB := map[string]bool{}
			for _, k := range acks {
				if k.onB && k.id > after {
					onB[k.id] = true
				}
			}
			mu.Unlock()
			liveMu.Lock()
			defer liveMu.Unlock()
			return slices.ContainsFunc(live[name], func(id string) bool { return onB[id] })
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}

	// A member on A receives live what others push on B, over both streams.
	waitFor("150 pushes acknowledged", func() bool { return count() >= 150 })
	for _, name := range []string{"sse", "grpc"} {
		waitFor(name+" on A delivers a push made on B", liveFromB(name, ""))
	}

	// NATS restarts mid-load: what B commits meanwhile still reaches A's
	// streams (caught up from the store), and live traffic goes on after.
	mu.Lock()
	var beforeRestart string
	for _, k := range acks {
		beforeRestart = max(beforeRestart, k.id)
	}
	mu.Unlock()
	ns.Restart(t)
	for _, name := range []string{"sse", "grpc"} {
		waitFor(name+" on A delivers a push made on B after NATS restarted", liveFromB(name, beforeRestart))
	}
	acked := count()
	waitFor("more pushes after NATS restarted", func() bool { return count() >= acked+100 })

	// kill -9 of A under load.
	mu.Lock()
	dead = true
	mu.Unlock()
	a.kill(t)
	for range 2 {
		select {
		case err := <-liveDone:
			require.NoError(t, err)
		case <-time.After(streamWait):
			failLoad("bob's streams on A did not end with A")
		}
	}
	// Every publisher, A's included, goes on on B.
	waitFor("every publisher acknowledged on B after the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Min(onBOf) >= 20
	})
	close(stop)
	wg.Wait()
	require.Empty(t, bErrs)
	t.Logf("%d pushes acknowledged (%v tried per publisher); live on A: %d over SSE, %d over gRPC",
		len(acks), sent, len(live["sse"]), len(live["grpc"]))

	d := restDriver{b}
	bob := bearer(bobTok)
	stored := historyAll(t, d, bob, obj{})
	for _, with := range []string{"admin", "carol"} {
		for id, m := range historyAll(t, d, bob, obj{"with": with}) {
			stored[id] = m
		}
	}

	// Exactly once: one stored message per body, with the acknowledged id,
	// each publisher's in the order they were acknowledged.
	byBody := map[string]string{}
	for id, m := range stored {
		body := m["body"].(string)
		other, dup := byBody[body]
		require.False(t, dup, "%q is stored twice: %s and %s", body, other, id)
		byBody[body] = id
	}
	lastOf := make([]string, workers)
	for w := range workers {
		for n := range sent[w] {
			body := fmt.Sprintf("w%d-%05d", w, n)
			k, ok := acks[body]
			if !ok {
				continue
			}
			id, ok := byBody[body]
			require.True(t, ok, "acknowledged message %s (%s) is lost", k.id, body)
			require.Equal(t, k.id, id, "%s is stored under the id it was acknowledged with", body)
			require.Greater(t, id, lastOf[w], "%s: a publisher's messages keep their order", body)
			lastOf[w] = id
		}
	}

	var after []string
	for id := range stored {
		if id > startID {
			after = append(after, id)
		}
	}
	slices.Sort(after)
	_, fenceMsg := mustPush(t, d, admin, obj{"to": "bob", "body": "fence"})
	require.Greater(t, fenceMsg["id"], after[len(after)-1])
	for name, ids := range live {
		require.True(t, slices.IsSorted(ids), "%s on A delivered in id order", name)
	}
	// Resumed on B from the last id A delivered, and from the middle (a
	// client that kept only part of what it read).
	for _, name := range []string{"sse", "grpc"} {
		ids := live[name]
		for _, kept := range []int{len(ids), len(ids) / 2} {
			from := startID
			if kept > 0 {
				from = ids[kept-1]
			}
			var s msgStream
			if name == "sse" {
				s = b.subscribeSSE(t, bobTok, "bob", "", withHeader("Last-Event-ID", from))
			} else {
				s = b.subscribeGRPC(t, bobTok, "bob", from)
			}
			got := slices.Clone(ids[:kept])
			for {
				m := s.nextMessage(t)
				if m["id"] == fenceMsg["id"] {
					break
				}
				got = append(got, m["id"].(string))
			}
			s.close()
			require.Equal(t, after, got, "%s resumed on B after %d of the %d messages A delivered: every stored message after the start, once, in id order",
				name, kept, len(ids))
		}
	}
}

// clusterOpts starts a NATS (embedded in the test process) and returns it
// with the options that start brokers of one team on it and on one
// PostgreSQL database and config, as docs/OPERATIONS.md's "Several
// brokers" runs them.
func clusterOpts(t *testing.T) (*natstest.Server, procOpts) {
	ns := natstest.Start(t)
	dir := t.TempDir()
	return ns, procOpts{store: storePostgres,
		configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db"),
		env: []string{"SVC_NATS_URL=" + ns.URL()}}
}
