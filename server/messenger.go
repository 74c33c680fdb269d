package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"svc/server/apierr"
	"svc/server/wire"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/cluster"
	"svc/server/groupcommit"
	"svc/server/hub"
	"svc/server/teamconfig"
	"svc/store"
)

// Commit batching: the committer takes every push waiting when it starts a
// transaction, up to maxBatch; commitQueue bounds what may wait.
const (
	maxBatch    = 512
	commitQueue = 4096
)

// errShuttingDown answers pushes that arrive after the committer stopped.
var errShuttingDown = apierr.Errorf(apierr.CodeUnavailable, "the broker is shutting down")

// stopped maps a group-commit loop's ErrStopped to errShuttingDown.
func stopped(err error) error {
	if errors.Is(err, groupcommit.ErrStopped) {
		return errShuttingDown
	}
	return err
}

// outgoing is a change on its way to the store and the hub: a message, a
// transactional change that yields messages (apply), or both.
type outgoing struct {
	// apply, when set, runs inside the commit transaction, in a savepoint
	// of its own: an error fails this change alone. The messages it returns
	// are committed with it. apply may use only tx and data it captured:
	// the transaction holds the store's only writer connection, and
	// Team.change holds the team lock while it waits for that connection,
	// so reading the team (or the store outside tx) here can deadlock.
	apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)
	msg   *store.Message
	proto *apiv1.Message // rendered from msg; Id and CreatedAt set at commit
	// stored, when set, runs in the same transaction once this change's
	// messages are appended, with them (Seq set): a record that names its
	// messages' ids (a hook delivery receipt) commits with them. Its error
	// fails the whole batch, so it must not fail for its input's sake.
	stored func(ctx context.Context, tx store.Tx, msgs []store.Message) error
	// push marks a member's push (a DM, a channel post, a broadcast, an
	// objective discussion post): sent in a turn, it counts against the
	// agent push limit.
	push bool
	done chan committed

	out []store.Message // what commit appends for this change
	err error           // apply's error
}

type committed struct {
	msgs []*apiv1.Message // msg's first, then apply's, in commit order
	live int              // how many of msg's targets were live
	err  error
}

// messenger commits messages in groups and publishes them in commit order.
// Changes that must commit with their messages (objective transitions,
// attachment grants) go through it too, so a message never reaches a stream
// before the change it reports is durable, and such changes are serialized.
type messenger struct {
	store store.Store
	hub   *hub.Hub
	now   func() time.Time
	log   *slog.Logger
	queue *groupcommit.Queue[*outgoing]
	// afterPublish, when set, runs on the committer after each message is
	// published (web push).
	afterPublish func(m store.Message, live func(member string) bool)
	last         time.Time
	// met, when set, counts commits and messages.
	met *metrics
	// guard stamps each message's reply chain from its sender's turn,
	// stops chains past the hop bound and limits agents' pushes.
	guard *loopGuard
	// fan, when set (several brokers, Server.JoinCluster), takes each
	// committed batch instead of the hub: it publishes it on NATS and
	// hands the hub every broker's messages in commit order.
	fan *cluster.Fanout[clusterMsg]
	// connected, when set (several brokers), counts a member's live
	// streams on every broker: web push goes only to members with none.
	connected func(member string) int
	// live, when set (several brokers), counts the members a message
	// addresses that hold a live stream on any broker: a push's
	// delivery.live. Without it, the hub's count (this broker's streams).
	live func(all bool, sender string, recipients []string) int
}

// newMessenger returns a messenger over st and h; afterPublish, when not
// nil, runs on the committer after each message is published.
func newMessenger(st store.Store, h *hub.Hub, now func() time.Time, log *slog.Logger, afterPublish func(m store.Message, live func(member string) bool)) *messenger {
	return &messenger{
		store: st, hub: h, now: now, log: log, afterPublish: afterPublish, queue: groupcommit.New[*outgoing](commitQueue, maxBatch),
		guard: newLoopGuard((&teamconfig.File{}).LoopGuardSettings(), now),
	}
}

// change commits a change and publishes its messages once they are
// durable: apply (when not nil) runs in the next commit, and msg (when not
// nil) is committed with it, first, once apply succeeds. A plain push is
// a change with msg alone.
func (m *messenger) change(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error), msg *store.Message, pm *apiv1.Message) committed {
	o := &outgoing{apply: apply, msg: msg, proto: pm, done: make(chan committed, 1)}
	return groupcommit.Submit(ctx, m.queue, o, o.done, func(err error) committed { return committed{err: stopped(err)} })
}

// push is change for a member's push: sent in a turn, it counts against
// the agent push limit.
func (m *messenger) push(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error), msg *store.Message, pm *apiv1.Message) committed {
	o := &outgoing{apply: apply, msg: msg, proto: pm, push: true, done: make(chan committed, 1)}
	return groupcommit.Submit(ctx, m.queue, o, o.done, func(err error) committed { return committed{err: stopped(err)} })
}

