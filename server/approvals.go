package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"svc/server/apierr"
	"svc/server/wire"
	"sync"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/server/toolcall"
	"svc/store"
)

// Approval bounds (docs/APPROVALS.md).
const (
	// maxApprovalTool bounds the tool name: the runner's own bound on a
	// tool name.
	maxApprovalTool = 256
	// maxApprovalInput bounds the tool input's JSON: the runner caps a
	// tool_action field at the same size.
	maxApprovalInput = 64 << 10
	// maxApprovalReason bounds a decider's or a withdrawal's reason.
	maxApprovalReason = 4 << 10
	// maxPendingApprovals bounds one member's pending approvals: an agent
	// waits on one tool at a time, a few run in parallel; past this an
	// agent in a loop would flood its approvers.
	maxPendingApprovals = 32
	// maxListedApprovals bounds a list: the newest approvals in the asked
	// status, of which the caller sees its own and those it may decide.
	maxListedApprovals = 500
	// approvalBodyInput bounds the input quoted in a request message.
	approvalBodyInput = 2 << 10
)

// Approval statuses on the wire and in data.kind of their messages.
const (
	kindApprovalRequest = "approval_request"
	kindApprovalDecided = "approval_decided"
	// approvalThreadPrefix is the thread of a decision's message: written
	// by the broker only (a push may not name it), so a runner can trust a
	// decision that comes on it.
	approvalThreadPrefix = "approval:"
)

// Approvals serves the approvals resource: requests of members to use a
// tool, decided by people.
type Approvals struct {
	apiv1.UnimplementedApprovalsServer
	*core
}

var _ apiv1.ApprovalsServer = (*Approvals)(nil)

// pendingApprovals is the in-memory index of the pending approvals: it
// makes a member with one read blocked in presence and drives the expiry
// timer. The store is the authority; the index is loaded from it at start.
type pendingApprovals struct {
	mu       sync.Mutex
	byID     map[string]pendingApproval
	byMember map[string]int
	// wake nudges the expiry loop after an add (an earlier expiry).
	wake chan struct{}
	// changed, when set, runs outside the lock after a member's count of
	// pending approvals went from or to zero: its presence reads blocked,
	// or no longer does (the team stream).
	changed func(member string)
}

type pendingApproval struct {
	member  string
	expires time.Time
}

func newPendingApprovals() *pendingApprovals {
	return &pendingApprovals{byID: map[string]pendingApproval{}, byMember: map[string]int{}, wake: make(chan struct{}, 1)}
}

func (x *pendingApprovals) add(id, member string, expires time.Time) {
	x.mu.Lock()
	first := false
	if _, ok := x.byID[id]; !ok {
		x.byID[id] = pendingApproval{member: member, expires: expires}
		x.byMember[member]++
		first = x.byMember[member] == 1
	}
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	if first && x.changed != nil {
		x.changed(member)
	}
}

func (x *pendingApprovals) remove(id string) {
	x.mu.Lock()
	p, ok := x.byID[id]
	last := false
	if ok {
		delete(x.byID, id)
		if x.byMember[p.member]--; x.byMember[p.member] <= 0 {
			delete(x.byMember, p.member)
			last = true
		}
	}
	x.mu.Unlock()
	if last && x.changed != nil {
		x.changed(p.member)
	}
}

// forget drops member's pending approvals from the index: they went from
// the store with the member.
func (x *pendingApprovals) forget(member string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, p := range x.byID {
		if p.member == member {
			delete(x.byID, id)
		}
	}
	delete(x.byMember, member)
}

// blocked says whether member waits on a decision.
func (x *pendingApprovals) blocked(member string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.byMember[member] > 0
}

// next is the earliest expiry, false when nothing is pending.
func (x *pendingApprovals) next() (time.Time, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var first time.Time
	for _, p := range x.byID {
		if first.IsZero() || p.expires.Before(first) {
			first = p.expires
		}
	}
	return first, !first.IsZero()
}

