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
)

// TestE2EKillUnderLoadPostgres runs a broker on PostgreSQL (in either mode
// of the suite), pushes over REST and gRPC from several goroutines while a
// member's SSE stream reads along, kills the broker with SIGKILL mid-load
// and restarts it on the same database. Every push it acknowledged is
// stored exactly once, each publisher's messages in the order they were
// acknowledged, ids go on past the crash, and the member's stream resumed
// by its last id (Last-Event-ID, and gRPC's last_id) delivers the rest in id
// order with nothing lost or repeated.
func TestE2EKillUnderLoadPostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{store: storePostgres,
		configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	bobTok := createMember(t, restDriver{p}, admin, "bob")

	// Everything bob's stream delivers from here on is the load's.
	_, start := mustPush(t, restDriver{p}, admin, obj{"to": "bob", "body": "start"})
	live := p.subscribeSSE(t, bobTok, "bob", "&lastEventId="+start["id"].(string))
	var liveIDs []string // what the stream delivered before the kill
	liveDone := make(chan error, 1)
	go func() {
		for ev := range live.events {
			if ev.event != "message" {
				continue
			}
			var m obj
			if len(ev.data) != 1 || json.Unmarshal([]byte(ev.data[0]), &m) != nil || m["id"] != ev.id {
				liveDone <- fmt.Errorf("malformed message frame %q", ev.lines)
				return
			}
			liveIDs = append(liveIDs, ev.id)
		}
		liveDone <- nil
	}()

	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	gc := apiv1.NewBrokerClient(conn)

	type ack struct {
		id     string
		worker int
		dm     bool
	}
	var mu sync.Mutex
	acks := map[string]ack{} // by body
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const workers, perWorker = 6, 2000
	for w := range workers {
		wg.Go(func() {
			for n := range perWorker {
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
				acks[body] = ack{id: id, worker: w, dm: dm}
				mu.Unlock()
			}
		})
	}

	loadStart := time.Now()
	deadline := loadStart.Add(callTimeout)
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 150 && time.Since(loadStart) >= time.Second {
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
	select {
	case err := <-liveDone:
		require.NoError(t, err)
	case <-time.After(streamWait):
		t.Fatal("bob's stream did not end with the broker")
	}
	t.Logf("%d pushes acknowledged before kill -9, %d delivered live", len(acks), len(liveIDs))
	require.True(t, slices.IsSorted(liveIDs), "the live stream delivers in id order")
	require.Len(t, liveIDs, len(slices.Compact(slices.Clone(liveIDs))), "the live stream repeats nothing")

	p2 := p.restart(t)
	d := restDriver{p2}
	bob := bearer(bobTok)
	stored := historyAll(t, d, bob, obj{})
	for id, m := range historyAll(t, d, bob, obj{"with": "admin"}) {
		stored[id] = m
	}

	// Exactly once: one stored message per body, with the acknowledged id.
	byBody := map[string]string{}
	for id, m := range stored {
		body := m["body"].(string)
		other, dup := byBody[body]
		require.False(t, dup, "%q is stored twice: %s and %s", body, other, id)
		byBody[body] = id
	}
	lastOf := make([]string, workers)
	for w := range workers {
		for n := range perWorker {
			body := fmt.Sprintf("w%d-%05d", w, n)
			a, ok := acks[body]
			if !ok {
				// Unacknowledged: stored or not, but nothing of this
				// worker's after it was acknowledged either.
				continue
			}
			id, ok := byBody[body]
			require.True(t, ok, "acknowledged message %s (%s) is lost", a.id, body)
			require.Equal(t, a.id, id, "%s is stored under the id it was acknowledged with", body)
			require.Greater(t, id, lastOf[w], "%s: a publisher's messages keep their order", body)
			lastOf[w] = id
			if a.dm {
				require.Equal(t, "bob", stored[id]["to"], "%s", body)
			}
		}
	}

	// The stream resumed by its last id delivers, in id order, exactly the
	// stored messages after it: with what it had live, everything after
	// the start once.
	var after []string
	for id := range stored {
		if id > start["id"].(string) {
			after = append(after, id)
		}
	}
	slices.Sort(after)
	_, fenceMsg := mustPush(t, d, admin, obj{"to": "bob", "body": "after restart"})
	require.Greater(t, fenceMsg["id"], after[len(after)-1], "ids never repeat after a restart")
	// Resume from the last id the stream delivered, and from the middle
	// (a client that kept only part of what it read): the replay comes
	// from the restarted broker's store.
	for _, kept := range []int{len(liveIDs), len(liveIDs) / 2} {
		resumeFrom := start["id"].(string)
		if kept > 0 {
			resumeFrom = liveIDs[kept-1]
		}
		streams := map[string]msgStream{
			"Last-Event-ID": p2.subscribeSSE(t, bobTok, "bob", "", withHeader("Last-Event-ID", resumeFrom)),
			"gRPC last_id":  p2.subscribeGRPC(t, bobTok, "bob", resumeFrom),
		}
		for name, s := range streams {
			got := slices.Clone(liveIDs[:kept])
			for {
				m := s.nextMessage(t)
				if m["id"] == fenceMsg["id"] {
					break
				}
				got = append(got, m["id"].(string))
			}
			s.close()
			require.Equal(t, after, got, "%s after %d of %d live messages: with what was read live, every stored message after the start, once, in id order",
				name, kept, len(liveIDs))
		}
	}
}