// changeStored is change with apply alone, and stored run on apply's
// messages once they are appended, in the same transaction.
func (m *messenger) changeStored(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error), stored func(ctx context.Context, tx store.Tx, msgs []store.Message) error) committed {
	o := &outgoing{apply: apply, stored: stored, done: make(chan committed, 1)}
	return groupcommit.Submit(ctx, m.queue, o, o.done, func(err error) committed { return committed{err: stopped(err)} })
}

// run commits until ctx ends, then answers what is queued with an error.
func (m *messenger) run(ctx context.Context) {
	m.queue.Run(ctx, m.commit, func(o *outgoing) { o.done <- committed{err: errShuttingDown} })
}

// turnsReader reads the turns in progress of several members in one
// statement (the SQLite store's ActiveTurns).
type turnsReader interface {
	ActiveTurns(ctx context.Context, members []string) (map[string]store.ActiveTurn, error)
}

// readTurns puts into turns the turn of every sender of the stretch of
// plain messages that starts at batch[i] (up to the next change with an
// apply, which may change a turn and empties turns), in one read where the
// store can, and returns the index past the stretch. Nothing between the
// start of the stretch and its last message changes a delivery state, so
// the turns are what attribute would read one by one. When the store
// cannot, or the read fails, turns is left as it was: attribute then reads
// each sender itself, with the error it always had.
func readTurns(ctx context.Context, tx store.Tx, batch []*outgoing, i int, turns map[string]turnLookup) int {
	tr, ok := tx.(turnsReader)
	if !ok {
		return len(batch)
	}
	j := i
	var members []string
	seen := map[string]bool{}
	for ; j < len(batch) && batch[j].apply == nil; j++ {
		msg := batch[j].msg
		if msg == nil || strings.IndexByte(msg.From, ':') >= 0 {
			continue
		}
		if _, ok := turns[msg.From]; ok || seen[msg.From] {
			continue
		}
		seen[msg.From] = true
		members = append(members, msg.From)
	}
	if len(members) == 0 {
		return j
	}
	active, err := tr.ActiveTurns(ctx, members)
	if err != nil {
		return j
	}
	for _, member := range members {
		t, ok := active[member]
		turns[member] = turnLookup{turn: t, active: ok}
	}
	return j
}

