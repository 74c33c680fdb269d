package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/store"
)

// policyEnv is a hookEnv with the helpers of the policy tests.
type policyEnv struct{ *hookEnv }

func newPolicyEnv(t *testing.T) *policyEnv { return &policyEnv{newHookEnv(t, false)} }

// endpoint makes endpoint slug targeting targets (members by name,
// channels as "#ops") with policy pol.
func (e *policyEnv) endpoint(t *testing.T, slug string, pol *apiv1.NotificationPolicy, to ...string) {
	t.Helper()
	var ts []map[string]any
	for _, x := range to {
		if ch, ok := strings.CutPrefix(x, "#"); ok {
			ts = append(ts, map[string]any{"channel": ch})
		} else {
			ts = append(ts, map[string]any{"member": x})
		}
	}
	e.create(t, slug, func(r *apiv1.CreateNotificationEndpointRequest) {
		r.Targets = targets(t, ts...)
		r.Policy = pol
	})
}

// post delivers body to slug with query q (e.g. "if_offline=queue").
func (e *policyEnv) post(t *testing.T, slug, q, body string) Result {
	t.Helper()
	v, err := url.ParseQuery(q)
	require.NoError(t, err)
	res, err := e.s.Ingress(context.Background(), "", slug, v, signed(), []byte(body))
	require.NoError(t, err)
	return res
}

// pass runs one scheduler pass and answers when the next is due.
func (e *policyEnv) pass(t *testing.T) time.Time {
	t.Helper()
	next, err := e.s.Pass(context.Background())
	require.NoError(t, err)
	return next
}

func (e *policyEnv) receipt(t *testing.T, id string) store.HookDelivery {
	t.Helper()
	d, err := e.st.GetHookDelivery(context.Background(), id)
	require.NoError(t, err)
	return d
}

// hookMsgs are the messages from hook:slug who can read.
func (e *policyEnv) hookMsgs(t *testing.T, who, slug string) []store.Message {
	t.Helper()
	msgs, err := e.st.MessagesFor(context.Background(), who, 0, 1000)
	require.NoError(t, err)
	var out []store.Message
	for _, m := range msgs {
		if m.From == "hook:"+slug {
			out = append(out, m)
		}
	}
	return out
}

func (e *policyEnv) pendingRows(t *testing.T) []store.HookPending {
	t.Helper()
	rows, err := e.st.ListHookPending(context.Background(), store.HookPendingFilter{})
	require.NoError(t, err)
	return rows
}

func deliveryIDs(t *testing.T, m store.Message) []string {
	t.Helper()
	var data struct {
		DeliveryIDs []string `json:"deliveryIds"`
	}
	require.NoError(t, json.Unmarshal(m.Data, &data))
	return data.DeliveryIDs
}

