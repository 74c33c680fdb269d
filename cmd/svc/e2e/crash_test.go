package e2e

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	apiv1 "svc/gen/svc/v1"
)

// historyAll pages through one history selector with limit 500 and the
// before cursor and returns every message by id. before is exclusive and
// several messages can share a millisecond, so each next page starts one
// millisecond later than the oldest seen and duplicates are dropped.
func historyAll(t testing.TB, d driver, c cred, query obj) map[string]obj {
	t.Helper()
	seen := map[string]obj{}
	var before any
	for range 200 {
		q := maps.Clone(query)
		q["limit"] = 500
		if before != nil {
			q["before"] = before
		}
		msgs := listOf(t, mustCall(t, d, c, "History", q), "messages")
		fresh := 0
		for _, m := range msgs {
			id := m["id"].(string)
			if _, ok := seen[id]; !ok {
				seen[id] = m
				fresh++
			}
		}
		if len(msgs) < 500 {
			return seen
		}
		oldest := msgs[len(msgs)-1]["createdAt"].(float64)
		before = oldest + 1
		if fresh == 0 {
			before = oldest
		}
	}
	t.Fatalf("history %v did not end within 200 pages", query)
	return nil
}

// TestKill9KeepsAcknowledgedMessages pushes over REST and gRPC from several
// goroutines, kills the broker mid-load, and requires every push it
// acknowledged to be in history after a restart on the same files.
func TestKill9KeepsAcknowledgedMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	bobTok := createMember(t, restDriver{p}, admin, "bob")

	// The load's own gRPC connection: p.kill closes the harness's first,
	// which would end the gRPC load before the process dies.
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	gc := apiv1.NewBrokerClient(conn)

	type ack struct {
		body string
		dm   bool
	}
	var mu sync.Mutex
	acks := map[string]ack{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers = 6
	for w := range workers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				dm := n%2 == 1
				body := fmt.Sprintf("w%d-%05d", w, n)
				var id string
				if w%2 == 0 {
					req := obj{"body": body}
					if dm {
						req["to"] = "bob"
					}
					m, err := restPush(p, adminTok, req)
					if err != nil {
						return
					}
					id = m["id"].(string)
				} else {
					req := &apiv1.PushRequest{Body: body}
					if dm {
						to := "bob"
						req.To = &to
					}
					m, err := grpcPush(gc, adminTok, req)
					if err != nil {
						return
					}
					id = m.GetId()
				}
				mu.Lock()
				acks[id] = ack{body: body, dm: dm}
				mu.Unlock()
			}
		})
	}

	// Kill after a second of load, with the load well under way.
	loadStart := time.Now()
	deadline := loadStart.Add(callTimeout)
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 100 && time.Since(loadStart) >= time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d pushes acknowledged within %s", n, callTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.kill(t)
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(callTimeout + time.Second):
		t.Fatal("pushers did not stop after the kill")
	}
	t.Logf("%d pushes acknowledged before kill -9", len(acks))

	p2 := p.restart(t)
	d := restDriver{p2}
	general := historyAll(t, d, bearer(bobTok), obj{})
	dms := historyAll(t, d, bearer(bobTok), obj{"with": "admin"})
	var maxID string
	for id, a := range acks {
		in := general
		if a.dm {
			in = dms
		}
		m, ok := in[id]
		require.True(t, ok, "acknowledged message %s (%s) is lost", id, a.body)
		require.Equal(t, a.body, m["body"], "message %s", id)
		require.Equal(t, "admin", m["from"])
		maxID = max(maxID, id)
	}
	// The sequence goes on past everything committed before the crash.
	_, msg := mustPush(t, d, admin, obj{"to": "bob", "body": "after restart"})
	require.Greater(t, msg["id"], maxID)
	all := slices.Collect(maps.Keys(general))
	all = append(all, slices.Collect(maps.Keys(dms))...)
	require.Greater(t, msg["id"], slices.Max(all), "ids never repeat after a restart")
}

// TestSIGTERMWithOpenStreams stops a broker that holds SSE and gRPC
// subscriber streams: it exits 0 well before the 8 s drain and ends them.
func TestSIGTERMWithOpenStreams(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	bob := createMember(t, restDriver{p}, bearer(adminTok), "bob")
	sse1 := p.subscribeSSE(t, bob, "bob", "")
	sse2 := p.subscribeSSE(t, adminTok, "admin", "")

	// Its own connection: p.stop closes the harness's before signalling.
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	g, ready, err := grpcSubscribeOn(t, apiv1.NewBrokerClient(conn), bearer(bob), &apiv1.SubscribeRequest{Name: "bob"})
	require.NoError(t, err)
	require.Equal(t, "bob", ready.GetReady().GetMember())
	_, msg := mustPush(t, restDriver{p}, bearer(adminTok), obj{"to": "bob", "body": "before stop"})
	require.Equal(t, msg, sse1.nextMessage(t))
	require.Equal(t, msg, g.nextMessage(t))

	code, took := p.stop(t)
	t.Logf("exit %d after %s", code, took)
	require.Zero(t, code, "stderr:\n%s", p.stderr)
	require.Less(t, took, 3*time.Second, "open streams must not hold up shutdown")
	for _, s := range []*sseStream{sse1, sse2} {
		require.Empty(t, s.drain(t, time.Second))
		require.True(t, isEOF(s.endErr()), "the broker ends the SSE response cleanly: %v", s.endErr())
	}
	require.Error(t, g.endErr(t, time.Second), "the gRPC stream ends with the process")
}
