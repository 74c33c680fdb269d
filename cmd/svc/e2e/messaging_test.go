package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	apiv1 "svc/gen/svc/v1"
)

// messageIDRE is a message id: the 16-digit commit sequence (DECISIONS).
var messageIDRE = regexp.MustCompile(`^[0-9]{16}$`)

// messageFields are the keys a Message may carry (proto/svc/v1).
// replyTo, hops and loopStopped are the reply chain the broker stamps on an
// agent's message (docs/RUNNER.md, Loop guard).
var messageFields = []string{"attachments", "body", "createdAt", "data", "from", "hops", "id", "level", "loopStopped", "meta", "replyTo", "title", "to"}

// requireMessage asserts the Message shape and returns it.
func requireMessage(t testing.TB, m obj) obj {
	t.Helper()
	for k := range m {
		require.Contains(t, messageFields, k, "unexpected Message field %q: %v", k, m)
	}
	for _, k := range []string{"id", "from", "title", "body", "level", "attachments", "createdAt"} {
		require.Contains(t, m, k, "Message lacks %q: %v", k, m)
	}
	require.Regexp(t, messageIDRE, m["id"])
	created, ok := m["createdAt"].(float64)
	require.True(t, ok, "createdAt is a JSON number: %v", m)
	require.InDelta(t, float64(time.Now().UnixMilli()), created, float64(time.Hour.Milliseconds()))
	_, ok = m["attachments"].([]any)
	require.True(t, ok, "attachments is a list: %v", m)
	return m
}

// tokenOf is the bearer token of a credential.
func tokenOf(c cred) string { return strings.TrimPrefix(c.authorization, "Bearer ") }

// transportOf names the transport a driver speaks.
func transportOf(d driver) string {
	if _, ok := d.(grpcDriver); ok {
		return "grpc"
	}
	return "rest"
}

// mustPush pushes and returns the PushResult's delivery and message.
func mustPush(t testing.TB, d driver, c cred, req obj) (delivery, msg obj) {
	t.Helper()
	res := mustCall(t, d, c, "Push", req)
	require.Equal(t, []string{"delivery", "message"}, keys(res))
	delivery, _ = res["delivery"].(obj)
	require.NotNil(t, delivery)
	msg, _ = res["message"].(obj)
	require.NotNil(t, msg)
	return delivery, requireMessage(t, msg)
}

// restPush pushes over REST without a testing.TB, for load goroutines.
func restPush(p *proc, tok string, req obj) (obj, error) {
	enc, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/push", bytes.NewReader(enc))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+tok)
	hr.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("push: status %d: %s", resp.StatusCode, raw)
	}
	var out obj
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	m, _ := out["message"].(obj)
	if m == nil {
		return nil, fmt.Errorf("push: no message in %s", raw)
	}
	return m, nil
}

