package runner

// The runner's side of approvals (docs/APPROVALS.md): the agent asks
// (Claude Code through the toolbox's permission-prompt tool and the relay,
// Codex through its approval requests), the loop asks the broker for an
// approval naming the turn's objective, marks the agent blocked, and waits
// for the decision on its stream (an approval_decided message on the
// broker-only thread approval:<id>). The answer goes back to the agent; a
// denial also closes the tool's in-flight count, which no post-tool hook
// would. Nothing it starts outlives the wait: a request the agent stops
// waiting for is withdrawn.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"svc/cmd/internal/client"
	"svc/cmd/internal/relay"
	apiv1 "svc/gen/svc/v1"
)

// Timings and bounds of approvals.
const (
	// approvalGrace: a decision missing this long after the approval's
	// expiry is asked of the broker, in case the stream lost it; then every
	// approvalRepoll while it stays pending.
	approvalGrace  = 30 * time.Second
	approvalRepoll = 30 * time.Second
	// maxAsked bounds the approvals one agent waits on at once.
	maxAsked = 64
	// maxStashed bounds the decisions kept for approvals not known yet: a
	// decision can come on the stream before the answer to the request.
	maxStashed = 256
	// maxOpenTools bounds the tool calls remembered between their start and
	// end.
	maxOpenTools = 1024
	// maxApprovalWait is the broker's longest approval expiry
	// (approvals.expireAfter, docs/APPROVALS.md): an agent's tool call that
	// waits on a person must be allowed that long.
	maxApprovalWait = 24 * time.Hour
)

// approvalReq is one request from the agent: answered once on answer.
type approvalReq struct {
	ctx    context.Context // ends when the agent stops waiting
	req    relay.ApprovalRequest
	answer chan relay.ApprovalAnswer // buffered: one answer
}

// approvalDecision is a decision as the broker gives it.
type approvalDecision struct {
	status    string // allowed, denied or expired
	reason    string
	decidedBy string
}

// answer is what the agent reads of d.
func (d approvalDecision) answer(id string) relay.ApprovalAnswer {
	a := relay.ApprovalAnswer{Allow: d.status == "allowed", Approval: id, DecidedBy: d.decidedBy}
	if a.Allow {
		a.Reason = d.reason
		return a
	}
	switch {
	case d.status == "denied" && d.reason != "":
		a.Reason = fmt.Sprintf("Denied by %s: %s", d.decidedBy, d.reason)
	case d.status == "denied":
		a.Reason = fmt.Sprintf("Denied by %s.", d.decidedBy)
	case d.reason != "":
		a.Reason = "Denied (" + d.reason + ")."
	default:
		a.Reason = "Denied: the approval " + d.status + "."
	}
	return a
}

// refusal answers a request no person decided.
func refusal(why string) relay.ApprovalAnswer {
	return relay.ApprovalAnswer{Reason: "Denied: " + why}
}

// Kinds of approvalEvent.
const (
	approvalCreated = iota + 1
	approvalCancelled
	approvalPolled
)

// approvalEvent is news about one request, from the goroutines the loop
// starts (broker calls) and from the request's context.
type approvalEvent struct {
	seq     int
	kind    int
	id      string
	expires time.Time
	dec     *approvalDecision // approvalPolled: the decision, nil while pending
	err     error
}

// asked is one request the agent waits on.
type asked struct {
	seq       int
	r         approvalReq
	id        string // the broker's approval; "" until created
	expires   time.Time
	pollAt    time.Time
	started   time.Time
	cancelled bool // the agent stopped waiting
	stopWatch func() bool
}

// approvals is the loop's approval state; the loop's goroutine owns it.
type approvals struct {
	in     chan approvalReq // requests; nil until the runner wires it
	events chan approvalEvent
	quit   chan struct{} // closed when the loop ends
	timer  *time.Timer

	seq    int
	asked  map[int]*asked
	byID   map[string]*asked
	stash  map[string]approvalDecision
	stashQ []string
	// open are the tool calls started and not ended, by call id; closed
	// are those a denial closed, whose late end must not count again.
	open   map[string]string
	closed map[string]bool
}

func newApprovals() approvals {
	return approvals{
		events: make(chan approvalEvent), quit: make(chan struct{}), timer: stoppedTimer(),
		asked: map[int]*asked{}, byID: map[string]*asked{}, stash: map[string]approvalDecision{},
		open: map[string]string{}, closed: map[string]bool{},
	}
}

