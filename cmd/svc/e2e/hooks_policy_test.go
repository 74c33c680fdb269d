package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The durable delivery policy of inbound hooks, over HTTP against the
// real binary: the offline queue flushed on a runner's attach (an SSE
// /subscribe), the busy wait flushed on idle or forced at maxWaitMs,
// debounce, and all of it across a kill -9.

// hookPolicyEnv is an endpoint slug with header-secret auth, targets and
// policy, and a way to post to it.
type hookPolicyEnv struct {
	p      *proc
	admin  cred
	secret string
}

func newHookPolicyEnv(t *testing.T, p *proc) *hookPolicyEnv {
	return &hookPolicyEnv{p: p, admin: bearer(p.adminToken(t)), secret: hookSecret(t)}
}

func (h *hookPolicyEnv) endpoint(t *testing.T, slug string, policy obj, members ...string) {
	t.Helper()
	var ts []any
	for _, m := range members {
		ts = append(ts, obj{"member": m})
	}
	d := restDriver{h.p}
	mustCall(t, d, h.admin, "CreateNotificationEndpoint", obj{"slug": slug, "targets": ts, "auth": obj{"kind": "header-secret"}, "policy": policy})
	mustCall(t, d, h.admin, "SetNotificationEndpointSecret", obj{"slug": slug, "secret": h.secret})
}

// post sends body to /hooks/slug?query and answers the receipt id,
// requiring 202 with status want.
func (h *hookPolicyEnv) post(t *testing.T, slug, query, body, want string) string {
	t.Helper()
	path := "/hooks/" + slug
	if query != "" {
		path += "?" + query
	}
	r := h.p.do(t, http.MethodPost, path, []byte(body), withHeader("X-Hook-Secret", h.secret))
	require.Equal(t, http.StatusAccepted, r.status, string(r.raw))
	require.Equal(t, want, r.body["status"], string(r.raw))
	return r.body["id"].(string)
}

// receipt reads one receipt as GET /notifications/endpoints/:slug/deliveries lists it.
func (h *hookPolicyEnv) receipt(t *testing.T, slug, id string) obj {
	t.Helper()
	for _, r := range listOf(t, mustCall(t, restDriver{h.p}, h.admin, "ListNotificationDeliveries", obj{"slug": slug}), "deliveries") {
		if r["id"] == id {
			return r
		}
	}
	t.Fatalf("no receipt %s on %s", id, slug)
	return nil
}

// eventually waits up to streamWait for receipt id of slug to read status.
func (h *hookPolicyEnv) eventually(t *testing.T, slug, id, status string) obj {
	t.Helper()
	var r obj
	require.Eventually(t, func() bool {
		r = h.receipt(t, slug, id)
		return r["status"] == status
	}, streamWait, 20*time.Millisecond, "receipt %s of %s never became %s", id, slug, status)
	return r
}

func (h *hookPolicyEnv) activity(t *testing.T, tok, state string) {
	t.Helper()
	r := h.p.do(t, http.MethodPost, "/presence/activity", obj{"state": state}, withBearer(tok))
	require.Equal(t, http.StatusNoContent, r.status, string(r.raw))
}

// nextHook reads the next message event of s, requiring it from hook:slug.
// The endpoint's own registry events go to its member targets too, and
// the broker answers a write before it fans the write's messages out: a
// stream opened right after the setup may still see them, so they are
// passed over (nextHookDelivery).
func nextHook(t *testing.T, s *sseStream, slug string) obj {
	t.Helper()
	m := nextHookDelivery(t, s)
	require.Equal(t, "hook:"+slug, m["from"], "%v", m)
	return m
}