// grpcPush pushes over gRPC without a testing.TB.
func grpcPush(c apiv1.BrokerClient, tok string, req *apiv1.PushRequest) (*apiv1.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	r, err := c.Push(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.GetMessage(), nil
}

// fence has fencer DM every watched member a marker and reads each stream up
// to its marker, returning what each stream received before it. Streams
// deliver in commit order, so anything sent earlier shows up here; nothing
// has to be waited out.
func fence(t testing.TB, d driver, fencer cred, streams map[string]msgStream, marker string) map[string][]obj {
	t.Helper()
	for name := range streams {
		mustPush(t, d, fencer, obj{"to": name, "body": marker})
	}
	got := map[string][]obj{}
	for name, s := range streams {
		for {
			m := s.nextMessage(t)
			if m["body"] == marker {
				break
			}
			got[name] = append(got[name], m)
		}
	}
	return got
}

func TestPushRouting(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		toks := map[string]string{"admin": tokenOf(admin)}
		for _, n := range []string{"alice", "bob", "carol", "dave", "fence"} {
			toks[n] = createMember(t, d, admin, n)
		}
		as := func(n string) cred { return bearer(toks[n]) }
		ops := mustCall(t, d, as("alice"), "CreateChannel", obj{"slug": "ops"})
		opsThread := "chan:" + ops["id"].(string)
		mustCall(t, d, as("bob"), "AddChannelMember", obj{"channel": ops["id"], "member": "bob"})
		old := mustCall(t, d, as("alice"), "CreateChannel", obj{"slug": "old"})
		mustCall(t, d, as("alice"), "ArchiveChannel", obj{"channel": old["id"]})

		// dave and fence never subscribe: they count as targets, not live.
		streams := map[string]msgStream{}
		for _, n := range []string{"admin", "alice", "bob", "carol"} {
			streams[n] = subscribeOn(t, p, transportOf(d), toks[n], n)
		}
		marker := 0
		expectReceived := func(t *testing.T, msg obj, want ...string) {
			t.Helper()
			marker++
			got := fence(t, d, as("fence"), streams, fmt.Sprintf("fence %d", marker))
			for name := range streams {
				if slices.Contains(want, name) {
					require.Equal(t, []obj{msg}, got[name], "%s receives the message once, as pushed", name)
				} else {
					require.Empty(t, got[name], "%s must not receive the message", name)
				}
			}
		}

		t.Run("routing", func(t *testing.T) {
			tests := []struct {
				name          string
				from          string
				req           obj
				wantTo        string // Message.to; "" for absent
				want          []string
				targets, live float64
			}{
				{name: "dm", from: "alice", req: obj{"to": "bob"}, wantTo: "bob", want: []string{"bob"}, targets: 1, live: 1},
				{name: "dm to self", from: "alice", req: obj{"to": "alice"}, wantTo: "alice", want: []string{"alice"}, targets: 1, live: 1},
				{name: "dm to an offline member", from: "alice", req: obj{"to": "dave"}, wantTo: "dave", targets: 1},
				{name: "dm from a manager", from: "admin", req: obj{"to": "carol"}, wantTo: "carol", want: []string{"carol"}, targets: 1, live: 1},
				{name: "broadcast", from: "alice", req: obj{}, want: []string{"admin", "bob", "carol"}, targets: 5, live: 3},
				{name: "broadcast with null to", from: "carol", req: obj{"to": nil}, want: []string{"admin", "alice", "bob"}, targets: 5, live: 3},
				{name: "general thread is a broadcast", from: "bob", req: obj{"data": obj{"thread": "chan:general"}}, want: []string{"admin", "alice", "carol"}, targets: 5, live: 3},
				{name: "channel post", from: "alice", req: obj{"data": obj{"thread": opsThread}}, want: []string{"bob"}, targets: 1, live: 1},
				{name: "channel post by a member", from: "bob", req: obj{"data": obj{"thread": opsThread, "extra": "kept"}}, want: []string{"alice"}, targets: 1, live: 1},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					req := obj{"body": "routing: " + tc.name, "title": "t " + tc.name}
					for k, v := range tc.req {
						req[k] = v
					}
					delivery, msg := mustPush(t, d, as(tc.from), req)
					require.Equal(t, obj{"targets": tc.targets, "live": tc.live}, delivery)
					require.Equal(t, tc.from, msg["from"], "from is the caller")
					require.Equal(t, req["body"], msg["body"])
					require.Equal(t, req["title"], msg["title"])
					require.Equal(t, "info", msg["level"], "level defaults to info")
					if tc.wantTo == "" {
						require.Nil(t, msg["to"], "only a DM names a recipient")
					} else {
						require.Equal(t, tc.wantTo, msg["to"])
					}
					if data, ok := tc.req["data"]; ok {
						require.Equal(t, data, msg["data"])
					}
					expectReceived(t, msg, tc.want...)
				})
			}
		})

		t.Run("a post naming the slug carries the stable id", func(t *testing.T) {
			_, msg := mustPush(t, d, as("alice"), obj{"body": "by slug", "data": obj{"thread": "chan:ops"}})
			require.Equal(t, obj{"thread": opsThread}, msg["data"])
			expectReceived(t, msg, "bob")
		})

		t.Run("levels", func(t *testing.T) {
			for _, lvl := range []string{"debug", "info", "notice", "warning", "error", "critical"} {
				_, msg := mustPush(t, d, as("alice"), obj{"to": "dave", "body": "at " + lvl, "level": lvl})
				require.Equal(t, lvl, msg["level"])
			}
		})

		t.Run("bounds", func(t *testing.T) {
			at := make([]string, 64)
			for i := range at {
				at[i] = fmt.Sprintf("/alice/f%d", i)
				fsWrite(t, p, toks["alice"], at[i], "overwrite", "text/plain", []byte("f"))
			}
			long := "/alice/" + strings.Repeat("a", 255) + "/" + strings.Repeat("b", 255) + "/" +
				strings.Repeat("c", 255) + "/" + strings.Repeat("d", 249) // 1024 bytes
			require.Len(t, long, 1024)
			fsWrite(t, p, toks["alice"], long, "overwrite", "text/plain", []byte("long"))
			for _, req := range []obj{
				{"body": strings.Repeat("b", 64*1024)},
				{"body": "x", "title": strings.Repeat("t", 1024)},
				{"body": "x", "attachments": at},
				{"body": "x", "attachments": []string{long}},
			} {
				req["to"] = "dave"
				_, msg := mustPush(t, d, as("alice"), req)
				require.Equal(t, req["body"], msg["body"])
			}
		})

		t.Run("attachments in own home", func(t *testing.T) {
			fsWrite(t, p, toks["alice"], "/alice/notes.txt", "overwrite", "text/plain", []byte("notes"))
			fsWrite(t, p, toks["bob"], "/bob/report.md", "overwrite", "text/markdown", []byte("report"))
			_, msg := mustPush(t, d, as("alice"), obj{"to": "dave", "body": "see file", "attachments": []string{"/alice/notes.txt"}})
			require.Equal(t, []any{"/alice/notes.txt"}, msg["attachments"])
			// members.manage may attach from any home.
			_, msg = mustPush(t, d, admin, obj{"to": "dave", "body": "see file", "attachments": []string{"/bob/report.md"}})
			require.Equal(t, []any{"/bob/report.md"}, msg["attachments"])
		})

		t.Run("refused", func(t *testing.T) {
			many := make([]string, 65)
			for i := range many {
				many[i] = fmt.Sprintf("/alice/f%d", i)
			}
			tests := []struct {
				name string
				from string
				req  obj
				code string
			}{
				{name: "unknown level", from: "alice", req: obj{"body": "x", "level": "loud"}, code: "bad_request"},
				{name: "level in capitals", from: "alice", req: obj{"body": "x", "level": "INFO"}, code: "bad_request"},
				{name: "missing body", from: "alice", req: obj{"to": "bob", "title": "only a title"}, code: "bad_request"},
				{name: "empty body", from: "alice", req: obj{"to": "bob", "body": ""}, code: "bad_request"},
				{name: "unknown recipient", from: "alice", req: obj{"to": "nobody", "body": "x"}, code: "bad_request"},
				{name: "objective thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": "obj:1"}}, code: "bad_request"},
				{name: "hook thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": "hook:gh"}}, code: "bad_request"},
				{name: "tool thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": "tool:t"}}, code: "bad_request"},
				{name: "secret thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": "secret:s"}}, code: "bad_request"},
				{name: "mistyped channel thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": "Chan:" + ops["id"].(string)}}, code: "bad_request"},
				{name: "free-form thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": "ops"}}, code: "bad_request"},
				{name: "dm thread id", from: "alice", req: obj{"body": "x", "data": obj{"thread": "dm:alice:bob"}}, code: "bad_request"},
				{name: "non-string thread", from: "alice", req: obj{"body": "x", "data": obj{"thread": 7}}, code: "bad_request"},
				{name: "channel thread on a dm", from: "alice", req: obj{"to": "bob", "body": "x", "data": obj{"thread": opsThread}}, code: "bad_request"},
				{name: "title over 1 KiB", from: "alice", req: obj{"body": "x", "title": strings.Repeat("t", 1025)}, code: "bad_request"},
				{name: "body over 64 KiB", from: "alice", req: obj{"body": strings.Repeat("b", 64*1024+1)}, code: "bad_request"},
				{name: "65 attachments", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": many}, code: "bad_request"},
				{name: "relative attachment", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"alice/x.txt"}}, code: "bad_request"},
				{name: "unclean attachment", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice/../bob/x.txt"}}, code: "bad_request"},
				{name: "attachment with a double slash", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice//x.txt"}}, code: "bad_request"},
				{name: "attachment with a dot segment", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice/./x.txt"}}, code: "bad_request"},
				{name: "attachment with NUL", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice/x\x00.txt"}}, code: "bad_request"},
				{name: "attachment over 1024 bytes", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice/" + strings.Repeat("a", 1018)}}, code: "bad_request"},
				{name: "absent attachment", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice/absent.txt"}}, code: "bad_request"},
				{name: "directory attachment", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/alice/" + strings.Repeat("a", 255)}}, code: "bad_request"},
				{name: "data over 64 KiB", from: "alice", req: obj{"to": "bob", "body": "x", "data": obj{"blob": strings.Repeat("d", 64*1024)}}, code: "bad_request"},
				{name: "general thread on a dm", from: "alice", req: obj{"to": "bob", "body": "x", "data": obj{"thread": "chan:general"}}, code: "bad_request"},
				{name: "attachment in another home", from: "alice", req: obj{"to": "bob", "body": "x", "attachments": []string{"/bob/x.txt"}}, code: "forbidden"},
				{name: "channel post by a non-member", from: "carol", req: obj{"body": "x", "data": obj{"thread": opsThread}}, code: "forbidden"},
				{name: "channel post by a non-member manager", from: "admin", req: obj{"body": "x", "data": obj{"thread": opsThread}}, code: "forbidden"},
				{name: "unknown channel", from: "alice", req: obj{"body": "x", "data": obj{"thread": "chan:nope"}}, code: "not_found"},
				{name: "archived channel", from: "alice", req: obj{"body": "x", "data": obj{"thread": "chan:" + old["id"].(string)}}, code: "gone"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					mustFail(t, d, as(tc.from), "Push", tc.req, tc.code)
				})
			}
			// A refused push reaches nobody.
			marker++
			for name, got := range fence(t, d, as("fence"), streams, fmt.Sprintf("fence %d", marker)) {
				require.Empty(t, got, "%s received a refused push", name)
			}
		})

		if transportOf(d) == "rest" {
			t.Run("from cannot be forged", func(t *testing.T) {
				r := p.do(t, http.MethodPost, "/push", obj{"to": "bob", "body": "forged?", "from": "mallory"}, withBearer(toks["alice"]))
				require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
				msg := requireMessage(t, r.body["message"].(obj))
				require.Equal(t, "alice", msg["from"])
				expectReceived(t, msg, "bob")
			})
			t.Run("body over 1 MiB", func(t *testing.T) {
				r := p.do(t, http.MethodPost, "/push", obj{"to": "dave", "body": strings.Repeat("b", 1<<20)}, withBearer(toks["alice"]))
				requireRESTError(t, r, "payload_too_large")
			})
			t.Run("no request body", func(t *testing.T) {
				requireRESTError(t, p.do(t, http.MethodPost, "/push", nil, withBearer(toks["alice"])), "bad_request")
				requireRESTError(t, p.do(t, http.MethodPost, "/push", []byte("{"), withBearer(toks["alice"])), "bad_request")
			})
		}
	})
}