// due are the ids expired at now.
func (x *pendingApprovals) due(now time.Time) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for id, p := range x.byID {
		if !p.expires.After(now) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// loadPendingApprovals fills the index from the store: pending approvals
// outlive a restart, and so do their blocked state and expiry.
func (c *core) loadPendingApprovals(ctx context.Context) error {
	list, err := c.store.ListApprovals(ctx, store.ApprovalFilter{Statuses: []string{store.ApprovalPending}, Limit: 1 << 20})
	if err != nil {
		return err
	}
	for _, a := range list {
		c.approvals.add(a.ID, a.Member, a.ExpiresAt)
	}
	return nil
}

// runApprovalExpiry expires pending approvals as they come due, until ctx
// ends. It sleeps until the earliest expiry (or an add wakes it).
func (c *core) runApprovalExpiry(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Stop()
		var timer <-chan time.Time
		if next, ok := c.approvals.next(); ok {
			t.Reset(max(next.Sub(c.now()), 0))
			timer = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-c.approvals.wake:
		case <-timer:
			if !c.expireDue(ctx) {
				// The store refused: the same approvals are due again at
				// once, so wait rather than spin.
				select {
				case <-ctx.Done():
					return
				case <-time.After(expiryRetry):
				}
			}
		}
	}
}

// expiryRetry spaces the attempts to expire approvals the store refused.
const expiryRetry = time.Second

// expireDue expires every approval due now, as denied: each gets its
// decision message and activity row like a person's decision. It reports
// whether every one was settled.
func (c *core) expireDue(ctx context.Context) bool {
	ok := true
	for _, id := range c.approvals.due(c.now()) {
		a, err := c.store.GetApproval(ctx, id)
		if err == nil {
			_, err = c.settleApproval(ctx, id, store.ApprovalDecision{
				ID: id, Status: store.ApprovalExpired,
				Reason: fmt.Sprintf("expired: no decision within %s", a.ExpiresAt.Sub(a.RequestedAt).Round(time.Second)),
			}, "")
		}
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
			// Expired now, or gone with its member, or decided meanwhile.
			c.approvals.remove(id)
		case ctx.Err() != nil:
			return false
		default:
			ok = false
			c.log.WarnContext(ctx, "approval not expired; retried", "approval", id, "err", err)
		}
	}
	return ok
}

