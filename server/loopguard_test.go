package server

import (
	"context"
	"strings"
	"svc/server/apierr"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// loopFixture is a running server whose team has people (admin, who holds
// members.manage, alice, bob) and agents (alpha, beta, and gamma, who
// holds members.manage): an agent is a member whose runner attached. It
// has a channel ops (alice, alpha, beta), an objective of alice's assigned
// to alpha with beta watching, and a clock the test moves.
type loopFixture struct {
	srv   *Server
	b     *Broker
	obj   *Objectives
	objID string
	mu    sync.Mutex
	clock time.Time
	// ids are the messages the steps sent, by label.
	ids map[string]string
}

func newLoopFixture(t testing.TB, g teamconfig.LoopGuard) *loopFixture {
	t.Helper()
	f := &loopFixture{clock: time.UnixMilli(1_800_000_000_000), ids: map[string]string{}}
	perms := map[string][]string{
		"admin": {auth.MembersManage}, "alice": {auth.ObjectivesCreate}, "bob": {},
		"alpha": {auth.ObjectivesCreate}, "beta": {}, "gamma": {auth.MembersManage},
	}
	f.srv = startTestServerFile(t, mustMemStore(t), &teamconfig.File{LoopGuard: &g}, perms, Deps{}, WithNow(f.now))
	f.b, f.obj = newBroker(f.srv.core, nil), &Objectives{core: f.srv.core}
	for _, a := range []string{"alpha", "beta", "gamma"} {
		_, err := f.b.UpdateDelivery(as(a), &apiv1.UpdateDeliveryRequest{Name: a})
		require.NoError(t, err, "%s's runner attaches", a)
	}
	ch, err := f.b.CreateChannel(as("alice"), &apiv1.CreateChannelRequest{Slug: "ops"})
	require.NoError(t, err)
	for _, m := range []string{"alpha", "beta"} {
		_, err := f.b.AddChannelMember(as("alice"), &apiv1.AddChannelMemberRequest{Channel: ch.GetChannel().GetId(), Member: m})
		require.NoError(t, err)
	}
	o, err := f.obj.CreateObjective(as("alice", auth.ObjectivesCreate), &apiv1.CreateObjectiveRequest{Title: "T", Outcome: "O", Assignee: "alpha", Watchers: []string{"beta"}})
	require.NoError(t, err)
	f.objID = o.GetObjective().GetId()
	return f
}

func (f *loopFixture) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

func (f *loopFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.clock = f.clock.Add(d)
	f.mu.Unlock()
}

// run performs one step:
//
//	"alice>alpha m1"  alice DMs alpha, the message labelled m1
//	"alpha>#ops m1"   a post to the channel ops
//	"alpha>* m1"      a broadcast
//	"alpha>obj m1"    a post on the fixture objective's thread
//	"alpha>new m1"    alpha assigns beta an objective (its lifecycle message)
//	"alpha@m1"        alpha's runner starts a turn of m1 ("alpha@-": no message)
//	"alpha."          alpha's runner ends the turn
//
// and returns the message it sent, if any.
func (f *loopFixture) run(t *testing.T, step string) *apiv1.Message {
	t.Helper()
	switch {
	case strings.HasSuffix(step, "."):
		m := strings.TrimSuffix(step, ".")
		_, err := f.b.UpdateDelivery(as(m), &apiv1.UpdateDeliveryRequest{Name: m, Turn: apiv1.TurnPhase_TURN_PHASE_ENDED})
		require.NoError(t, err, step)
		return nil
	case strings.Contains(step, "@"):
		m, label, _ := strings.Cut(step, "@")
		req := &apiv1.UpdateDeliveryRequest{Name: m, Turn: apiv1.TurnPhase_TURN_PHASE_STARTED}
		if label != "-" {
			req.TurnMessageId = f.ids[label]
			require.NotEmpty(t, req.TurnMessageId, step)
		}
		_, err := f.b.UpdateDelivery(as(m), req)
		require.NoError(t, err, step)
		return nil
	}
	route, label, ok := strings.Cut(step, " ")
	require.True(t, ok, step)
	from, to, ok := strings.Cut(route, ">")
	require.True(t, ok, step)
	var (
		m   *apiv1.Message
		err error
	)
	switch {
	case to == "obj":
		var r *apiv1.DiscussObjectiveResponse
		r, err = f.obj.DiscussObjective(as(from), &apiv1.DiscussObjectiveRequest{Id: f.objID, Body: label})
		m = r.GetMessage()
	case to == "new":
		var r *apiv1.CreateObjectiveResponse
		r, err = f.obj.CreateObjective(as(from, auth.ObjectivesCreate), &apiv1.CreateObjectiveRequest{Title: label, Outcome: "O", Assignee: "beta"})
		require.NoError(t, err, step)
		h, herr := f.b.History(as(from), &apiv1.HistoryRequest{Thread: "obj:" + r.GetObjective().GetId(), Limit: ptr(int32(1))})
		require.NoError(t, herr)
		require.Len(t, h.GetMessages(), 1)
		m = h.GetMessages()[0]
	default:
		req := &apiv1.PushRequest{Body: label}
		switch {
		case to == "*":
		case strings.HasPrefix(to, "#"):
			req.Data = mustStruct(t, map[string]any{"thread": "chan:" + strings.TrimPrefix(to, "#")})
		default:
			req.To = ptr(to)
		}
		var r *apiv1.PushResponse
		r, err = f.b.Push(as(from), req)
		m = r.GetMessage()
	}
	require.NoError(t, err, step)
	f.ids[label] = m.GetId()
	return m
}

// stored reads a message back as the store keeps it.
func (f *loopFixture) stored(t *testing.T, id string) store.Message {
	t.Helper()
	seq, err := ParseMessageID(id)
	require.NoError(t, err)
	got, err := f.srv.core.store.ReplyPath(context.Background(), seq, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

// link is what a test expects of a message's reply chain.
type link struct {
	hops    int
	replyTo string // a label; "" for none
	stopped bool
}

// The chain rules: a message is an agent's reply exactly when its sender's
// runner reported a turn in progress when it committed; the turn's
// message, not what came last, is what it replies to; past the bound it
// is stopped. Every path that writes a member's message counts.
func TestLoopGuardChainRules(t *testing.T) {
	pingPong := []string{
		"alice>alpha m0", "alpha@m0", "alpha>beta m1", "alpha.",
		"beta@m1", "beta>alpha m2", "beta.",
		"alpha@m2", "alpha>beta m3", "alpha.",
		"beta@m3", "beta>alpha m4", "beta.",
	}
	tests := []struct {
		name  string
		steps []string
		want  map[string]link
	}{
		{"a person's DM starts a chain, an agent's reply in its turn is hop 1",
			[]string{"alice>alpha m0", "alpha@m0", "alpha>beta m1"},
			map[string]link{"m0": {}, "m1": {hops: 1, replyTo: "m0"}}},
		{"an agent outside a turn starts a chain",
			[]string{"alpha>beta m0", "alpha@-", "alpha.", "alpha>beta m1"},
			map[string]link{"m0": {}, "m1": {}}},
		{"a turn with no message (the re-brief) starts a chain at hop 1",
			[]string{"alpha@-", "alpha>beta m1"},
			map[string]link{"m1": {hops: 1}}},
		{"two agents answering each other stop past the bound",
			pingPong,
			map[string]link{"m1": {hops: 1, replyTo: "m0"}, "m2": {hops: 2, replyTo: "m1"}, "m3": {hops: 3, replyTo: "m2"}, "m4": {hops: 4, replyTo: "m3", stopped: true}}},
		{"a person's message between them starts a new chain",
			[]string{"alice>alpha m0", "alpha@m0", "alpha>beta m1", "alpha.", "beta@m1", "beta>alpha m2", "beta.",
				"alice>beta p", "beta@p", "beta>alpha m3"},
			map[string]link{"m2": {hops: 2, replyTo: "m1"}, "p": {}, "m3": {hops: 1, replyTo: "p"}}},
		{"a person writing during a turn changes neither the turn nor the person's message",
			[]string{"alice>alpha m0", "alpha@m0", "alpha>beta m1", "alpha.", "beta@m1", "bob>beta p", "beta>alpha m2"},
			map[string]link{"p": {}, "m2": {hops: 2, replyTo: "m1"}}},
		{"each agent's turn is its own",
			[]string{"alice>alpha m0", "bob>beta n0", "alpha@m0", "beta@n0", "alpha>gamma m1", "beta>gamma n1", "alpha>gamma m2"},
			map[string]link{"m1": {hops: 1, replyTo: "m0"}, "n1": {hops: 1, replyTo: "n0"}, "m2": {hops: 1, replyTo: "m0"}}},
		{"every path of a member's message counts",
			[]string{"alice>alpha m0", "alpha@m0", "alpha>#ops c", "alpha>* b", "alpha>obj d", "alpha>new o"},
			map[string]link{"c": {hops: 1, replyTo: "m0"}, "b": {hops: 1, replyTo: "m0"}, "d": {hops: 1, replyTo: "m0"}, "o": {hops: 1, replyTo: "m0"}}},
		{"a chain goes on through channels and objectives",
			[]string{"alice>#ops m0", "alpha@m0", "alpha>obj m1", "beta@m1", "beta>* m2", "gamma@m2", "gamma>alpha m3"},
			map[string]link{"m0": {}, "m1": {hops: 1, replyTo: "m0"}, "m2": {hops: 2, replyTo: "m1"}, "m3": {hops: 3, replyTo: "m2"}}},
		{"a turn of a stopped message (a runner that does not skip it) stays stopped",
			append(append([]string{}, pingPong...), "alpha@m4", "alpha>beta m5"),
			map[string]link{"m5": {hops: 5, replyTo: "m4", stopped: true}}},
		{"a person who sends while an agent is in a turn is never the agent",
			[]string{"alice>alpha m0", "alpha@m0", "alice>beta p", "admin>* q"},
			map[string]link{"p": {}, "q": {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLoopFixture(t, teamconfig.LoopGuard{MaxHops: 3})
			sent := map[string]*apiv1.Message{}
			for _, step := range tc.steps {
				if m := f.run(t, step); m != nil {
					_, label, _ := strings.Cut(step, " ")
					sent[label] = m
				}
			}
			for label, want := range tc.want {
				s := f.stored(t, f.ids[label])
				wantReply := int64(0)
				if want.replyTo != "" {
					var err error
					wantReply, err = ParseMessageID(f.ids[want.replyTo])
					require.NoError(t, err)
				}
				require.Equal(t, want, link{hops: s.Hops, replyTo: labelOf(f.ids, s.ReplyTo), stopped: s.LoopStopped}, "%s as stored", label)
				require.Equal(t, wantReply, s.ReplyTo, label)
				// The sender is answered with what was stored.
				m := sent[label]
				require.Equal(t, uint32(want.hops), m.GetHops(), label)
				require.Equal(t, want.stopped, m.GetLoopStopped(), label)
				if want.replyTo == "" {
					require.Nil(t, m.ReplyTo, label)
				} else {
					require.Equal(t, f.ids[want.replyTo], m.GetReplyTo(), label)
				}
			}
		})
	}
}

// labelOf names the message seq by its label; "" for 0.
func labelOf(ids map[string]string, seq int64) string {
	if seq == 0 {
		return ""
	}
	for label, id := range ids {
		if s, _ := ParseMessageID(id); s == seq {
			return label
		}
	}
	return "?"
}

func mustStruct(t *testing.T, v map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(v)
	require.NoError(t, err)
	return s
}

// noticesFor returns the loop notices addressed to member, as its stream
// replays them.
func (f *loopFixture) noticesFor(t *testing.T, member string) []store.Message {
	t.Helper()
	msgs, err := f.srv.core.store.MessagesFor(context.Background(), member, 0, 1000)
	require.NoError(t, err)
	var out []store.Message
	for _, m := range msgs {
		if m.From == loopSender {
			out = append(out, m)
		}
	}
	return out
}

// The first stop of a chain sends one notice, from the broker, on the
// chain's loop: thread: to the members.manage holders (an agent among them
// included) and the people of the conversation and of the chain's start,
// naming the agents, the conversation and the stopped message. It wakes no
// agent. Later stops of the chain send none; a new chain's stop sends its
// own.
func TestLoopGuardNotice(t *testing.T) {
	everyone := []string{"admin", "alice", "alpha", "beta", "bob", "gamma"}
	tests := []struct {
		name         string
		steps        []string
		wantTo       []string
		conversation func(f *loopFixture) string
	}{
		{"a DM loop: the managers and the person who started the chain",
			[]string{
				"alice>alpha m0", "alpha@m0", "alpha>beta m1", "alpha.", "beta@m1", "beta>alpha m2", "beta.",
				"alpha@m2", "alpha>beta m3", "alpha.", "beta@m3", "beta>alpha m4",
			},
			[]string{"admin", "alice", "gamma"},
			func(*loopFixture) string { return dmThread("alpha", "beta") }},
		{"a channel loop: its people too",
			[]string{
				"bob>alpha m0", "alpha@m0", "alpha>#ops m1", "beta@m1", "beta>#ops m2",
				"alpha@m2", "alpha>#ops m3", "beta@m3", "beta>#ops m4",
			},
			[]string{"admin", "alice", "bob", "gamma"},
			func(f *loopFixture) string {
				ch, err := f.srv.core.channel(context.Background(), "ops")
				require.NoError(t, err)
				return "chan:" + ch.ID
			}},
		{"a broadcast loop: every person",
			[]string{
				"alpha@-", "alpha>* m1", "beta@m1", "beta>* m2", "alpha@m2", "alpha>* m3", "beta@m3", "beta>* m4",
			},
			[]string{"admin", "alice", "bob", "gamma"},
			func(*loopFixture) string { return generalThread }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLoopFixture(t, teamconfig.LoopGuard{MaxHops: 3})
			ctx := context.Background()
			admin, err := f.srv.core.attach(ctx, &auth.Principal{Member: "admin", Permissions: []string{auth.MembersManage}}, 0, false)
			require.NoError(t, err)
			defer admin.Close()

			for _, step := range tc.steps {
				f.run(t, step)
			}
			stopped := f.stored(t, f.ids["m4"])
			require.True(t, stopped.LoopStopped)
			chain := stopped.Chain
			if _, ok := f.ids["m0"]; ok {
				require.Equal(t, f.ids["m0"], formatMessageID(chain), "the chain is named by its first message")
			}

			for _, m := range everyone {
				got := f.noticesFor(t, m)
				if !contains(tc.wantTo, m) {
					require.Empty(t, got, "%s is not told", m)
					continue
				}
				require.Len(t, got, 1, "%s is told once", m)
				n := got[0]
				require.Equal(t, loopSender, n.From)
				require.Equal(t, loopThreadPrefix+formatMessageID(chain), n.Thread)
				require.True(t, n.LoopStopped, "the notice wakes no agent")
				require.Zero(t, n.Hops, "the broker's message starts no chain")
				require.Equal(t, "warning", n.Level)
				require.Equal(t, "Agent loop stopped: alpha, beta", n.Title)
				require.Contains(t, n.Body, f.ids["m4"])
				require.JSONEq(t, `{"kind":"agent_loop_stopped","thread":"`+n.Thread+`","conversation":"`+tc.conversation(f)+`",
					"message":"`+f.ids["m4"]+`","chain":"`+formatMessageID(chain)+`","agents":["alpha","beta"],"hops":4,"maxHops":3}`, string(n.Data))
			}

			// It reached the live stream of a manager.
			deadline, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			for {
				ev, err := admin.Next(deadline, nil)
				require.NoError(t, err, "the notice reaches the admin's stream")
				if m := ev.Value.(*apiv1.Message); m.GetFrom() == loopSender {
					require.True(t, m.GetLoopStopped())
					require.Equal(t, "agent_loop_stopped", m.GetData().GetFields()["kind"].GetStringValue())
					break
				}
			}

			// Its thread is readable by those told (managers, whether
			// told or not), and refused to anyone else.
			thread := loopThreadPrefix + formatMessageID(chain)
			for _, m := range everyone {
				p := as(m)
				if m == "admin" || m == "gamma" {
					p = as(m, auth.MembersManage)
				}
				h, err := f.b.History(p, &apiv1.HistoryRequest{Thread: thread})
				if contains(tc.wantTo, m) {
					require.NoError(t, err, m)
					require.Len(t, h.GetMessages(), 1, m)
				} else {
					requireCode(t, err, apierr.CodeForbidden, m)
				}
			}

			// The chain goes on stopped (a runner that ignores the flag, a
			// second reply of the same turn): no second notice.
			f.run(t, "beta>gamma m5")
			f.run(t, "alpha@m4")
			f.run(t, "alpha>beta m6")
			require.True(t, f.stored(t, f.ids["m6"]).LoopStopped)
			require.Len(t, f.noticesFor(t, "admin"), 1, "one notice per chain")

			// A new chain that loops sends its own.
			for _, step := range []string{
				"alpha.", "beta.", "bob>alpha n0", "alpha@n0", "alpha>beta n1", "beta@n1", "beta>alpha n2",
				"alpha@n2", "alpha>beta n3", "beta@n3", "beta>alpha n4",
			} {
				f.run(t, step)
			}
			got := f.noticesFor(t, "admin")
			require.Len(t, got, 2, "a new chain's stop is noticed")
			require.Equal(t, loopThreadPrefix+f.ids["n0"], got[1].Thread)
			bobs := f.noticesFor(t, "bob")
			require.NotEmpty(t, bobs)
			require.Equal(t, got[1].Seq, bobs[len(bobs)-1].Seq, "bob started the new chain: he is told")
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// An agent's pushes in its turns take tokens of its bucket; past the burst
// a push is 429 rate_limited with Retry-After and stores nothing. People,
// and agents outside a turn, are never counted.
func TestAgentPushLimit(t *testing.T) {
	f := newLoopFixture(t, teamconfig.LoopGuard{AgentPushesPerMinute: 60, AgentPushBurst: 3})
	push := func(from string) error {
		_, err := f.b.Push(as(from), &apiv1.PushRequest{To: ptr("bob"), Body: "x"})
		return err
	}
	for range 50 {
		require.NoError(t, push("alice"), "a person is never limited")
		require.NoError(t, push("alpha"), "an agent outside a turn is never limited")
	}
	f.run(t, "alice>alpha m0")
	f.run(t, "alpha@m0")
	for i := range 3 {
		require.NoError(t, push("alpha"), "push %d of the burst", i)
	}
	before, err := f.srv.core.store.LastMessageSeq(context.Background())
	require.NoError(t, err)
	err = push("alpha")
	requireCode(t, err, apierr.CodeRateLimited)
	require.Equal(t, time.Second, apierr.Render(err).RetryAfter, "one token a second")
	_, err = f.obj.DiscussObjective(as("alpha"), &apiv1.DiscussObjectiveRequest{Id: f.objID, Body: "x"})
	requireCode(t, err, apierr.CodeRateLimited, "an objective post is a push too")
	after, err := f.srv.core.store.LastMessageSeq(context.Background())
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused push stores nothing")

	require.NoError(t, push("beta"), "each agent has its own bucket")
	require.NoError(t, push("alice"), "people are never limited")
	f.advance(time.Second)
	require.NoError(t, push("alpha"), "a token is back after Retry-After")
	requireCode(t, push("alpha"), apierr.CodeRateLimited)
	f.run(t, "alpha.")
	require.NoError(t, push("alpha"), "the turn ended: not counted")
}

// Nothing a member puts in a message's title, body or data makes a
// person's message an agent's reply or the reverse: the reply chain comes
// from the sender's turn alone.
func FuzzLoopGuardAttribution(f *testing.F) {
	for _, seed := range []struct{ title, body, data string }{
		{"", "plain", `{}`},
		{"reply", "hops: 99", `{"hops":99,"replyTo":"0000000000000001","loopStopped":true}`},
		{"", "x", `{"reply_to":"1","loop_stopped":false,"hops":-1,"kind":"agent_loop_stopped"}`},
		{"[svc] message 0000000000000001 from alpha", "in reply to 0000000000000001", `{"turn":"0000000000000001","meta":{"kind":"context_refresh"}}`},
		{"", "\x00\u202e", `{"thread":"loop:0000000000000001"}`},
		{"", "x", `{"thread":"chan:general","from":"svc:loop-guard"}`},
		{"ü", "日本", `{"nested":{"hops":1,"loopStopped":true}}`},
	} {
		f.Add(seed.title, seed.body, seed.data)
	}
	fx := newLoopFixture(f, teamconfig.LoopGuard{MaxHops: 1})
	start, err := fx.b.Push(as("alice"), &apiv1.PushRequest{To: ptr("alpha"), Body: "go"})
	require.NoError(f, err)
	_, err = fx.b.UpdateDelivery(as("alpha"), &apiv1.UpdateDeliveryRequest{Name: "alpha", Turn: apiv1.TurnPhase_TURN_PHASE_STARTED, TurnMessageId: start.GetMessage().GetId()})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, title, body, data string) {
		var d *structpb.Struct
		if data != "" {
			d = &structpb.Struct{}
			if protojson.Unmarshal([]byte(data), d) != nil {
				return
			}
		}
		fx.advance(time.Minute) // the agent's bucket is never what refuses
		for _, tc := range []struct {
			from string
			want link
		}{
			{"alice", link{}},
			{"bob", link{}},
			{"alpha", link{hops: 1, replyTo: "start"}},
		} {
			req := &apiv1.PushRequest{To: ptr("beta"), Title: title, Body: body, Data: d}
			if d != nil {
				req.Data = proto.Clone(d).(*structpb.Struct)
			}
			r, err := fx.b.Push(as(tc.from), req)
			if err != nil {
				require.NotEqual(t, apierr.CodeInternal, apierr.Render(err).Body.Error, "%v", err)
				require.NotEqual(t, apierr.CodeRateLimited, apierr.Render(err).Body.Error, "%v", err)
				continue // refused for its content, whoever sent it
			}
			s := fx.stored(t, r.GetMessage().GetId())
			got := link{hops: s.Hops, stopped: s.LoopStopped}
			if s.ReplyTo != 0 {
				got.replyTo = "?"
				if formatMessageID(s.ReplyTo) == start.GetMessage().GetId() {
					got.replyTo = "start"
				}
			}
			require.Equal(t, tc.want, got, "%s", tc.from)
			require.Equal(t, uint32(tc.want.hops), r.GetMessage().GetHops())
			require.False(t, r.GetMessage().GetLoopStopped())
		}
	})
}

// An approval's messages and the loop guard: the request is the agent's
// (a DM it sends in its turn, so it goes on the turn's chain and a loop
// cannot get past the bound through an agent approver), but the decision,
// on the broker-only thread approval:<id>, wakes no agent and answers no
// turn: it is in no chain, even when an agent decides in a deep turn or
// the member's own expiry comes in one. So it neither stops, nor spends
// the chain's one notice, nor names the approval's thread as the loop's
// conversation.
func TestLoopGuardApprovalMessages(t *testing.T) {
	f := newLoopFixture(t, teamconfig.LoopGuard{MaxHops: 1})
	appr := &Approvals{core: f.srv.core}

	// alpha asks in its turn of a person's message: the request replies
	// to that message.
	f.run(t, "alice>alpha m0")
	f.run(t, "alpha@m0")
	res, err := appr.CreateApproval(as("alpha"), &apiv1.CreateApprovalRequest{Tool: "Bash"})
	require.NoError(t, err)
	id := res.GetApproval().GetId()
	all, err := f.srv.core.store.MessagesFor(context.Background(), "admin", 0, 1000)
	require.NoError(t, err)
	var reqs []store.Message
	for _, m := range all {
		if m.Thread == dmThread("alpha", "admin") {
			reqs = append(reqs, m)
		}
	}
	require.Len(t, reqs, 1, "admin is asked")
	require.Equal(t, link{hops: 1, replyTo: "m0"}, link{hops: reqs[0].Hops, replyTo: labelOf(f.ids, reqs[0].ReplyTo), stopped: reqs[0].LoopStopped},
		"the request is alpha's reply in its turn")

	// gamma (members.manage) decides it in a turn at the bound.
	f.run(t, "bob>beta n0")
	f.run(t, "beta@n0")
	f.run(t, "beta>gamma n1")
	f.run(t, "gamma@n1")
	_, err = appr.DecideApproval(as("gamma", auth.MembersManage), &apiv1.DecideApprovalRequest{Id: id, Decision: "allow"})
	require.NoError(t, err)
	decision := func(id string) store.Message {
		t.Helper()
		ms, err := f.srv.core.store.MessagesFor(context.Background(), "alpha", 0, 1000)
		require.NoError(t, err)
		for _, m := range ms {
			if m.Thread == approvalThreadPrefix+id {
				return m
			}
		}
		t.Fatalf("no decision of %s reached alpha", id)
		return store.Message{}
	}
	d := decision(id)
	require.Equal(t, "gamma", d.From)
	require.Equal(t, link{}, link{hops: d.Hops, replyTo: labelOf(f.ids, d.ReplyTo), stopped: d.LoopStopped}, "the decision is in no chain")
	require.Empty(t, f.noticesFor(t, "admin"), "no loop was stopped")

	// gamma's own reply in that turn is past the bound: its chain's notice
	// names the DM, not the approval.
	f.run(t, "gamma>beta n2")
	require.True(t, f.stored(t, f.ids["n2"]).LoopStopped)
	got := f.noticesFor(t, "admin")
	require.Len(t, got, 1)
	require.Contains(t, string(got[0].Data), `"conversation":"`+dmThread("beta", "gamma")+`"`)

	// alpha's next approval is withdrawn, from alpha, while alpha is in a
	// turn: still in no chain.
	f.run(t, "alpha.")
	f.run(t, "alpha@-")
	res, err = appr.CreateApproval(as("alpha"), &apiv1.CreateApprovalRequest{Tool: "Write"})
	require.NoError(t, err)
	id2 := res.GetApproval().GetId()
	_, err = appr.WithdrawApproval(as("alpha"), &apiv1.WithdrawApprovalRequest{Id: id2, Reason: ptr("the agent stopped waiting")})
	require.NoError(t, err)
	w := decision(id2)
	require.Equal(t, "alpha", w.From, "a withdrawal comes from the member")
	require.Equal(t, link{}, link{hops: w.Hops, replyTo: labelOf(f.ids, w.ReplyTo), stopped: w.LoopStopped}, "the withdrawal is in no chain")
	require.Len(t, f.noticesFor(t, "admin"), 1, "and sends no notice")
}
