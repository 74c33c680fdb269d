package auth

import (
	"sync"
	"time"
)

// TOTP failure limits (docs/API.md, POST /session/totp).
const (
	TOTPWindow         = 15 * time.Minute
	TOTPMemberFailures = 5
	TOTPGlobalFailures = 10
)

// FailureLimiter counts failed logins in a sliding window, per member and
// globally. While a limit is reached every attempt it covers is refused, even
// one with a correct code: a limit is a lockout, not a delay.
type FailureLimiter struct {
	mu        sync.Mutex
	now       func() time.Time
	window    time.Duration
	perMember int
	global    int
	members   map[string][]time.Time
	all       []time.Time
}

// NewFailureLimiter returns the TOTP limiter.
func NewFailureLimiter(now func() time.Time) *FailureLimiter {
	return &FailureLimiter{
		now: now, window: TOTPWindow, perMember: TOTPMemberFailures, global: TOTPGlobalFailures,
		members: map[string][]time.Time{},
	}
}

// Check reports how long the caller must wait before an attempt covered by
// member ("" for none) is allowed; zero means allowed now.
func (l *FailureLimiter) Check(member string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.all = l.prune(l.all, now)
	wait := l.waitFor(l.all, l.global, now)
	if member != "" {
		l.members[member] = l.prune(l.members[member], now)
		if len(l.members[member]) == 0 {
			delete(l.members, member)
		}
		wait = max(wait, l.waitFor(l.members[member], l.perMember, now))
	}
	return wait
}

// Fail records a failed attempt: globally, and for member when one was named
// or matched. Callers pass only known member names, so memory stays bounded.
func (l *FailureLimiter) Fail(member string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.all = append(l.prune(l.all, now), now)
	if member != "" {
		l.members[member] = append(l.prune(l.members[member], now), now)
	}
}

func (l *FailureLimiter) prune(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-l.window)) {
		i++
	}
	return ts[i:]
}

// waitFor returns how long until fewer than limit failures remain in the
// window.
func (l *FailureLimiter) waitFor(ts []time.Time, limit int, now time.Time) time.Duration {
	if len(ts) < limit {
		return 0
	}
	oldest := ts[len(ts)-limit]
	return oldest.Add(l.window).Sub(now)
}