func TestHookOfflineQueueAttachFlush(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "q1", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
	e.endpoint(t, "q2", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
	r1 := e.post(t, "q1", "", `{"n":1}`)
	e.clock.Add(10 * time.Second)
	r2 := e.post(t, "q1", "level=error", `{"n":2}`)
	r3 := e.post(t, "q2", "", `{"n":3}`)
	for _, r := range []Result{r1, r2, r3} {
		require.Equal(t, "pending", r.Status)
	}
	e.pass(t)
	require.Empty(t, e.hookMsgs(t, "alice", "q1"), "alice is offline: nothing delivered")
	require.Len(t, e.pendingRows(t), 3)

	e.clock.Add(time.Minute)
	e.online(t, "alice")
	e.pass(t)
	msgs := e.hookMsgs(t, "alice", "q1")
	require.Len(t, msgs, 1, "one message per endpoint")
	m := msgs[0]
	require.Equal(t, []string{r2.ID, r1.ID}, deliveryIDs(t, m), "newest first")
	require.Less(t, strings.Index(m.Body, `delivery="`+r2.ID+`"`), strings.Index(m.Body, `delivery="`+r1.ID+`"`), "newest first")
	require.Contains(t, m.Body, "Held for 1m10s while you were offline", "the oldest waited 70 s")
	require.Equal(t, "error", m.Level, "the most severe level of the flush")
	require.Equal(t, "alice", m.To)
	require.Len(t, e.hookMsgs(t, "alice", "q2"), 1)
	for _, id := range []string{r1.ID, r2.ID} {
		d := e.receipt(t, id)
		require.Equal(t, "delivered", d.Status)
		require.Equal(t, []string{msgID(m.Seq)}, d.MessageIDs)
	}
	require.Equal(t, "delivered", e.receipt(t, r3.ID).Status)
	require.Empty(t, e.pendingRows(t))
	require.True(t, e.pass(t).IsZero(), "nothing left to wait for")
}

func TestHookQueueTTL(t *testing.T) {
	for _, attach := range []bool{true, false} {
		t.Run(map[bool]string{true: "on attach", false: "by timer"}[attach], func(t *testing.T) {
			e := newPolicyEnv(t)
			e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue"), QueueTtlMs: ptr(int32(60000))}, "alice")
			old := e.post(t, "q", "", `{"n":1}`)
			e.clock.Add(30 * time.Second)
			fresh := e.post(t, "q", "", `{"n":2}`)
			require.Equal(t, e.clock.Now().Add(30*time.Second), e.pass(t), "the scheduler wakes when the oldest expires")
			e.clock.Add(30 * time.Second) // old is 60 s old: expired; fresh 30 s
			if attach {
				e.online(t, "alice")
			}
			e.pass(t)
			d := e.receipt(t, old.ID)
			require.Equal(t, "expired", d.Status)
			require.Contains(t, d.Reason, "queueTtlMs")
			require.Empty(t, d.MessageIDs)
			if attach {
				msgs := e.hookMsgs(t, "alice", "q")
				require.Len(t, msgs, 1)
				require.Equal(t, []string{fresh.ID}, deliveryIDs(t, msgs[0]), "the expired one is not delivered")
				require.Equal(t, "delivered", e.receipt(t, fresh.ID).Status)
			} else {
				require.Equal(t, "pending", e.receipt(t, fresh.ID).Status)
				e.clock.Add(30 * time.Second)
				e.pass(t)
				require.Equal(t, "expired", e.receipt(t, fresh.ID).Status)
				require.Empty(t, e.hookMsgs(t, "alice", "q"))
			}
			require.Empty(t, e.pendingRows(t), "the table does not grow for a member who never attaches")
		})
	}
}

func TestHookBusyWait(t *testing.T) {
	t.Run("idle flush", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "w", &apiv1.NotificationPolicy{IfBusy: ptr("wait")}, "alice")
		e.online(t, "alice")
		e.activity("alice", stateWorking)
		r := e.post(t, "w", "", `{}`)
		require.Equal(t, "pending", r.Status)
		e.clock.Add(5 * time.Second)
		e.pass(t)
		require.Empty(t, e.hookMsgs(t, "alice", "w"))
		e.activity("alice", stateIdle)
		e.pass(t)
		require.Len(t, e.hookMsgs(t, "alice", "w"), 1)
		require.Equal(t, "delivered", e.receipt(t, r.ID).Status)
	})
	t.Run("blocked flushes", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "w", &apiv1.NotificationPolicy{IfBusy: ptr("wait")}, "alice")
		e.online(t, "alice")
		e.activity("alice", stateWorking)
		r := e.post(t, "w", "", `{}`)
		e.activity("alice", stateBlocked)
		e.pass(t)
		require.Equal(t, "delivered", e.receipt(t, r.ID).Status)
	})
	t.Run("the 30 s lapse", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "w", &apiv1.NotificationPolicy{IfBusy: ptr("wait")}, "alice")
		e.online(t, "alice")
		e.activity("alice", stateWorking)
		lapse := e.clock.Now().Add(activityTTL)
		r := e.post(t, "w", "", `{}`)
		e.clock.Add(29 * time.Second)
		require.Equal(t, lapse, e.pass(t), "the scheduler wakes at the lapse, before maxWaitMs")
		require.Equal(t, "pending", e.receipt(t, r.ID).Status)
		e.clock.Add(time.Second)
		e.pass(t)
		require.Equal(t, "delivered", e.receipt(t, r.ID).Status)
		require.Len(t, e.hookMsgs(t, "alice", "w"), 1)
	})
	t.Run("maxWaitMs forces", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "w", &apiv1.NotificationPolicy{IfBusy: ptr("wait"), MaxWaitMs: ptr(int32(60000))}, "alice")
		e.online(t, "alice")
		e.activity("alice", stateWorking)
		r := e.post(t, "w", "", `{}`)
		for range 5 { // alice keeps reporting working
			e.clock.Add(11 * time.Second)
			e.activity("alice", stateWorking)
			e.pass(t)
			require.Equal(t, "pending", e.receipt(t, r.ID).Status)
		}
		e.clock.Add(5 * time.Second) // 60 s from the receipt
		e.activity("alice", stateWorking)
		e.pass(t)
		d := e.receipt(t, r.ID)
		require.Equal(t, "delivered", d.Status)
		require.Contains(t, d.Reason, "forced out after maxWaitMs")
		require.Len(t, e.hookMsgs(t, "alice", "w"), 1)
	})
}