func TestSubscribe(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	bob := createMember(t, d, admin, "bob")
	alice := createMember(t, d, admin, "alice")

	t.Run("sse framing", func(t *testing.T) {
		s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
		require.Equal(t, "no-cache", s.resp.Header.Get("Cache-Control"))
		require.Equal(t, "1", s.resp.Header.Get("X-SVC-Protocol"), "every response carries the protocol header")
		s.requireReady(t, "bob")
		var pushed []obj
		for i, req := range []obj{
			{"to": "bob", "body": "one"},
			{"to": "bob", "body": "two", "title": "T", "level": "warning", "data": obj{"k": []any{1.0, "x"}}},
			{"body": "to everyone"},
			{"to": "bob", "body": "multi\nline\nbody"},
		} {
			_, msg := mustPush(t, d, admin, req)
			pushed = append(pushed, msg)
			ev := s.next(t)
			got := requireMessageEvent(t, ev)
			require.Equal(t, []string{"id: " + msg["id"].(string), "event: message", "data: " + ev.data[0]}, ev.lines,
				"message %d is id:, event:, one data: line", i)
			require.Equal(t, msg, requireMessage(t, got), "the stream carries the pushed Message")
		}
		for i := 1; i < len(pushed); i++ {
			require.Less(t, pushed[i-1]["id"], pushed[i]["id"], "ids sort in commit order")
		}
	})

	t.Run("sse refused", func(t *testing.T) {
		tests := []struct {
			name string
			path string
			opts []reqOpt
			code string
		}{
			{name: "no name", path: "/subscribe", opts: []reqOpt{withBearer(bob)}, code: "bad_request"},
			{name: "empty name", path: "/subscribe?name=", opts: []reqOpt{withBearer(bob)}, code: "bad_request"},
			{name: "another member's name", path: "/subscribe?name=alice", opts: []reqOpt{withBearer(bob)}, code: "forbidden"},
			{name: "no credential", path: "/subscribe?name=bob", code: "unauthenticated"},
			{name: "unknown token", path: "/subscribe?name=bob", opts: []reqOpt{withBearer(randomToken(t))}, code: "unauthenticated"},
			{name: "unknown session", path: "/subscribe?name=bob", opts: []reqOpt{withSession(randomSecret(t))}, code: "unauthenticated"},
			{name: "other protocol", path: "/subscribe?name=bob", opts: []reqOpt{withBearer(bob), withHeader("X-SVC-Protocol", "2")}, code: "unsupported_protocol"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				p.sseFail(t, tc.path, tc.code, tc.opts...)
			})
		}
	})

	t.Run("sse with a session cookie", func(t *testing.T) {
		session := login(t, d, enroll(t, d, admin, "bob"))
		s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withSession(session))
		s.requireReady(t, "bob")
		_, msg := mustPush(t, d, bearer(alice), obj{"to": "bob", "body": "cookie"})
		require.Equal(t, msg, s.nextMessage(t))
		// The human plane pushes and reads history with the cookie too;
		// a cross-origin push by cookie is refused.
		r := p.do(t, http.MethodPost, "/push", obj{"to": "alice", "body": "from the browser"}, withSession(session), withHeader("Origin", p.base))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		require.Equal(t, "bob", r.body["message"].(obj)["from"])
		requireRESTError(t, p.do(t, http.MethodPost, "/push", obj{"to": "alice", "body": "csrf"}, withSession(session), withHeader("Origin", "http://evil.example")), "forbidden")
		r = p.do(t, http.MethodGet, "/history?with=alice&limit=1", nil, withSession(session))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		require.Equal(t, "from the browser", listOf(t, r.body, "messages")[0]["body"], "the refused push left nothing")
	})

	t.Run("many streams per member", func(t *testing.T) {
		s1 := p.subscribeSSE(t, bob, "bob", "")
		s2 := p.subscribeSSE(t, bob, "bob", "")
		g := p.subscribeGRPC(t, bob, "bob", "")
		delivery, msg := mustPush(t, d, bearer(alice), obj{"to": "bob", "body": "to all three"})
		require.Equal(t, obj{"targets": 1.0, "live": 1.0}, delivery, "live counts members, not streams")
		for _, s := range []msgStream{s1, s2, g} {
			require.Equal(t, msg, s.nextMessage(t))
		}
	})

	t.Run("grpc", func(t *testing.T) {
		g := p.subscribeGRPC(t, bob, "bob", "")
		for _, body := range []string{"g1", "g2"} {
			_, msg := mustPush(t, d, bearer(alice), obj{"to": "bob", "body": body, "data": obj{"n": 1.0}})
			require.Equal(t, msg, requireMessage(t, g.nextMessage(t)))
		}
		// name may be left out over gRPC: the stream is the caller's.
		g2, ready, err := p.grpcSubscribe(t, bearer(alice), &apiv1.SubscribeRequest{})
		require.NoError(t, err)
		require.Equal(t, "alice", ready.GetReady().GetMember())
		_, msg := mustPush(t, d, bearer(bob), obj{"to": "alice", "body": "nameless"})
		require.Equal(t, msg, g2.nextMessage(t))
	})

	t.Run("grpc refused", func(t *testing.T) {
		tests := []struct {
			name string
			c    cred
			req  *apiv1.SubscribeRequest
			code string
		}{
			{name: "another member's name", c: bearer(bob), req: &apiv1.SubscribeRequest{Name: "alice"}, code: "forbidden"},
			{name: "no credential", c: anonymous, req: &apiv1.SubscribeRequest{Name: "bob"}, code: "unauthenticated"},
			{name: "unknown token", c: bearer(randomToken(t)), req: &apiv1.SubscribeRequest{Name: "bob"}, code: "unauthenticated"},
			{name: "malformed last id", c: bearer(bob), req: &apiv1.SubscribeRequest{Name: "bob", LastId: "abc"}, code: "bad_request"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, _, err := p.grpcSubscribe(t, tc.c, tc.req)
				requireGRPCError(t, err, tc.code)
			})
		}
	})
}