func TestE2EHookOfflineQueue(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	h := newHookPolicyEnv(t, p)
	bob := createMember(t, restDriver{p}, h.admin, "bob")
	h.endpoint(t, "q", obj{"ifOffline": "queue"}, "bob")
	h.endpoint(t, "d", obj{"ifOffline": "drop"}, "bob")
	first := h.post(t, "q", "", `{"n":1}`, "pending")
	second := h.post(t, "q", "", `{"n":2}`, "pending")
	dropped := h.post(t, "d", "", `{"n":3}`, "dropped")
	overridden := h.post(t, "d", "if_offline=queue", `{"n":4}`, "pending")
	require.Equal(t, "pending", h.receipt(t, "q", first)["status"])

	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")
	got := map[string]obj{}
	for range 2 {
		m := nextHookDelivery(t, s)
		got[m["from"].(string)] = m
	}
	m := got["hook:q"]
	require.NotNil(t, m, "one message per endpoint: %v", got)
	require.Equal(t, []any{second, first}, m["data"].(obj)["deliveryIds"], "newest first")
	require.Contains(t, m["body"], "while you were offline", "the staleness note")
	require.Less(t, strings.Index(m["body"].(string), `delivery="`+second), strings.Index(m["body"].(string), `delivery="`+first))
	require.Equal(t, []any{overridden}, got["hook:d"]["data"].(obj)["deliveryIds"])
	for _, id := range []string{first, second} {
		r := h.eventually(t, "q", id, "delivered")
		require.Equal(t, []any{m["id"]}, r["messageIds"])
	}
	h.eventually(t, "d", overridden, "delivered")
	require.Equal(t, "dropped", h.receipt(t, "d", dropped)["status"])
}

func TestE2EHookBusyWait(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	h := newHookPolicyEnv(t, p)
	bob := createMember(t, restDriver{p}, h.admin, "bob")
	h.endpoint(t, "w", obj{"ifBusy": "wait", "maxWaitMs": 1000}, "bob")
	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")

	// Idle flush.
	h.activity(t, bob, "working")
	held := h.post(t, "w", "", `{"n":1}`, "pending")
	h.activity(t, bob, "idle")
	m := nextHook(t, s, "w")
	require.Equal(t, []any{held}, m["data"].(obj)["deliveryIds"])
	h.eventually(t, "w", held, "delivered")

	// Not idle: forced at maxWaitMs from the receipt while bob keeps working.
	h.activity(t, bob, "working")
	start := time.Now()
	forced := h.post(t, "w", "", `{"n":2}`, "pending")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = p.do(t, http.MethodPost, "/presence/activity", obj{"state": "working"}, withBearer(bob))
			}
		}
	}()
	m = nextHook(t, s, "w")
	close(stop)
	<-done
	require.GreaterOrEqual(t, time.Since(start), time.Second, "held until maxWaitMs")
	require.Equal(t, []any{forced}, m["data"].(obj)["deliveryIds"])
	r := h.eventually(t, "w", forced, "delivered")
	require.Contains(t, r["reason"], "forced out after maxWaitMs")

	// Critical bypasses the wait.
	crit := h.post(t, "w", "level=critical", `{"n":3}`, "delivered")
	m = nextHook(t, s, "w")
	require.Equal(t, []any{crit}, m["data"].(obj)["deliveryIds"])
	require.Equal(t, "critical", m["level"])
}

func TestE2EHookDebounce(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	h := newHookPolicyEnv(t, p)
	bob := createMember(t, restDriver{p}, h.admin, "bob")
	h.endpoint(t, "db", obj{"debounceMs": 500, "debounceMax": 3}, "bob")
	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")

	// Window end.
	a := h.post(t, "db", "", `{"n":1}`, "pending")
	b := h.post(t, "db", "", `{"n":2}`, "pending")
	m := nextHook(t, s, "db")
	require.Equal(t, []any{b, a}, m["data"].(obj)["deliveryIds"], "newest first")
	require.Contains(t, m["body"], "2 deliveries coalesced")
	r := h.eventually(t, "db", b, "delivered")
	require.Equal(t, []any{m["id"]}, r["messageIds"])
	r = h.receipt(t, "db", a)
	require.Equal(t, "coalesced", r["status"])
	require.Equal(t, "coalesced into "+b, r["reason"])

	// debounceMax: the third flushes in its own request.
	x := h.post(t, "db", "", `{"n":3}`, "pending")
	y := h.post(t, "db", "", `{"n":4}`, "pending")
	z := h.post(t, "db", "", `{"n":5}`, "delivered")
	m = nextHook(t, s, "db")
	require.Equal(t, []any{z, y, x}, m["data"].(obj)["deliveryIds"])
	require.Equal(t, "coalesced", h.receipt(t, "db", x)["status"])
}