func TestHookDebounce(t *testing.T) {
	t.Run("window end", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "d", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(1000))}, "alice", "#ops")
		e.online(t, "alice")
		var rs []Result
		for i := range 3 {
			rs = append(rs, e.post(t, "d", "", `{}`))
			require.Equal(t, "pending", rs[i].Status)
			e.clock.Add(300 * time.Millisecond)
		}
		e.pass(t)
		require.Empty(t, e.hookMsgs(t, "alice", "d"), "the window is still open")
		e.clock.Add(100 * time.Millisecond) // 1 s after the first
		e.pass(t)
		for _, who := range []string{"alice", "bob", "carol"} {
			msgs := e.hookMsgs(t, who, "d")
			require.Len(t, msgs, 1, who)
			require.Equal(t, []string{rs[2].ID, rs[1].ID, rs[0].ID}, deliveryIDs(t, msgs[0]), "newest first")
		}
		newest := e.receipt(t, rs[2].ID)
		require.Equal(t, "delivered", newest.Status)
		require.Len(t, newest.MessageIDs, 2, "alice's copy and the channel's")
		for _, r := range rs[:2] {
			d := e.receipt(t, r.ID)
			require.Equal(t, "coalesced", d.Status)
			require.Equal(t, "coalesced into "+rs[2].ID, d.Reason)
			require.Empty(t, d.MessageIDs)
		}
		require.Empty(t, e.pendingRows(t))
	})
	t.Run("debounceMax", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "d", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(600000)), DebounceMax: ptr(int32(2))}, "alice")
		e.online(t, "alice")
		r1 := e.post(t, "d", "", `{}`)
		require.Equal(t, "pending", r1.Status)
		r2 := e.post(t, "d", "", `{}`)
		require.Equal(t, "delivered", r2.Status, "the second fills the buffer: flushed in its own commit")
		require.Equal(t, "coalesced", e.receipt(t, r1.ID).Status)
		msgs := e.hookMsgs(t, "alice", "d")
		require.Len(t, msgs, 1)
		require.Equal(t, []string{r2.ID, r1.ID}, deliveryIDs(t, msgs[0]))
	})
	t.Run("then the member policy", func(t *testing.T) {
		e := newPolicyEnv(t)
		e.endpoint(t, "d", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(1000)), IfOffline: ptr("queue")}, "alice")
		r1 := e.post(t, "d", "", `{}`)
		r2 := e.post(t, "d", "", `{}`)
		e.clock.Add(time.Second)
		e.pass(t)
		require.Equal(t, "coalesced", e.receipt(t, r1.ID).Status)
		require.Equal(t, "pending", e.receipt(t, r2.ID).Status, "queued for alice, offline")
		e.online(t, "alice")
		e.pass(t)
		msgs := e.hookMsgs(t, "alice", "d")
		require.Len(t, msgs, 1)
		require.Equal(t, []string{r2.ID, r1.ID}, deliveryIDs(t, msgs[0]))
		require.Equal(t, "delivered", e.receipt(t, r2.ID).Status)
	})
}