// TestSubscribeResume drops a stream mid-flow while a publisher keeps
// pushing and resumes it by its last id, over each way of naming it.
func TestSubscribeResume(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	d := restDriver{p}

	tests := []struct {
		name   string
		grpc   bool
		resume func(t *testing.T, tok, member, lastID string) msgStream
	}{
		{name: "Last-Event-ID header", resume: func(t *testing.T, tok, member, lastID string) msgStream {
			return p.subscribeSSE(t, tok, member, "", withHeader("Last-Event-ID", lastID))
		}},
		{name: "lastEventId query", resume: func(t *testing.T, tok, member, lastID string) msgStream {
			return p.subscribeSSE(t, tok, member, "&lastEventId="+lastID)
		}},
		{name: "grpc last_id", grpc: true, resume: func(t *testing.T, tok, member, lastID string) msgStream {
			return p.subscribeGRPC(t, tok, member, lastID)
		}},
	}
	for i, tc := range tests {
		member := fmt.Sprintf("rx%d", i)
		tok := createMember(t, d, bearer(adminTok), member)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const total, readFirst = 80, 10
			var first msgStream
			if tc.grpc {
				first = p.subscribeGRPC(t, tok, member, "")
			} else {
				first = p.subscribeSSE(t, tok, member, "")
			}

			// The publisher paces itself a little so the drop and the
			// resume both happen while it is still pushing.
			var mu sync.Mutex
			var acked []string
			pubErr := make(chan error, 1)
			go func() {
				for n := range total {
					m, err := restPush(p, adminTok, obj{"to": member, "body": fmt.Sprintf("m%03d", n)})
					if err != nil {
						pubErr <- err
						return
					}
					mu.Lock()
					acked = append(acked, m["id"].(string))
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
				}
				pubErr <- nil
			}()
			ackedN := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

			var got []string
			for range readFirst {
				got = append(got, first.nextMessage(t)["id"].(string))
			}
			first.close()
			require.Eventually(t, func() bool { return ackedN() >= readFirst+20 }, callTimeout, 5*time.Millisecond,
				"the publisher keeps pushing while the subscriber is away")
			second := tc.resume(t, tok, member, got[len(got)-1])
			for len(got) < total {
				got = append(got, second.nextMessage(t)["id"].(string))
			}
			select {
			case err := <-pubErr:
				require.NoError(t, err)
			case <-time.After(callTimeout):
				t.Fatal("publisher did not finish")
			}
			mu.Lock()
			require.Equal(t, acked, got, "every message once, in commit order")
			mu.Unlock()

			// Then live.
			_, msg := mustPush(t, d, bearer(adminTok), obj{"to": member, "body": "live"})
			require.Equal(t, msg, second.nextMessage(t))

			// Resuming from 0 replays the whole backlog.
			from0 := tc.resume(t, tok, member, "0")
			for _, id := range append(got, msg["id"].(string)) {
				require.Equal(t, id, from0.nextMessage(t)["id"])
			}
		})
	}

	t.Run("replay delivers what was addressed then", func(t *testing.T) {
		t.Parallel()
		admin := bearer(adminTok)
		alice := bearer(createMember(t, d, admin, "rp-alice"))
		bobTok := createMember(t, d, admin, "rp-bob")
		carolTok := createMember(t, d, admin, "rp-carol")
		ch := mustCall(t, d, alice, "CreateChannel", obj{"slug": "rp"})
		thread := obj{"thread": "chan:" + ch["id"].(string)}
		mustCall(t, d, bearer(bobTok), "AddChannelMember", obj{"channel": ch["id"], "member": "rp-bob"})
		bob := p.subscribeSSE(t, bobTok, "rp-bob", "")
		carol := p.subscribeSSE(t, carolTok, "rp-carol", "")

		_, m1 := mustPush(t, d, alice, obj{"body": "p1", "data": thread})
		require.Equal(t, m1, bob.nextMessage(t))
		bob.close()
		_, m2 := mustPush(t, d, alice, obj{"body": "p2 while bob is away", "data": thread})
		mustCall(t, d, bearer(bobTok), "RemoveChannelMember", obj{"channel": ch["id"], "name": "rp-bob"})
		mustPush(t, d, alice, obj{"body": "p3 after bob left", "data": thread})
		// A live stream follows membership at once.
		mustCall(t, d, bearer(carolTok), "AddChannelMember", obj{"channel": ch["id"], "member": "rp-carol"})
		_, m4 := mustPush(t, d, alice, obj{"body": "p4 after carol joined", "data": thread})
		require.Equal(t, m4, carol.nextMessage(t), "carol gets posts from her join on, none before")
		// (No broadcasts here: they would reach the parallel subtests.)
		_, m5 := mustPush(t, d, alice, obj{"to": "rp-bob", "body": "dm to bob"})
		_, m6 := mustPush(t, d, alice, obj{"to": "rp-carol", "body": "dm to carol"})
		require.Equal(t, m6, carol.nextMessage(t))

		bob2 := p.subscribeSSE(t, bobTok, "rp-bob", "", withHeader("Last-Event-ID", m1["id"].(string)))
		require.Equal(t, m2, bob2.nextMessage(t), "addressed to bob when committed")
		require.Equal(t, m5, bob2.nextMessage(t), "p3 and p4 were not addressed to bob")
		carol0 := p.subscribeSSE(t, carolTok, "rp-carol", "&lastEventId=0")
		require.Equal(t, m4, carol0.nextMessage(t), "p1 and p2 were not addressed to carol")
		require.Equal(t, m6, carol0.nextMessage(t))
		alice0 := p.subscribeGRPC(t, tokenOf(alice), "rp-alice", "0")
		_, m7 := mustPush(t, d, bearer(bobTok), obj{"to": "rp-alice", "body": "dm"})
		require.Equal(t, m7, alice0.nextMessage(t), "a sender's own posts are never replayed to it")
	})

	t.Run("edge last ids", func(t *testing.T) {
		t.Parallel()
		// Any decimal of up to 19 digits names a position (DECISIONS).
		tok := createMember(t, d, bearer(adminTok), "edge-resume")
		for _, v := range []string{"0", "0000000000000000", "0000000000000000000", "9999999999999999999"} {
			t.Run(v, func(t *testing.T) {
				p.subscribeSSE(t, tok, "edge-resume", "", withHeader("Last-Event-ID", v)).close()
				p.subscribeSSE(t, tok, "edge-resume", "&lastEventId="+v).close()
				p.subscribeGRPC(t, tok, "edge-resume", v).close()
			})
		}
	})

	t.Run("malformed last id", func(t *testing.T) {
		t.Parallel()
		tok := createMember(t, d, bearer(adminTok), "bad-resume")
		for _, v := range []string{"abc", "-1", "1.5", "0x10", "12345678901234567890", "1 2", "１"} {
			t.Run(v, func(t *testing.T) {
				p.sseFail(t, "/subscribe?name=bad-resume", "bad_request", withBearer(tok), withHeader("Last-Event-ID", v))
				q := strings.NewReplacer(" ", "%20").Replace(v)
				p.sseFail(t, "/subscribe?name=bad-resume&lastEventId="+q, "bad_request", withBearer(tok))
				_, _, err := p.grpcSubscribe(t, bearer(tok), &apiv1.SubscribeRequest{Name: "bad-resume", LastId: v})
				requireGRPCError(t, err, "bad_request")
			})
		}
	})
}