// commit writes one batch in one transaction, then publishes each message
// and answers each change. Publishing happens on this one goroutine, in
// commit order, so every stream sees messages in id order.
//
// Each message's reply chain is stamped here, from its sender's delivery
// state as this transaction sees it at that point of the batch: a turn's
// start or end commits through this loop too, so a message is attributed
// to exactly the turns committed before it (docs/RUNNER.md, Loop guard).
func (m *messenger) commit(ctx context.Context, batch []*outgoing) {
	start := time.Now()
	var notices []store.Message
	err := m.store.WithTx(ctx, func(tx store.Tx) error {
		var (
			msgs []store.Message
			// turns caches senders' turns while no delivery state can
			// change: only an apply changes one, so it is emptied at each.
			turns   = map[string]turnLookup{}
			stopped []*store.Message
			// read is the index of the first change past the stretch
			// whose senders' turns are already in turns.
			read int
		)
		notices = notices[:0]
		for i, o := range batch {
			o.out, o.err = o.out[:0], nil
			if o.apply == nil && i >= read {
				read = readTurns(ctx, tx, batch, i, turns)
			}
			produce := func() error {
				if o.apply != nil {
					var err error
					if o.out, err = o.apply(ctx, tx); err != nil {
						return err
					}
					clear(turns)
				}
				if o.msg != nil {
					o.out = append([]store.Message{*o.msg}, o.out...)
				}
				for i := range o.out {
					if err := m.guard.attribute(ctx, tx, turns, &o.out[i]); err != nil {
						return err
					}
				}
				if o.push && len(o.out) > 0 && o.out[0].Hops > 0 {
					// With several brokers (fan set) the bucket is in the
					// store, read and taken from in this transaction.
					wait, err := m.guard.allow(ctx, tx, o.out[0].From, m.fan != nil)
					if err != nil {
						return err
					}
					if wait > 0 {
						return errAgentPushLimit(wait)
					}
				}
				return nil
			}
			if o.apply != nil {
				o.err = tx.Savepoint(ctx, produce)
				clear(turns) // what a rolled back apply wrote is gone
			} else {
				o.err = produce()
			}
			if o.err != nil {
				o.out = nil
				continue
			}
			for i := range o.out {
				if o.out[i].LoopStopped {
					stopped = append(stopped, &o.out[i])
				}
				// Creation times never go backwards along the commit order,
				// so the history's time cursor agrees with its id order.
				now := m.now()
				if now.Before(m.last) {
					now = m.last
				}
				m.last = now
				o.out[i].CreatedAt = now
			}
			msgs = append(msgs, o.out...)
		}
		if len(msgs) == 0 {
			return nil
		}
		stored, err := tx.AppendMessages(ctx, msgs)
		if err != nil {
			return err
		}
		for _, o := range batch {
			n := copy(o.out, stored)
			stored = stored[n:]
		}
		// The first stop of a chain writes its notice, after every message
		// of the batch: the notice names a stored message.
		for _, s := range stopped {
			n, err := m.guard.notice(ctx, tx, *s)
			if err != nil {
				return err
			}
			if n != nil {
				n.CreatedAt = m.last
				notices = append(notices, *n)
			}
		}
		if len(notices) > 0 {
			if notices, err = tx.AppendMessages(ctx, notices); err != nil {
				return err
			}
		}
		for _, o := range batch {
			if o.stored != nil && o.err == nil && len(o.out) > 0 {
				if err := o.stored(ctx, tx, o.out); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if m.met != nil {
		commitTimer(m.met.msgBatch, m.met.msgCommit, len(batch), start)
	}
	if err != nil {
		m.log.ErrorContext(ctx, "message commit failed", "changes", len(batch), "err", err)
		for _, o := range batch {
			o.done <- committed{err: err}
		}
		return
	}
	// Every writer is answered before anything is fanned out: a broadcast
	// wakes one goroutine per live stream, and an answer sent after them
	// waited its turn behind all of them on the CPU (publish round trip
	// 16 ms at 1000 subscribers, 1.7 ms at one). The fan-out follows at
	// once, on this goroutine and in commit order, so causal order holds:
	// whatever a writer sends after its answer commits after this batch
	// and is published after it.
	var (
		items  []hub.Item
		stored []store.Message // items' messages, for afterPublish
		fanned []clusterMsg    // the same, for the fan-out across brokers
	)
	for _, o := range batch {
		if o.err != nil {
			o.done <- committed{err: o.err}
			continue
		}
		r := committed{msgs: make([]*apiv1.Message, len(o.out))}
		for i, s := range o.out {
			var pm *apiv1.Message
			if i == 0 && o.msg != nil {
				pm = o.proto
				pm.Id = formatMessageID(s.Seq)
				pm.CreatedAt = wire.MS(s.CreatedAt)
				setReplyChain(pm, s)
				if m.live != nil {
					r.live = m.live(s.All, s.From, s.Recipients)
				} else {
					r.live = m.hub.Live(s.All, s.From, s.Recipients)
				}
			} else {
				pm = messageToProto(s)
			}
			items = append(items, hub.Item{Ev: hub.NewEvent(s.Seq, pm), All: s.All, Sender: s.From, Recipients: s.Recipients})
			stored = append(stored, s)
			if m.fan != nil {
				fanned = append(fanned, clusterMsg{Message: s, pm: pm})
			}
			r.msgs[i] = pm
			if m.met != nil {
				m.met.pushed(&o.out[i], i == 0 && o.msg != nil)
			}
		}
		o.done <- r
	}
	for _, s := range notices {
		items = append(items, hub.Item{Ev: hub.NewEvent(s.Seq, messageToProto(s)), All: s.All, Sender: s.From, Recipients: s.Recipients})
		stored = append(stored, s)
		if m.fan != nil {
			fanned = append(fanned, clusterMsg{Message: s})
		}
		if m.met != nil {
			m.met.pushed(&s, false)
		}
	}
	// One publish for the batch: each stream is woken once and writes the
	// batch's messages to it in one write. With several brokers the
	// fan-out publishes it, after any earlier id another broker committed.
	if m.fan != nil {
		m.fan.Committed(fanned)
	} else {
		m.hub.PublishBatch(items)
	}
	if m.afterPublish != nil {
		connected := m.hub.Connected
		if m.connected != nil {
			connected = m.connected
		}
		live := func(member string) bool { return connected(member) > 0 }
		for _, s := range stored {
			m.afterPublish(s, live)
		}
	}
}

// formatMessageID renders a sequence as the wire id: 16 zero-padded digits,
// so ids sort in commit order as strings and as numbers.
func formatMessageID(seq int64) string {
	if seq < 0 {
		return fmt.Sprintf("%016d", seq) // not an id the store hands out
	}
	// Without fmt: every delivery of every message formats its id, and
	// Sprintf was 8% of a broadcast's CPU.
	var b [20]byte
	d := strconv.AppendInt(b[:0], seq, 10)
	if len(d) >= 16 {
		return string(d)
	}
	var out [16]byte
	n := copy(out[16-len(d):], d)
	for i := range 16 - n {
		out[i] = '0'
	}
	return string(out[:])
}

// ParseMessageID reads a wire id (Last-Event-ID, lastId): a decimal of up to
// 19 digits. The empty string is position 0; "0" resumes from the start.
// Values past the int64 range read as its maximum.
func ParseMessageID(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 19 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, apierr.Invalid("lastEventId", "must be a message id")
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, apierr.Invalid("lastEventId", "must be a message id")
	}
	// Past every id this store can hold: Attach resumes from the start.
	return int64(min(n, math.MaxInt64)), nil
}
