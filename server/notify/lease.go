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

// ReachAnnounce is how often the brokers look at the members that
// queued or held copies wait for, and the holder wakes its loop: a lost
// report or notice is repeated, and a row another broker wrote is seen
// within it.
const ReachAnnounce = 3 * time.Second

// errLeaseLost refuses a scheduler write of a broker that no longer holds
// the lease.
var errLeaseLost = errors.New("the hooks lease is held by another broker")

// leased is a Service's part of the cluster: its lease, and how far the
// presence it reads can be trusted.
type leased struct {
	owner string        // this broker's id; "" alone: the loop always runs
	ttl   time.Duration // LeaseTTL; shorter in tests
	mu    sync.Mutex
	epoch int64 // 0 while not held
	// doubt answers how much longer the presence summed across brokers
	// may miss members attached elsewhere (0: complete); nil alone.
	doubt func() time.Duration
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

// PresenceDoubt tells the loop how long the presence it reads may still
// miss members attached on other brokers (NATS cut off, or not long back):
// meanwhile no queued copy expires and no held copy goes out because its
// member looks free (docs/DECISIONS.md, "Hook schedulers: fixes of the
// review"). Call before Run.
func (s *Service) PresenceDoubt(doubt func() time.Duration) {
	s.lease.doubt = doubt
}

// presenceDoubt is PresenceDoubt's answer now (0 alone).
func (s *Service) presenceDoubt() time.Duration {
	if s.lease.doubt == nil {
		return 0
	}
	return max(s.lease.doubt(), 0)
}

// RemoteReach is another broker's report that a member's reach changed
// there, or that it wrote rows the loop must time: a wake-up only. What
// the pass decides it reads from the store and the presence summed
// across brokers, never from the report, which may be stale or forged.
func (s *Service) RemoteReach() {
	if s.Holding() {
		s.wakeLoop()
	}
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
		stop  context.CancelFunc
		done  chan struct{}
		epoch int64 // the lease's epoch it runs under
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
			if cur != nil && cur.epoch != l.Epoch {
				// Lost and taken again between two ticks: another broker
				// may have run the loop meanwhile. The old loop stops
				// before the new epoch is set, so none of its passes
				// writes under it; a fresh one starts below.
				s.d.Log.InfoContext(ctx, "hooks lease taken again at a new epoch; the scheduler restarts", "was", cur.epoch, "epoch", l.Epoch)
				drop()
			}
			s.lease.mu.Lock()
			s.lease.epoch = l.Epoch // a holder keeps its epoch while it renews
			s.lease.mu.Unlock()
			if cur == nil {
				s.d.Log.InfoContext(ctx, "hooks scheduler runs on this broker", "epoch", l.Epoch)
				rctx, stop := context.WithCancel(ctx)
				c := &loop{stop: stop, done: make(chan struct{}), epoch: l.Epoch}
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

// Announce runs, on every broker of several, what wakes the lease
// holder's loop. On the holder it wakes the loop every ReachAnnounce,
// so rows written by another broker's ingress (a debounce window, a
// busy wait, a queue's TTL) are timed within that even when a notice is
// lost. On every other broker it sends a notice as soon as its ingress
// wrote rows (publish with member ""), and reports the members it
// serves that copies wait for: attached here with copies queued, or
// attached here and not working with copies held; it looks when a
// member's reach changes here (Poke) and every ReachAnnounce while such
// copies wait, so a lost report is repeated. The holder takes reports
// and notices as wake-ups only (RemoteReach).
func (s *Service) Announce(ctx context.Context, publish func(member string, attached bool)) {
	tick := time.NewTicker(ReachAnnounce)
	defer tick.Stop()
	for {
		due := false
		select {
		case <-ctx.Done():
			return
		case <-s.reach:
		case <-s.due:
			due = true
		case <-tick.C:
		}
		if s.Holding() {
			// Its own pass sees every member and row: it needs only waking,
			// as rows another broker's ingress wrote never poked it.
			s.wakeLoop()
			continue
		}
		if due {
			publish("", false)
		}
		if err := s.announce(ctx, publish); err != nil && ctx.Err() == nil {
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