// TestE2EHookPolicySurvivesKill9: a queued and a held delivery, each
// answered 202 pending, outlive a kill -9: after the restart the held one
// flushes (nobody is working after a restart) and the queued one is
// delivered when its member attaches; an expired TTL is counted from the
// receipt, not from the restart.
func TestE2EHookPolicySurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	h := newHookPolicyEnv(t, p)
	d := restDriver{p}
	bob := createMember(t, d, h.admin, "bob")
	carol := createMember(t, d, h.admin, "carol")
	h.endpoint(t, "q", obj{"ifOffline": "queue"}, "carol")
	h.endpoint(t, "w", obj{"ifBusy": "wait", "maxWaitMs": 600000}, "bob")
	h.endpoint(t, "db", obj{"debounceMs": 600000}, "bob")

	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")
	h.activity(t, bob, "working")
	held := h.post(t, "w", "", `{"n":1}`, "pending")
	queued := h.post(t, "q", "", `{"n":2}`, "pending")
	buffered := h.post(t, "db", "", `{"n":3}`, "pending")
	s.close()

	p.kill(t)
	p2 := p.restart(t)
	h.p = p2
	// Held: bob is not working after the restart, so it flushes at once.
	r := h.eventually(t, "w", held, "delivered")
	require.Len(t, r["messageIds"], 1)
	// Queued: carol is offline, so it waits for her attach.
	require.Equal(t, "pending", h.receipt(t, "q", queued)["status"])
	require.Equal(t, "pending", h.receipt(t, "db", buffered)["status"], "the debounce window (10 min) is still open")

	sc := p2.openSSE(t, "/subscribe?name=carol", sseOpts{}, withBearer(carol))
	sc.requireReady(t, "carol")
	m := nextHook(t, sc, "q")
	require.Equal(t, []any{queued}, m["data"].(obj)["deliveryIds"])
	require.Contains(t, m["body"], "while you were offline")
	r = h.eventually(t, "q", queued, "delivered")
	require.Equal(t, []any{m["id"]}, r["messageIds"])

	// The held message is in bob's history.
	hist := listOf(t, mustCall(t, restDriver{p2}, bearer(bob), "History", obj{"thread": "hook:w"}), "messages")
	var deliveries []any
	for _, m := range hist {
		if data, _ := m["data"].(obj); data["kind"] == "hook_delivery" {
			deliveries = append(deliveries, data["deliveryIds"])
		}
	}
	require.Equal(t, []any{[]any{held}}, deliveries)
}

// A queued copy whose member does not attach within queueTtlMs, counted
// from receipt, expires on a timer and is never delivered; a channel
// target of the same endpoint gets its message at once.
func TestE2EHookQueueTTLAndChannelTarget(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	h := newHookPolicyEnv(t, p)
	d := restDriver{p}
	bob := createMember(t, d, h.admin, "bob")
	carol := createMember(t, d, h.admin, "carol")
	mustCall(t, d, bearer(carol), "CreateChannel", obj{"slug": "ops"})
	cs := p.openSSE(t, "/subscribe?name=carol", sseOpts{}, withBearer(carol))
	cs.requireReady(t, "carol")
	mustCall(t, d, h.admin, "CreateNotificationEndpoint", obj{
		"slug": "ttl", "targets": []any{obj{"member": "bob"}, obj{"channel": "ops"}},
		"auth": obj{"kind": "header-secret"}, "policy": obj{"ifOffline": "queue", "queueTtlMs": 1000},
	})
	mustCall(t, d, h.admin, "SetNotificationEndpointSecret", obj{"slug": "ttl", "secret": h.secret})
	h.endpoint(t, "solo", obj{"ifOffline": "queue", "queueTtlMs": 1000}, "bob")

	id := h.post(t, "ttl", "", `{"n":1}`, "pending")
	solo := h.post(t, "solo", "", `{"n":2}`, "pending")
	m := nextHook(t, cs, "ttl")
	require.Equal(t, []any{id}, m["data"].(obj)["deliveryIds"], "the channel copy went at once")

	// The member's copy expires; the receipt is delivered (its channel
	// copy was) and says so. With no other target it is expired.
	r := h.eventually(t, "ttl", id, "delivered")
	require.Contains(t, r["reason"], "bob not attached within queueTtlMs")
	require.Equal(t, []any{m["id"]}, r["messageIds"])
	r = h.eventually(t, "solo", solo, "expired")
	require.Contains(t, r["reason"], "bob not attached within queueTtlMs")
	require.Empty(t, r["messageIds"])

	// bob attaches later: the expired copy does not come; a DM does.
	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")
	_, err := restPush(p, carol, obj{"to": "bob", "body": "after"})
	require.NoError(t, err)
	next := nextHookDelivery(t, s)
	require.Equal(t, "carol", next["from"], "nothing from the hook before it: %v", next)
}