// originator is the originator of the objective id, "" when there is none.
func (c *core) originator(ctx context.Context, id string) (string, error) {
	if id == "" {
		return "", nil
	}
	o, err := c.store.GetObjective(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return o.Originator, err
}

// approversOf are the members who may decide member's approvals now, by
// name: the holders of members.manage, the originator (of the objective
// the approval names, "" for none) and the members the team names as
// member's approvers; never member itself.
func (c *core) approversOf(member, originator string) []string {
	set := map[string]bool{}
	for _, m := range c.holders(auth.MembersManage) {
		set[m] = true
	}
	if originator != "" {
		if _, ok := c.team.Member(originator); ok {
			set[originator] = true
		}
	}
	if m, ok := c.team.Member(member); ok {
		for _, a := range m.Approvers {
			if _, ok := c.team.Member(a); ok {
				set[a] = true
			}
		}
	}
	delete(set, member)
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// mayDecide says whether p may decide a: a holder of members.manage, the
// originator of a's objective, or a named approver of a's member; never
// the member itself.
func (c *core) mayDecide(p *auth.Principal, a store.Approval, originator string) bool {
	if p.Member == a.Member {
		return false
	}
	if p.Has(auth.MembersManage) || (originator != "" && originator == p.Member) {
		return true
	}
	m, ok := c.team.Member(a.Member)
	return ok && slices.Contains(m.Approvers, p.Member)
}

// ListApprovals implements apiv1.ApprovalsServer.
func (s *Approvals) ListApprovals(ctx context.Context, req *apiv1.ListApprovalsRequest) (*apiv1.ListApprovalsResponse, error) {
	p := mustPrincipal(ctx)
	var statuses []string
	switch req.GetStatus() {
	case "", store.ApprovalPending:
		statuses = []string{store.ApprovalPending}
	case "decided":
		statuses = []string{store.ApprovalAllowed, store.ApprovalDenied, store.ApprovalExpired}
	case "all":
	default:
		return nil, apierr.Invalid("status", "must be pending, decided or all")
	}
	list, err := s.store.ListApprovals(ctx, store.ApprovalFilter{Statuses: statuses, Limit: maxListedApprovals})
	if err != nil {
		return nil, err
	}
	origins := map[string]string{}
	out := &apiv1.ListApprovalsResponse{Approvals: []*apiv1.Approval{}}
	for _, a := range list {
		if a.Member != p.Member && !p.Has(auth.MembersManage) {
			o, seen := origins[a.Objective]
			if !seen {
				if o, err = s.originator(ctx, a.Objective); err != nil {
					return nil, err
				}
				origins[a.Objective] = o
			}
			if !s.mayDecide(p, a, o) {
				continue
			}
		}
		out.Approvals = append(out.Approvals, approvalToProto(a))
	}
	return out, nil
}

// visibleApproval returns approval id for p with its objective's
// originator: 404 when it does not exist or p may neither decide it nor
// be its requester.
func (s *Approvals) visibleApproval(ctx context.Context, p *auth.Principal, id string) (store.Approval, string, bool, error) {
	if id == "" {
		return store.Approval{}, "", false, apierr.Invalid("id", "is required")
	}
	a, err := s.store.GetApproval(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return a, "", false, apierr.Errorf(apierr.CodeNotFound, "no approval %q", id)
	}
	if err != nil {
		return a, "", false, err
	}
	o, err := s.originator(ctx, a.Objective)
	if err != nil {
		return a, "", false, err
	}
	return a, o, s.mayDecide(p, a, o), nil
}

// GetApproval implements apiv1.ApprovalsServer.
func (s *Approvals) GetApproval(ctx context.Context, req *apiv1.GetApprovalRequest) (*apiv1.GetApprovalResponse, error) {
	p := mustPrincipal(ctx)
	a, _, decider, err := s.visibleApproval(ctx, p, req.GetId())
	if err != nil {
		return nil, err
	}
	if !decider && a.Member != p.Member {
		return nil, apierr.Errorf(apierr.CodeNotFound, "no approval %q", req.GetId())
	}
	return &apiv1.GetApprovalResponse{Approval: approvalToProto(a)}, nil
}

// validToolName checks the tool an approval names: one line of UTF-8.
func validToolName(tool string) error {
	if err := apierr.ValidText("tool", tool, maxApprovalTool, true); err != nil {
		return err
	}
	if strings.ContainsFunc(tool, unicode.IsControl) {
		return apierr.Invalid("tool", "must be one line without control characters")
	}
	return nil
}

// CreateApproval implements apiv1.ApprovalsServer.
func (s *Approvals) CreateApproval(ctx context.Context, req *apiv1.CreateApprovalRequest) (*apiv1.CreateApprovalResponse, error) {
	p := mustPrincipal(ctx)
	if !p.BearerPlane() {
		return nil, fmt.Errorf("%w: approvals are requested with a bearer token, by the member that waits", auth.ErrForbidden)
	}
	if err := validToolName(req.GetTool()); err != nil {
		return nil, err
	}
	input := []byte("null")
	if req.GetInput() != nil {
		var err error
		if input, err = protojson.Marshal(req.GetInput()); err != nil {
			return nil, apierr.Invalid("input", "must be JSON")
		}
	}
	input = s.redactForMember(ctx, p.Member, input)
	if len(input) > maxApprovalInput {
		return nil, apierr.Invalid("input", "at most %d bytes of JSON", maxApprovalInput)
	}
	objective := req.GetObjective()
	originator := ""
	if objective != "" {
		o, err := s.store.GetObjective(ctx, objective)
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierr.Invalid("objective", "no objective %q", objective)
		}
		if err != nil {
			return nil, err
		}
		if o.Assignee != p.Member || (o.Status != store.StatusActive && o.Status != store.StatusBlocked) {
			return nil, apierr.Invalid("objective", "must be an open objective assigned to you")
		}
		originator = o.Originator
	}
	now := s.now()
	exp := s.team.ApprovalExpiry()
	a := store.Approval{
		ID: newID(), Member: p.Member, Tool: req.GetTool(), Input: input, Objective: objective,
		Status: store.ApprovalPending, RequestedAt: now, ExpiresAt: now.Add(exp),
	}
	approvers := s.approversOf(p.Member, originator)
	r := s.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		n, err := tx.CountPendingApprovals(ctx, a.Member)
		if err != nil {
			return nil, err
		}
		if n >= maxPendingApprovals {
			return nil, &apierr.Error{Code: apierr.CodeRateLimited, RetryAfter: time.Minute,
				Message: fmt.Sprintf("%d approvals wait for a decision already; wait for them", n)}
		}
		if err := tx.CreateApproval(ctx, a); err != nil {
			return nil, err
		}
		return approvalRequests(a, approvers, exp)
	}, nil, nil)
	if r.err != nil {
		return nil, r.err
	}
	// The request is published: a decision may have come (and its remove
	// found nothing to remove) before this add. Read again once indexed.
	s.approvals.add(a.ID, a.Member, a.ExpiresAt)
	if cur, err := s.store.GetApproval(ctx, a.ID); err == nil && cur.Status != store.ApprovalPending {
		s.approvals.remove(a.ID)
	}
	setHTTPStatus(ctx, http.StatusCreated)
	return &apiv1.CreateApprovalResponse{Approval: approvalToProto(a)}, nil
}

