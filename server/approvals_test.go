package server

import (
	"context"
	"encoding/json"
	"path/filepath"
	"svc/server/apierr"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
	"svc/store/sqlite"
)

func TestPendingApprovalsIndex(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type op struct {
		add    bool
		id     string
		member string
		exp    time.Duration
	}
	for _, tc := range []struct {
		name        string
		ops         []op
		blocked     map[string]bool
		next        time.Duration // 0: nothing pending
		dueAt       time.Duration
		due         []string
		wantWakeups bool
	}{
		{name: "empty", blocked: map[string]bool{"a": false}},
		{
			name:    "one pending blocks its member only",
			ops:     []op{{true, "x", "a", time.Minute}},
			blocked: map[string]bool{"a": true, "b": false}, next: time.Minute,
			dueAt: time.Minute, due: []string{"x"},
		},
		{
			name:    "two of one member: blocked until both go",
			ops:     []op{{true, "x", "a", time.Minute}, {true, "y", "a", 2 * time.Minute}, {add: false, id: "x"}},
			blocked: map[string]bool{"a": true}, next: 2 * time.Minute,
			dueAt: time.Minute, due: nil,
		},
		{
			name:    "all removed",
			ops:     []op{{true, "x", "a", time.Minute}, {true, "y", "a", 2 * time.Minute}, {add: false, id: "x"}, {add: false, id: "y"}},
			blocked: map[string]bool{"a": false},
		},
		{
			name:    "adding twice counts once",
			ops:     []op{{true, "x", "a", time.Minute}, {true, "x", "a", time.Minute}, {add: false, id: "x"}},
			blocked: map[string]bool{"a": false},
		},
		{
			name:    "removing an unknown id changes nothing",
			ops:     []op{{true, "x", "a", time.Minute}, {add: false, id: "nope"}},
			blocked: map[string]bool{"a": true}, next: time.Minute,
		},
		{
			name:    "earliest expiry first, due in order",
			ops:     []op{{true, "late", "a", 3 * time.Minute}, {true, "b2", "b", time.Minute}, {true, "b1", "b", time.Minute}},
			blocked: map[string]bool{"a": true, "b": true}, next: time.Minute,
			dueAt: 3 * time.Minute, due: []string{"b1", "b2", "late"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newPendingApprovals()
			for _, o := range tc.ops {
				if o.add {
					x.add(o.id, o.member, t0.Add(o.exp))
				} else {
					x.remove(o.id)
				}
			}
			for m, want := range tc.blocked {
				require.Equal(t, want, x.blocked(m), "blocked(%s)", m)
			}
			next, ok := x.next()
			require.Equal(t, tc.next != 0, ok)
			if ok {
				require.Equal(t, t0.Add(tc.next), next)
			}
			require.Equal(t, tc.due, x.due(t0.Add(tc.dueAt)))
		})
	}
}

// approvalsEnv is a running server whose team has approvers to test.
type approvalsEnv struct {
	srv  *Server
	st   store.Store
	svc  *Approvals
	objs *Objectives
}

// approvalTeam: admin holds members.manage, agent asks, alice is agent's
// named approver, orig may create objectives, bob is nobody to agent.
func approvalTeam(expire string) *teamconfig.File {
	f := &teamconfig.File{Store: teamconfig.Store{Members: []teamconfig.Member{
		{Name: "admin", Permissions: []string{auth.MembersManage}},
		{Name: "agent", Permissions: []string{}, Approvers: []string{"alice"}},
		{Name: "alice", Permissions: []string{}},
		{Name: "bob", Permissions: []string{}},
		{Name: "orig", Permissions: []string{auth.ObjectivesCreate}},
	}}}
	if expire != "" {
		f.Approvals = &teamconfig.Approvals{ExpireAfter: expire}
	}
	return f
}