// stallTimeout is how long a round of pushes may take before the test
// calls the publishers stalled. A stall is forever; a round on a loaded
// machine under -race has taken over 10 s, so the bound only has to be
// far beyond that, not tight.
const stallTimeout = time.Minute

// TestSlowSubscriber has one member's stream stop reading while publishers
// push far more than a stream's queue holds to it and to a healthy member.
func TestSlowSubscriber(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	d := restDriver{p}
	slowTok := createMember(t, d, bearer(adminTok), "slow")
	fastTok := createMember(t, d, bearer(adminTok), "fast")

	// A small receive window keeps the client side from soaking up the
	// backlog; the broker's socket buffer still holds a few MB, so the
	// publishers go on in rounds until the broker cuts the stalled stream
	// (the roster stops counting it) rather than guessing that size.
	slow := p.openSSE(t, "/subscribe?name=slow", sseOpts{rcvBuf: 4096}, withBearer(slowTok))
	slow.requireReady(t, "slow")
	fast := p.subscribeSSE(t, fastTok, "fast", "")
	require.Equal(t, 1.0, presenceOf(t, p, bearer(adminTok), "slow")["connected"])

	var fastMu sync.Mutex
	var fastIDs []string
	go func() {
		for ev := range fast.events {
			if ev.event == "message" {
				fastMu.Lock()
				fastIDs = append(fastIDs, ev.id)
				fastMu.Unlock()
			}
		}
	}()

	const publishers, perRound, maxTotal = 4, 10, 3000
	pad := strings.Repeat("x", 4*1024)
	var acked []string
	var mu sync.Mutex
	start := time.Now()
	for round := 0; ; round++ {
		errs := make(chan error, publishers)
		var wg sync.WaitGroup
		for w := range publishers {
			wg.Go(func() {
				for n := range perRound {
					m, err := restPush(p, adminTok, obj{"body": fmt.Sprintf("r%03d-w%d-%02d %s", round, w, n, pad)})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					acked = append(acked, m["id"].(string))
					mu.Unlock()
				}
			})
		}
		roundDone := make(chan struct{})
		go func() { wg.Wait(); close(roundDone) }()
		select {
		case <-roundDone:
		case <-time.After(stallTimeout):
			t.Fatalf("publishers stalled behind a slow subscriber: round %d took over %s", round, stallTimeout)
		}
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		if presenceOf(t, p, bearer(adminTok), "slow")["connected"] == 0.0 {
			break
		}
		require.Less(t, len(acked), maxTotal, "the broker never cut the stalled stream")
	}
	total := len(acked)
	t.Logf("%d pushes acknowledged in %s before the stalled stream was cut", total, time.Since(start))
	require.Greater(t, total, 256, "a stream holds 256 messages before it is cut")
	slices.Sort(acked)

	deadline := time.Now().Add(callTimeout)
	for {
		fastMu.Lock()
		n := len(fastIDs)
		fastMu.Unlock()
		if n >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fastMu.Lock()
	require.Equal(t, acked, fastIDs, "the healthy subscriber got every message in order, once")
	fastMu.Unlock()

	// The stalled stream was cut: reading it now ends before the backlog
	// does, and what it carried is a gapless prefix.
	got := slow.drain(t, callTimeout)
	require.Less(t, len(got), total, "the broker must end a stream that fell a queue behind")
	require.True(t, isEOF(slow.endErr()), "the broker ends the response: %v", slow.endErr())
	gotIDs := make([]string, len(got))
	for i, m := range got {
		gotIDs[i] = m["id"].(string)
	}
	require.Equal(t, acked[:len(got)], gotIDs, "the cut stream delivered a gapless prefix")
	last := "0"
	if len(got) > 0 {
		last = gotIDs[len(gotIDs)-1]
	}
	t.Logf("the slow stream delivered %d messages before it ended", len(got))

	resumed := p.subscribeSSE(t, slowTok, "slow", "", withHeader("Last-Event-ID", last))
	for i := len(got); i < total; i++ {
		m := resumed.nextMessage(t)
		require.Equal(t, acked[i], m["id"], "resume replays the rest in order, once")
	}
	_, msg := mustPush(t, d, bearer(fastTok), obj{"to": "slow", "body": "live again"})
	require.Equal(t, msg, resumed.nextMessage(t))

	// The history cap: with more than 500 broadcasts, a page holds 500.
	for len(acked) <= 500 {
		_, m := mustPush(t, d, bearer(adminTok), obj{"body": "filler"})
		acked = append(acked, m["id"].(string))
	}
	h := mustCall(t, d, bearer(slowTok), "History", obj{"limit": 1000})
	msgs := listOf(t, h, "messages")
	require.Len(t, msgs, 500, "limit is capped at 500")
	require.Equal(t, acked[len(acked)-1], msgs[0]["id"], "newest first")
	require.Equal(t, acked[len(acked)-500], msgs[499]["id"])
}

func TestHistory(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		toks := map[string]string{"admin": tokenOf(admin)}
		for _, n := range []string{"alice", "bob", "carol"} {
			toks[n] = createMember(t, d, admin, n)
		}
		as := func(n string) cred { return bearer(toks[n]) }
		ops := mustCall(t, d, as("alice"), "CreateChannel", obj{"slug": "ops"})
		opsID := ops["id"].(string)
		mustCall(t, d, as("bob"), "AddChannelMember", obj{"channel": opsID, "member": "bob"})

		// Pushed in this order; sent[body] is the Message as pushed.
		sent := map[string]obj{}
		for _, s := range []struct {
			from, body string
			req        obj
		}{
			{"alice", "ab1", obj{"to": "bob"}},
			{"bob", "ba1", obj{"to": "alice"}},
			{"alice", "ac1", obj{"to": "carol"}},
			{"carol", "ca1", obj{"to": "alice"}},
			{"alice", "g1", obj{}},
			{"alice", "o1", obj{"data": obj{"thread": "chan:" + opsID}}},
			{"bob", "o2", obj{"data": obj{"thread": "chan:" + opsID}}},
			{"alice", "ab2", obj{"to": "bob"}},
			{"admin", "g2", obj{"data": obj{"thread": "chan:general"}}},
			{"bob", "bb", obj{"to": "bob"}},
		} {
			req := obj{"body": s.body}
			for k, v := range s.req {
				req[k] = v
			}
			_, msg := mustPush(t, d, as(s.from), req)
			sent[s.body] = msg
		}

		t.Run("selectors", func(t *testing.T) {
			// before is exclusive and messages can share a millisecond.
			cut := sent["ab2"]["createdAt"].(float64)
			beforeWant := []string{}
			for _, b := range []string{"ba1", "ab1"} {
				if sent[b]["createdAt"].(float64) < cut {
					beforeWant = append(beforeWant, b)
				}
			}
			tests := []struct {
				name   string
				caller string
				query  obj
				want   []string // bodies, newest first
			}{
				{name: "dm thread", caller: "alice", query: obj{"with": "bob"}, want: []string{"ab2", "ba1", "ab1"}},
				{name: "dm thread from the other side", caller: "bob", query: obj{"with": "alice"}, want: []string{"ab2", "ba1", "ab1"}},
				{name: "another dm thread", caller: "alice", query: obj{"with": "carol"}, want: []string{"ca1", "ac1"}},
				{name: "third party sees only its own dms", caller: "carol", query: obj{"with": "alice"}, want: []string{"ca1", "ac1"}},
				{name: "third party with no dms", caller: "carol", query: obj{"with": "bob"}, want: []string{}},
				{name: "manager with no dms", caller: "admin", query: obj{"with": "bob"}, want: []string{}},
				{name: "dm to self", caller: "bob", query: obj{"with": "bob"}, want: []string{"bb"}},
				{name: "channel by id", caller: "bob", query: obj{"channel": opsID}, want: []string{"o2", "o1"}},
				{name: "channel by slug", caller: "alice", query: obj{"channel": "ops"}, want: []string{"o2", "o1"}},
				{name: "channel read by a non-member manager", caller: "admin", query: obj{"channel": opsID}, want: []string{"o2", "o1"}},
				{name: "general scrollback", caller: "carol", query: obj{}, want: []string{"g2", "g1"}},
				{name: "general by channel id", caller: "carol", query: obj{"channel": "general"}, want: []string{"g2", "g1"}},
				{name: "own dm thread by its thread id", caller: "bob", query: obj{"thread": "dm:alice:bob"}, want: []string{"ab2", "ba1", "ab1"}},
				{name: "limit", caller: "alice", query: obj{"with": "bob", "limit": 2}, want: []string{"ab2", "ba1"}},
				{name: "before", caller: "alice", query: obj{"with": "bob", "before": cut}, want: beforeWant},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					msgs := listOf(t, mustCall(t, d, as(tc.caller), "History", tc.query), "messages")
					got := make([]string, 0, len(msgs))
					for _, m := range msgs {
						got = append(got, m["body"].(string))
						require.Equal(t, sent[m["body"].(string)], m, "history holds the Message as pushed")
					}
					require.Equal(t, tc.want, got)
				})
			}
		})

		t.Run("refused", func(t *testing.T) {
			tests := []struct {
				name   string
				caller string
				query  obj
				code   string
			}{
				{name: "non-member channel", caller: "carol", query: obj{"channel": opsID}, code: "forbidden"},
				{name: "non-member channel by slug", caller: "carol", query: obj{"channel": "ops"}, code: "forbidden"},
				{name: "unknown channel", caller: "alice", query: obj{"channel": "nope"}, code: "not_found"},
				{name: "with and channel", caller: "alice", query: obj{"with": "bob", "channel": opsID}, code: "bad_request"},
				{name: "with and thread", caller: "alice", query: obj{"with": "bob", "thread": "obj:1"}, code: "bad_request"},
				{name: "channel and thread", caller: "alice", query: obj{"channel": opsID, "thread": "obj:1"}, code: "bad_request"},
				{name: "thread of an unknown objective", caller: "alice", query: obj{"thread": "obj:nope"}, code: "not_found"},
				{name: "another pair's dm thread", caller: "carol", query: obj{"thread": "dm:alice:bob"}, code: "forbidden"},
				{name: "another pair's dm thread, even for a manager", caller: "admin", query: obj{"thread": "dm:alice:bob"}, code: "forbidden"},
				{name: "malformed dm thread", caller: "alice", query: obj{"thread": "dm:alice"}, code: "bad_request"},
				{name: "registry thread", caller: "alice", query: obj{"thread": "hook:github"}, code: "forbidden"},
				{name: "thread of no known kind", caller: "alice", query: obj{"thread": "nope:1"}, code: "bad_request"},
				{name: "limit zero", caller: "alice", query: obj{"limit": 0}, code: "bad_request"},
				{name: "negative limit", caller: "alice", query: obj{"limit": -1}, code: "bad_request"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					mustFail(t, d, as(tc.caller), "History", tc.query, tc.code)
				})
			}
		})

		t.Run("paging", func(t *testing.T) {
			for i := range 55 {
				mustPush(t, d, as("bob"), obj{"body": fmt.Sprintf("p%02d", i)})
			}
			all := listOf(t, mustCall(t, d, as("carol"), "History", obj{"limit": 501}), "messages")
			require.Len(t, all, 57, "a limit over 500 is cut, not refused")
			for i := 1; i < len(all); i++ {
				require.Greater(t, all[i-1]["id"], all[i]["id"], "newest first, in commit order")
				require.GreaterOrEqual(t, all[i-1]["createdAt"], all[i]["createdAt"])
			}
			def := listOf(t, mustCall(t, d, as("carol"), "History", obj{}), "messages")
			require.Equal(t, all[:50], def, "limit defaults to 50")

			before := all[20]["createdAt"].(float64)
			var want []obj
			for _, m := range all {
				if m["createdAt"].(float64) < before && len(want) < 10 {
					want = append(want, m)
				}
			}
			page := listOf(t, mustCall(t, d, as("carol"), "History", obj{"limit": 10, "before": before}), "messages")
			require.Equal(t, want, page, "before keeps messages created strictly earlier")
		})

		if transportOf(d) == "rest" {
			t.Run("malformed query", func(t *testing.T) {
				for _, q := range []string{"limit=abc", "limit=1.5", "before=abc"} {
					requireRESTError(t, p.do(t, http.MethodGet, "/history?"+q, nil, withBearer(toks["alice"])), "bad_request")
				}
			})
			// Bodies may be 64 KiB and a page 500 messages: a page of
			// several MB is an ordinary answer (over gRPC the client sets
			// its own receive limit).
			t.Run("a page over 4 MiB", func(t *testing.T) {
				big1 := createMember(t, d, admin, "big1")
				createMember(t, d, admin, "big2")
				pad := strings.Repeat("b", 60000)
				for i := range 80 {
					mustPush(t, d, bearer(big1), obj{"to": "big2", "body": fmt.Sprintf("%02d %s", i, pad)})
				}
				msgs := listOf(t, mustCall(t, d, bearer(big1), "History", obj{"with": "big2", "limit": 80}), "messages")
				require.Len(t, msgs, 80)
				require.Equal(t, "79 "+pad, msgs[0]["body"])
			})
		}
	})
}

