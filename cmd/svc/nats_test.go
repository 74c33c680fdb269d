package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/cluster/natstest"
)

// sseMessage is one message event of a stream: its SSE id and body.
type sseMessage struct{ id, body string }

// openStream opens member's message stream on s (after lastID, when
// set) and sends each message event on the returned channel until the
// test ends; it returns once the stream said ready.
func openStream(t *testing.T, s *serving, token, member, lastID string) <-chan sseMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/subscribe?name="+member, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := make(chan sseMessage, 1024)
	ready := make(chan struct{})
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var id, event, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				switch event {
				case "ready":
					close(ready)
				case "message":
					var m struct {
						Body string `json:"body"`
					}
					_ = json.Unmarshal([]byte(data), &m)
					out <- sseMessage{id: id, body: m.Body}
				}
				id, event, data = "", "", ""
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("stream not ready within 30 s")
	}
	return out
}

// collect reads n messages from c, failing after a generous bound.
func collect(t *testing.T, c <-chan sseMessage, n int) []sseMessage {
	t.Helper()
	var got []sseMessage
	deadline := time.After(60 * time.Second)
	for len(got) < n {
		select {
		case m, ok := <-c:
			require.True(t, ok, "stream ended after %d of %d messages", len(got), n)
			got = append(got, m)
		case <-deadline:
			t.Fatalf("%d of %d messages within 60 s", len(got), n)
		}
	}
	return got
}

// TestTwoBrokersOnNATS: two brokers on one PostgreSQL database and one
// NATS serve one team. A member subscribed on broker A receives, in
// commit order and once each, what another member pushes on B and what a
// third pushes on A meanwhile; resuming on B with Last-Event-ID gives
// exactly the rest.
func TestTwoBrokersOnNATS(t *testing.T) {
	a, b, _, admin, tokens := twoBrokers(t)
	stream := openStream(t, a, tokens["alice"], "alice", "")
	const each = 40
	var (
		mu  sync.Mutex
		ids = map[string]string{} // pushed id → body
		wg  sync.WaitGroup
	)
	push := func(s *serving, token, who string) {
		for i := range each {
			body := fmt.Sprintf("%s %d", who, i)
			code, out := s.call(t, http.MethodPost, "/push", token, map[string]any{"to": "alice", "body": body})
			if !assertOK(t, code, out) {
				return
			}
			mu.Lock()
			ids[out["message"].(map[string]any)["id"].(string)] = body
			mu.Unlock()
		}
	}
	wg.Go(func() { push(b, tokens["bob"], "bob on B") })
	wg.Go(func() { push(a, admin, "admin on A") })
	wg.Wait()
	require.Len(t, ids, 2*each)

	got := collect(t, stream, 2*each)
	seen := map[string]bool{}
	for i, g := range got {
		require.False(t, seen[g.id], "message %s delivered twice", g.id)
		seen[g.id] = true
		require.Equal(t, ids[g.id], g.body, "message %s", g.id)
		if i > 0 {
			require.Less(t, got[i-1].id, g.id, "commit order")
		}
	}
	// Both writers' messages came, each writer's in its own order.
	bobs := 0
	for _, g := range got {
		if strings.HasPrefix(g.body, "bob on B ") {
			require.Equal(t, fmt.Sprintf("bob on B %d", bobs), g.body)
			bobs++
		}
	}
	require.Equal(t, each, bobs)
	// NATS carried B's messages to A with their records, signed with the
	// key the brokers derive from the KEK they share: A read (nearly)
	// none of them from the store. Unsigned, it read every one.
	require.NotZero(t, metric(t, a, admin, `svc_cluster_received_total{kind="msg"}`))
	read := metric(t, a, admin, `svc_cluster_store_records_total{kind="msg"}`)
	t.Logf("A read %v of B's %d messages from the store", read, each)
	// A smoke check (cluster's TestSignedBatchesNeedNoStoreRead is the
	// proof): under load a batch NATS brings late is read from the store
	// after GapWait, so not necessarily none.
	require.LessOrEqual(t, read, float64(each/4))
	require.Zero(t, metric(t, a, admin, `svc_cluster_rejected_total{kind="msg"}`))

	// Resuming on the other broker after the 25th: exactly the rest, in
	// order, then live ones from either broker.
	resumed := openStream(t, b, tokens["alice"], "alice", got[24].id)
	rest := collect(t, resumed, len(got)-25)
	for i, r := range rest {
		require.Equal(t, got[25+i], r)
	}
	code, out := a.call(t, http.MethodPost, "/push", admin, map[string]any{"to": "alice", "body": "after the resume"})
	require.Equal(t, http.StatusOK, code, "%v", out)
	last := collect(t, resumed, 1)[0]
	require.Equal(t, "after the resume", last.body)
	require.Equal(t, out["message"].(map[string]any)["id"], last.id)
	require.Equal(t, last, collect(t, stream, 1)[0], "the stream on A gets it too")
	select {
	case extra := <-resumed:
		t.Fatalf("nothing more was pushed, got %v", extra)
	case <-time.After(100 * time.Millisecond):
	}
}