// redactForMember replaces the member's secret values in input by
// [REDACTED]: the runner redacts before it asks, and the broker does it
// again with what it knows (the secrets, not the token), so approvers
// never read a secret whatever the client. Without a KEK the broker holds
// no secret values.
func (c *core) redactForMember(ctx context.Context, member string, input []byte) []byte {
	if c.kek == nil || c.secretValues == nil {
		return input
	}
	secrets, err := c.secretValues(ctx, member)
	if err != nil || len(secrets) == 0 {
		return input
	}
	var v any
	if json.Unmarshal(input, &v) != nil {
		return input
	}
	out, err := json.Marshal(toolcall.Redact(v, secrets...))
	if err != nil {
		return input
	}
	return out
}

// approvalRequests are the approval_request messages of a: one DM from
// the member to each approver, so each sees it in the conversation with
// the agent.
func approvalRequests(a store.Approval, approvers []string, exp time.Duration) ([]store.Message, error) {
	title := apierr.TruncateUTF8(fmt.Sprintf("%s asks to use %s", a.Member, a.Tool), maxTitle)
	var b strings.Builder
	fmt.Fprintf(&b, "%s asks for approval to use %s.\n\nInput: %s\n", a.Member, a.Tool, apierr.TruncateUTF8(string(a.Input), approvalBodyInput))
	if a.Objective != "" {
		fmt.Fprintf(&b, "Objective: %s\n", a.Objective)
	}
	fmt.Fprintf(&b, "Unanswered, it expires as denied in %s.\n\nApproval %s: allow or deny it in the web app, with `svc approve %s` or `svc deny %s [reason]`, or with the approvals_decide tool.",
		exp, a.ID, a.ID, a.ID)
	data, err := json.Marshal(map[string]any{"kind": kindApprovalRequest, "approval": a.ID, "member": a.Member, "tool": a.Tool})
	if err != nil {
		return nil, err
	}
	out := make([]store.Message, 0, len(approvers))
	for _, to := range approvers {
		out = append(out, store.Message{
			From: a.Member, To: to, Thread: dmThread(a.Member, to), Title: title, Body: b.String(),
			Level: "notice", Data: data, Recipients: []string{to},
		})
	}
	return out, nil
}

