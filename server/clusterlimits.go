package server

import (
	"context"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/notify"
	"svc/store"
)

// The limits that guard secrets, where several brokers serve one team
// (docs/DECISIONS.md, "Revocation and login limits across brokers"): the
// TOTP failure limits, TOTP replay and the enrollment mint limit count in
// the shared store, so N brokers do not give N times the tries. A broker
// that serves the team alone keeps counting in memory.

// sharedLimitsKept is how long a limit hit stays in the shared store: the
// longest window that counts one.
var sharedLimitsKept = max(auth.TOTPWindow, auth.EnrollMintWindow)

// HookRateLimit is the verified requests one hook endpoint takes a
// minute; tests of several brokers lower it before the brokers start.
var HookRateLimit = notify.RateLimit

// clustered reports whether other brokers serve the team too (JoinCluster
// ran, before any request).
func (c *core) clustered() bool { return c.revokes != nil }

// loginLimits is what a TOTP login checks and counts: the failure limits
// (auth.FailureLimiter's) and the last accepted time step per member.
type loginLimits interface {
	check(a auth.Attempt) (time.Duration, error)
	fail(a auth.Attempt) error
	// claimStep records step as member's last accepted one, false when a
	// step at or after it was accepted (the code was used).
	claimStep(member string, step int64) (bool, error)
}

// localLogin counts in this broker's memory.
type localLogin struct{ b *brokerSessions }

func (l localLogin) check(a auth.Attempt) (time.Duration, error) { return l.b.limiter.Check(a), nil }

func (l localLogin) fail(a auth.Attempt) error {
	l.b.limiter.Fail(a)
	return nil
}

func (l localLogin) claimStep(member string, step int64) (bool, error) {
	l.b.stepMu.Lock()
	defer l.b.stepMu.Unlock()
	if last, ok := l.b.lastStep[member]; ok && step <= last {
		return false, nil
	}
	l.b.lastStep[member] = step
	return true, nil
}

// sharedLogin counts in the shared store, in the login's transaction:
// it holds the store's write lock, so check, verification and count are
// one step across brokers as loginMu makes them on one.
type sharedLogin struct {
	ctx context.Context
	tx  store.Tx
	now time.Time
}

// Keys of the shared login counters.
const (
	loginKeyAll    = "login:all"
	loginKeyMember = "login:member:"
	loginKeySource = "login:source:"
)

func (l sharedLogin) check(a auth.Attempt) (time.Duration, error) {
	var wait time.Duration
	for _, k := range []struct {
		on    bool
		key   string
		limit int
	}{
		{a.Global, loginKeyAll, auth.TOTPGlobalFailures},
		{a.Member != "", loginKeyMember + a.Member, auth.TOTPMemberFailures},
		{a.Source != "", loginKeySource + a.Source, auth.TOTPSourceFailures},
	} {
		if !k.on {
			continue
		}
		w, err := windowWait(l.ctx, l.tx, k.key, k.limit, auth.TOTPWindow, l.now)
		if err != nil {
			return 0, err
		}
		wait = max(wait, w)
	}
	return wait, nil
}

func (l sharedLogin) fail(a auth.Attempt) error {
	keys := []string{loginKeyAll}
	if a.Member != "" {
		keys = append(keys, loginKeyMember+a.Member)
	}
	if a.Source != "" {
		keys = append(keys, loginKeySource+a.Source)
	}
	for _, k := range keys {
		if err := l.tx.AddLimitHit(l.ctx, k, l.now); err != nil {
			return err
		}
	}
	return nil
}

func (l sharedLogin) claimStep(member string, step int64) (bool, error) {
	return l.tx.ClaimTOTPStep(l.ctx, member, step)
}

