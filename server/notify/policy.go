package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"svc/server/hooks"
	"svc/store"
)

// The durable delivery policy of inbound hooks (docs/HOOKS.md, States):
// the offline queue, the busy wait and the debounce buffer are rows of
// store.HookPending, written in the transaction that lands the receipt;
// one background loop (Run) flushes, forces and expires them.

const levelCritical = "critical"

// levelRank orders the LogLevels by severity.
var levelRank = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5}

// hookRescan is the longest the scheduler sleeps without a look at the
// store; hookRetry is how long it waits after a failed pass.
const (
	hookRescan = 30 * time.Second
	hookRetry  = time.Second
)

// hookItem is one delivery a pending row or a message carries.
type hookItem struct {
	ID         string `json:"id"`
	ReceivedAt int64  `json:"receivedAt"` // epoch ms
	Content    string `json:"content"`
	// ReplayedBy is the member who replayed a delivery that failed
	// verification (hooks.Item).
	ReplayedBy string `json:"replayedBy,omitempty"`
}

// hookLevel is a delivery's level: the override, else the policy's, else
// the endpoint's.
func hookLevel(e Endpoint, override string) string {
	if override != "" {
		return override
	}
	if pl := e.Policy.Level; pl != "" {
		return pl
	}
	return e.Level
}

// hookMember is a member target as the team and presence see it now.
type hookMember struct {
	name                string
	known, online, busy bool
}

// hookRoute is where a delivery of an endpoint can go: its member targets
// with their state and its channel ids. It is read before the commit (the
// team may not be read inside it); the policy decides inside.
type hookRoute struct {
	members  []hookMember
	channels []string
}

func (s *Service) routeHook(e Endpoint) hookRoute {
	var r hookRoute
	for _, t := range e.Targets {
		switch {
		case t.Channel != "":
			r.channels = append(r.channels, t.Channel)
		case t.Member != "":
			busy, _ := s.d.Members.Busy(t.Member)
			r.members = append(r.members, hookMember{name: t.Member, known: s.d.Members.Known(t.Member), online: s.d.Members.Online(t.Member), busy: busy})
		}
	}
	return r
}

// hookTally gathers what one transaction of the pipeline does: the
// messages with the receipts each delivers, the receipts touched (to
// finish) with notes for their reasons, and their final statuses.
type hookTally struct {
	msgs    []store.Message
	owners  [][]string // per message, the receipts it delivers
	touched []string
	// seen is touched as a set: a flush of n queued receipts touches each
	// once per message it renders, and a scan of touched each time was
	// O(n^2) in the committer.
	seen   map[string]struct{}
	notes  map[string][]string
	status map[string]hookStatus
	// fresh counts, per receipt, the messages this transaction adds for
	// it: such a receipt's status is written by stored, with their ids.
	fresh map[string]int
	ids   map[string][]string // message ids per receipt, once stored
	added int                 // pending rows written
	// written holds a receipt this transaction wrote, as written, when
	// nothing else in it changes that receipt but the pending rows held
	// for it (counted in held): finish then knows what it would read back.
	written map[string]store.HookDelivery
	held    map[string]int
	// messageID renders a stored message's id.
	messageID func(seq int64) string
}

type hookStatus struct{ status, reason string }

func (s *Service) newTally() *hookTally {
	return &hookTally{
		seen:  map[string]struct{}{},
		notes: map[string][]string{}, status: map[string]hookStatus{}, fresh: map[string]int{}, ids: map[string][]string{},
		written: map[string]store.HookDelivery{}, held: map[string]int{},
		messageID: s.d.MessageID,
	}
}

func (t *hookTally) touch(id string) {
	if _, ok := t.seen[id]; !ok {
		t.seen[id] = struct{}{}
		t.touched = append(t.touched, id)
	}
}

// wrote marks d as written by this transaction, which changes it no
// further but by holding pending rows for it (hold counts them).
func (t *hookTally) wrote(d store.HookDelivery) { t.written[d.ID] = d }

func (t *hookTally) note(id, note string) {
	t.touch(id)
	t.notes[id] = append(t.notes[id], note)
}