func TestHookCriticalBypass(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "c", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(60000)), IfBusy: ptr("wait")}, "alice")
	e.online(t, "alice")
	e.activity("alice", stateWorking)
	r := e.post(t, "c", "level=critical", `{}`)
	require.Equal(t, "delivered", r.Status, "neither debounced nor held")
	msgs := e.hookMsgs(t, "alice", "c")
	require.Len(t, msgs, 1)
	require.Equal(t, "critical", msgs[0].Level)
	// The policy's own level critical bypasses too.
	e.endpoint(t, "c2", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(60000)), IfBusy: ptr("wait"), Level: ptr("critical")}, "alice")
	require.Equal(t, "delivered", e.post(t, "c2", "", `{}`).Status)
	// Critical does not bypass the offline policy.
	e.endpoint(t, "c3", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "bob")
	require.Equal(t, "pending", e.post(t, "c3", "level=critical", `{}`).Status)
}

func TestHookPolicyCombinations(t *testing.T) {
	for _, tc := range []struct {
		online        bool
		state, q      string
		status        string
		heldRowKind   string
		deliveredCopy bool
	}{
		// alice's copy dropped; the channel message makes it delivered.
		{false, stateIdle, "if_offline=drop&if_busy=now", "delivered", "", false},
		{false, stateWorking, "if_offline=drop&if_busy=wait", "delivered", "", false},
		{false, stateWorking, "if_offline=queue&if_busy=wait", "pending", store.HookQueue, false},
		{false, stateIdle, "if_offline=queue&if_busy=now", "pending", store.HookQueue, false},
		{true, stateIdle, "if_offline=queue&if_busy=wait", "delivered", "", true},
		{true, stateBlocked, "if_offline=drop&if_busy=wait", "delivered", "", true},
		{true, stateWorking, "if_offline=drop&if_busy=now", "delivered", "", true},
		{true, stateWorking, "if_offline=drop&if_busy=wait", "pending", store.HookWait, false},
		{true, stateWorking, "if_offline=queue&if_busy=wait", "pending", store.HookWait, false},
	} {
		name := tc.q + "/" + tc.state
		if tc.online {
			name += "/online"
		}
		t.Run(name, func(t *testing.T) {
			e := newPolicyEnv(t)
			e.endpoint(t, "p", nil, "alice", "#ops")
			if tc.online {
				e.online(t, "alice")
			}
			e.activity("alice", tc.state)
			r := e.post(t, "p", tc.q, `{}`)
			require.Equal(t, tc.status, r.Status)
			rows := e.pendingRows(t)
			if tc.heldRowKind == "" {
				require.Empty(t, rows)
			} else {
				require.Len(t, rows, 1)
				require.Equal(t, tc.heldRowKind, rows[0].Kind)
				require.Equal(t, "alice", rows[0].Member)
			}
			require.Len(t, e.hookMsgs(t, "alice", "p"), map[bool]int{true: 1, false: 0}[tc.deliveredCopy])
			// Channel targets always deliver now: carol is a member of ops.
			require.Len(t, e.hookMsgs(t, "carol", "p"), 1)
		})
	}
}

func TestHookChannelAndQueuedCopy(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "cq", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice", "#ops")
	r := e.post(t, "cq", "", `{}`)
	require.Equal(t, "pending", r.Status, "alice's copy is queued")
	d := e.receipt(t, r.ID)
	require.Len(t, d.MessageIDs, 1, "the channel message went now")
	require.Len(t, e.hookMsgs(t, "carol", "cq"), 1)
	e.online(t, "alice")
	e.pass(t)
	d = e.receipt(t, r.ID)
	require.Equal(t, "delivered", d.Status)
	require.Len(t, d.MessageIDs, 2)
}

func TestHookDroppedReceipt(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "m", nil, "alice")
	r := e.post(t, "m", "", `{}`)
	require.Equal(t, "dropped", r.Status)
	require.Contains(t, e.receipt(t, r.ID).Reason, "copy for alice dropped: offline (ifOffline drop)")
}

