package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"svc/server/apierr"
	"time"

	"golang.org/x/time/rate"

	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// The loop guard's notice (docs/RUNNER.md, Loop guard).
const (
	// loopSender sends the notices: the ':' makes it a name no member can
	// have, so no push can pass for one.
	loopSender = "svc:loop-guard"
	// loopThreadPrefix starts a notice's thread, loop:<chain id>: a thread
	// no push may name (pushes name only chan: threads).
	loopThreadPrefix = "loop:"
	// kindAgentLoopStopped is the notice's data.kind.
	kindAgentLoopStopped = "agent_loop_stopped"
)

// loopGuard attributes each message the messenger commits to its sender's
// turn (the reply chain fields), stops a chain past the team's hop bound,
// writes the notice of a chain's first stop and limits how fast an agent
// pushes in its turns. It reads nothing but the transaction it is given
// and is used only on the committer's goroutine.
type loopGuard struct {
	maxHops int
	// perMinute and burst are the agent push limit; every is perMinute
	// as a rate.
	perMinute int
	every     rate.Limit
	burst     int
	now       func() time.Time
	// buckets are the agents' push token buckets, by member, when the
	// broker serves the team alone. Only members that pushed in a turn
	// have one, so the team bounds the map. With several brokers the
	// buckets are in the store (allowShared).
	buckets map[string]*rate.Limiter
}

// newLoopGuard returns a guard with the settings of the team's loopGuard
// block (defaults filled in).
func newLoopGuard(s teamconfig.LoopGuard, now func() time.Time) *loopGuard {
	return &loopGuard{
		maxHops:   s.MaxHops,
		perMinute: s.AgentPushesPerMinute,
		every:     rate.Limit(float64(s.AgentPushesPerMinute) / 60),
		burst:     s.AgentPushBurst,
		now:       now,
		buckets:   map[string]*rate.Limiter{},
	}
}

// turnLookup is a member's turn as one batch read it.
type turnLookup struct {
	turn   store.ActiveTurn
	active bool
}

// attribute stamps msg's reply chain from its sender's delivery state in
// tx, and nothing else: a message a member sends while its turn is active
// is an agent's reply to the turn's message; any other message (a person's,
// a hook's, the broker's, an agent's outside a turn) starts a new chain.
// Whatever msg carried in those fields is overwritten. turns caches the
// lookups of one stretch of the batch in which no delivery state changed.
func (g *loopGuard) attribute(ctx context.Context, tx store.Tx, turns map[string]turnLookup, msg *store.Message) error {
	msg.ReplyTo, msg.Hops, msg.Chain, msg.LoopStopped = 0, 0, 0, false
	if strings.IndexByte(msg.From, ':') >= 0 {
		return nil // hook:<slug>, the broker: never a member, never in a turn
	}
	if strings.HasPrefix(msg.Thread, approvalThreadPrefix) {
		// An approval's decision (the broker writes it on approval:<id>,
		// a thread no push may name) wakes no agent and answers no turn,
		// whoever decided or when it expired: it is in no chain
		// (docs/APPROVALS.md, The loop guard).
		return nil
	}
	look, ok := turns[msg.From]
	if !ok {
		t, active, err := tx.ActiveTurn(ctx, msg.From)
		if err != nil {
			return err
		}
		look = turnLookup{turn: t, active: active}
		turns[msg.From] = look
	}
	if !look.active {
		return nil
	}
	msg.ReplyTo = look.turn.Seq
	msg.Hops = look.turn.Hops + 1
	msg.Chain = look.turn.Chain
	msg.LoopStopped = msg.Hops > g.maxHops
	return nil
}

// allow takes a token from member's push bucket, or returns how long until
// one is there (and takes none). shared (several brokers serve the team)
// keeps the bucket in tx, the commit's transaction, so every broker takes
// from the same one; alone it is in this broker's memory.
func (g *loopGuard) allow(ctx context.Context, tx store.Tx, member string, shared bool) (time.Duration, error) {
	if shared {
		return g.allowShared(ctx, tx, member)
	}
	return g.allowLocal(member), nil
}