// windowWait is how long until key has fewer than limit hits in the
// sliding window ending at now: zero when it has fewer already.
func windowWait(ctx context.Context, tx store.Tx, key string, limit int, window time.Duration, now time.Time) (time.Duration, error) {
	hits, err := tx.LimitHits(ctx, key, now.Add(-window), limit)
	if err != nil || len(hits) < limit {
		return 0, err
	}
	// Newest first: the limit-th newest leaves the window last of those
	// that keep the key at its limit.
	return max(hits[limit-1].Add(window).Sub(now), time.Millisecond), nil
}

// countShared counts one hit of key in tx, at c's now, when key has had
// fewer than limit hits in the window ending now; else it counts nothing
// and answers how long until one is allowed.
func (c *core) countShared(ctx context.Context, tx store.Tx, key string, limit int, window time.Duration) (time.Duration, error) {
	now := c.now()
	wait, err := windowWait(ctx, tx, key, limit, window, now)
	if err != nil || wait > 0 {
		return wait, err
	}
	return 0, tx.AddLimitHit(ctx, key, now)
}

// loginOnce runs one TOTP login under the limits: this broker's memory
// alone, the shared store's counters in one transaction with others.
func (b *brokerSessions) loginOnce(ctx context.Context, req *apiv1.CreateSessionRequest, source string) (string, error) {
	if !b.clustered() {
		return b.login(localLogin{b}, req, source)
	}
	var (
		matched  string
		loginErr error
	)
	err := b.store.WithTx(ctx, func(tx store.Tx) error {
		l := &storeErrs{loginLimits: sharedLogin{ctx: ctx, tx: tx, now: b.now()}}
		matched, loginErr = b.login(l, req, source)
		// A store failure rolls the counts back and fails the login; a
		// refused code commits its failure.
		return l.err
	})
	if err != nil {
		return "", err
	}
	return matched, loginErr
}

// storeErrs keeps the first error of the limits' store, so the login's
// transaction can tell a failed store from a refused code.
type storeErrs struct {
	loginLimits
	err error
}

func (s *storeErrs) keep(err error) error {
	if err != nil && s.err == nil {
		s.err = err
	}
	return err
}

func (s *storeErrs) check(a auth.Attempt) (time.Duration, error) {
	d, err := s.loginLimits.check(a)
	return d, s.keep(err)
}

func (s *storeErrs) fail(a auth.Attempt) error { return s.keep(s.loginLimits.fail(a)) }

func (s *storeErrs) claimStep(member string, step int64) (bool, error) {
	ok, err := s.loginLimits.claimStep(member, step)
	return ok, s.keep(err)
}

// The enrollment mint limit with other brokers: this broker's limiter
// answers first (a flood from one address costs the store nothing), then
// the shared count, in the transaction that creates the enrollment. A
// mint is counted there only with the enrollment it creates, so what a
// flood of distinct addresses makes the store keep is bounded by the
// enrollments it can create (maxLiveEnrollments live), not by the
// requests it sends.

// mintKeyPrefix prefixes a mint's key in the shared store.
const mintKeyPrefix = "mint:"

// errMintLimit answers a mint over the per-address limit.
func errMintLimit(wait time.Duration) error {
	return &apierr.Error{Code: apierr.CodeRateLimited, Message: "enrollment mint limit reached for this address", RetryAfter: wait}
}

// mintShared refuses a mint of key (an address) over the limit counted in
// the shared store; nothing alone.
func (e *Enrollment) mintShared(ctx context.Context, tx store.Tx, key string, now time.Time) error {
	if !e.clustered() {
		return nil
	}
	wait, err := windowWait(ctx, tx, mintKeyPrefix+key, auth.EnrollMintLimit, auth.EnrollMintWindow, now)
	if err != nil {
		return err
	}
	if wait > 0 {
		return errMintLimit(wait)
	}
	return nil
}

// mintedShared counts a mint of key in the shared store, in the
// transaction that created its enrollment; nothing alone.
func (e *Enrollment) mintedShared(ctx context.Context, tx store.Tx, key string, now time.Time) error {
	if !e.clustered() {
		return nil
	}
	return tx.AddLimitHit(ctx, mintKeyPrefix+key, now)
}