// TestSlowGRPCSubscriber stalls a gRPC Subscribe stream (a fixed 64 KiB
// HTTP/2 window, so the broker's sends back up at once) while one member's
// DMs pile up: the broker ends the stream with UNAVAILABLE and a resume by
// last_id gets the rest, in order, once.
func TestSlowGRPCSubscriber(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	d := restDriver{p}
	slowTok := createMember(t, d, bearer(adminTok), "slow")

	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64*1024), grpc.WithInitialConnWindowSize(64*1024))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	slow, ready, err := grpcSubscribeOn(t, apiv1.NewBrokerClient(conn), bearer(slowTok), &apiv1.SubscribeRequest{Name: "slow"})
	require.NoError(t, err)
	require.Equal(t, "slow", ready.GetReady().GetMember())

	pad := strings.Repeat("y", 1024)
	var acked []string
	for round := 0; presenceOf(t, p, bearer(adminTok), "slow")["connected"] != 0.0; round++ {
		require.Less(t, len(acked), 3000, "the broker never cut the stalled gRPC stream")
		for n := range 50 {
			_, m := mustPush(t, d, bearer(adminTok), obj{"to": "slow", "body": fmt.Sprintf("r%03d-%02d %s", round, n, pad)})
			acked = append(acked, m["id"].(string))
		}
	}
	t.Logf("stalled gRPC stream cut after %d DMs", len(acked))

	var got []string
	var end error
	deadline := time.After(callTimeout)
	for end == nil {
		select {
		case r, ok := <-slow.events:
			if !ok {
				slow.mu.Lock()
				end = slow.err
				slow.mu.Unlock()
				break
			}
			got = append(got, r.GetMessage().GetId())
		case <-deadline:
			t.Fatalf("the cut gRPC stream did not end (%d messages read)", len(got))
		}
	}
	requireGRPCStatus(t, end, codes.Unavailable)
	require.Less(t, len(got), len(acked))
	require.Equal(t, acked[:len(got)], got, "the cut stream delivered a gapless prefix")

	last := "0"
	if len(got) > 0 {
		last = got[len(got)-1]
	}
	resumed := p.subscribeGRPC(t, slowTok, "slow", last)
	for i := len(got); i < len(acked); i++ {
		require.Equal(t, acked[i], resumed.nextMessage(t)["id"], "resume replays the rest in order, once")
	}
}

