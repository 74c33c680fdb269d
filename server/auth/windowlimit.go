package auth

import (
	"sync"
	"time"
)

// Enrollment mint limit: 10 per client address per hour
// (docs/ENROLLMENT.md, Limits).
const (
	EnrollMintWindow = time.Hour
	EnrollMintLimit  = 10
)

// WindowLimiter allows at most limit events per key in a sliding window.
// It remembers at most maxKeys keys: past that, new keys are refused until
// the window frees some, so a flood of distinct addresses cannot grow it
// without bound.
type WindowLimiter struct {
	mu        sync.Mutex
	now       func() time.Time
	window    time.Duration
	limit     int
	maxKeys   int
	keys      map[string][]time.Time
	lastSweep time.Time
}

// NewWindowLimiter returns a limiter of limit events per key per window.
func NewWindowLimiter(limit int, window time.Duration, maxKeys int, now func() time.Time) *WindowLimiter {
	return &WindowLimiter{now: now, window: window, limit: limit, maxKeys: maxKeys, keys: map[string][]time.Time{}}
}

// Allow records an event of key and returns zero, or, when key already had
// limit events in the window, records nothing and returns how long until
// one is allowed.
func (l *WindowLimiter) Allow(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sweep(now)
	ts := l.prune(l.keys[key], now)
	if len(ts) >= l.limit {
		l.keys[key] = ts
		return ts[len(ts)-l.limit].Add(l.window).Sub(now)
	}
	if len(ts) == 0 && len(l.keys) >= l.maxKeys {
		if _, known := l.keys[key]; !known {
			return l.window / 60 // a minute, for the default hour
		}
	}
	l.keys[key] = append(ts, now)
	return 0
}

// sweep drops keys whose events all left the window, at most once per
// window/60.
func (l *WindowLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.window/60 && len(l.keys) < l.maxKeys {
		return
	}
	l.lastSweep = now
	for k, ts := range l.keys {
		if ts = l.prune(ts, now); len(ts) == 0 {
			delete(l.keys, k)
		} else {
			l.keys[k] = ts
		}
	}
}

func (l *WindowLimiter) prune(ts []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(now.Add(-l.window)) {
		i++
	}
	return ts[i:]
}