// firstBroker starts the first broker of a team on a fresh PostgreSQL
// database and an embedded NATS; it returns the broker, the arguments
// that start another broker of the team, the database's URL, the NATS and
// the admin token its first boot printed.
func firstBroker(t *testing.T) (a *serving, args []string, url string, ns *natstest.Server, admin string) {
	t.Helper()
	url = pgCluster(t).NewDatabase(t)
	ns = natstest.Start(t)
	args = []string{"--config-path", t.TempDir() + "/svc.json", "--db-url", url, "--nats-url", ns.URL()}
	a = startServe(t, args...)
	m := regexp.MustCompile(`admin token: (\S+)`).FindStringSubmatch(a.stdout.String())
	require.NotNil(t, m, "a first boot prints the admin token")
	return a, args, url, ns, m[1]
}

// twoBrokers starts brokers a and b of one team on one fresh PostgreSQL
// database and one embedded NATS, with members alice and bob; it returns
// the NATS, the admin token and the members' tokens.
func twoBrokers(t *testing.T) (a, b *serving, ns *natstest.Server, admin string, tokens map[string]string) {
	t.Helper()
	a, args, _, ns, admin := firstBroker(t)
	// Members are created before the second broker starts, so it starts
	// with them; members created later reach it through the database
	// (nats_members_test.go).
	tokens = map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		code, out := a.call(t, http.MethodPost, "/members", admin, map[string]any{"name": name})
		require.Equal(t, http.StatusOK, code, "%v", out)
		tokens[name] = out["token"].(string)
	}
	b = startServe(t, args...)
	return a, b, ns, admin, tokens
}

// TestTwoBrokersWithoutNATS: while NATS is down, a member on broker A
// still receives, in order, what another pushes on B (read from the
// store), and once NATS is back, live traffic goes on, nothing twice.
func TestTwoBrokersWithoutNATS(t *testing.T) {
	a, b, ns, _, tokens := twoBrokers(t)
	stream := openStream(t, a, tokens["alice"], "alice", "")
	var want []sseMessage
	push := func(body string) {
		code, out := b.call(t, http.MethodPost, "/push", tokens["bob"], map[string]any{"to": "alice", "body": body})
		require.Equal(t, http.StatusOK, code, "%v", out)
		want = append(want, sseMessage{id: out["message"].(map[string]any)["id"].(string), body: body})
	}
	push("before the outage")
	require.Equal(t, want, collect(t, stream, 1))

	ns.Stop()
	for i := range 5 {
		push(fmt.Sprintf("during the outage %d", i))
	}
	require.Equal(t, want[1:], collect(t, stream, 5))

	ns.Resume(t)
	for i := range 5 {
		push(fmt.Sprintf("after the outage %d", i))
	}
	require.Equal(t, want[6:], collect(t, stream, 5))
	select {
	case extra := <-stream:
		t.Fatalf("nothing more was pushed, got %v", extra)
	case <-time.After(300 * time.Millisecond):
	}
}

// assertOK reports whether a push was answered 200, failing the test
// (from any goroutine) when it was not.
func assertOK(t *testing.T, code int, out map[string]any) bool {
	if code != http.StatusOK {
		t.Errorf("push: %d %v", code, out)
		return false
	}
	return true
}

// TestNATSURLFlags: --nats-url needs --db-url and a nats:// URL, and a
// refused value is not repeated (it may carry a password).
func TestNATSURLFlags(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string
	}{
		{"without db-url", "--nats-url nats://127.0.0.1:4222", "needs --db-url"},
		{"not a nats URL", "--db-url postgres://x@h/db --nats-url http://u:secret@h:1", "must be nats://"},
		{"a path", "--db-url postgres://x@h/db --nats-url nats://u:secret@h:1/x", "must be nats://"},
		{"one of several bad", "--db-url postgres://x@h/db --nats-url nats://h:1,h2:secret", "must be nats://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			err := run(context.Background(), append([]string{"serve", "--config-path", t.TempDir() + "/svc.json"}, strings.Fields(tc.args)...), nil, io.Discard, &stderr)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, 2, ee.code)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error()+stderr.String(), "secret")
		})
	}
	// Accepted: one or several servers, with credentials.
	for _, v := range []string{"nats://127.0.0.1:4222", "nats://u:p@h:4222,tls://h2:4222", "nats://tok@h:4222/"} {
		got, err := parseNATSURL(v, true)
		require.NoError(t, err, v)
		require.Equal(t, v, got)
	}
	require.Equal(t, "nats://u:xxxxx@h:4222,nats://xxxxx@h2:1", redactNATSURL("nats://u:p@h:4222,nats://tok@h2:1"))
}

// metric reads one sample of s's /metrics, named with its labels as the
// text format writes them.
func metric(t *testing.T, s *serving, token, sample string) float64 {
	t.Helper()
	for line := range strings.Lines(string(s.get(t, "/metrics", token))) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no sample %s on /metrics", sample)
	return 0
}

// get reads path on s with a bearer token, failing the test unless it
// answers 200.
func (s *serving) get(t *testing.T, path, token string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return body
}

// writeFile writes data to path (a member's file) on s with a bearer
// token, failing the test unless it answers 200.
func (s *serving) writeFile(t *testing.T, path, token string, data []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+"/fs/write?path="+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