// A member's name never makes a dropped copy read as an expired one.
func TestHookDroppedForAMemberNamedExpired(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "m", nil, "expired")
	r := e.post(t, "m", "", `{}`)
	require.Equal(t, "dropped", r.Status)
	require.Equal(t, "dropped", e.receipt(t, r.ID).Status)
}

func TestHookReplayPolicy(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "r", &apiv1.NotificationPolicy{IfOffline: ptr("drop")}, "alice")
	orig := e.post(t, "r", "if_offline=queue", `{"a":1}`)
	require.Equal(t, "pending", orig.Status)
	out, err := e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: orig.ID})
	require.NoError(t, err)
	require.Equal(t, "pending", out.GetDelivery().GetStatus(), "the override applies again: queued")
	e.online(t, "alice")
	e.pass(t)
	d := e.receipt(t, out.GetDelivery().GetId())
	require.Equal(t, "delivered", d.Status)
	require.Equal(t, "replay of "+orig.ID, d.Reason)
	// Replay through debounce too.
	e.endpoint(t, "rd", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(1000))}, "alice")
	o2 := e.post(t, "rd", "", `{}`)
	out, err = e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: o2.ID})
	require.NoError(t, err)
	require.Equal(t, "pending", out.GetDelivery().GetStatus())
	e.clock.Add(time.Second)
	e.pass(t)
	require.Equal(t, "coalesced", e.receipt(t, o2.ID).Status)
	require.Equal(t, "delivered", e.receipt(t, out.GetDelivery().GetId()).Status)
}

func TestHookDeleteCascadesPending(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "x", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "alice")
	e.endpoint(t, "y", &apiv1.NotificationPolicy{DebounceMs: ptr(int32(1000))}, "alice")
	e.post(t, "x", "", `{}`)
	e.post(t, "y", "", `{}`)
	require.Len(t, e.pendingRows(t), 2)
	for _, slug := range []string{"x", "y"} {
		_, err := e.n.DeleteNotificationEndpoint(e.as("admin"), &apiv1.DeleteNotificationEndpointRequest{Slug: slug})
		require.NoError(t, err)
	}
	require.Empty(t, e.pendingRows(t))
	e.online(t, "alice")
	e.clock.Add(time.Hour)
	require.True(t, e.pass(t).IsZero())
	require.Empty(t, e.hookMsgs(t, "alice", "x"))
}

// TestHookPolicyRestart: a second service over the same store (a restart)
// rebuilds the timers from the rows: the TTL and maxWaitMs count from the
// receipt, not from the restart, and everyone starts offline and free.
func TestHookPolicyRestart(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue"), QueueTtlMs: ptr(int32(60000))}, "bob")
	e.endpoint(t, "w", &apiv1.NotificationPolicy{IfBusy: ptr("wait"), MaxWaitMs: ptr(int32(20000))}, "alice")
	e.online(t, "alice")
	e.activity("alice", stateWorking)
	queued := e.post(t, "q", "", `{}`)
	held := e.post(t, "w", "", `{}`)
	require.Equal(t, "pending", queued.Status)
	require.Equal(t, "pending", held.Status)

	// The restarted service: alice attaches and reports working before its
	// loop starts (else its first pass would flush the held copy at once,
	// as nobody works after a restart).
	clock := &fakeClock{now: e.clock.Now().Add(10 * time.Second)}
	team := newFakeTeam(clock.Now, e.perms)
	team.online["alice"] = 1
	setWorking := func() { team.state["alice"], team.at["alice"] = stateWorking, clock.Now() }
	setWorking()
	c := testCommitter(e.st, clock.Now)
	srv := New(Deps{Store: e.st, Commit: c, Members: team.members(), Registry: team.kit(c, nil), MessageID: msgID, Now: clock.Now})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	pass := func() time.Time {
		next, err := srv.Pass(context.Background())
		require.NoError(t, err)
		return next
	}
	require.Equal(t, e.clock.Now().Add(20*time.Second), pass(), "maxWaitMs from the receipt is the next thing due")
	require.Equal(t, "pending", e.receipt(t, held.ID).Status)
	clock.Add(10 * time.Second) // 20 s from the receipt
	team.mu.Lock()
	setWorking()
	team.mu.Unlock()
	pass()
	d := e.receipt(t, held.ID)
	require.Equal(t, "delivered", d.Status)
	require.Contains(t, d.Reason, "forced out after maxWaitMs")
	require.Equal(t, "pending", e.receipt(t, queued.ID).Status)
	clock.Add(40 * time.Second) // 60 s from the receipt, 50 s after the restart
	pass()
	require.Equal(t, "expired", e.receipt(t, queued.ID).Status)
	require.Empty(t, e.pendingRows(t))
}