// settleApproval writes a decision of a pending approval with its
// approval_decided message (from actor, or from the member itself when
// actor is "": an expiry or a withdrawal) and, once durable, its activity
// row. ErrNotFound and ErrConflict (decided meanwhile) come from the store.
func (c *core) settleApproval(ctx context.Context, id string, d store.ApprovalDecision, actor string) (store.Approval, error) {
	cur, err := c.store.GetApproval(ctx, id)
	if err != nil {
		return cur, err
	}
	o, err := c.originator(ctx, cur.Objective)
	if err != nil {
		return cur, err
	}
	recipients := append([]string{cur.Member}, c.approversOf(cur.Member, o)...)
	d.ID, d.DecidedAt = id, c.now()
	var decided store.Approval
	r := c.msgs.change(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		a, err := tx.DecideApproval(ctx, d)
		if err != nil {
			return nil, err
		}
		decided = a
		m, err := approvalDecidedMessage(a, actor, recipients)
		if err != nil {
			return nil, err
		}
		return []store.Message{m}, nil
	}, nil, nil)
	if r.err != nil {
		return store.Approval{}, r.err
	}
	c.approvals.remove(id)
	c.recordDecision(ctx, decided)
	return decided, nil
}

// decisionWord is the decision of a status as the runner reads it: allow
// for allowed, deny for everything else (expiry is a denial).
func decisionWord(status string) string {
	if status == store.ApprovalAllowed {
		return "allow"
	}
	return "deny"
}

// describeDecision says who decided what, for titles and activity rows.
func describeDecision(a store.Approval) string {
	switch {
	case a.Status == store.ApprovalExpired && a.DecidedBy == "":
		return fmt.Sprintf("the approval of %s for %s expired", a.Tool, a.Member)
	case a.Status == store.ApprovalAllowed:
		return fmt.Sprintf("%s allowed %s for %s", a.DecidedBy, a.Tool, a.Member)
	}
	return fmt.Sprintf("%s denied %s for %s", a.DecidedBy, a.Tool, a.Member)
}

// approvalDecidedMessage is the message that carries a decision to the
// waiting runner (and tells the approvers it was decided): on the
// broker-only thread approval:<id>.
func approvalDecidedMessage(a store.Approval, actor string, recipients []string) (store.Message, error) {
	from := actor
	if from == "" {
		from = a.Member
	}
	thread := approvalThreadPrefix + a.ID
	data := map[string]any{
		"thread": thread, "kind": kindApprovalDecided, "approval": a.ID, "decision": decisionWord(a.Status),
		"status": a.Status, "member": a.Member, "tool": a.Tool,
	}
	if a.DecidedBy != "" {
		data["decidedBy"] = a.DecidedBy
	}
	if a.Reason != "" {
		data["reason"] = a.Reason
	}
	b, err := json.Marshal(data)
	if err != nil {
		return store.Message{}, err
	}
	body := describeDecision(a) + "."
	if a.Reason != "" {
		body += "\nReason: " + a.Reason
	}
	seen := map[string]bool{}
	var to []string
	for _, r := range recipients {
		if !seen[r] {
			seen[r] = true
			to = append(to, r)
		}
	}
	return store.Message{
		From: from, Thread: thread, Title: apierr.TruncateUTF8(describeDecision(a), maxTitle), Body: body,
		Level: "info", Data: b, Recipients: to,
	}, nil
}

