package store

import (
	"context"
	"time"
)

// Revocation is one entry of the revocations log: the live streams of
// Member opened with the credentials What names end on every broker
// (docs/DECISIONS.md, "Revocation and login limits across brokers"). It
// is written in the transaction of the revoke it reports, so its id is
// in commit order like a message's.
type Revocation struct {
	// ID is assigned on append, ascending in commit order, never reused.
	ID     int64
	Member string
	// What names the credentials: the server's vocabulary, opaque here.
	What string
	At   time.Time
}

// RevocationStore keeps the revocations log that brokers sharing one
// store fan out.
type RevocationStore interface {
	// AddRevocation appends r (its ID is assigned; a zero At is now) and
	// returns it as stored.
	AddRevocation(ctx context.Context, r Revocation) (Revocation, error)
	// RevocationsBetween returns the entries with after < id <= upTo,
	// oldest first.
	RevocationsBetween(ctx context.Context, after, upTo int64) ([]Revocation, error)
	// LastRevocationID returns the newest entry's id, 0 when there is none
	// (also once pruned: ids are never reused).
	LastRevocationID(ctx context.Context) (int64, error)
	// PruneRevocations deletes the entries from before before and returns
	// how many went.
	PruneRevocations(ctx context.Context, before time.Time) (int, error)
}
