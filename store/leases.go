package store

import (
	"context"
	"time"
)

// Lease is a named lease one broker holds at a time (docs/DECISIONS.md,
// "Hook schedulers on several brokers"): its holder, the epoch that
// changes every time another holder takes it, and when it lapses unless
// renewed.
type Lease struct {
	Name      string
	Owner     string
	Epoch     int64
	ExpiresAt time.Time
}

// LeaseStore keeps the leases.
type LeaseStore interface {
	// TakeLease takes the lease name for owner until now+ttl, in one
	// statement: granted when nobody holds it, when its holder's time ran
	// out (before now), or when owner holds it already (a renewal, same
	// epoch). A new holder gets the next epoch. It returns the lease as it
	// stands after the attempt and whether owner holds it.
	TakeLease(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (Lease, bool, error)
	// HoldsLease reports whether owner holds the lease name at epoch: no
	// other holder took it since. Inside a transaction it fences the
	// transaction's writes: a holder that lost the lease writes nothing.
	HoldsLease(ctx context.Context, name, owner string, epoch int64) (bool, error)
}