// recordDecision writes the decision into the member's activity stream as
// a tool_action saying who decided what. The decision is durable already,
// so a failure here is logged, not answered.
func (c *core) recordDecision(ctx context.Context, a store.Approval) {
	if !c.act.Enabled() {
		return
	}
	ctx = context.WithoutCancel(ctx)
	row := map[string]any{
		"tool": a.Tool, "phase": "approval", "source": "broker", "approval": a.ID,
		"decision": a.Status, "summary": describeDecision(a), "input": json.RawMessage(a.Input),
	}
	if a.DecidedBy != "" {
		row["decidedBy"] = a.DecidedBy
	}
	if a.Reason != "" {
		row["reason"] = a.Reason
	}
	data, err := json.Marshal(row)
	if err != nil {
		c.log.WarnContext(ctx, "approval decision not recorded", "approval", a.ID, "err", err)
		return
	}
	ev := store.ActivityEvent{Member: a.Member, Kind: kindToolAction, TS: a.DecidedAt, ObjectiveID: a.Objective, Data: data}
	if _, err := c.act.Write(ctx, store.ActivityBatch{Events: []store.ActivityEvent{ev}}); err != nil {
		c.log.WarnContext(ctx, "approval decision not recorded", "approval", a.ID, "err", err)
	}
}

// DecideApproval implements apiv1.ApprovalsServer.
func (s *Approvals) DecideApproval(ctx context.Context, req *apiv1.DecideApprovalRequest) (*apiv1.DecideApprovalResponse, error) {
	p := mustPrincipal(ctx)
	var status string
	switch req.GetDecision() {
	case "allow":
		status = store.ApprovalAllowed
	case "deny":
		status = store.ApprovalDenied
	default:
		return nil, apierr.Invalid("decision", "must be allow or deny")
	}
	if err := apierr.ValidText("reason", req.GetReason(), maxApprovalReason, false); err != nil {
		return nil, err
	}
	a, _, decider, err := s.visibleApproval(ctx, p, req.GetId())
	if err != nil {
		return nil, err
	}
	if !decider {
		return nil, fmt.Errorf("%w: only members.manage holders, the objective's originator and %s's named approvers decide its approvals", auth.ErrForbidden, a.Member)
	}
	if a.Status != store.ApprovalPending {
		return nil, apierr.Errorf(apierr.CodeConflict, "approval %s is %s already", a.ID, a.Status)
	}
	decided, err := s.settleApproval(ctx, a.ID, store.ApprovalDecision{Status: status, DecidedBy: p.Member, Reason: req.GetReason()}, p.Member)
	if err != nil {
		return nil, approvalSettleError(a.ID, err)
	}
	return &apiv1.DecideApprovalResponse{Approval: approvalToProto(decided)}, nil
}

// approvalSettleError maps the store's answer to a decision.
func approvalSettleError(id string, err error) error {
	switch {
	case errors.Is(err, store.ErrConflict):
		return apierr.Errorf(apierr.CodeConflict, "approval %s was decided meanwhile", id)
	case errors.Is(err, store.ErrNotFound):
		return apierr.Errorf(apierr.CodeNotFound, "no approval %q", id)
	}
	return err
}

// WithdrawApproval implements apiv1.ApprovalsServer.
func (s *Approvals) WithdrawApproval(ctx context.Context, req *apiv1.WithdrawApprovalRequest) (*apiv1.WithdrawApprovalResponse, error) {
	p := mustPrincipal(ctx)
	if err := apierr.ValidText("reason", req.GetReason(), maxApprovalReason, false); err != nil {
		return nil, err
	}
	a, _, decider, err := s.visibleApproval(ctx, p, req.GetId())
	if err != nil {
		return nil, err
	}
	if a.Member != p.Member {
		if decider {
			return nil, fmt.Errorf("%w: only %s withdraws its approvals; decide it instead", auth.ErrForbidden, a.Member)
		}
		return nil, apierr.Errorf(apierr.CodeNotFound, "no approval %q", req.GetId())
	}
	if a.Status != store.ApprovalPending {
		return nil, apierr.Errorf(apierr.CodeConflict, "approval %s is %s already", a.ID, a.Status)
	}
	reason := "withdrawn: nothing waits for the decision any more"
	if r := req.GetReason(); r != "" {
		reason = "withdrawn: " + r
	}
	decided, err := s.settleApproval(ctx, a.ID, store.ApprovalDecision{Status: store.ApprovalExpired, Reason: apierr.TruncateUTF8(reason, maxApprovalReason)}, "")
	if err != nil {
		return nil, approvalSettleError(a.ID, err)
	}
	return &apiv1.WithdrawApprovalResponse{Approval: approvalToProto(decided)}, nil
}

