package hub

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// DefaultBuffer is how many messages a subscription may fall behind before
// the hub cuts it off. The subscriber resumes from the store by its last id,
// so the bound costs a reconnect, never a message; it keeps a stalled client
// from holding memory or slowing publishers.
const DefaultBuffer = 256

// Errors of Subscribe.
var (
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("hub closed")
	// ErrTooMany is returned when the member already holds the most
	// subscriptions WithMaxPerMember allows.
	ErrTooMany = errors.New("too many live subscriptions for one member")
)

// Event is one committed item (a chat message, an activity row) as every
// subscriber sees it. It is shared read-only between subscribers; its JSON
// is rendered once, on first use.
type Event struct {
	Seq   int64
	Value proto.Message

	once sync.Once
	json []byte
	// frame is the event's server-sent-event frame for the first kind of
	// stream that asked for one (Frame).
	frame atomic.Pointer[frame]
}

// IDs is how one kind of stream names its events on the wire (the SSE id
// a client resumes from). Frames are shared between streams whose IDs are
// the same value (pointer), so each kind has one, made once.
type IDs struct {
	// Format renders an event's sequence as its wire id.
	Format func(seq int64) string
}

// frame is an event rendered as one kind of stream writes it.
type frame struct {
	ids  *IDs
	name string
	b    []byte
}

// NewEvent returns the event of a committed item.
func NewEvent(seq int64, v proto.Message) *Event { return &Event{Seq: seq, Value: v} }

// jsonOptions render values as the REST gateway does.
var jsonOptions = protojson.MarshalOptions{EmitDefaultValues: true}

// JSON returns the value as one line of JSON, rendered once.
func (e *Event) JSON() []byte {
	e.once.Do(func() {
		b, err := jsonOptions.Marshal(e.Value)
		if err != nil {
			b = []byte(`{}`) // the values svc publishes always marshal; keep the stream alive regardless
		}
		e.json = b
	})
	return e.json
}

// Frame returns the event as a server-sent event named name with the id
// ids gives it (AppendFrame). The first (ids, name) asked is rendered once
// and its bytes shared by every later caller asking for the same: a
// broadcast to a thousand streams of one kind formats its id and frame
// once, not per stream. Another (ids, name) is rendered for its caller
// alone. The bytes are shared: callers must not change them.
func (e *Event) Frame(ids *IDs, name string) []byte {
	if f := e.frame.Load(); f != nil && f.ids == ids && f.name == name {
		return f.b
	}
	b := AppendFrame(nil, ids.Format(e.Seq), name, e.JSON())
	e.frame.CompareAndSwap(nil, &frame{ids: ids, name: name, b: b})
	return b
}

// AppendFrame appends one server-sent event (id, event name and a JSON
// line of data) to dst. data must hold no newline (JSON renders none).
func AppendFrame(dst []byte, id, name string, data []byte) []byte {
	dst = append(dst, "id: "...)
	dst = append(dst, id...)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, data...)
	return append(dst, "\n\n"...)
}

// Hub maps keys (the member a chat stream belongs to, or the member an
// activity stream watches) to their live subscriptions. Each subscription
// also has a holder, the member who opened it: bounds and disconnects go by
// holder, delivery by key.
type Hub struct {
	pubMu sync.Mutex // serializes Publish, so a cut-off subscriber never gets a later event
	mu    sync.RWMutex
	subs  map[string]map[*Subscription]struct{} // by key
	held  map[string]map[*Subscription]struct{} // by holder
	// closed is set under mu by Close.
	closed bool
	buffer int
	// maxPerMember bounds the subscriptions one holder may have open; <= 0
	// is unbounded.
	maxPerMember int
	// onChange, when set, is called outside the lock after a key's
	// subscription count changes.
	onChange func(member string)
	// delivered counts events handed to subscriptions, cut the
	// subscriptions cut off for falling behind (Stats).
	delivered, cut atomic.Uint64
	// woken collects the subscriptions one publish queued to, reused
	// under pubMu.
	woken []*Subscription
}

// Option configures a Hub.
type Option func(*Hub)