// requireGRPCStatus asserts err is a gRPC status with code.
func requireGRPCStatus(t testing.TB, err error, code codes.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, status.Code(err), "status: %v", err)
}

// TestRevocationEndsStreams: a stream lives no longer than the credential
// or the member it was opened with.
func TestRevocationEndsStreams(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	tokenID := func(t *testing.T, name string) string {
		t.Helper()
		toks := listOf(t, mustCall(t, d, admin, "ListTokens", obj{"name": name}), "tokens")
		require.Len(t, toks, 1)
		return toks[0]["id"].(string)
	}

	t.Run("revoked token", func(t *testing.T) {
		t.Parallel()
		tok := createMember(t, d, admin, "revokee")
		other := createMember(t, d, admin, "revokee2")
		sse := p.subscribeSSE(t, tok, "revokee", "")
		g := p.subscribeGRPC(t, tok, "revokee", "")
		keep := p.subscribeSSE(t, other, "revokee2", "")
		mustCall(t, d, admin, "RevokeToken", obj{"name": "revokee", "id": tokenID(t, "revokee")})
		sse.requireEnds(t)
		require.Error(t, g.endErr(t, streamWait))
		// Another member's stream is untouched.
		mustCall(t, d, admin, "Push", obj{"to": "revokee2", "body": "still here"})
		require.Equal(t, "still here", keep.nextMessage(t)["body"])
	})
	t.Run("rotated token", func(t *testing.T) {
		t.Parallel()
		tok := createMember(t, d, admin, "rotatee")
		sse := p.subscribeSSE(t, tok, "rotatee", "")
		mustCall(t, d, admin, "RotateToken", obj{"name": "rotatee"})
		sse.requireEnds(t)
	})
	t.Run("deleted member", func(t *testing.T) {
		t.Parallel()
		tok := createMember(t, d, admin, "deletee")
		sse := p.subscribeSSE(t, tok, "deletee", "")
		g := p.subscribeGRPC(t, tok, "deletee", "")
		mustCall(t, d, admin, "DeleteMember", obj{"name": "deletee"})
		sse.requireEnds(t)
		require.Error(t, g.endErr(t, streamWait))
	})
}