func (t *hookTally) add(m store.Message, owners ...string) {
	t.msgs = append(t.msgs, m)
	t.owners = append(t.owners, owners)
	for _, o := range owners {
		t.touch(o)
	}
}

// expiredMark is what the note of an expired copy says after the member's
// name. A name has no space or colon, so a member called "expired" cannot
// make a dropped copy read as an expired one.
const expiredMark = " expired: "

// finish decides the status of every receipt touched: pending while it
// has rows; else delivered when it became a message (now or before); else
// expired when a copy expired; else dropped. It writes those that get no
// message now; stored writes the others once their messages have ids, so
// a receipt's status is written once per transition.
func (t *hookTally) finish(ctx context.Context, tx store.Tx) error {
	fresh := t.fresh
	for _, os := range t.owners {
		for _, o := range os {
			fresh[o]++
		}
	}
	for _, id := range t.touched {
		d, left, err := t.receipt(ctx, tx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		reason := d.Reason
		if ns := t.notes[id]; len(ns) > 0 {
			reason = strings.Join(slices.DeleteFunc(append([]string{reason}, ns...), func(s string) bool { return s == "" }), "; ")
		}
		st := StatusDelivered
		switch {
		case left > 0:
			st = StatusPending
		case len(d.MessageIDs)+fresh[id] > 0:
		case strings.Contains(reason, expiredMark):
			st = StatusExpired
		default:
			st = StatusDropped
			if reason == "" || reason == d.Reason {
				reason = strings.Join(slices.DeleteFunc([]string{d.Reason, "no target reachable"}, func(s string) bool { return s == "" }), "; ")
			}
		}
		t.status[id] = hookStatus{st, reason}
		if fresh[id] > 0 || (st == d.Status && reason == d.Reason) {
			continue // stored writes it, or nothing changed
		}
		if err := tx.SetHookDeliveryStatus(ctx, id, st, reason, nil); err != nil {
			return err
		}
	}
	return nil
}

// receipt is receipt id as the transaction holds it, and how many pending
// rows it has: what this transaction wrote when it wrote the receipt
// (a verified delivery's commit then reads nothing back), else read.
func (t *hookTally) receipt(ctx context.Context, tx store.Tx, id string) (store.HookDelivery, int, error) {
	if d, ok := t.written[id]; ok {
		return d, t.held[id], nil
	}
	d, err := tx.GetHookDelivery(ctx, id)
	if err != nil {
		return d, 0, err
	}
	left, err := tx.CountHookPending(ctx, id)
	return d, left, err
}

// stored writes the status finish decided of every receipt that got
// messages now, appending the stored messages' ids.
func (t *hookTally) stored(ctx context.Context, tx store.Tx, msgs []store.Message) error {
	for i, m := range msgs {
		for _, o := range t.owners[i] {
			t.ids[o] = append(t.ids[o], t.messageID(m.Seq))
		}
	}
	for _, id := range t.touched {
		if t.fresh[id] == 0 {
			continue
		}
		if _, ok := t.status[id]; !ok {
			continue // gone since: finish found no receipt
		}
		st := t.status[id]
		if err := tx.SetHookDeliveryStatus(ctx, id, st.status, st.reason, t.ids[id]); err != nil {
			return err
		}
	}
	return nil
}

// hookPart is one message of a rendered delivery: its text and the items
// (newest first) it carries.
type hookPart struct {
	text  string
	items []hookItem
}

// renderHook renders items (newest first) as the messages they need: one
// when they fit the message size cap, else as many as it takes, in order;
// every item is in exactly one of them.
func (s *Service) renderHook(e Endpoint, items []hookItem, queuedFor time.Duration) ([]hookPart, error) {
	f := hooks.Frame{Slug: e.Slug, DisplayName: e.DisplayName, QueuedFor: queuedFor}
	for _, it := range items {
		f.Items = append(f.Items, hooks.Item{DeliveryID: it.ID, Received: time.UnixMilli(it.ReceivedAt).UTC(), Content: it.Content, ReplayedBy: it.ReplayedBy})
	}
	var parts []hookPart
	rest := items
	for _, p := range f.Render() {
		if p.Items < 0 || p.Items > len(rest) {
			return nil, fmt.Errorf("hook frame: a part of %d items past the %d left", p.Items, len(rest))
		}
		parts = append(parts, hookPart{text: p.Body, items: rest[:p.Items]})
		rest = rest[p.Items:]
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("hook frame: %d items in no part", len(rest))
	}
	return parts, nil
}

// hookMessage is a message of endpoint e carrying items on thread, to
// recipients (to, for a member copy).
func hookMessage(e Endpoint, thread, to string, recipients []string, text, level string, items []hookItem) (store.Message, error) {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	b, err := json.Marshal(map[string]any{"kind": hookDeliveryKind, "thread": thread, "endpoint": e.Slug, "deliveryIds": ids})
	if err != nil {
		return store.Message{}, err
	}
	title := e.DisplayName
	if title == "" {
		title = e.Slug
	}
	return store.Message{From: "hook:" + e.Slug, To: to, Thread: thread, Title: title, Body: text, Level: level, Data: b, Recipients: recipients}, nil
}

// dispatchHook applies the per-target policy to items (newest first)
// that the receipt owner delivers: channel targets get a message now; a
// member target no longer on the team is dropped; an offline one
// (no live stream) is queued (ifOffline queue) or dropped; an online,
// busy (working) one is held (ifBusy wait, unless the level is critical);
// anyone else gets a copy now. owner's overrides apply over the policy.
func (s *Service) dispatchHook(ctx context.Context, tx store.Tx, t *hookTally, e Endpoint, owner store.HookDelivery, items []hookItem, level string, queuedFor time.Duration, route hookRoute) error {
	pol := e.Policy
	ifOffline, ifBusy := pol.IfOffline, pol.IfBusy
	if owner.IfOffline != "" {
		ifOffline = owner.IfOffline
	}
	if owner.IfBusy != "" {
		ifBusy = owner.IfBusy
	}
	raw, err := json.Marshal(items)
	if err != nil {
		return err
	}
	parts, err := s.renderHook(e, items, queuedFor)
	if err != nil {
		return err
	}
	hold := func(member, kind string, d time.Duration) error {
		t.touch(owner.ID)
		t.added++
		t.held[owner.ID]++
		return tx.AddHookPending(ctx, store.HookPending{
			Delivery: owner.ID, Endpoint: e.Slug, Member: member, Kind: kind,
			ReceivedAt: owner.ReceivedAt, DueAt: owner.ReceivedAt.Add(d), Level: level, Items: raw,
		})
	}
	thread := "hook:" + e.Slug
	for _, m := range route.members {
		switch {
		case !m.known:
			t.note(owner.ID, "copy for "+m.name+" dropped: not on the team")
		case !m.online && ifOffline == "queue":
			if err := hold(m.name, store.HookQueue, time.Duration(pol.QueueTTLMs)*time.Millisecond); err != nil {
				return err
			}
		case !m.online:
			t.note(owner.ID, "copy for "+m.name+" dropped: offline (ifOffline drop)")
		case m.busy && ifBusy == "wait" && level != levelCritical:
			if err := hold(m.name, store.HookWait, time.Duration(pol.MaxWaitMs)*time.Millisecond); err != nil {
				return err
			}
		default:
			for _, p := range parts {
				msg, err := hookMessage(e, thread, m.name, []string{m.name}, p.text, level, p.items)
				if err != nil {
					return err
				}
				t.add(msg, owner.ID)
			}
		}
	}
	for _, id := range route.channels {
		ch, err := tx.GetChannel(ctx, id)
		if errors.Is(err, store.ErrNotFound) || (err == nil && !ch.ArchivedAt.IsZero()) {
			continue // a channel gone or archived since: nobody to reach
		}
		if err != nil {
			return err
		}
		members, err := tx.ListChannelMembers(ctx, id)
		if err != nil {
			return err
		}
		var to []string
		for _, m := range members {
			to = append(to, m.Member)
		}
		if len(to) == 0 {
			continue
		}
		for _, p := range parts {
			msg, err := hookMessage(e, "chan:"+id, "", to, p.text, level, p.items)
			if err != nil {
				return err
			}
			t.add(msg, owner.ID)
		}
	}
	t.touch(owner.ID)
	return nil
}

// bufferHook puts the receipt d (already stored, pending) into its
// endpoint's debounce buffer: the window ends debounceMs after the
// buffer's first delivery; a buffer holding debounceMax deliveries
// flushes now, in this transaction.
func (s *Service) bufferHook(ctx context.Context, tx store.Tx, t *hookTally, e Endpoint, d store.HookDelivery, it hookItem, level string, route hookRoute) error {
	pol := e.Policy
	buf, err := tx.ListHookPending(ctx, store.HookPendingFilter{Endpoint: e.Slug, Kind: store.HookDebounce})
	if err != nil {
		return err
	}
	due := d.ReceivedAt.Add(time.Duration(pol.DebounceMs) * time.Millisecond)
	for _, p := range buf {
		if p.DueAt.Before(due) {
			due = p.DueAt
		}
	}
	raw, err := json.Marshal([]hookItem{it})
	if err != nil {
		return err
	}
	if err := tx.AddHookPending(ctx, store.HookPending{
		Delivery: d.ID, Endpoint: e.Slug, Kind: store.HookDebounce, ReceivedAt: d.ReceivedAt, DueAt: due, Level: level, Items: raw,
	}); err != nil {
		return err
	}
	t.added++
	t.touch(d.ID)
	if len(buf)+1 < int(pol.DebounceMax) {
		return nil
	}
	return s.flushDebounce(ctx, tx, t, e, route)
}

// flushDebounce delivers an endpoint's debounce buffer as one delivery:
// its newest receipt carries every item (newest first) through the
// per-target policy, with its own overrides and level; the older
// receipts become coalesced into it.
func (s *Service) flushDebounce(ctx context.Context, tx store.Tx, t *hookTally, e Endpoint, route hookRoute) error {
	buf, err := tx.ListHookPending(ctx, store.HookPendingFilter{Endpoint: e.Slug, Kind: store.HookDebounce})
	if err != nil || len(buf) == 0 {
		return err
	}
	var items []hookItem
	for _, p := range buf {
		if err := tx.DeleteHookPending(ctx, p.Delivery, p.Member, p.Kind); err != nil {
			return err
		}
		var its []hookItem
		if err := json.Unmarshal(p.Items, &its); err != nil {
			return fmt.Errorf("hook pending items: %w", err)
		}
		items = append(items, its...)
	}
	sortItems(items)
	newest := buf[0]
	owner, err := tx.GetHookDelivery(ctx, newest.Delivery)
	if err != nil {
		return err
	}
	for _, p := range buf[1:] {
		if err := tx.SetHookDeliveryStatus(ctx, p.Delivery, StatusCoalesced, "coalesced into "+newest.Delivery, nil); err != nil {
			return err
		}
	}
	return s.dispatchHook(ctx, tx, t, e, owner, items, newest.Level, 0, route)
}

// sortItems orders items newest first (by id on a tie, for a stable
// order).
func sortItems(items []hookItem) {
	sort.SliceStable(items, func(i, j int) bool { return items[i].ReceivedAt > items[j].ReceivedAt })
}

// memberRows says what becomes of a member's rows of one kind.
type memberRows int

const (
	rowsDeliver memberRows = iota // flush now (attach, idle, forced)
	rowsExpire                    // queue TTL run out
	rowsDrop                      // the member left the team
)

// resolveMember resolves member's rows of kind due by dueBy (every row
// when dueBy is zero), in one transaction: delivered as one message per
// endpoint (items of every row newest first, the most severe level, and
// for the queue the time the oldest waited), expired or dropped. A queued
// row past its TTL expires even when the member attaches.
func (s *Service) resolveMember(ctx context.Context, member, kind string, dueBy time.Time, what memberRows, why string) error {
	return s.resolveMemberAs(ctx, false, member, kind, dueBy, what, why)
}

// errStillMember refuses the loop's drop of the copies of a member the
// store still has (several brokers): the loop's member list lagged.
var errStillMember = errors.New("the member is in the store: copies kept")

// resolveMemberAs is resolveMember, by the scheduler loop when fenced:
// then only while this broker holds the lease, and (several brokers)
// dropping a member's copies only when the store has no such member.
func (s *Service) resolveMemberAs(ctx context.Context, fenced bool, member, kind string, dueBy time.Time, what memberRows, why string) error {
	var t *hookTally
	return s.d.Commit.CommitStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		if fenced {
			if err := s.fence(ctx, tx); err != nil {
				return nil, err
			}
			if what == rowsDrop && s.lease.owner != "" {
				// The loop's member list may lag a member another broker
				// just created: the store says whether it is on the team.
				_, err := tx.GetMember(ctx, member)
				if err == nil {
					return nil, errStillMember
				}
				if !errors.Is(err, store.ErrNotFound) {
					return nil, err
				}
			}
		}
		t = s.newTally()
		now := s.now()
		rows, err := tx.ListHookPending(ctx, store.HookPendingFilter{Kind: kind, Member: member, DueBy: dueBy})
		if err != nil {
			return nil, err
		}
		for len(rows) > 0 {
			n := 1
			for n < len(rows) && rows[n].Endpoint == rows[0].Endpoint {
				n++
			}
			if err := s.resolveRows(ctx, tx, t, rows[:n], what, why, now); err != nil {
				return nil, err
			}
			rows = rows[n:]
		}
		if err := t.finish(ctx, tx); err != nil {
			return nil, err
		}
		return t.msgs, nil
	}, func(ctx context.Context, tx store.Tx, msgs []store.Message) error { return t.stored(ctx, tx, msgs) })
}