func startApprovals(t *testing.T, st store.Store, f *teamconfig.File) *approvalsEnv {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, f.Validate())
	path := filepath.Join(t.TempDir(), "svc.json")
	require.NoError(t, teamconfig.Save(path, f))
	team, err := NewTeam(ctx, path, f, st, time.Now)
	require.NoError(t, err)
	srv := New(Deps{Store: st, Team: team, Version: "test"})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = srv.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &approvalsEnv{srv: srv, st: st, svc: &Approvals{core: srv.core}, objs: &Objectives{core: srv.core}}
}

func asSession(member string, perms ...string) context.Context {
	return auth.WithPrincipal(context.Background(), &auth.Principal{Member: member, Permissions: perms, Via: auth.ViaSession})
}

var (
	apprAdmin = func() context.Context { return as("admin", auth.MembersManage) }
	apprAgent = func() context.Context { return as("agent") }
)

func mustInput(t *testing.T, js string) *structpb.Value {
	t.Helper()
	v := &structpb.Value{}
	require.NoError(t, protojson.Unmarshal([]byte(js), v))
	return v
}

func (e *approvalsEnv) ask(t *testing.T, tool, input string, objective *string) *apiv1.Approval {
	t.Helper()
	res, err := e.svc.CreateApproval(apprAgent(), &apiv1.CreateApprovalRequest{Tool: tool, Input: mustInput(t, input), Objective: objective})
	require.NoError(t, err)
	return res.GetApproval()
}

// messagesOn are the messages of a thread, oldest first.
func (e *approvalsEnv) messagesOn(t *testing.T, thread string) []store.Message {
	t.Helper()
	ms, err := e.st.ListMessages(context.Background(), store.MessageFilter{Thread: thread, Limit: 100})
	require.NoError(t, err)
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	return ms
}

func dataOf(t *testing.T, m store.Message) map[string]any {
	t.Helper()
	var d map[string]any
	require.NoError(t, json.Unmarshal(m.Data, &d))
	return d
}

func TestApprovalRequestReachesEveryApprover(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam(""))
	obj, err := e.objs.CreateObjective(as("orig", auth.ObjectivesCreate), &apiv1.CreateObjectiveRequest{Title: "ship", Outcome: "shipped", Assignee: "agent"})
	require.NoError(t, err)
	id := obj.GetObjective().GetId()
	a := e.ask(t, "Bash", `{"command":"make deploy"}`, &id)

	require.Equal(t, "agent", a.GetMember())
	require.Equal(t, "Bash", a.GetTool())
	require.Equal(t, store.ApprovalPending, a.GetStatus())
	require.Equal(t, id, a.GetObjective().GetStringValue())
	require.Equal(t, "make deploy", a.GetInput().GetStructValue().GetFields()["command"].GetStringValue())
	for _, v := range []*structpb.Value{a.GetDecidedAt(), a.GetDecidedBy(), a.GetReason()} {
		require.IsType(t, &structpb.Value_NullValue{}, v.GetKind(), "null until decided")
	}
	require.InDelta(t, float64(teamconfig.DefaultApprovalExpiry.Milliseconds()), a.GetExpiresAt()-a.GetRequestedAt(), 1)

	for _, who := range []string{"admin", "alice", "orig"} {
		ms := e.messagesOn(t, dmThread("agent", who))
		require.Len(t, ms, 1, "%s gets one request", who)
		m := ms[0]
		require.Equal(t, "agent", m.From, "a DM from the agent")
		require.Equal(t, who, m.To)
		require.Equal(t, "agent asks to use Bash", m.Title)
		require.Contains(t, m.Body, a.GetId())
		require.Contains(t, m.Body, "make deploy")
		d := dataOf(t, m)
		require.Equal(t, kindApprovalRequest, d["kind"])
		require.Equal(t, a.GetId(), d["approval"])
	}
	require.Empty(t, e.messagesOn(t, dmThread("agent", "bob")), "bob is no approver")
	require.True(t, e.srv.core.presence.blocked("agent"))
}

