package store

import (
	"context"
	"time"
)

// ActivityEvent is one row of a member's append-only activity stream.
type ActivityEvent struct {
	ID          int64 // assigned by the store
	Member      string
	Kind        string
	TS          time.Time
	ObjectiveID string // empty when none
	Data        []byte // kind-specific JSON object
}

// ActivityFilter selects activity rows of one member.
type ActivityFilter struct {
	Member string
	From   time.Time // inclusive; zero means unbounded
	To     time.Time // inclusive; zero means unbounded
	Kinds  []string  // empty means every kind
	Limit  int       // at most this many rows, newest first; <= 0 means 1000
}

// ActivityStore is the separate store of activity streams.
type ActivityStore interface {
	// AppendActivity stores events in one transaction and returns them with
	// their row ids set, in the order given.
	AppendActivity(ctx context.Context, events []ActivityEvent) ([]ActivityEvent, error)
	// ListActivity returns matching rows newest first (by TS, then id).
	ListActivity(ctx context.Context, f ActivityFilter) ([]ActivityEvent, error)
	// PruneActivity deletes every row whose TS is before cutoff and returns
	// how many it deleted.
	PruneActivity(ctx context.Context, cutoff time.Time) (int64, error)
	Close() error
}