// GetApprovers implements apiv1.ApprovalsServer.
func (s *Approvals) GetApprovers(ctx context.Context, req *apiv1.GetApproversRequest) (*apiv1.GetApproversResponse, error) {
	p := mustPrincipal(ctx)
	if err := s.manageOrSelf(p, req.GetName()); err != nil {
		return nil, err
	}
	m, _ := s.team.Member(req.GetName())
	return &apiv1.GetApproversResponse{Approvers: nonNil(m.Approvers), ApproverOf: nonNil(s.team.ApproverOf(req.GetName()))}, nil
}

// SetApprovers implements apiv1.ApprovalsServer.
func (s *Approvals) SetApprovers(ctx context.Context, req *apiv1.SetApproversRequest) (*apiv1.SetApproversResponse, error) {
	name := req.GetName()
	if _, ok := s.team.Member(name); !ok {
		return nil, apierr.Errorf(apierr.CodeNotFound, "member %q not found", name)
	}
	if len(req.GetApprovers()) > teamconfig.MaxApprovers {
		return nil, apierr.Invalid("approvers", "at most %d names", teamconfig.MaxApprovers)
	}
	seen := map[string]bool{}
	for _, a := range req.GetApprovers() {
		if err := s.knownMember("approvers", a); err != nil {
			return nil, err
		}
		if a == name {
			return nil, apierr.Invalid("approvers", "a member cannot approve its own requests")
		}
		if seen[a] {
			return nil, apierr.Invalid("approvers", "%q named twice", a)
		}
		seen[a] = true
	}
	list := slices.Clone(req.GetApprovers())
	sort.Strings(list)
	if len(list) == 0 {
		list = nil
	}
	if err := s.team.changeMember(ctx, name, func(m *teamconfig.Member) error {
		m.Approvers = list
		return nil
	}, nil); err != nil {
		var ee *teamconfig.EntryError
		if errors.As(err, &ee) {
			return nil, apierr.Invalid("approvers", "%v", ee.Err)
		}
		return nil, err
	}
	return &apiv1.SetApproversResponse{Approvers: nonNil(list), ApproverOf: nonNil(s.team.ApproverOf(name))}, nil
}

// approvalToProto renders an approval; its nullable fields are JSON null
// until set.
func approvalToProto(a store.Approval) *apiv1.Approval {
	input := &structpb.Value{}
	if err := protojson.Unmarshal(a.Input, input); err != nil {
		input = structpb.NewNullValue()
	}
	nullable := func(s string) *structpb.Value {
		if s == "" {
			return structpb.NewNullValue()
		}
		return structpb.NewStringValue(s)
	}
	decidedAt := structpb.NewNullValue()
	if !a.DecidedAt.IsZero() {
		decidedAt = structpb.NewNumberValue(wire.MS(a.DecidedAt))
	}
	return &apiv1.Approval{
		Id: a.ID, Member: a.Member, Tool: a.Tool, Input: input, Objective: nullable(a.Objective),
		Status: a.Status, RequestedAt: wire.MS(a.RequestedAt), DecidedAt: decidedAt,
		DecidedBy: nullable(a.DecidedBy), Reason: nullable(a.Reason), ExpiresAt: wire.MS(a.ExpiresAt),
	}
}