func TestApprovalDecisionRules(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam(""))
	a := e.ask(t, "Write", `{"file_path":"/etc/passwd"}`, nil)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *apiv1.DecideApprovalRequest
		code apierr.Code
	}{
		{"bad decision", apprAdmin(), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "maybe"}, apierr.CodeBadRequest},
		{"reason too long", apprAdmin(), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "deny", Reason: ptr(string(make([]byte, maxApprovalReason+1)))}, apierr.CodeBadRequest},
		{"unknown id", apprAdmin(), &apiv1.DecideApprovalRequest{Id: "nope", Decision: "allow"}, apierr.CodeNotFound},
		{"nobody to the agent", as("bob"), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"}, apierr.CodeForbidden},
		{"the agent itself", apprAgent(), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"}, apierr.CodeForbidden},
		{"objectives.create alone is no approver", as("orig", auth.ObjectivesCreate), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"}, apierr.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.DecideApproval(tc.ctx, tc.req)
			requireCode(t, err, tc.code)
		})
	}
	// alice, a named approver, decides over the human plane.
	res, err := e.svc.DecideApproval(asSession("alice"), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "deny", Reason: ptr("not /etc")})
	require.NoError(t, err)
	d := res.GetApproval()
	require.Equal(t, store.ApprovalDenied, d.GetStatus())
	require.Equal(t, "alice", d.GetDecidedBy().GetStringValue())
	require.Equal(t, "not /etc", d.GetReason().GetStringValue())
	require.Positive(t, d.GetDecidedAt().GetNumberValue())
	require.False(t, e.srv.core.presence.blocked("agent"), "unblocked by the decision")

	_, err = e.svc.DecideApproval(apprAdmin(), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"})
	requireCode(t, err, apierr.CodeConflict, "decided once")
	_, err = e.svc.DecideApproval(as("bob"), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"})
	requireCode(t, err, apierr.CodeForbidden, "403 before 409 for a caller who may not decide")

	ms := e.messagesOn(t, approvalThreadPrefix+a.GetId())
	require.Len(t, ms, 1)
	m := ms[0]
	require.Equal(t, "alice", m.From)
	for who, want := range map[string]bool{"agent": true, "admin": true, "alice": true, "bob": false, "orig": false} {
		got, err := e.st.MessagesFor(context.Background(), who, 0, 100)
		require.NoError(t, err)
		found := false
		for _, x := range got {
			found = found || x.Seq == m.Seq
		}
		require.Equal(t, want, found, "the decision reaches the agent and its approvers: %s", who)
	}
	// The decision thread's history: the agent, its approvers and the
	// members.manage holders read it; anyone else is refused, not shown
	// it empty.
	b := newBroker(e.srv.core, nil)
	for who, ctx := range map[string]context.Context{"agent": apprAgent(), "alice": as("alice"), "admin": apprAdmin(), "bob": as("bob")} {
		h, err := b.History(ctx, &apiv1.HistoryRequest{Thread: approvalThreadPrefix + a.GetId()})
		if who == "bob" {
			requireCode(t, err, apierr.CodeForbidden, "bob is not in the approval's thread")
			continue
		}
		require.NoError(t, err, who)
		require.Len(t, h.GetMessages(), 1, who)
		require.Equal(t, "alice", h.GetMessages()[0].GetFrom(), who)
	}
	dd := dataOf(t, m)
	require.Equal(t, kindApprovalDecided, dd["kind"])
	require.Equal(t, approvalThreadPrefix+a.GetId(), dd["thread"])
	require.Equal(t, "deny", dd["decision"])
	require.Equal(t, "not /etc", dd["reason"])
	require.Equal(t, "alice", dd["decidedBy"])
	require.Equal(t, "alice denied Write for agent", m.Title)
}

func TestApprovalListVisibility(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam(""))
	first := e.ask(t, "Bash", `{"command":"a"}`, nil)
	second := e.ask(t, "Bash", `{"command":"b"}`, nil)
	_, err := e.svc.DecideApproval(apprAdmin(), &apiv1.DecideApprovalRequest{Id: first.GetId(), Decision: "allow"})
	require.NoError(t, err)

	ids := func(ctx context.Context, status string) []string {
		res, err := e.svc.ListApprovals(ctx, &apiv1.ListApprovalsRequest{Status: status})
		require.NoError(t, err)
		out := []string{}
		for _, a := range res.GetApprovals() {
			out = append(out, a.GetId())
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		status string
		want   []string
	}{
		{"admin pending by default", apprAdmin(), "", []string{second.GetId()}},
		{"admin decided", apprAdmin(), "decided", []string{first.GetId()}},
		{"admin all, newest first", apprAdmin(), "all", []string{second.GetId(), first.GetId()}},
		{"named approver", asSession("alice"), "all", []string{second.GetId(), first.GetId()}},
		{"the requester sees its own", apprAgent(), "pending", []string{second.GetId()}},
		{"nobody sees nothing", as("bob"), "all", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ids(tc.ctx, tc.status))
		})
	}
	_, err = e.svc.ListApprovals(apprAdmin(), &apiv1.ListApprovalsRequest{Status: "open"})
	requireCode(t, err, apierr.CodeBadRequest)

	_, err = e.svc.GetApproval(as("bob"), &apiv1.GetApprovalRequest{Id: second.GetId()})
	requireCode(t, err, apierr.CodeNotFound, "hidden from who may neither decide nor asked")
	got, err := e.svc.GetApproval(apprAgent(), &apiv1.GetApprovalRequest{Id: second.GetId()})
	require.NoError(t, err)
	require.Equal(t, second.GetId(), got.GetApproval().GetId())
}