// resolveRows resolves one endpoint's rows of one member and kind.
func (s *Service) resolveRows(ctx context.Context, tx store.Tx, t *hookTally, rows []store.HookPending, what memberRows, why string, now time.Time) error {
	member, kind := rows[0].Member, rows[0].Kind
	var keep []store.HookPending
	for _, p := range rows {
		if err := tx.DeleteHookPending(ctx, p.Delivery, p.Member, p.Kind); err != nil {
			return err
		}
		switch {
		case what == rowsDrop:
			t.note(p.Delivery, "copy for "+member+" dropped: "+why)
		case kind == store.HookQueue && !now.Before(p.DueAt):
			t.note(p.Delivery, fmt.Sprintf("queued copy for %s"+expiredMark+"%s not attached within queueTtlMs (%d ms)",
				member, member, p.DueAt.Sub(p.ReceivedAt).Milliseconds()))
		case what == rowsExpire:
			t.note(p.Delivery, "queued copy for "+member+expiredMark+why)
		default:
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	e, err := Read(ctx, tx, keep[0].Endpoint)
	if err != nil {
		return err
	}
	// Each item with the receipt of its row: a message carrying it is
	// one that receipt became.
	type held struct {
		hookItem
		owner string
	}
	var (
		all    []held
		level  = keep[0].Level
		oldest = keep[0].ReceivedAt
	)
	for _, p := range keep {
		var its []hookItem
		if err := json.Unmarshal(p.Items, &its); err != nil {
			return fmt.Errorf("hook pending items: %w", err)
		}
		for _, it := range its {
			all = append(all, held{it, p.Delivery})
		}
		if levelRank[p.Level] > levelRank[level] {
			level = p.Level
		}
		if p.ReceivedAt.Before(oldest) {
			oldest = p.ReceivedAt
		}
		if why != "" {
			t.note(p.Delivery, why)
		}
		// A row whose items are all gone still resolves: its receipt is
		// finished with what it had.
		t.touch(p.Delivery)
	}
	if len(all) == 0 {
		return nil
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].ReceivedAt > all[j].ReceivedAt })
	items := make([]hookItem, len(all))
	for i, h := range all {
		items[i] = h.hookItem
	}
	var queuedFor time.Duration
	if kind == store.HookQueue {
		for _, it := range items {
			if r := time.UnixMilli(it.ReceivedAt); r.Before(oldest) {
				oldest = r
			}
		}
		queuedFor = max(now.Sub(oldest), time.Second)
	}
	parts, err := s.renderHook(e, items, queuedFor)
	if err != nil {
		return err
	}
	at := 0
	for _, p := range parts {
		var owners []string
		for _, h := range all[at : at+len(p.items)] {
			if !slices.Contains(owners, h.owner) {
				owners = append(owners, h.owner)
			}
		}
		at += len(p.items)
		msg, err := hookMessage(e, "hook:"+e.Slug, member, []string{member}, p.text, level, p.items)
		if err != nil {
			return err
		}
		t.add(msg, owners...)
	}
	return nil
}