// send hands e to the loop unless the loop ended.
func (ap *approvals) send(e approvalEvent) {
	select {
	case ap.events <- e:
	case <-ap.quit:
	}
}

// countTool keeps the tool calls' ids and says whether e moves the
// in-flight count: not the end of a call a denial closed already.
func (l *loop) countTool(e Event) bool {
	ap := &l.appr
	switch e.Kind {
	case ToolStart:
		if e.ToolUseID != "" && len(ap.open) < maxOpenTools {
			ap.open[e.ToolUseID] = e.Tool
		}
	case ToolEnd:
		if e.ToolUseID == "" {
			return true
		}
		if ap.closed[e.ToolUseID] {
			delete(ap.closed, e.ToolUseID)
			return false
		}
		delete(ap.open, e.ToolUseID)
	case TurnEnd:
		clear(ap.open)
		clear(ap.closed)
	}
	return true
}

// objectiveNow is the objective the agent works on: the one whose thread
// the turn's message came on, else the only active objective of the
// plate; "" when neither says.
func (l *loop) objectiveNow() string {
	if id, ok := strings.CutPrefix(l.turnThread, "obj:"); ok && id != "" {
		return id
	}
	active := ""
	for _, o := range l.plate {
		if o.GetStatus() == "active" {
			if active != "" {
				return ""
			}
			active = o.GetId()
		}
	}
	return active
}

// onApproval takes a request of the agent: the agent is blocked from now
// until it is answered.
func (l *loop) onApproval(ctx context.Context, r approvalReq) {
	ap := &l.appr
	if l.deps.askApproval == nil {
		r.answer <- refusal("this runner asks no one (approvals are off)")
		return
	}
	if len(ap.asked) >= maxAsked {
		r.answer <- refusal(fmt.Sprintf("%d approvals wait already", len(ap.asked)))
		return
	}
	ap.seq++
	x := &asked{seq: ap.seq, r: r, started: l.now()}
	ap.asked[x.seq] = x
	l.onEvent(Event{Kind: ApprovalWait})
	seq, objective := x.seq, l.objectiveNow()
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		id, exp, err := l.deps.askApproval(cctx, r.req.Tool, r.req.Input, objective)
		ap.send(approvalEvent{seq: seq, kind: approvalCreated, id: id, expires: exp, err: err})
	}()
	x.stopWatch = context.AfterFunc(r.ctx, func() { ap.send(approvalEvent{seq: seq, kind: approvalCancelled}) })
}

// onApprovalEvent applies news about a request.
func (l *loop) onApprovalEvent(ctx context.Context, e approvalEvent) {
	ap := &l.appr
	x := ap.asked[e.seq]
	if x == nil {
		return // answered already
	}
	switch e.kind {
	case approvalCreated:
		if e.err != nil {
			l.deps.logf("svc runner: no approval asked for %s: %v", oneLine(x.r.req.Tool, 64), e.err)
			l.finishApproval(x, refusal("no person could be asked ("+oneLine(e.err.Error(), 200)+")"))
			return
		}
		x.id, x.expires = e.id, e.expires
		x.pollAt = e.expires.Add(approvalGrace)
		ap.byID[x.id] = x
		l.deps.logf("svc runner: approval %s asked for %s; the agent waits", x.id, oneLine(x.r.req.Tool, 64))
		if x.cancelled {
			l.withdrawApproval(ctx, x.id, "the agent stopped waiting")
			l.finishApproval(x, refusal("the agent stopped waiting"))
			return
		}
		if d, ok := ap.stash[x.id]; ok {
			delete(ap.stash, x.id)
			l.finishApproval(x, d.answer(x.id))
			return
		}
		l.scheduleApprovalPoll()
	case approvalCancelled:
		x.cancelled = true
		if x.id == "" {
			return // withdrawn once created
		}
		l.withdrawApproval(ctx, x.id, "the agent stopped waiting")
		l.finishApproval(x, refusal("the agent stopped waiting"))
	case approvalPolled:
		if e.dec != nil {
			l.finishApproval(x, e.dec.answer(x.id))
			return
		}
		if e.err != nil {
			l.deps.logf("svc runner: approval %s not read: %v", x.id, e.err)
		}
		x.pollAt = l.now().Add(approvalRepoll)
		l.scheduleApprovalPoll()
	}
}

