package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"svc/server"
	"svc/server/cluster"
	"svc/server/kek"
)

// Presence, the team stream and live activity across brokers
// (docs/DECISIONS.md, "Presence and the team stream on several brokers").

// sseEvent is one event of an SSE stream: its id, name and data.
type sseEvent struct{ id, name, data string }

// openSSE opens path on s with token and sends every event after ready on
// the returned channel, which closes when the stream ends; stop ends it
// from this side. It returns once the stream said ready.
func openSSE(t *testing.T, s *serving, token, path string) (<-chan sseEvent, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseEvent, 1024)
	ready := make(chan struct{})
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name == "ready" {
					close(ready)
				} else if ev.name != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready within 30 s", path)
	}
	return out, cancel
}

// rosterEntry is one member's live presence as GET /roster shows it.
type rosterEntry struct {
	Connected int    `json:"connected"`
	Activity  string `json:"activity"`
}

// roster reads the live presence on s, by member.
func roster(t *testing.T, s *serving, token string) map[string]rosterEntry {
	t.Helper()
	var body struct {
		Connected []struct {
			Name string `json:"name"`
			rosterEntry
		} `json:"connected"`
	}
	require.NoError(t, json.Unmarshal(s.get(t, "/roster", token), &body))
	out := map[string]rosterEntry{}
	for _, p := range body.Connected {
		out[p.Name] = p.rosterEntry
	}
	return out
}

