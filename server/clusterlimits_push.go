package server

import (
	"context"
	"errors"
	"strconv"
	"time"

	"svc/store"
)

// The agent push limit where several brokers serve one team
// (docs/DECISIONS.md, "Rate limits across brokers"): each agent's token
// bucket is one meta key in the shared store, read and written in the
// commit's transaction. That transaction holds the store's write lock, so
// the read-modify-write is one step across brokers, and a push refused or
// rolled back takes nothing.

// pushBucketKey prefixes the meta key of a member's push bucket.
const pushBucketKey = "agent_push_tat:"

// allowShared is allow with member's bucket in tx, kept as GCRA (the
// generic cell rate algorithm): the bucket is one time, its theoretical
// arrival time (TAT). TAT - now, when positive, is how much of the bucket
// is spent, one interval (a minute / perMinute) per token; a push is
// allowed while at most burst-1 intervals are spent, and spends one more.
// That answers what the in-memory token bucket of the same rate and burst
// (rate.Limiter, allowLocal) answers, allow or deny and the wait, with one
// integer per member instead of a token count and a time.
func (g *loopGuard) allowShared(ctx context.Context, tx store.Tx, member string) (time.Duration, error) {
	if g.perMinute <= 0 || g.burst < 1 {
		return time.Minute, nil // Validate refuses these
	}
	interval := time.Minute / time.Duration(g.perMinute)
	spendable := interval * time.Duration(g.burst-1)
	now := g.now()
	tat := now
	v, err := tx.GetMeta(ctx, pushBucketKey+member)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return 0, err
	default:
		// Only brokers write it; an unreadable value counts as a full
		// bucket rather than stopping the agent for good.
		if ns, perr := strconv.ParseInt(v, 10, 64); perr == nil {
			if t := time.Unix(0, ns); t.After(now) {
				tat = t
			}
		}
	}
	if wait := tat.Sub(now) - spendable; wait > 0 {
		return wait, nil
	}
	return 0, tx.PutMeta(ctx, pushBucketKey+member, strconv.FormatInt(tat.Add(interval).UnixNano(), 10))
}
