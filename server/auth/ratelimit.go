package auth

import (
	"sync"
	"time"
)

// TOTP failure limits (docs/API.md, POST /session/totp), and the
// per-address one (docs/DECISIONS.md, "Login limits: strangers cannot lock
// a member out").
const (
	TOTPWindow         = 15 * time.Minute
	TOTPMemberFailures = 5
	TOTPGlobalFailures = 10
	// TOTPSourceFailures bounds the failures from one client address (an
	// IPv6 /64) in the window, whatever names they give.
	TOTPSourceFailures = 10
	// maxLoginSources bounds the addresses tracked at once: past it, a new
	// address is not tracked (its attempts are still covered by the member
	// and global counters), so a flood of addresses cannot grow memory.
	maxLoginSources = 10000
)

// Attempt says which counters cover a login attempt.
type Attempt struct {
	// Member is the known member the attempt names or matched; "" for none.
	Member string
	// Source is the client's address key; "" when unknown (in-process).
	Source string
	// Global is set when the global counter covers the attempt: the
	// codeless form, and a name that is no member's. An attempt naming a
	// real member is not covered by it, so strangers' failures cannot lock
	// that member out.
	Global bool
}

// FailureLimiter counts failed logins in a sliding window: globally, per
// member and per client address. While a limit is reached every attempt it
// covers is refused, even one with a correct code: a limit is a lockout, not
// a delay.
type FailureLimiter struct {
	mu         sync.Mutex
	now        func() time.Time
	window     time.Duration
	perMember  int
	global     int
	perSource  int
	maxSources int
	members    map[string][]time.Time
	sources    map[string][]time.Time
	all        []time.Time
}

// NewFailureLimiter returns the TOTP limiter.
func NewFailureLimiter(now func() time.Time) *FailureLimiter {
	return &FailureLimiter{
		now: now, window: TOTPWindow, perMember: TOTPMemberFailures, global: TOTPGlobalFailures,
		perSource: TOTPSourceFailures, maxSources: maxLoginSources,
		members: map[string][]time.Time{}, sources: map[string][]time.Time{},
	}
}

// Check reports how long the caller must wait before attempt a is allowed;
// zero means allowed now. It counts nothing.
func (l *FailureLimiter) Check(a Attempt) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.all = l.prune(l.all, now)
	var wait time.Duration
	if a.Global {
		wait = l.waitFor(l.all, l.global, now)
	}
	wait = max(wait, l.keyed(l.members, a.Member, l.perMember, now))
	return max(wait, l.keyed(l.sources, a.Source, l.perSource, now))
}

// keyed is the wait of key's counter in m, pruning it on the way.
func (l *FailureLimiter) keyed(m map[string][]time.Time, key string, limit int, now time.Time) time.Duration {
	if key == "" {
		return 0
	}
	ts := l.prune(m[key], now)
	if len(ts) == 0 {
		delete(m, key)
		return 0
	}
	m[key] = ts
	return l.waitFor(ts, limit, now)
}

// Fail records a failed attempt: always globally (every failure counts
// there, whichever attempts the global limit covers), and for its member
// and source when known. Callers pass only known member names, so memory
// stays bounded; sources are bounded by maxSources.
func (l *FailureLimiter) Fail(a Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.all = append(l.prune(l.all, now), now)
	if a.Member != "" {
		l.members[a.Member] = append(l.prune(l.members[a.Member], now), now)
	}
	if a.Source != "" {
		if _, ok := l.sources[a.Source]; !ok && len(l.sources) >= l.maxSources {
			for k, ts := range l.sources {
				if len(l.prune(ts, now)) == 0 {
					delete(l.sources, k)
				}
			}
			if len(l.sources) >= l.maxSources {
				return
			}
		}
		l.sources[a.Source] = append(l.prune(l.sources[a.Source], now), now)
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