// TestHookMemberLeft: a queued or held copy of a member no longer on the
// team is dropped, with the reason on its receipt.
func TestHookMemberLeft(t *testing.T) {
	e := newPolicyEnv(t)
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "bob")
	r := e.post(t, "q", "", `{}`)
	require.Equal(t, "pending", r.Status)
	e.team.remove("bob")
	e.pass(t)
	d := e.receipt(t, r.ID)
	require.Equal(t, "dropped", d.Status)
	require.Contains(t, d.Reason, "copy for bob dropped: not on the team")
	require.Empty(t, e.pendingRows(t))
}

// What a sender without the secret makes the broker keep is bounded: a
// rejected delivery keeps the head of its body (and so cannot be
// replayed), and receipts with nothing pending go after the retention.
func TestHookReceiptsAreBounded(t *testing.T) {
	e := newPolicyEnv(t)
	e.online(t, "alice")
	e.endpoint(t, "m", nil, "alice")
	ctx := context.Background()
	big := []byte(`{"pad":"` + strings.Repeat("x", 100<<10) + `"}`)
	_, err := e.s.Ingress(ctx, "", "m", url.Values{"level": {"critical"}}, http.Header{"X-Hook-Secret": {"wrong"}}, big)
	require.ErrorIs(t, err, ErrRejected)
	_, err = e.s.Ingress(ctx, "", "m", url.Values{"level": {"critical"}}, http.Header{"X-Hook-Secret": {"wrong"}}, []byte(`{"small":1}`))
	require.ErrorIs(t, err, ErrRejected)
	rs := e.receipts(t, "m")
	require.Len(t, rs, 2)
	bigRec, smallRec := rs[1], rs[0] // newest first
	full, err := e.st.GetHookDelivery(ctx, bigRec.ID)
	require.NoError(t, err)
	require.Len(t, full.Body, RejectedBodyKept, "the head only")
	require.Equal(t, len(big), full.Size, "the size it had")
	_, err = e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: bigRec.ID})
	requireCode(t, err, apierr.CodeConflict)

	// A whole rejected body replays, without the overrides its sender set.
	got, err := e.n.ReplayNotificationDelivery(e.as("admin"), &apiv1.ReplayNotificationDeliveryRequest{Id: smallRec.ID})
	require.NoError(t, err)
	replayed, err := e.st.GetHookDelivery(ctx, got.GetDelivery().GetId())
	require.NoError(t, err)
	require.Empty(t, replayed.Level, "not the unverified critical")

	ok := e.post(t, "m", "", `{}`)
	e.clock.Add(RejectedRetention - time.Minute)
	e.pass(t)
	require.Len(t, e.receipts(t, "m"), 4, "kept within the rejected retention")
	e.clock.Add(ReceiptRetention - RejectedRetention)
	e.pass(t)
	require.Len(t, e.receipts(t, "m"), 2, "the rejected gone after a day, the others kept within the retention")
	e.clock.Add(2 * time.Minute)
	e.pass(t)
	require.Empty(t, e.receipts(t, "m"), "gone after it")
	_, err = e.st.GetHookDelivery(ctx, ok.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestHookFlushSplitsIntoMessages: a flush that needs more than one
// message (each delivery's content is capped near 16 KiB, so three fill
// a 64 KiB message) sends them all, in order, each naming in deliveryIds
// exactly the deliveries it carries; a receipt names the messages that
// carry its items.
func TestHookFlushSplitsIntoMessages(t *testing.T) {
	const n = 7
	pad := strings.Repeat("x", 20<<10)
	for _, tc := range []struct {
		name string
		pol  *apiv1.NotificationPolicy
		// hold runs before the posts, flush after them.
		hold, flush func(e *policyEnv)
		// coalesced: the flush is one delivery (debounce) whose newest
		// receipt carries every message.
		coalesced bool
	}{
		{
			name:  "offline queue, on attach",
			pol:   &apiv1.NotificationPolicy{IfOffline: ptr("queue")},
			hold:  func(*policyEnv) {},
			flush: func(e *policyEnv) { e.online(t, "alice") },
		},
		{
			name:  "busy wait, on idle",
			pol:   &apiv1.NotificationPolicy{IfBusy: ptr("wait")},
			hold:  func(e *policyEnv) { e.online(t, "alice"); e.activity("alice", stateWorking) },
			flush: func(e *policyEnv) { e.activity("alice", stateIdle) },
		},
		{
			name:      "debounce window end",
			pol:       &apiv1.NotificationPolicy{DebounceMs: ptr(int32(60000)), DebounceMax: ptr(int32(100))},
			hold:      func(e *policyEnv) { e.online(t, "alice") },
			flush:     func(e *policyEnv) { e.clock.Add(time.Minute) },
			coalesced: true,
		},
		{
			name:      "debounce, then the offline queue",
			pol:       &apiv1.NotificationPolicy{DebounceMs: ptr(int32(60000)), DebounceMax: ptr(int32(100)), IfOffline: ptr("queue")},
			hold:      func(*policyEnv) {},
			flush:     func(e *policyEnv) { e.clock.Add(time.Minute); e.pass(t); e.online(t, "alice") },
			coalesced: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPolicyEnv(t)
			e.endpoint(t, "s", tc.pol, "alice")
			tc.hold(e)
			var ids []string // newest first
			for i := range n {
				r := e.post(t, "s", "", fmt.Sprintf(`{"n":%d,"pad":%q}`, i, pad))
				require.Equal(t, "pending", r.Status)
				ids = append([]string{r.ID}, ids...)
				e.clock.Add(time.Second)
			}
			e.pass(t)
			require.Empty(t, e.hookMsgs(t, "alice", "s"))
			tc.flush(e)
			e.pass(t)

			msgs := e.hookMsgs(t, "alice", "s")
			require.Len(t, msgs, 3, "%d deliveries, three to a message", n)
			var got []string
			carrier := map[string]string{}
			var msgIDs []string
			for _, m := range msgs {
				part := deliveryIDs(t, m)
				require.Equal(t, len(part), strings.Count(m.Body, "<external_content "), "the message's text is the part it names")
				for _, id := range part {
					require.Contains(t, m.Body, `delivery="`+id+`"`)
				}
				for _, id := range part {
					carrier[id] = msgID(m.Seq)
				}
				got = append(got, part...)
				msgIDs = append(msgIDs, msgID(m.Seq))
			}
			require.Equal(t, ids, got, "every delivery once, newest first, over the messages in order")
			if tc.coalesced {
				d := e.receipt(t, ids[0])
				require.Equal(t, "delivered", d.Status)
				require.Equal(t, msgIDs, d.MessageIDs, "the flushed delivery became every message")
				for _, id := range ids[1:] {
					require.Equal(t, "coalesced", e.receipt(t, id).Status)
				}
			} else {
				for _, id := range ids {
					d := e.receipt(t, id)
					require.Equal(t, "delivered", d.Status)
					require.Equal(t, []string{carrier[id]}, d.MessageIDs, "receipt %s names the message carrying it", id)
				}
			}
			require.Empty(t, e.pendingRows(t))
		})
	}
}

