package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A flush of many held deliveries (the offline queue on attach, the busy
// wait on idle, a debounce burst at debounceMax) reaches the member whole:
// as many messages as the message size cap needs, each naming in
// data.deliveryIds exactly the deliveries it carries, and every receipt
// names the messages that really carry it. Nothing is summarized away.

// hookPad is a payload of about 2 KiB, so that about 30 fit one message.
func hookPad(n int) string {
	return fmt.Sprintf(`{"n":%d,"pad":%q}`, n, strings.Repeat("x", 2000))
}

// requireWholeFlush reads messages of s from hook:slug until every id of
// want (newest first) arrived, and checks each message: within the body
// cap, nothing omitted, its deliveryIds fenced in its body, and the
// messages together carry want once each, in order. It answers, per
// delivery id, the id of the message carrying it, and the message ids in
// order.
func requireWholeFlush(t *testing.T, s *sseStream, slug string, want []string) (map[string]string, []any) {
	t.Helper()
	carrier := map[string]string{}
	var order []string
	var msgIDs []any
	for len(order) < len(want) {
		m := nextHook(t, s, slug)
		body := m["body"].(string)
		require.LessOrEqual(t, len(body), 64<<10, "a message within the body cap")
		require.False(t, strings.Contains(body, "omitted"), "nothing summarized away: ...%s", body[max(0, len(body)-200):])
		ids := strs(t, m["data"].(obj)["deliveryIds"])
		require.NotEmpty(t, ids)
		require.Equal(t, len(ids), strings.Count(body, "<external_content "), "one fence per delivery the message names")
		for _, id := range ids {
			require.Contains(t, body, `delivery="`+id+`"`)
			_, dup := carrier[id]
			require.False(t, dup, "delivery %s in two messages", id)
			carrier[id] = m["id"].(string)
		}
		order = append(order, ids...)
		msgIDs = append(msgIDs, m["id"])
	}
	require.Equal(t, want, order, "every delivery once, newest first")
	require.Greater(t, len(msgIDs), 1, "more than one message was needed")
	return carrier, msgIDs
}

// receiptByID reads one receipt with GET /notifications/deliveries/:id
// (the list shows the newest 50 by default), waiting up to streamWait for
// status.
func receiptByID(t *testing.T, h *hookPolicyEnv, id, status string) obj {
	t.Helper()
	var r obj
	require.Eventually(t, func() bool {
		r = mustCall(t, restDriver{h.p}, h.admin, "GetNotificationDelivery", obj{"id": id})
		return r["status"] == status
	}, streamWait, 20*time.Millisecond, "receipt %s never became %s", id, status)
	return r
}

func TestE2EHookFlushDeliversEveryDelivery(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	h := newHookPolicyEnv(t, p)
	d := restDriver{p}
	bob := createMember(t, d, h.admin, "bob")
	carol := createMember(t, d, h.admin, "carol")
	h.endpoint(t, "q", obj{"ifOffline": "queue"}, "bob")
	h.endpoint(t, "w", obj{"ifBusy": "wait", "maxWaitMs": 600000}, "carol")

	// The offline queue: 110 deliveries while bob is offline.
	var queued []string
	for i := range 110 {
		queued = append(queued, h.post(t, "q", "", hookPad(i), "pending"))
	}
	slices.Reverse(queued)
	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")
	carrier, _ := requireWholeFlush(t, s, "q", queued)
	for _, id := range queued {
		r := receiptByID(t, h, id, "delivered")
		require.Equal(t, []any{carrier[id]}, r["messageIds"], "receipt %s names the message carrying it", id)
	}

	// The busy wait: 60 deliveries held while carol works, flushed on idle.
	sc := p.openSSE(t, "/subscribe?name=carol", sseOpts{}, withBearer(carol))
	sc.requireReady(t, "carol")
	h.activity(t, carol, "working")
	var held []string
	for i := range 60 {
		held = append(held, h.post(t, "w", "", hookPad(i), "pending"))
	}
	slices.Reverse(held)
	h.activity(t, carol, "idle")
	carrier, _ = requireWholeFlush(t, sc, "w", held)
	for _, id := range held {
		r := receiptByID(t, h, id, "delivered")
		require.Equal(t, []any{carrier[id]}, r["messageIds"], "receipt %s names the message carrying it", id)
	}
}

func TestE2EHookDebounceBurstDeliversEveryDelivery(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	h := newHookPolicyEnv(t, p)
	bob := createMember(t, restDriver{p}, h.admin, "bob")
	h.endpoint(t, "db", obj{"debounceMs": 600000, "debounceMax": 100}, "bob")
	s := p.openSSE(t, "/subscribe?name=bob", sseOpts{}, withBearer(bob))
	s.requireReady(t, "bob")

	var burst []string
	for i := range 99 {
		burst = append(burst, h.post(t, "db", "", hookPad(i), "pending"))
	}
	burst = append(burst, h.post(t, "db", "", hookPad(99), "delivered"))
	slices.Reverse(burst)
	_, msgIDs := requireWholeFlush(t, s, "db", burst)
	newest := receiptByID(t, h, burst[0], "delivered")
	require.Equal(t, msgIDs, newest["messageIds"], "the burst's delivery became every message of the flush")
	for _, id := range burst[1:] {
		r := receiptByID(t, h, id, "coalesced")
		require.Equal(t, "coalesced into "+burst[0], r["reason"])
	}
}