// onApprovalDecided takes a decision from the stream. Only a message on
// its approval's own thread counts: members cannot post there.
func (l *loop) onApprovalDecided(m decidedMessage) {
	ap := &l.appr
	id := m.approval
	if id == "" || m.thread != "approval:"+id {
		return
	}
	d := approvalDecision{status: m.status, reason: m.reason, decidedBy: m.decidedBy}
	if d.status == "" {
		d.status = "denied"
		if m.decision == "allow" {
			d.status = "allowed"
		}
	}
	if x := ap.byID[id]; x != nil {
		l.finishApproval(x, d.answer(id))
		return
	}
	// Not (yet) one of ours: the answer to the request may still be on
	// its way, or it is another runner's (or a past life's) approval.
	if _, ok := ap.stash[id]; !ok {
		ap.stash[id] = d
		ap.stashQ = append(ap.stashQ, id)
		if len(ap.stashQ) > maxStashed {
			delete(ap.stash, ap.stashQ[0])
			ap.stashQ = ap.stashQ[1:]
		}
	}
}

// decidedMessage is the part of an approval_decided message the loop
// reads.
type decidedMessage struct {
	thread, approval, decision, status, reason, decidedBy string
}

// finishApproval answers x (if the agent still waits) and ends its wait:
// the agent is no longer blocked by it, and a denied tool's in-flight
// count is closed (no post-tool hook comes for it).
func (l *loop) finishApproval(x *asked, ans relay.ApprovalAnswer) {
	ap := &l.appr
	delete(ap.asked, x.seq)
	if x.id != "" {
		delete(ap.byID, x.id)
	}
	if x.stopWatch != nil {
		x.stopWatch()
	}
	select {
	case x.r.answer <- ans:
	default:
	}
	l.onEvent(Event{Kind: ApprovalDone})
	tool := oneLine(x.r.req.Tool, 64)
	if ans.Allow {
		l.deps.logf("svc runner: approval %s: %s allowed by %s after %s", x.id, tool, oneLine(ans.DecidedBy, 64), l.now().Sub(x.started).Round(time.Millisecond))
	} else {
		l.deps.logf("svc runner: approval %s: %s refused after %s: %s", x.id, tool, l.now().Sub(x.started).Round(time.Millisecond), oneLine(ans.Reason, 200))
		if use := x.r.req.ToolUseID; use != "" {
			if name, open := ap.open[use]; open {
				l.onEvent(Event{Kind: ToolEnd, Tool: name, ToolUseID: use})
				ap.closed[use] = true
			}
		}
	}
	l.scheduleApprovalPoll()
}

// withdrawApproval tells the broker nothing waits for id any more, off
// the loop.
func (l *loop) withdrawApproval(ctx context.Context, id, why string) {
	if l.deps.withdrawApproval == nil {
		return
	}
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		if err := l.deps.withdrawApproval(cctx, id, why); err != nil {
			l.deps.logf("svc runner: approval %s not withdrawn: %v", id, err)
		}
	}()
}

// scheduleApprovalPoll sets the timer to the earliest poll due.
func (l *loop) scheduleApprovalPoll() {
	ap := &l.appr
	var first time.Time
	for _, x := range ap.asked {
		if x.id != "" && (first.IsZero() || x.pollAt.Before(first)) {
			first = x.pollAt
		}
	}
	ap.timer.Stop()
	if !first.IsZero() {
		ap.timer.Reset(max(first.Sub(l.now()), 0))
	}
}

// pollApprovals asks the broker about the approvals whose decision is
// overdue.
func (l *loop) pollApprovals(ctx context.Context) {
	ap := &l.appr
	now := l.now()
	for _, x := range ap.asked {
		if x.id == "" || x.pollAt.After(now) || l.deps.getApproval == nil {
			continue
		}
		x.pollAt = now.Add(callTimeout + approvalRepoll) // one poll at a time
		seq, id := x.seq, x.id
		go func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			dec, err := l.deps.getApproval(cctx, id)
			ap.send(approvalEvent{seq: seq, kind: approvalPolled, id: id, dec: dec, err: err})
		}()
	}
	l.scheduleApprovalPoll()
}