func TestApprovalCreateRefusals(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam(""))
	obj, err := e.objs.CreateObjective(as("orig", auth.ObjectivesCreate), &apiv1.CreateObjectiveRequest{Title: "t", Outcome: "o", Assignee: "bob"})
	require.NoError(t, err)
	bobs := obj.GetObjective().GetId()
	big := `{"x":"` + repeat("a", maxApprovalInput) + `"}`
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  *apiv1.CreateApprovalRequest
		code apierr.Code
	}{
		{"no tool", apprAgent(), &apiv1.CreateApprovalRequest{Tool: " "}, apierr.CodeBadRequest},
		{"tool with a newline", apprAgent(), &apiv1.CreateApprovalRequest{Tool: "Bash\nrm"}, apierr.CodeBadRequest},
		{"tool too long", apprAgent(), &apiv1.CreateApprovalRequest{Tool: repeat("t", maxApprovalTool+1)}, apierr.CodeBadRequest},
		{"input too large", apprAgent(), &apiv1.CreateApprovalRequest{Tool: "Bash", Input: mustInput(t, big)}, apierr.CodeBadRequest},
		{"unknown objective", apprAgent(), &apiv1.CreateApprovalRequest{Tool: "Bash", Objective: ptr("nope")}, apierr.CodeBadRequest},
		{"someone else's objective", apprAgent(), &apiv1.CreateApprovalRequest{Tool: "Bash", Objective: &bobs}, apierr.CodeBadRequest},
		{"session plane", asSession("agent"), &apiv1.CreateApprovalRequest{Tool: "Bash"}, apierr.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.CreateApproval(tc.ctx, tc.req)
			requireCode(t, err, tc.code)
		})
	}
	list, err := e.st.ListApprovals(context.Background(), store.ApprovalFilter{})
	require.NoError(t, err)
	require.Empty(t, list, "a refused request stores nothing")

	for range maxPendingApprovals {
		e.ask(t, "Bash", `{}`, nil)
	}
	_, err = e.svc.CreateApproval(apprAgent(), &apiv1.CreateApprovalRequest{Tool: "Bash"})
	requireCode(t, err, apierr.CodeRateLimited, "past the pending bound")
}

func repeat(s string, n int) string {
	b := make([]byte, 0, n*len(s))
	for range n {
		b = append(b, s...)
	}
	return string(b)
}