// TestHistoryBeforeIDPagesExactly: messages committed together share a
// millisecond, so only the id cursor pages through them without a gap.
func TestHistoryBeforeIDPagesExactly(t *testing.T) {
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		createMember(t, d, admin, "pager")
		const n = 40
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mustPush(t, d, admin, obj{"to": "pager", "body": fmt.Sprintf("m%d", i)})
			}()
		}
		wg.Wait()
		seen := map[string]bool{}
		var ids []string
		cursor := ""
		for page := 0; page < n; page++ {
			q := obj{"with": "pager", "limit": 3}
			if cursor != "" {
				q["beforeId"] = cursor
			}
			msgs := listOf(t, mustCall(t, d, admin, "History", q), "messages")
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				id := m["id"].(string)
				require.False(t, seen[id], "id %s on two pages", id)
				seen[id] = true
				ids = append(ids, id)
			}
			cursor = ids[len(ids)-1]
		}
		require.Len(t, ids, n, "every message exactly once")
		require.True(t, slices.IsSortedFunc(ids, func(a, b string) int { return strings.Compare(b, a) }), "newest first")
		mustFail(t, d, admin, "History", obj{"with": "pager", "beforeId": "x1"}, "bad_request")
	})
}

// TestRecreatedMemberDoesNotInheritMessages: a name deleted and created
// again is a new member; the old member's DMs are not its history or
// backlog.
func TestRecreatedMemberDoesNotInheritMessages(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{dbPath: t.TempDir() + "/svc.db"})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	old := createMember(t, d, admin, "reused")
	mustPush(t, d, admin, obj{"to": "reused", "body": "for the old one"})
	require.Len(t, listOf(t, mustCall(t, d, bearer(old), "History", obj{"with": "admin"}), "messages"), 1)
	mustCall(t, d, admin, "DeleteMember", obj{"name": "reused"})
	time.Sleep(5 * time.Millisecond) // a later millisecond than the old DM
	tok := createMember(t, d, admin, "reused")
	mustPush(t, d, admin, obj{"to": "reused", "body": "for the new one"})

	h := listOf(t, mustCall(t, d, bearer(tok), "History", obj{"with": "admin"}), "messages")
	require.Len(t, h, 1)
	require.Equal(t, "for the new one", h[0]["body"])
	s := p.subscribeSSE(t, tok, "reused", "&lastEventId=0")
	require.Equal(t, "for the new one", s.nextMessage(t)["body"], "the replay skips the old member's DM")
	// The sender's own view of the thread keeps both.
	require.Len(t, listOf(t, mustCall(t, d, admin, "History", obj{"with": "reused"}), "messages"), 2)
}