// allowLocal is allow with the bucket in memory.
func (g *loopGuard) allowLocal(member string) time.Duration {
	b := g.buckets[member]
	if b == nil {
		b = rate.NewLimiter(g.every, g.burst)
		g.buckets[member] = b
	}
	now := g.now()
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return time.Minute // burst < 1: Validate refuses that
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// errAgentPushLimit answers a push over the agent push limit.
func errAgentPushLimit(wait time.Duration) error {
	return &apierr.Error{Code: apierr.CodeRateLimited, RetryAfter: wait,
		Message: "this agent pushes faster than the team's agent push limit allows; retry later (docs/RUNNER.md, Loop guard)"}
}

// notice records the stop of stopped's chain and returns the notice of
// its first stop; nil when the chain had stopped before. stopped is
// stored (Seq set).
func (g *loopGuard) notice(ctx context.Context, tx store.Tx, stopped store.Message) (*store.Message, error) {
	chain := stopped.Chain
	if chain == 0 {
		chain = stopped.Seq // a maxHops of 0 would stop a chain's first message
	}
	first, err := tx.AddLoopStop(ctx, store.LoopStop{Chain: chain, Message: stopped.Seq, At: stopped.CreatedAt})
	if err != nil || !first {
		return nil, err
	}
	path, err := tx.ReplyPath(ctx, stopped.Seq, g.maxHops+2)
	if err != nil {
		return nil, err
	}
	members, err := tx.ListMembers(ctx)
	if err != nil {
		return nil, err
	}
	agentList, err := tx.ListAgents(ctx)
	if err != nil {
		return nil, err
	}
	isAgent := map[string]bool{}
	for _, a := range agentList {
		isAgent[a] = true
	}
	loopers := []string{stopped.From}
	starter := ""
	for _, m := range path {
		if m.Hops > 0 {
			loopers = append(loopers, m.From)
		} else {
			starter = m.From // the message the chain started from
		}
	}
	slices.Sort(loopers)
	loopers = slices.Compact(loopers)

	// Who is told: the members.manage holders, and the people of the
	// conversation the loop was stopped in and the one whose message
	// started the chain. An agent's state says it is one; a member without
	// one is a person.
	known := map[string]bool{}
	var to []string
	for _, m := range members {
		known[m.Name] = true
		if slices.Contains(m.Permissions, auth.MembersManage) {
			to = append(to, m.Name)
		}
	}
	conversation := append([]string{stopped.From, starter}, stopped.Recipients...)
	if stopped.All {
		conversation = conversation[:0]
		for _, m := range members {
			conversation = append(conversation, m.Name)
		}
	}
	for _, name := range conversation {
		if known[name] && !isAgent[name] {
			to = append(to, name)
		}
	}
	slices.Sort(to)
	to = slices.Compact(to)

	thread := loopThreadPrefix + formatMessageID(chain)
	id := formatMessageID(stopped.Seq)
	names := strings.Join(loopers, ", ")
	data, err := json.Marshal(map[string]any{
		"kind": kindAgentLoopStopped, "thread": thread, "conversation": stopped.Thread,
		"message": id, "chain": formatMessageID(chain), "agents": loopers,
		"hops": stopped.Hops, "maxHops": g.maxHops,
	})
	if err != nil {
		return nil, err
	}
	body := fmt.Sprintf("%s kept replying to each other in %s with no person in between: %d hops, past this team's bound of %d. "+
		"Message %s and every later reply of this chain are stored but wake no agent. A person's message starts a new chain.",
		names, stopped.Thread, stopped.Hops, g.maxHops, id)
	return &store.Message{
		From: loopSender, Thread: thread, Title: apierr.TruncateUTF8("Agent loop stopped: "+names, maxTitle),
		Body: body, Level: "warning", Data: data, Recipients: to,
		// People read it; no agent makes a turn of it: an agent of the
		// loop that holds members.manage would otherwise start the loop
		// again by answering it.
		LoopStopped: true,
	}, nil
}

// loopThreadReadable admits to a notice's thread (loop:<chain id>), and
// to an approval's decision thread (approval:<id>), the members.manage
// holders and whoever received a message on it.
func (c *core) loopThreadReadable(ctx context.Context, p *auth.Principal, thread string) error {
	if p.Has(auth.MembersManage) {
		return nil
	}
	return c.receivedOn(ctx, p, thread)
}