// WithBuffer sets the per-subscription buffer.
func WithBuffer(n int) Option { return func(h *Hub) { h.buffer = max(n, 1) } }

// WithMaxPerMember bounds how many live subscriptions one member may hold
// open; n <= 0 is unbounded.
func WithMaxPerMember(n int) Option { return func(h *Hub) { h.maxPerMember = n } }

// WithOnChange sets a callback run after a key's subscription count
// changes.
func WithOnChange(f func(member string)) Option { return func(h *Hub) { h.onChange = f } }

// New returns an empty hub.
func New(opts ...Option) *Hub {
	h := &Hub{subs: map[string]map[*Subscription]struct{}{}, held: map[string]map[*Subscription]struct{}{}, buffer: DefaultBuffer}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Subscription is one live stream of one key.
//
// Its queue is a slice that grows with what waits in it, up to the hub's
// buffer, and shrinks back once drained: an idle subscription holds no
// buffer. (It was a channel of DefaultBuffer slots, 2 KiB held by every
// idle stream; docs/PERFORMANCE.md.)
type Subscription struct {
	hub    *Hub
	member string // the key
	holder string // the member who opened it
	cred   string // the credential the stream authenticated with
	// mu guards q, head and ended.
	mu sync.Mutex
	// q[head:] are the events waiting, oldest first.
	q    []*Event
	head int
	// ended is set when the subscription ends; what waits in q is still
	// delivered.
	ended bool
	// wake holds a token while events may wait, and is closed when the
	// subscription ends.
	wake chan struct{}
	// behind is set when the buffer overflowed: nothing more is sent and the
	// subscription is closed.
	behind atomic.Bool
	// queued is set, under the hub's pubMu, while a publish has queued to
	// the subscription and not yet woken it.
	queued bool
	once   sync.Once
	// deadline, set by EndAt, ends the subscription when it fires; ending
	// stops it. expired is set when it fired.
	deadline *time.Timer
	expired  atomic.Bool
	// afterEnd, when set, runs once the subscription has ended (guarded by
	// mu; see AfterEnd).
	afterEnd func()
}

// keptQueue is the largest drained queue a subscription keeps for the
// next event; a larger one (grown by a burst) is dropped.
const keptQueue = 8

// Subscribe registers a live subscription of member to its own key, opened
// with the credential cred (see Disconnect).
func (h *Hub) Subscribe(member, cred string) (*Subscription, error) {
	return h.SubscribeAs(member, member, cred)
}

// SubscribeAs registers a live subscription of key held by holder, opened
// with holder's credential cred: it counts toward holder's bound, and
// Disconnect(holder, …) ends it.
func (h *Hub) SubscribeAs(key, holder, cred string) (*Subscription, error) {
	s := &Subscription{hub: h, member: key, holder: holder, cred: cred, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if h.maxPerMember > 0 && len(h.held[holder]) >= h.maxPerMember {
		h.mu.Unlock()
		return nil, ErrTooMany
	}
	add(h.subs, key, s)
	add(h.held, holder, s)
	h.mu.Unlock()
	h.changed(key)
	return s, nil
}

func add(m map[string]map[*Subscription]struct{}, k string, s *Subscription) {
	set := m[k]
	if set == nil {
		set = map[*Subscription]struct{}{}
		m[k] = set
	}
	set[s] = struct{}{}
}

// drop removes s from m[k] and reports whether it was there.
func drop(m map[string]map[*Subscription]struct{}, k string, s *Subscription) bool {
	set, ok := m[k]
	if !ok {
		return false
	}
	if _, ok := set[s]; !ok {
		return false
	}
	delete(set, s)
	if len(set) == 0 {
		delete(m, k)
	}
	return true
}

// Next returns the oldest waiting event without blocking. With none, ev is
// nil and open reports whether more may come: it is false once the
// subscription has ended (by Close, by the hub closing, or by falling
// behind) and everything queued before the end has been returned. Events
// come in commit order.
func (s *Subscription) Next() (ev *Event, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == len(s.q) {
		return nil, !s.ended
	}
	ev = s.q[s.head]
	s.q[s.head] = nil
	s.head++
	if s.head == len(s.q) {
		s.head = 0
		if cap(s.q) > keptQueue {
			s.q = nil
		} else {
			s.q = s.q[:0]
		}
	}
	return ev, true
}

// Ready is ready to receive from when Next may have something new: an
// event, or the end. Wait on it only after Next returned nothing.
func (s *Subscription) Ready() <-chan struct{} { return s.wake }

// push queues ev unless max events already wait; it reports false when
// the queue is full. It does not wake the reader: see signal.
func (s *Subscription) push(ev *Event, max int) bool {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return true
	}
	n := len(s.q) - s.head
	if n >= max {
		s.mu.Unlock()
		return false
	}
	switch {
	case s.q == nil:
		s.q = make([]*Event, 0, min(keptQueue, max))
	case len(s.q) == cap(s.q) && s.head > 0:
		// Slide what waits to the front rather than grow.
		copy(s.q, s.q[s.head:])
		clear(s.q[n:])
		s.q, s.head = s.q[:n], 0
	}
	s.q = append(s.q, ev)
	s.mu.Unlock()
	return true
}

// signal wakes the subscription's reader. The caller holds the hub's read
// lock, so the subscription has not ended (remove ends it under the write
// lock) and wake is open.
func (s *Subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default: // a token is already there
	}
}

