package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"svc/store"
)

// Several brokers of one team (docs/DECISIONS.md, "Hook schedulers on
// several brokers"): the scheduler loop runs on the one broker that holds
// the team's hooks lease, and each of its transactions checks the lease's
// epoch, so a holder that paused past its lease writes nothing. Ingress,
// replays and member deletion stay on the broker that serves them: their
// writes are transactions of their own on the shared store.

// LeaseName is the lease the scheduler loop runs under.
const LeaseName = "hooks.scheduler"

// LeaseTTL is how long the lease lasts without a renewal; its holder
// renews it every third. A holder that dies is replaced after at most
// LeaseTTL plus one renewal period.
const LeaseTTL = 15 * time.Second

// remoteReach is how long a notice from another broker that a member
// attached (or became free) counts; brokers repeat it every
// ReachAnnounce while it still holds.
const (
	remoteReach   = 10 * time.Second
	ReachAnnounce = 3 * time.Second
)

// errLeaseLost refuses a scheduler write of a broker that no longer holds
// the lease.
var errLeaseLost = errors.New("the hooks lease is held by another broker")

// leased is a Service's part of the cluster: its lease and what other
// brokers reported of members' reach.
type leased struct {
	owner string        // this broker's id; "" alone: the loop always runs
	ttl   time.Duration // LeaseTTL; shorter in tests
	mu    sync.Mutex
	epoch int64 // 0 while not held
	// attached and idle are members another broker reports attached, or
	// no longer working, until when the report counts.
	attached, idle map[string]time.Time
}

// Clustered makes s one of several brokers' services: its loop runs only
// while this broker (owner, unique per process) holds the lease, with ttl
// (LeaseTTL when zero). Call before Run.
func (s *Service) Clustered(owner string, ttl time.Duration) {
	if ttl <= 0 {
		ttl = LeaseTTL
	}
	s.lease.owner, s.lease.ttl = owner, ttl
}

// Holding reports whether this broker runs the loop now (always, alone).
func (s *Service) Holding() bool {
	if s.lease.owner == "" {
		return true
	}
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	return s.lease.epoch != 0
}

// RemoteReach records another broker's report that member attached
// (attached) or is no longer working (!attached), and asks for a pass.
func (s *Service) RemoteReach(member string, attached bool) {
	if !s.d.Members.Known(member) {
		return // a name off the team would only grow the map
	}
	s.lease.mu.Lock()
	m := &s.lease.idle
	if attached {
		m = &s.lease.attached
	}
	if *m == nil {
		*m = map[string]time.Time{}
	}
	(*m)[member] = s.now().Add(remoteReach)
	s.lease.mu.Unlock()
	s.Poke()
}

// reached reports whether another broker reported member attached
// (attached) or free, recently.
func (s *Service) reached(member string, attached bool) bool {
	s.lease.mu.Lock()
	defer s.lease.mu.Unlock()
	m := s.lease.idle
	if attached {
		m = s.lease.attached
	}
	until, ok := m[member]
	if ok && !s.now().Before(until) {
		delete(m, member)
		return false
	}
	return ok
}

// wakeLoop asks the loop for a pass soon; it never blocks.
func (s *Service) wakeLoop() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fence refuses the scheduler's write in tx unless this broker holds the
// lease at the epoch it took it with (alone: always allowed).
func (s *Service) fence(ctx context.Context, tx store.Tx) error {
	if s.lease.owner == "" {
		return nil
	}
	s.lease.mu.Lock()
	epoch := s.lease.epoch
	s.lease.mu.Unlock()
	if epoch == 0 {
		return errLeaseLost
	}
	ok, err := tx.HoldsLease(ctx, LeaseName, s.lease.owner, epoch)
	if err != nil {
		return err
	}
	if !ok {
		return errLeaseLost
	}
	return nil
}

// runLeased takes the lease (retrying every third of its TTL) and runs
// the loop while it holds it, renewing it every third of the TTL; when a
// renewal fails or is refused, the loop stops at once and the broker
// tries again.
func (s *Service) runLeased(ctx context.Context) {
	every := s.lease.ttl / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	type loop struct {
		stop context.CancelFunc
		done chan struct{}
	}
	var cur *loop
	drop := func() {
		if cur != nil {
			cur.stop()
			<-cur.done
			cur = nil
		}
		s.lease.mu.Lock()
		s.lease.epoch = 0
		s.lease.mu.Unlock()
	}
	defer drop()
	for {
		l, ok, err := s.d.Store.TakeLease(ctx, LeaseName, s.lease.owner, s.now(), s.lease.ttl)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			s.d.Log.WarnContext(ctx, "hooks lease not renewed; the scheduler stops until it is taken again", "err", err)
			drop()
		case !ok:
			drop()
		default:
			s.lease.mu.Lock()
			s.lease.epoch = l.Epoch // a holder keeps its epoch while it renews
			s.lease.mu.Unlock()
			if cur == nil {
				s.d.Log.InfoContext(ctx, "hooks scheduler runs on this broker", "epoch", l.Epoch)
				rctx, stop := context.WithCancel(ctx)
				c := &loop{stop: stop, done: make(chan struct{})}
				cur = c
				go func() { defer close(c.done); s.run(rctx) }()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Announce runs, on every broker of several, the reports the lease holder
// needs of members this broker serves: a member attached here with
// copies queued, or attached here and not working with copies held. It
// looks when a member's reach changes here (Poke) and every ReachAnnounce
// while such copies wait, so a lost report is repeated. publish sends one
// report (attached, or free) to the other brokers.
func (s *Service) Announce(ctx context.Context, publish func(member string, attached bool)) {
	tick := time.NewTicker(ReachAnnounce)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.reach:
		case <-tick.C:
		}
		send := publish
		if s.Holding() {
			// Its own pass sees its own members; it needs only waking, as
			// copies queued by another broker's ingress never poked it.
			send = func(string, bool) { s.wakeLoop() }
		}
		if err := s.announce(ctx, send); err != nil && ctx.Err() == nil {
			s.d.Log.WarnContext(ctx, "hook reach reports not sent", "err", err)
		}
	}
}

func (s *Service) announce(ctx context.Context, publish func(member string, attached bool)) error {
	queued, err := s.d.Store.HookPendingMembers(ctx, store.HookQueue)
	if err != nil {
		return err
	}
	for _, m := range queued {
		if s.d.Members.Online(m) {
			publish(m, true)
		}
	}
	held, err := s.d.Store.HookPendingMembers(ctx, store.HookWait)
	if err != nil {
		return err
	}
	for _, m := range held {
		if busy, _ := s.d.Members.Busy(m); s.d.Members.Online(m) && !busy {
			publish(m, false)
		}
	}
	return nil
}