func TestApprovalWithdraw(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam(""))
	a := e.ask(t, "Bash", `{}`, nil)
	_, err := e.svc.WithdrawApproval(apprAdmin(), &apiv1.WithdrawApprovalRequest{Id: a.GetId()})
	requireCode(t, err, apierr.CodeForbidden, "an approver decides, never withdraws")
	_, err = e.svc.WithdrawApproval(as("bob"), &apiv1.WithdrawApprovalRequest{Id: a.GetId()})
	requireCode(t, err, apierr.CodeNotFound)
	res, err := e.svc.WithdrawApproval(apprAgent(), &apiv1.WithdrawApprovalRequest{Id: a.GetId(), Reason: ptr("the runner restarted")})
	require.NoError(t, err)
	require.Equal(t, store.ApprovalExpired, res.GetApproval().GetStatus())
	require.Equal(t, "withdrawn: the runner restarted", res.GetApproval().GetReason().GetStringValue())
	require.IsType(t, &structpb.Value_NullValue{}, res.GetApproval().GetDecidedBy().GetKind())
	require.False(t, e.srv.core.presence.blocked("agent"))
	_, err = e.svc.WithdrawApproval(apprAgent(), &apiv1.WithdrawApprovalRequest{Id: a.GetId()})
	requireCode(t, err, apierr.CodeConflict)
	_, err = e.svc.DecideApproval(apprAdmin(), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"})
	requireCode(t, err, apierr.CodeConflict)
}

// waitApproval polls the store until the approval has status (bounded: a
// hang, not a speed).
func waitApproval(t *testing.T, st store.Store, id, status string) store.Approval {
	t.Helper()
	var a store.Approval
	require.Eventually(t, func() bool {
		var err error
		a, err = st.GetApproval(context.Background(), id)
		return err == nil && a.Status == status
	}, 30*time.Second, 10*time.Millisecond, "approval %s never became %s (last %+v)", id, status, a)
	return a
}

func TestApprovalExpiresAsDenied(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam("1s"))
	a := e.ask(t, "Bash", `{}`, nil)
	require.InDelta(t, 1000, a.GetExpiresAt()-a.GetRequestedAt(), 1)
	got := waitApproval(t, e.st, a.GetId(), store.ApprovalExpired)
	require.Empty(t, got.DecidedBy)
	require.Equal(t, "expired: no decision within 1s", got.Reason)
	require.False(t, got.DecidedAt.Before(got.ExpiresAt), "not before its expiry")
	require.Eventually(t, func() bool { return !e.srv.core.presence.blocked("agent") }, 10*time.Second, 10*time.Millisecond)
	ms := e.messagesOn(t, approvalThreadPrefix+a.GetId())
	require.Len(t, ms, 1)
	d := dataOf(t, ms[0])
	require.Equal(t, "deny", d["decision"], "an expiry is a denial to the runner")
	require.Equal(t, store.ApprovalExpired, d["status"])
}

func TestPendingApprovalSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.db")
	st, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	e := startApprovals(t, st, approvalTeam("3s"))
	a := e.ask(t, "Bash", `{}`, nil)
	stillPending := e.ask(t, "Bash", `{"n":2}`, nil)
	require.NoError(t, st.Close())

	st2, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st2.Close() })
	e2 := startApprovals(t, st2, approvalTeam("3s"))
	require.True(t, e2.srv.core.presence.blocked("agent"), "blocked again after the restart")
	res, err := e2.svc.DecideApproval(apprAdmin(), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"})
	require.NoError(t, err)
	require.Equal(t, store.ApprovalAllowed, res.GetApproval().GetStatus())
	require.True(t, e2.srv.core.presence.blocked("agent"), "one still waits")
	waitApproval(t, st2, stillPending.GetId(), store.ApprovalExpired)
}