// eventually waits, bounded, until member's presence on every one of
// brokers reads want.
func eventually(t *testing.T, token, member string, want rosterEntry, brokers ...*serving) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		var got []rosterEntry
		for _, s := range brokers {
			e := roster(t, s, token)[member]
			got = append(got, e)
			ok = ok && e == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's presence on the brokers: %+v, want %+v", member, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPresenceAcrossBrokers: a member's live streams and live activity
// read the same on both brokers, whichever holds them; when they end, it
// is offline on both; a broker that stops says goodbye and stops counting
// at once.
func TestPresenceAcrossBrokers(t *testing.T) {
	// A 20 s heartbeat: a table holds a minute after its last word, past
	// what the goodbye check below measures.
	was := server.PresenceHeartbeat
	server.PresenceHeartbeat = 20 * time.Second
	t.Cleanup(func() { server.PresenceHeartbeat = was })
	a, b, _, admin, tokens := twoBrokers(t)
	_, stop1 := openSSE(t, a, tokens["alice"], "/subscribe?name=alice")
	eventually(t, admin, "alice", rosterEntry{Connected: 1}, a, b)
	// A push on B counts alice's stream on A as live.
	code, out := b.call(t, http.MethodPost, "/push", tokens["bob"], map[string]any{"to": "alice", "body": "hi"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.EqualValues(t, 1, out["delivery"].(map[string]any)["live"], "%v", out)
	code, out = b.call(t, http.MethodPost, "/push", admin, map[string]any{"body": "to everyone"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.EqualValues(t, 1, out["delivery"].(map[string]any)["live"], "a broadcast too: %v", out)
	_, stop2 := openSSE(t, b, tokens["alice"], "/subscribe?name=alice")
	eventually(t, admin, "alice", rosterEntry{Connected: 2}, a, b)

	// Live activity reported on A reads on B, and back to idle on both.
	code, out = a.call(t, http.MethodPost, "/presence/activity", tokens["alice"], map[string]any{"state": "working"})
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	eventually(t, admin, "alice", rosterEntry{Connected: 2, Activity: "working"}, a, b)
	code, out = a.call(t, http.MethodPost, "/presence/activity", tokens["alice"], map[string]any{"state": "idle"})
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	eventually(t, admin, "alice", rosterEntry{Connected: 2}, a, b)

	stop2()
	eventually(t, admin, "alice", rosterEntry{Connected: 1}, a, b)
	stop1()
	eventually(t, admin, "alice", rosterEntry{}, a, b)

	// A stops (a clean shutdown says goodbye) while bob streams there and
	// his live activity, reported there, holds: B stops counting him
	// without waiting for A's table to lapse (60 s after its last word) or
	// his activity (30 s after the report). His stream ends as A shuts
	// down, which A sends as a change of its own; only the goodbye drops
	// the activity.
	openSSE(t, a, tokens["bob"], "/subscribe?name=bob")
	reported := time.Now()
	code, out = a.call(t, http.MethodPost, "/presence/activity", tokens["bob"], map[string]any{"state": "working"})
	require.Equal(t, http.StatusNoContent, code, "%v", out)
	eventually(t, admin, "bob", rosterEntry{Connected: 1, Activity: "working"}, a, b)
	require.NoError(t, a.stop())
	eventually(t, admin, "bob", rosterEntry{}, b)
	require.Less(t, time.Since(reported), 25*time.Second, "the goodbye, not a lapse, dropped A's table")
}

// TestPresenceDeadBroker: a broker that dies without a goodbye stops
// counting once its table lapses: three of its heartbeats with no word.
// The dead broker is a NATS client that speaks the presence subject as a
// broker with a one-second heartbeat would, then goes silent.
func TestPresenceDeadBroker(t *testing.T) {
	a, b, ns, admin, tokens := twoBrokers(t)
	nc, err := nats.Connect(ns.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	// The subject names the team: learn it from a broker's heartbeat.
	heard := make(chan string, 16)
	sub, err := nc.Subscribe("svc.*.presence", func(m *nats.Msg) {
		select {
		case heard <- m.Subject:
		default:
		}
	})
	require.NoError(t, err)
	var subject string
	select {
	case subject = <-heard:
	case <-time.After(30 * time.Second):
		t.Fatal("no broker's presence heard within 30 s")
	}
	require.NoError(t, sub.Unsubscribe())

	// Bob streams on A too, so the dead broker's count adds to a live one.
	openSSE(t, a, tokens["bob"], "/subscribe?name=bob")
	eventually(t, admin, "bob", rosterEntry{Connected: 1}, a, b)
	// It signs as the team's brokers do (with the KEK they share), counts
	// its messages and times them. Its heartbeat is 2 s: its table holds
	// 6 s after the last word.
	signer := teamSigner(t, a)
	n := int64(0)
	msg := func(s *cluster.Signer, format string, args ...any) *nats.Msg {
		n++
		return s.Msg(subject, []byte(fmt.Sprintf(format, args...)))
	}
	now := func() int64 { return time.Now().UnixMilli() }
	send := func(m *nats.Msg) {
		t.Helper()
		require.NoError(t, nc.PublishMsg(m))
		require.NoError(t, nc.Flush())
	}
	sent := time.Now()
	send(msg(signer, `{"v":2,"o":"deadbroker","hb":2000,"f":true,"m":{"bob":{"c":2,"s":"working","t":30000}},"n":%d,"at":%d}`, n+1, now()))
	eventually(t, admin, "bob", rosterEntry{Connected: 3, Activity: "working"}, a, b)
	eventually(t, admin, "bob", rosterEntry{Connected: 1}, a, b)
	require.GreaterOrEqual(t, time.Since(sent), 6*time.Second, "a table holds for three heartbeats")

	// Malformed tables count for nothing; nor do good ones not signed by
	// a broker of the team.
	for _, bad := range []*nats.Msg{
		msg(signer, `{"v":2,"o":"x","hb":1000,"m":{"bob":{"c":-5}},"n":%d,"at":%d}`, n+1, now()),
		msg(signer, `{"v":2,"o":"x","hb":1000,"m":{"bob":{"c":1,"s":"asleep"}},"n":%d,"at":%d}`, n+1, now()),
		msg(signer, `{"v":1,"o":"x","hb":1000,"m":{"bob":{"c":1}},"n":%d,"at":%d}`, n+1, now()),
		msg(signer, `not json`),
		msg(nil, `{"v":2,"o":"y","hb":2000,"m":{"bob":{"c":10}},"n":%d,"at":%d}`, n+1, now()),
		msg(cluster.NewSigner(make([]byte, 32)), `{"v":2,"o":"y","hb":2000,"m":{"bob":{"c":20}},"n":%d,"at":%d}`, n+1, now()),
	} {
		require.NoError(t, nc.PublishMsg(bad))
	}
	// A good table after them, from the same connection (so read after
	// them), counts alone: they were dropped.
	good := msg(signer, `{"v":2,"o":"x","hb":2000,"m":{"bob":{"c":1}},"n":%d,"at":%d}`, n+1, now())
	send(good)
	eventually(t, admin, "bob", rosterEntry{Connected: 2}, a, b)
	send(msg(signer, `{"v":2,"o":"x","hb":2000,"b":true,"n":%d,"at":%d}`, n+1, now()))
	eventually(t, admin, "bob", rosterEntry{Connected: 1}, a, b)
	// The good table sent again (anyone on the subject heard it) counts
	// for nothing: once z's table, sent after it, counts, it was read.
	send(good)
	send(msg(signer, `{"v":2,"o":"z","hb":2000,"m":{"bob":{"c":4}},"n":%d,"at":%d}`, n+1, now()))
	eventually(t, admin, "bob", rosterEntry{Connected: 5}, a, b)
}

// teamSigner is the signer of the team broker s serves: the key derived
// from the KEK beside its config file.
func teamSigner(t *testing.T, s *serving) *cluster.Signer {
	t.Helper()
	i := slices.Index(s.args, "--config-path")
	require.GreaterOrEqual(t, i, 0, "started with --config-path")
	k, err := kek.Load(s.args[i+1] + ".kek")
	require.NoError(t, err)
	return cluster.NewSigner(k.Derive(cluster.SignerLabel))
}

// teamEvent reads the next team-stream event from c whose data holds
// want, failing after a generous bound.
func teamEvent(t *testing.T, c <-chan sseEvent, want string) map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-c:
			require.True(t, ok, "the team stream ended before %q", want)
			if ev.name == "team" && strings.Contains(ev.data, want) {
				var out map[string]any
				require.NoError(t, json.Unmarshal([]byte(ev.data), &out))
				return out
			}
		case <-deadline:
			t.Fatalf("no team event with %q within 30 s", want)
		}
	}
}

// TestTeamStreamAcrossBrokers: a team stream on A carries a channel
// created on B and the presence of a member streaming on B; when A loses
// NATS, its team streams end, so their clients start again from a
// snapshot.
func TestTeamStreamAcrossBrokers(t *testing.T) {
	a, b, ns, _, tokens := twoBrokers(t)
	team, _ := openSSE(t, a, tokens["alice"], "/team/stream")
	teamEvent(t, team, `"snapshot"`)

	code, out := b.call(t, http.MethodPost, "/channels", tokens["bob"], map[string]any{"slug": "made-on-b"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	ev := teamEvent(t, team, `"made-on-b"`)
	ch := ev["channel"].(map[string]any)
	require.Equal(t, "created", ch["op"])

	openSSE(t, b, tokens["bob"], "/subscribe?name=bob")
	for {
		p := teamEvent(t, team, `"presence"`)["presence"].(map[string]any)
		if p["name"] == "bob" && p["connected"] == float64(1) {
			break
		}
	}

	ns.Stop()
	deadline := time.After(30 * time.Second)
	for ended := false; !ended; {
		select {
		case _, ok := <-team:
			ended = !ok
		case <-deadline:
			t.Fatal("the team stream outlived NATS by 30 s")
		}
	}
	ns.Resume(t)
	// Once both brokers are back on NATS, a fresh stream on A starts from
	// a snapshot that counts bob on B, and gets channels made on B. Until
	// then a stream may end again (A reconnecting) or miss the change (B
	// still cut off): try again.
	for i := 0; ; i++ {
		require.Less(t, i, 30, "the team stream never worked again after NATS came back")
		team2, stop := openSSE(t, a, tokens["alice"], "/team/stream")
		snap := teamEvent(t, team2, `"snapshot"`)["snapshot"].(map[string]any)
		found := false
		for _, m := range snap["members"].([]any) {
			if mm := m.(map[string]any); mm["name"] == "bob" {
				found = mm["connected"] == float64(1)
			}
		}
		require.True(t, found, "bob's stream on B counts in A's snapshot: %v", snap)
		slug := fmt.Sprintf("after-%d", i)
		code, out = b.call(t, http.MethodPost, "/channels", tokens["bob"], map[string]any{"slug": slug})
		require.Equal(t, http.StatusOK, code, "%v", out)
		got := waitTeam(team2, slug, 2*time.Second)
		stop()
		if got {
			return
		}
	}
}

// waitTeam reports whether a team event whose data holds want comes on c
// within d (false when the stream ends first).
func waitTeam(c <-chan sseEvent, want string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				return false
			}
			if ev.name == "team" && strings.Contains(ev.data, want) {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestActivityAcrossBrokers: a live activity stream on A gets, in commit
// order and once each, the rows written through B and through A
// meanwhile; the stream's order is the store's.
func TestActivityAcrossBrokers(t *testing.T) {
	a, b, _, _, tokens := twoBrokers(t)
	stream, _ := openSSE(t, a, tokens["bob"], "/members/bob/activity/stream")
	const each = 15
	upload := func(s *serving, who string) {
		for i := range each {
			code, out := s.call(t, http.MethodPost, "/members/bob/activity", tokens["bob"], map[string]any{
				"events": []map[string]any{{"kind": "tool_action", "data": map[string]any{"via": who, "n": i}}},
			})
			if code != http.StatusOK {
				t.Errorf("upload through %s: %d %v", who, code, out)
				return
			}
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); upload(b, "B") }()
	upload(a, "A")
	<-done

	type row struct {
		ID   float64 `json:"id"`
		Data struct {
			Via string  `json:"via"`
			N   float64 `json:"n"`
		} `json:"data"`
	}
	var got []row
	deadline := time.After(60 * time.Second)
	for len(got) < 2*each {
		select {
		case ev, ok := <-stream:
			require.True(t, ok, "the stream ended after %d rows", len(got))
			if ev.name != "activity" {
				continue
			}
			var r row
			require.NoError(t, json.Unmarshal([]byte(ev.data), &r))
			got = append(got, r)
		case <-deadline:
			t.Fatalf("%d of %d rows within 60 s", len(got), 2*each)
		}
	}
	next := map[string]float64{}
	for i, r := range got {
		if i > 0 {
			require.Less(t, got[i-1].ID, r.ID, "commit order, each once")
		}
		require.Equal(t, next[r.Data.Via], r.Data.N, "each writer's rows in its order")
		next[r.Data.Via]++
	}
	require.Equal(t, map[string]float64{"A": each, "B": each}, next)

	// The stream carried exactly the store's rows.
	code, out := b.call(t, http.MethodGet, "/members/bob/activity?limit=100", tokens["bob"], nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	var stored, streamed []float64
	for _, r := range out["activity"].([]any) {
		stored = append(stored, r.(map[string]any)["id"].(float64))
	}
	for _, r := range got {
		streamed = append(streamed, r.ID)
	}
	slices.Sort(stored)
	require.Equal(t, stored, streamed)
	select {
	case extra := <-stream:
		t.Fatalf("nothing more was written, got %v", extra)
	case <-time.After(100 * time.Millisecond):
	}
}