// end marks the subscription ended and wakes its reader; once only. It
// returns the AfterEnd callback to run, once the caller has let go of the
// hub's locks.
func (s *Subscription) end() (after func()) {
	s.once.Do(func() {
		s.mu.Lock()
		s.ended = true
		after, s.afterEnd = s.afterEnd, nil
		if s.deadline != nil {
			s.deadline.Stop()
		}
		s.mu.Unlock()
		close(s.wake)
	})
	return after
}

// AfterEnd has f run once the subscription ends (by Close, by the hub
// closing, by Disconnect, or by falling behind), in the goroutine that
// ended it, outside the hub's locks; at once when it has already ended. A
// reader blocked elsewhere than on Ready (a stream's write to a client
// that stopped reading) learns of the end this way. A later call replaces
// an earlier f that has not run.
func (s *Subscription) AfterEnd(f func()) {
	s.mu.Lock()
	if !s.ended {
		s.afterEnd = f
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	f()
}

// EndAt has the subscription end at t (at once when t has passed), as Close
// would, and Expired report true from then: a stream opened with a
// credential that expires does not outlive it. Call it at most once, before
// handing the subscription to its reader.
func (s *Subscription) EndAt(t time.Time) {
	d := time.Until(t)
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.deadline = time.AfterFunc(max(d, 0), func() {
		s.expired.Store(true)
		s.Close()
	})
	s.mu.Unlock()
}

// Expired reports whether the subscription ended at its EndAt time.
func (s *Subscription) Expired() bool { return s.expired.Load() }

// Member names the key the subscription watches.
func (s *Subscription) Member() string { return s.member }

// FellBehind reports whether the hub cut the subscription off because its
// buffer overflowed.
func (s *Subscription) FellBehind() bool { return s.behind.Load() }

// Close ends the subscription and gives its place back to its holder. It
// is safe to call more than once.
func (s *Subscription) Close() { s.hub.remove(s, true) }

// remove ends s and stops delivering to it. With release, s also stops
// counting toward its holder's bound; a subscription cut off for falling
// behind keeps counting until its reader closes it, so a member whose
// streams are cut faster than they end cannot open more than its bound
// meanwhile.
func (h *Hub) remove(s *Subscription, release bool) {
	h.mu.Lock()
	removed := drop(h.subs, s.member, s)
	if release {
		drop(h.held, s.holder, s)
	}
	// Ended under the write lock: Publish sends only under the read lock,
	// so nothing is queued after the end.
	after := s.end()
	h.mu.Unlock()
	if removed {
		h.changed(s.member)
	}
	if after != nil {
		after()
	}
}

func (h *Hub) changed(member string) {
	if h.onChange != nil {
		h.onChange(member)
	}
}

// Publish delivers ev to every subscription of the addressed members: every
// member but sender when all is set, otherwise recipients. It never blocks:
// a subscription whose buffer is full is cut off. It returns how many of the
// addressed members have at least one live subscription.
func (h *Hub) Publish(ev *Event, all bool, sender string, recipients []string) (live int) {
	items := [1]Item{{Ev: ev, All: all, Sender: sender, Recipients: recipients}}
	var lives [1]int
	h.publish(items[:], lives[:])
	return lives[0]
}

// Item is one event of a batch and whom it addresses, as Publish's
// arguments.
type Item struct {
	Ev         *Event
	All        bool
	Sender     string
	Recipients []string
}

// PublishBatch publishes items in order, each as Publish would, but wakes
// each subscription once, after the last item is queued: a stream then
// writes what one commit made in one write, not one write (and one wake)
// per message.
func (h *Hub) PublishBatch(items []Item) { h.publish(items, nil) }

// publish queues every item to its subscriptions, then wakes each
// subscription it queued to; lives, when set, receives each item's count
// of addressed members with a live subscription.
func (h *Hub) publish(items []Item, lives []int) {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	var behind []*Subscription
	var sent uint64
	woken := h.woken[:0]
	send := func(ev *Event, set map[*Subscription]struct{}) {
		for s := range set {
			if s.behind.Load() {
				continue
			}
			if !s.push(ev, h.buffer) {
				s.behind.Store(true)
				behind = append(behind, s)
				continue
			}
			sent++
			if !s.queued {
				s.queued = true
				woken = append(woken, s)
			}
		}
	}
	h.mu.RLock()
	for i, it := range items {
		live := h.addressed(it.All, it.Sender, it.Recipients, func(set map[*Subscription]struct{}) { send(it.Ev, set) })
		if lives != nil {
			lives[i] = live
		}
	}
	// Woken under the read lock: no subscription ends meanwhile.
	for _, s := range woken {
		s.queued = false
		s.signal()
	}
	h.mu.RUnlock()
	clear(woken)
	h.woken = woken[:0]
	// One atomic add per publish, not per delivery.
	h.delivered.Add(sent)
	if len(behind) > 0 {
		h.cut.Add(uint64(len(behind)))
	}
	for _, s := range behind {
		h.remove(s, false)
	}
}

// Stats returns how many events Publish has handed to subscriptions and
// how many subscriptions it cut off for falling behind, since New. Both
// only grow; reading them takes no lock.
func (h *Hub) Stats() (delivered, cut uint64) { return h.delivered.Load(), h.cut.Load() }

// Live returns how many of the members Publish(ev, all, sender,
// recipients) would address have at least one live subscription, without
// publishing anything.
func (h *Hub) Live(all bool, sender string, recipients []string) (live int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.addressed(all, sender, recipients, nil)
}

// addressed counts the members that all, sender and recipients address (as
// Publish's arguments) holding at least one live subscription, and calls
// each, when set, with each such member's set. The caller holds mu.
func (h *Hub) addressed(all bool, sender string, recipients []string, each func(set map[*Subscription]struct{})) (live int) {
	visit := func(set map[*Subscription]struct{}) {
		if len(set) == 0 {
			return
		}
		live++
		if each != nil {
			each(set)
		}
	}
	if all {
		for member, set := range h.subs {
			if member != sender {
				visit(set)
			}
		}
		return live
	}
	for _, member := range recipients {
		visit(h.subs[member])
	}
	return live
}

// Connected returns how many live subscriptions key has.
func (h *Hub) Connected(member string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.subs[member])
}

// Disconnect ends the subscriptions member holds whose credential match
// accepts (every one when match is nil): a deleted member or a revoked
// credential must not keep a stream.
func (h *Hub) Disconnect(member string, match func(cred string) bool) {
	var gone []*Subscription
	h.mu.RLock()
	for s := range h.held[member] {
		if match == nil || match(s.cred) {
			gone = append(gone, s)
		}
	}
	h.mu.RUnlock()
	for _, s := range gone {
		s.Close()
	}
}

// Close ends every subscription and refuses new ones; streams end at once so
// shutdown never waits on a subscriber.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	var all []*Subscription
	for _, set := range h.subs {
		for s := range set {
			all = append(all, s)
		}
	}
	h.mu.Unlock()
	for _, s := range all {
		s.Close()
	}
}