// Run is the one background loop of the delivery policy: it flushes
// debounce windows that ended, a member's queue when its runner attaches
// (a live stream; after a restart everyone starts offline), a member's
// held copies when it is no longer working (a report, or the 30 s lapse
// of its activity) or when maxWaitMs ran out, and expires queued copies
// past queueTtlMs. It sleeps until the next due row or activity lapse, at
// most hookRescan; ingress and the broker's reach changes poke it.
// hookPruneBatch bounds the receipts one prune deletes, so a sweep never
// holds the writer long.
const hookPruneBatch = 1000

// prune deletes receipts past ReceiptRetention, a batch at a time.
func (s *Service) prune(ctx context.Context, now time.Time) error {
	if now.Sub(s.pruned) < time.Minute {
		return nil
	}
	for {
		// Rejected receipts of an endpoint no one posts to any more age
		// out here; ingress caps their number as they arrive.
		if _, err := s.d.Store.PruneRejectedHookDeliveries(ctx, "", now.Add(-RejectedRetention), 0); err != nil {
			return err
		}
		n, err := s.d.Store.PruneHookDeliveries(ctx, now.Add(-ReceiptRetention), hookPruneBatch)
		if err != nil {
			return err
		}
		if n < hookPruneBatch {
			s.pruned = now
			return nil
		}
	}
}

