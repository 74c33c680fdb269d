package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Defaults of Config (docs/DECISIONS.md, "Several brokers: fan-out on
// NATS").
const (
	// DefaultGapWait is how long a hole in the ids waits for NATS to fill
	// it before it is read from the store: NATS brings another broker's
	// batch within a millisecond or so when nothing is lost, and a read
	// too eager costs a store query per interleaving.
	DefaultGapWait = 200 * time.Millisecond
	// DefaultPoll is how often the store's newest id is read, so a lost
	// last batch (no later one shows the hole) is late by about two polls
	// at most; one MAX(seq) read a second is nothing to a database.
	DefaultPoll = time.Second
	// DefaultPage bounds the ids one store read spans, so a catch-up holds
	// at most a page of records (a message is at most ~200 KiB).
	DefaultPage = 100
	// DefaultMaxPayload bounds a NATS message; a batch whose envelope is
	// larger goes as its range alone. It is NATS's own default
	// max_payload; a server configured lower lowers it.
	DefaultMaxPayload = 1 << 20
	// DefaultMaxPending bounds the records held waiting for a hole to
	// fill; ranges that arrive past it are kept without their records and
	// read from the store when their turn comes.
	DefaultMaxPending = 10_000
	// subPendingMsgs bounds what NATS queues for the subscription before
	// it drops (a slow consumer): a dropped batch is a hole like any
	// other.
	subPendingMsgs  = 4096
	subPendingBytes = 64 << 20
	// subscribeWithin bounds the wait for NATS to confirm the
	// subscription at start.
	subscribeWithin = 5 * time.Second
	// maxSpan bounds the ids one announced range may cover: a committed
	// batch holds at most a few hundred; a range past this is not one.
	maxSpan = 1 << 20
)

// envelopeVersion is the version of what a NATS message carries;
// another version is dropped and its range read from the store.
const envelopeVersion = 1

// Store reads what the store committed. Ids are the commit order: once an
// id is visible every smaller one is (docs/DECISIONS.md, "PostgreSQL
// store").
type Store[T any] interface {
	// Range returns the records with after < id <= upTo, oldest first.
	// Ids with no record (none was ever committed with them, or it was
	// deleted) are simply absent.
	Range(ctx context.Context, after, upTo int64) ([]T, error)
	// Last returns the newest committed id, 0 when there is none.
	Last(ctx context.Context) (int64, error)
}

// Config is what a Fanout is built from. Conn, Subject, Store, ID and
// Deliver are required.
type Config[T any] struct {
	// Conn is the NATS connection; the Fanout subscribes and publishes on
	// it and never closes it.
	Conn *nats.Conn
	// Subject is where every broker of the team publishes this kind of
	// record, e.g. svc.<team id>.msg.
	Subject string
	// Origin names this broker in what it publishes, so it drops its own
	// batches when they come back; one per broker, shared by its fan-outs
	// and its logs. Random when empty.
	Origin string
	// Store reads holes and the tail.
	Store Store[T]
	// ID returns a record's id.
	ID func(T) int64
	// Deliver hands records to the local hub: called on one goroutine,
	// with ids ascending across calls, each id once.
	Deliver func([]T)
	// GapWait, Poll, Page, MaxPayload and MaxPending default to the
	// Default constants when <= 0.
	GapWait    time.Duration
	Poll       time.Duration
	Page       int
	MaxPayload int
	MaxPending int
	// Signer, when set, signs what this broker publishes and tells its
	// peers' batches from anyone else's: a batch its peers signed is
	// delivered with the records it carries, with no store read. Without
	// one, batches go as their ranges alone and every receiver reads the
	// records from the store (docs/DECISIONS.md, "Signed NATS messages").
	Signer *Signer
	// Log defaults to a discard logger.
	Log *slog.Logger
}

// envelope is one NATS message: a committed batch, all of its records
// with ids in [First, Last], or none (too large to carry: read them).
type envelope[T any] struct {
	V      int    `json:"v"`
	Origin string `json:"o"`
	First  int64  `json:"f"`
	Last   int64  `json:"l"`
	Items  []T    `json:"i,omitempty"`
}

// span is a committed range waiting to be delivered; items nil means its
// records are to be read from the store.
type span[T any] struct {
	first, last int64
	items       []T
	// local spans are this broker's commits, still to be published.
	local bool
}

// Stats counts what a Fanout did since New; each only grows.
type Stats struct {
	// Published is the batches this broker published on NATS.
	Published uint64
	// Received is the batches taken from NATS (other brokers').
	Received uint64
	// Rejected is the NATS messages dropped as malformed.
	Rejected uint64
	// StoreReads is the store reads of holes and the tail, StoreRecords
	// the records they delivered.
	StoreReads, StoreRecords uint64
	// Delivered is the records handed to Deliver.
	Delivered uint64
}

// Fanout fans one kind of committed record out to every broker: each
// broker's own commits (Committed) go out on NATS, and every broker hands
// its hub the records of all brokers in commit order, each once, reading
// from the store whatever NATS lost.
type Fanout[T any] struct {
	c      Config[T]
	origin string
	sub    *nats.Subscription
	status chan nats.Status

	mu    sync.Mutex
	inbox []span[T]
	held  int // records in inbox
	wake  chan struct{}

	// Owned by Run's goroutine.
	delivered int64     // the last id handed to Deliver
	pending   []span[T] // by first, ascending
	pendHeld  int       // records in pending
	seen      int64     // the store's newest id at the previous poll
	storeLast int64     // the store's newest id, last read

	published, received, rejected, storeReads, storeRecords, deliveredN atomic.Uint64

	// dropPublish, when set (tests), is asked before each publish: true
	// loses the batch as NATS might.
	dropPublish func(first, last int64) bool
}

// New subscribes to the subject and reads the store's newest id: what
// commits from now on is delivered by Run, what committed before is the
// store's to replay (a stream reads it on attach). Call Run next.
func New[T any](ctx context.Context, c Config[T]) (*Fanout[T], error) {
	switch {
	case c.Conn == nil, c.Store == nil, c.ID == nil, c.Deliver == nil:
		return nil, errors.New("cluster: Conn, Store, ID and Deliver are required")
	case !validSubject(c.Subject):
		return nil, fmt.Errorf("cluster: %q is no NATS subject to publish on", c.Subject)
	}
	if c.GapWait <= 0 {
		c.GapWait = DefaultGapWait
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Page <= 0 {
		c.Page = DefaultPage
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Origin == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		c.Origin = hex.EncodeToString(b[:])
	}
	f := &Fanout[T]{c: c, origin: c.Origin, wake: make(chan struct{}, 1)}
	f.status = c.Conn.StatusChanged(nats.CONNECTED)
	sub, err := c.Conn.Subscribe(c.Subject, f.receive)
	if err != nil {
		c.Conn.RemoveStatusListener(f.status)
		return nil, fmt.Errorf("cluster: subscribe %s: %w", c.Subject, err)
	}
	if err := sub.SetPendingLimits(subPendingMsgs, subPendingBytes); err != nil {
		_ = sub.Unsubscribe()
		c.Conn.RemoveStatusListener(f.status)
		return nil, fmt.Errorf("cluster: subscription limits: %w", err)
	}
	f.sub = sub
	// The subscription counts once the server has it: a flush's round
	// trip. Subscribed first, then the position: a batch committed in
	// between comes through NATS too and is dropped as already in the
	// store. Without NATS now, the polls deliver until it is back.
	if err := c.Conn.FlushTimeout(subscribeWithin); err != nil {
		c.Log.Warn("cluster: subscription not confirmed by NATS; the store's polls deliver meanwhile", "subject", c.Subject, "err", err)
	}
	last, err := c.Store.Last(ctx)
	if err != nil {
		f.stop()
		return nil, fmt.Errorf("cluster: newest id: %w", err)
	}
	f.delivered, f.seen, f.storeLast = last, last, last
	return f, nil
}

// validSubject reports whether s is a literal NATS subject: dot-separated
// non-empty tokens with no wildcard or white space.
func validSubject(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

func (f *Fanout[T]) stop() {
	_ = f.sub.Unsubscribe()
	f.c.Conn.RemoveStatusListener(f.status)
}

// Stats returns the counters.
func (f *Fanout[T]) Stats() Stats {
	return Stats{
		Published: f.published.Load(), Received: f.received.Load(), Rejected: f.rejected.Load(),
		StoreReads: f.storeReads.Load(), StoreRecords: f.storeRecords.Load(), Delivered: f.deliveredN.Load(),
	}
}

// Committed hands Run a batch this broker committed, ids ascending and
// contiguous (one transaction's), after its commit. It never blocks: the
// committer calls it.
func (f *Fanout[T]) Committed(items []T) {
	if len(items) == 0 {
		return
	}
	f.queue(span[T]{first: f.c.ID(items[0]), last: f.c.ID(items[len(items)-1]), items: items, local: true})
}

// queue adds s to the inbox and wakes Run. Past MaxPending records
// waiting, s waits without its records (a local one is then published as
// its range alone).
func (f *Fanout[T]) queue(s span[T]) {
	f.mu.Lock()
	if f.held+len(s.items) > f.c.MaxPending {
		s.items = nil
	}
	f.held += len(s.items)
	f.inbox = append(f.inbox, s)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// receive takes another broker's batch from NATS. It runs on the
// subscription's goroutine, so decoding does not hold up Run.
func (f *Fanout[T]) receive(m *nats.Msg) {
	var e envelope[T]
	if err := json.Unmarshal(m.Data, &e); err != nil || e.V != envelopeVersion || !f.wellFormed(e) {
		// What it announced, if anything, is a hole to the next batch or
		// poll: nothing is lost by dropping it.
		f.rejected.Add(1)
		f.c.Log.Warn("cluster: malformed batch dropped", "subject", m.Subject, "bytes", len(m.Data), "err", err)
		return
	}
	verdict := f.c.Signer.Check(m)
	if verdict == Forged {
		f.rejected.Add(1)
		f.c.Log.Warn("cluster: batch with a bad signature dropped", "subject", m.Subject, "bytes", len(m.Data))
		return
	}
	if e.Origin == f.origin {
		return // our own, delivered from Committed
	}
	f.received.Add(1)
	// An unsigned batch is news that its range committed, no more: its
	// records are read from the store. Anyone who can publish on the
	// subject could otherwise hand every broker's streams forged messages
	// (and push the position past real ones). A signed one comes from a
	// broker of the team, which sends what it committed.
	if verdict != Signed {
		e.Items = nil
	}
	f.queue(span[T]{first: e.First, last: e.Last, items: e.Items})
}

// wellFormed reports whether e announces a sane range and carries only
// records inside it, ascending.
func (f *Fanout[T]) wellFormed(e envelope[T]) bool {
	if e.First <= 0 || e.Last < e.First || e.Last-e.First >= maxSpan {
		return false
	}
	prev := e.First - 1
	for _, it := range e.Items {
		id := f.c.ID(it)
		if id <= prev || id > e.Last {
			return false
		}
		prev = id
	}
	return true
}

// Run delivers in commit order until ctx ends, then unsubscribes.
func (f *Fanout[T]) Run(ctx context.Context) {
	defer f.stop()
	poll := time.NewTicker(f.c.Poll)
	defer poll.Stop()
	gap := time.NewTimer(time.Hour)
	gap.Stop()
	defer gap.Stop()
	// armed: the gap timer runs. failing: a store read failed; nothing is
	// read again before the timer fires (no tight loop on a down store).
	armed, failing := false, false
	fail := func(err error) {
		if ctx.Err() == nil {
			f.c.Log.Warn("cluster: store read failed; retrying", "subject", f.c.Subject, "err", err)
		}
		failing, armed = true, true
		gap.Reset(f.c.GapWait)
	}
	for {
		f.take()
		f.advance()
		// The head of pending is either a hole (ids before it committed
		// elsewhere, not here yet) or a range whose records it does not
		// carry: read those now.
		if len(f.pending) > 0 && !failing {
			if h := f.pending[0]; h.first <= f.delivered+1 {
				if err := f.catchUp(ctx, h.last); err != nil {
					fail(err)
				}
				continue
			}
			if !armed {
				gap.Reset(f.c.GapWait)
				armed = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-gap.C:
			armed, failing = false, false
			if len(f.pending) > 0 && f.pending[0].first > f.delivered+1 {
				if err := f.catchUp(ctx, f.pending[0].first-1); err != nil {
					fail(err)
				}
			}
		case <-poll.C:
			// What was committed a whole poll ago and is still not here
			// was lost on the way: read it.
			target := f.seen
			if err := f.readLast(ctx); err != nil {
				fail(err)
				continue
			}
			f.seen = f.storeLast
			if target > f.delivered {
				if err := f.catchUp(ctx, target); err != nil {
					fail(err)
				}
			}
		case <-f.status:
			// Reconnected: what others published meanwhile is gone from
			// NATS; everything committed by now is in the store. The
			// client reports CONNECTED before the server has our
			// subscription again: a flush's round trip makes sure it has,
			// so what commits after the read below comes through NATS.
			if err := f.c.Conn.FlushTimeout(subscribeWithin); err != nil {
				f.c.Log.Warn("cluster: subscription not confirmed after reconnect; the store's polls deliver meanwhile", "subject", f.c.Subject, "err", err)
			}
			if err := f.readLast(ctx); err != nil {
				fail(err)
				continue
			}
			f.seen = f.storeLast
			if err := f.catchUp(ctx, f.storeLast); err != nil {
				fail(err)
			}
		}
	}
}

// take moves the inbox into pending, publishing this broker's batches on
// NATS on the way.
func (f *Fanout[T]) take() {
	f.mu.Lock()
	in := f.inbox
	f.inbox, f.held = nil, 0
	f.mu.Unlock()
	for _, s := range in {
		if s.local {
			f.publish(s)
		}
		if s.last <= f.delivered {
			continue // already delivered (NATS late, or read from the store)
		}
		if f.pendHeld+len(s.items) > f.c.MaxPending {
			s.items = nil
		}
		f.pendHeld += len(s.items)
		i, _ := slices.BinarySearchFunc(f.pending, s.first, func(p span[T], first int64) int { return cmpInt(p.first, first) })
		f.pending = slices.Insert(f.pending, i, s)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// publish sends one of this broker's batches on NATS: with its records
// when they fit, as its range alone otherwise. A failed publish (NATS
// down and its reconnect buffer full) is a hole to the other brokers.
func (f *Fanout[T]) publish(s span[T]) {
	if f.dropPublish != nil && f.dropPublish(s.first, s.last) {
		return
	}
	limit := f.c.MaxPayload
	if mp := f.c.Conn.MaxPayload(); mp > 0 && int(mp) < limit {
		limit = int(mp)
	}
	e := envelope[T]{V: envelopeVersion, Origin: f.origin, First: s.first, Last: s.last}
	if f.c.Signer != nil {
		e.Items = s.items // unsigned, no receiver would use them
	}
	data, err := json.Marshal(e)
	if err != nil || len(data) > limit {
		e.Items = nil
		if data, err = json.Marshal(e); err != nil {
			f.c.Log.Error("cluster: batch not encoded", "subject", f.c.Subject, "err", err)
			return
		}
	}
	if err := f.c.Conn.PublishMsg(f.c.Signer.Msg(f.c.Subject, data)); err != nil {
		f.c.Log.Warn("cluster: batch not published; other brokers read it from the store", "subject", f.c.Subject, "first", s.first, "last", s.last, "err", err)
		return
	}
	f.published.Add(1)
}

// advance delivers every pending range that carries its records and
// starts at most one past what was delivered.
func (f *Fanout[T]) advance() {
	for len(f.pending) > 0 {
		h := f.pending[0]
		if h.last <= f.delivered {
			f.pop()
			continue
		}
		if h.first > f.delivered+1 || h.items == nil {
			return
		}
		f.pop()
		items := h.items
		for len(items) > 0 && f.c.ID(items[0]) <= f.delivered {
			items = items[1:] // overlap with what a store read delivered
		}
		f.deliver(items, h.last)
	}
}

func (f *Fanout[T]) pop() {
	f.pendHeld -= len(f.pending[0].items)
	f.pending[0] = span[T]{}
	f.pending = f.pending[1:]
}

// deliver hands items to Deliver and moves the position to upTo.
func (f *Fanout[T]) deliver(items []T, upTo int64) {
	if len(items) > 0 {
		f.c.Deliver(items)
		f.deliveredN.Add(uint64(len(items)))
	}
	f.delivered = upTo
}

// readLast reads the store's newest id.
func (f *Fanout[T]) readLast(ctx context.Context) error {
	last, err := f.c.Store.Last(ctx)
	if err != nil {
		return err
	}
	f.storeLast = max(f.storeLast, last)
	return nil
}

// catchUp reads from the store and delivers every record up to upTo,
// which is known committed. Never past the store's newest id: a range
// announced past it (read after the range arrived, so a true one is
// covered) is dropped rather than walked.
func (f *Fanout[T]) catchUp(ctx context.Context, upTo int64) error {
	if upTo > f.storeLast {
		if err := f.readLast(ctx); err != nil {
			return err
		}
		if upTo > f.storeLast {
			f.dropAhead()
			upTo = f.storeLast
		}
	}
	for f.delivered < upTo {
		to := min(upTo, f.delivered+int64(f.c.Page))
		items, err := f.c.Store.Range(ctx, f.delivered, to)
		f.storeReads.Add(1)
		if err != nil {
			return err
		}
		// The store answers for the ids asked only, ascending.
		prev := f.delivered
		for _, it := range items {
			id := f.c.ID(it)
			if id <= prev || id > to {
				return fmt.Errorf("store range (%d, %d] returned id %d out of order", f.delivered, to, id)
			}
			prev = id
		}
		f.storeRecords.Add(uint64(len(items)))
		f.deliver(items, to)
	}
	f.advance()
	return nil
}

// dropAhead drops the pending ranges that end past the store's newest
// id: every true range was committed before it was announced, and the
// newest id was read after it arrived, so these are none.
func (f *Fanout[T]) dropAhead() {
	kept := f.pending[:0]
	for _, p := range f.pending {
		if p.last > f.storeLast {
			f.rejected.Add(1)
			f.pendHeld -= len(p.items)
			f.c.Log.Warn("cluster: announced range past the store's newest id dropped", "subject", f.c.Subject, "first", p.first, "last", p.last, "newest", f.storeLast)
			continue
		}
		kept = append(kept, p)
	}
	clear(f.pending[len(kept):])
	f.pending = kept
}