// abandonApprovals ends every wait when the runner stops: the broker's
// approvals are withdrawn (bounded by ctx), the agent gets a refusal. Call
// it once the loop has ended.
func (l *loop) abandonApprovals(ctx context.Context) {
	for _, x := range l.appr.asked {
		if x.id != "" && l.deps.withdrawApproval != nil {
			if err := l.deps.withdrawApproval(ctx, x.id, "the runner stopped"); err != nil {
				l.deps.logf("svc runner: approval %s not withdrawn: %v", x.id, err)
			}
		}
		select {
		case x.r.answer <- refusal("the runner stopped"):
		default:
		}
		if x.stopWatch != nil {
			x.stopWatch()
		}
	}
	clear(l.appr.asked)
}

// decidedOf reads an approval_decided message.
func decidedOf(thread string, data func(key string) string) decidedMessage {
	return decidedMessage{
		thread: thread, approval: data("approval"), decision: data("decision"), status: data("status"),
		reason: data("reason"), decidedBy: data("decidedBy"),
	}
}

// approvalInput caps an approval's input for the broker: past it the
// input is its JSON text cut, marked as such.
func approvalInput(r *Redactor, raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	out := r.JSON(raw)
	if len(out) <= maxUploadField {
		return out
	}
	cut, _ := json.Marshal(map[string]any{"inputTruncated": true, "input": cut(string(out), maxUploadField-64)})
	return cut
}

// kindApprovalDecided is the data.kind of a decision's message.
const kindApprovalDecided = "approval_decided"

// askApproval creates the broker's approval. An objective the broker
// refuses (reassigned meanwhile) is dropped rather than the request.
func askApproval(ctx context.Context, c apiv1.ApprovalsClient, tool string, input json.RawMessage, objective string) (string, time.Time, error) {
	in := &structpb.Value{}
	if err := protojson.Unmarshal(input, in); err != nil {
		return "", time.Time{}, fmt.Errorf("input: %w", err)
	}
	req := &apiv1.CreateApprovalRequest{Tool: tool, Input: in}
	if objective != "" {
		req.Objective = &objective
	}
	res, err := c.CreateApproval(ctx, req)
	if err != nil && objective != "" && client.Code(err) == "bad_request" && strings.Contains(err.Error(), "objective") {
		req.Objective = nil
		res, err = c.CreateApproval(ctx, req)
	}
	if err != nil {
		return "", time.Time{}, err
	}
	a := res.GetApproval()
	return a.GetId(), time.UnixMilli(int64(a.GetExpiresAt())), nil
}

// getApproval reads an approval's decision: nil while it is pending.
func getApproval(ctx context.Context, c apiv1.ApprovalsClient, id string) (*approvalDecision, error) {
	res, err := c.GetApproval(ctx, &apiv1.GetApprovalRequest{Id: id})
	if err != nil {
		return nil, err
	}
	a := res.GetApproval()
	if a.GetStatus() == "pending" {
		return nil, nil
	}
	return &approvalDecision{status: a.GetStatus(), reason: a.GetReason().GetStringValue(), decidedBy: a.GetDecidedBy().GetStringValue()}, nil
}

// withdrawLeftApprovals withdraws the member's pending approvals at start:
// the agent that asked for them died with the runner's last life. One
// member runs one runner; a second runner of the same member would lose
// its approvals here.
func withdrawLeftApprovals(ctx context.Context, c apiv1.ApprovalsClient, me string, log *logger) {
	res, err := c.ListApprovals(ctx, &apiv1.ListApprovalsRequest{Status: "pending"})
	if err != nil {
		log.logf("svc runner: pending approvals not listed: %v", err)
		return
	}
	why := "the runner restarted; the agent that asked is gone"
	n := 0
	for _, a := range res.GetApprovals() {
		if a.GetMember() != me {
			continue
		}
		if _, err := c.WithdrawApproval(ctx, &apiv1.WithdrawApprovalRequest{Id: a.GetId(), Reason: &why}); err != nil && client.Code(err) != "conflict" {
			log.logf("svc runner: approval %s not withdrawn: %v", a.GetId(), err)
			continue
		}
		n++
	}
	if n > 0 {
		log.logf("svc runner: withdrew %d approval(s) a previous run left waiting", n)
	}
}