// statusWrites is a store that records each receipt status write.
type statusWrites struct {
	store.Store
	mu     sync.Mutex
	writes map[string][]string // receipt id -> statuses written, in order
}

func (s *statusWrites) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx store.Tx) error { return fn(statusWritesTx{tx, s}) })
}

func (s *statusWrites) of(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes[id])
}

type statusWritesTx struct {
	store.Tx
	s *statusWrites
}

func (tx statusWritesTx) SetHookDeliveryStatus(ctx context.Context, id, status, reason string, messageIDs []string) error {
	tx.s.mu.Lock()
	tx.s.writes[id] = append(tx.s.writes[id], status)
	tx.s.mu.Unlock()
	return tx.Tx.SetHookDeliveryStatus(ctx, id, status, reason, messageIDs)
}

// A receipt's status is written once for each change of it, never again
// to say what it already says: stored pending, then once delivered (with
// the messages' ids), or once dropped.
func TestHookStatusWrittenOncePerTransition(t *testing.T) {
	w := &statusWrites{Store: memStore(t), writes: map[string][]string{}}
	e := &policyEnv{newHookEnvOn(t, w, false)}
	e.endpoint(t, "now", nil, "alice")
	e.endpoint(t, "q", &apiv1.NotificationPolicy{IfOffline: ptr("queue")}, "bob")

	e.online(t, "alice")
	now := e.post(t, "now", "", `{"n":1}`)
	require.Equal(t, "delivered", now.Status)
	require.Equal(t, []string{"delivered"}, w.of(now.ID))
	require.Len(t, e.receipt(t, now.ID).MessageIDs, 1)

	dropped := e.post(t, "q", "if_offline=drop", `{"n":2}`)
	require.Equal(t, "dropped", dropped.Status, "bob is offline")
	require.Equal(t, []string{"dropped"}, w.of(dropped.ID))
	queued := e.post(t, "q", "", `{"n":3}`)
	require.Equal(t, "pending", queued.Status)
	require.Empty(t, w.of(queued.ID), "stored pending: no second write")
	e.online(t, "bob")
	e.pass(t)
	require.Equal(t, "delivered", e.receipt(t, queued.ID).Status)
	require.Equal(t, []string{"delivered"}, w.of(queued.ID))
}