// rowsAdded asks for a pass soon after rows the loop times were written
// and, on a broker that does not run the loop, has Announce tell the
// holder; it never blocks.
func (s *Service) rowsAdded() {
	s.Poke()
	select {
	case s.due <- struct{}{}:
	default:
	}
}

// Poke asks for a pass soon; it never blocks.
func (s *Service) Poke() {
	for _, c := range []chan struct{}{s.wake, s.reach} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (s *Service) Run(ctx context.Context) {
	if s.lease.owner != "" {
		s.runLeased(ctx)
		return
	}
	s.run(ctx)
}

func (s *Service) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
		next, err := s.Pass(ctx)
		wait := hookRescan
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			s.d.Log.WarnContext(ctx, "hook delivery pass failed; retrying", "err", err)
			wait = hookRetry
		case !next.IsZero():
			wait = min(max(next.Sub(s.now()), 10*time.Millisecond), hookRescan)
		}
		timer.Reset(wait)
	}
}

// Pass resolves everything due now and answers when the next thing is
// due (zero: nothing pending). Run calls it; so may a test.
func (s *Service) Pass(ctx context.Context) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	errs := []error{s.prune(ctx, now)}

	// Debounce windows that ended.
	due, err := s.d.Store.ListHookPending(ctx, store.HookPendingFilter{Kind: store.HookDebounce, DueBy: now})
	if err != nil {
		return time.Time{}, err
	}
	var eps []string
	for _, p := range due {
		if !slices.Contains(eps, p.Endpoint) {
			eps = append(eps, p.Endpoint)
		}
	}
	for _, slug := range eps {
		errs = append(errs, s.flushDebounced(ctx, slug))
	}

	// Members with rows due now, by kind: the others need no commit.
	dueNow := func(kind string) (map[string]bool, error) {
		rows, err := s.d.Store.ListHookPending(ctx, store.HookPendingFilter{Kind: kind, DueBy: now})
		out := map[string]bool{}
		for _, p := range rows {
			out[p.Member] = true
		}
		return out, err
	}

	// The offline queue: flush on attach, expire past the TTL.
	queued, err := s.d.Store.HookPendingMembers(ctx, store.HookQueue)
	if err != nil {
		return time.Time{}, err
	}
	queueDue, err := dueNow(store.HookQueue)
	if err != nil {
		return time.Time{}, err
	}
	// While presence may miss members attached on other brokers, rows due
	// are left for a later pass: skipped makes the loop look again soon
	// rather than at once.
	doubt := s.presenceDoubt()
	skipped := false
	drop := func(m, kind string) {
		err := s.resolveMemberAs(ctx, true, m, kind, time.Time{}, rowsDrop, "not on the team")
		if errors.Is(err, errStillMember) {
			skipped, err = true, nil
		}
		errs = append(errs, err)
	}
	for _, m := range queued {
		switch {
		case !s.d.Members.Known(m):
			drop(m, store.HookQueue)
		case s.d.Members.Online(m):
			errs = append(errs, s.resolveMemberAs(ctx, true, m, store.HookQueue, time.Time{}, rowsDeliver, ""))
		case !queueDue[m]:
		case doubt > 0:
			skipped = true
		default:
			errs = append(errs, s.resolveMemberAs(ctx, true, m, store.HookQueue, now, rowsExpire,
				fmt.Sprintf("%s not attached within queueTtlMs", m)))
		}
	}

	// The busy wait: flush when free, force at maxWaitMs.
	var next time.Time
	held, err := s.d.Store.HookPendingMembers(ctx, store.HookWait)
	if err != nil {
		return time.Time{}, err
	}
	waitDue, err := dueNow(store.HookWait)
	if err != nil {
		return time.Time{}, err
	}
	for _, m := range held {
		busy, until := s.d.Members.Busy(m)
		switch {
		case !s.d.Members.Known(m):
			drop(m, store.HookWait)
		case !busy && doubt == 0:
			errs = append(errs, s.resolveMemberAs(ctx, true, m, store.HookWait, time.Time{}, rowsDeliver, ""))
		default:
			if waitDue[m] {
				errs = append(errs, s.resolveMemberAs(ctx, true, m, store.HookWait, now, rowsDeliver, "forced out after maxWaitMs"))
			}
			if !busy {
				skipped = true // free here, maybe working where presence is not heard
			} else if next.IsZero() || until.Before(next) {
				next = until
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return time.Time{}, err
	}
	d, ok, err := s.d.Store.NextHookPendingDue(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if ok && (next.IsZero() || d.Before(next)) {
		next = d
	}
	// Rows left for later: look again in a second (the doubt may be over),
	// not every 10 ms for rows past due, nor only when the next row is.
	if soon := now.Add(hookRetry); skipped && (next.IsZero() || !next.After(now) || next.After(soon)) {
		next = soon
	}
	return next, nil
}

// flushDebounced flushes the debounce buffer of the endpoint slug.
func (s *Service) flushDebounced(ctx context.Context, slug string) error {
	e, err := Read(ctx, s.d.Store, slug)
	if errors.Is(err, store.ErrNotFound) {
		return nil // deleted since: its rows went with it
	}
	if err != nil {
		return err
	}
	route := s.routeHook(e)
	var t *hookTally
	err = s.d.Commit.CommitStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		if err := s.fence(ctx, tx); err != nil {
			return nil, err
		}
		t = s.newTally()
		e, err := Read(ctx, tx, slug)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if err := s.flushDebounce(ctx, tx, t, e, route); err != nil {
			return nil, err
		}
		if err := t.finish(ctx, tx); err != nil {
			return nil, err
		}
		return t.msgs, nil
	}, func(ctx context.Context, tx store.Tx, msgs []store.Message) error { return t.stored(ctx, tx, msgs) })
	if err == nil && t != nil && t.added > 0 {
		s.Poke() // queued or held copies: their timers
	}
	return err
}

// DropMember drops the copies queued or held for member (deleted from
// the team) now, not at the next pass, which a member created again under
// the name could precede; their receipts say why.
func (s *Service) DropMember(ctx context.Context, member, why string) error {
	var errs []error
	for _, kind := range []string{store.HookQueue, store.HookWait} {
		errs = append(errs, s.resolveMember(ctx, member, kind, time.Time{}, rowsDrop, why))
	}
	s.Poke()
	return errors.Join(errs...)
}