func TestApproversNamedByTheTeam(t *testing.T) {
	e := startApprovals(t, mustMemStore(t), approvalTeam(""))
	for _, tc := range []struct {
		name      string
		member    string
		approvers []string
		code      apierr.Code
	}{
		{"unknown member", "ghost", []string{"alice"}, apierr.CodeNotFound},
		{"unknown approver", "agent", []string{"ghost"}, apierr.CodeBadRequest},
		{"itself", "agent", []string{"agent"}, apierr.CodeBadRequest},
		{"twice", "agent", []string{"bob", "bob"}, apierr.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.svc.SetApprovers(apprAdmin(), &apiv1.SetApproversRequest{Name: tc.member, Approvers: tc.approvers})
			requireCode(t, err, tc.code)
		})
	}
	res, err := e.svc.SetApprovers(apprAdmin(), &apiv1.SetApproversRequest{Name: "agent", Approvers: []string{"bob", "alice"}})
	require.NoError(t, err)
	require.Equal(t, []string{"alice", "bob"}, res.GetApprovers())
	got, err := e.svc.GetApprovers(as("bob"), &apiv1.GetApproversRequest{Name: "bob"})
	require.NoError(t, err)
	require.Equal(t, []string{"agent"}, got.GetApproverOf())
	_, err = e.svc.GetApprovers(as("bob"), &apiv1.GetApproversRequest{Name: "agent"})
	requireCode(t, err, apierr.CodeForbidden, "manage or self")

	a := e.ask(t, "Bash", `{}`, nil)
	_, err = e.svc.DecideApproval(as("bob"), &apiv1.DecideApprovalRequest{Id: a.GetId(), Decision: "allow"})
	require.NoError(t, err, "bob is named now")

	// A deleted approver's name leaves every list: a member created later
	// under that name is nobody's approver.
	_, err = (&brokerMembers{core: e.srv.core}).DeleteMember(apprAdmin(), &apiv1.DeleteMemberRequest{Name: "bob"})
	require.NoError(t, err)
	m, ok := e.srv.core.team.Member("agent")
	require.True(t, ok)
	require.Equal(t, []string{"alice"}, m.Approvers)
}

// decideAfterCommitStore decides an approval the moment the transaction
// that stored its request commits, before CreateApproval goes on: as a
// settleApproval on another goroutine would (the store's decision, then
// the index's remove), when an approver decides the moment the request
// reaches its stream.
type decideAfterCommitStore struct {
	store.Store
	decide atomic.Pointer[func(ctx context.Context, id string)]
}

func (s *decideAfterCommitStore) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	var asked []string
	err := s.Store.WithTx(ctx, func(tx store.Tx) error { return fn(askedTx{Tx: tx, asked: &asked}) })
	if decide := s.decide.Load(); err == nil && decide != nil {
		for _, id := range asked {
			(*decide)(ctx, id)
		}
	}
	return err
}

type askedTx struct {
	store.Tx
	asked *[]string
}

func (t askedTx) CreateApproval(ctx context.Context, a store.Approval) error {
	*t.asked = append(*t.asked, a.ID)
	return t.Tx.CreateApproval(ctx, a)
}

// A decision that lands between the request's commit (which publishes it)
// and CreateApproval's index add must not leave the member blocked until
// the approval's expiry.
func TestApprovalDecidedAtOnceLeavesNoBlock(t *testing.T) {
	st := &decideAfterCommitStore{Store: mustMemStore(t)}
	e := startApprovals(t, st, approvalTeam(""))
	decide := func(ctx context.Context, id string) {
		_, err := st.Store.DecideApproval(ctx, store.ApprovalDecision{ID: id, Status: store.ApprovalAllowed, DecidedBy: "alice", DecidedAt: time.Now()})
		require.NoError(t, err)
		e.srv.core.approvals.remove(id)
	}
	st.decide.Store(&decide)
	a := e.ask(t, "Bash", `{}`, nil)
	got, err := e.st.GetApproval(context.Background(), a.GetId())
	require.NoError(t, err)
	require.Equal(t, store.ApprovalAllowed, got.Status)
	require.Equal(t, stateIdle, e.srv.core.presence.state("agent", 1), "nothing waits: not blocked")
}