// TestHookRejectedReceiptsCapped: a storm of unsigned requests leaves an
// endpoint at most RejectedKept rejected receipts of at most
// RejectedBodyKept bytes each, and they go after RejectedRetention; the
// verified receipt stays.
func TestHookRejectedReceiptsCapped(t *testing.T) {
	e := newPolicyEnv(t)
	e.online(t, "alice")
	e.endpoint(t, "m", nil, "alice")
	ctx := context.Background()
	ok := e.post(t, "m", "", `{"ok":1}`)
	all := func() (rejected, bytes int) {
		t.Helper()
		var before time.Time
		for {
			page, err := e.st.ListHookDeliveries(ctx, store.HookDeliveryFilter{Endpoint: "m", Before: before, Limit: 500, WithBody: true})
			require.NoError(t, err)
			for _, d := range page {
				if d.Status == StatusRejected {
					rejected++
					bytes += len(d.Body)
				}
			}
			if len(page) < 500 {
				return rejected, bytes
			}
			before = page[len(page)-1].ReceivedAt
		}
	}
	big := []byte(`{"pad":"` + strings.Repeat("x", 8<<10) + `"}`)
	const storm = RejectedKept + 200
	for i := range storm {
		if i > 0 && i%RejectLimit == 0 {
			e.clock.Add(time.Minute) // the failure budgets' window moves on
		}
		e.clock.Add(time.Millisecond) // distinct receipt times, newest known
		addr := fmt.Sprintf("198.51.100.%d", i%RejectLimit/RejectAddrLimit)
		_, err := e.s.Ingress(ctx, addr, "m", nil, http.Header{"X-Hook-Secret": {"wrong"}}, big)
		require.ErrorIs(t, err, ErrRejected, i)
	}
	n, bytes := all()
	require.Equal(t, RejectedKept, n, "the newest only")
	require.Equal(t, RejectedKept*RejectedBodyKept, bytes, "the head of each body only")

	e.clock.Add(RejectedRetention + time.Second)
	e.pass(t)
	n, _ = all()
	require.Zero(t, n, "rejected receipts age out in a day")
	require.Equal(t, StatusDelivered, e.receipt(t, ok.ID).Status, "the verified receipt stays")
}
