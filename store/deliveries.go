package store

import (
	"context"
	"time"
)

// Delivery is a member's delivery state (docs/RUNNER.md, Delivery
// contract): what its runner acknowledged and the turn it is in. A member
// has one once its runner attached.
type Delivery struct {
	Member string
	// Position is the last message (Seq) whose turn ended or that was
	// skipped; 0 until the runner first acknowledged one. It never moves
	// backwards.
	Position int64
	// TurnActive says a turn is in progress: started and not yet ended
	// (or its runner stopped during it).
	TurnActive bool
	// TurnSeq is the message of the turn in progress; 0 for a turn with
	// no message (the re-brief) and when no turn is active.
	TurnSeq int64
	// TurnStartedAt is when the turn in progress started; zero without one.
	TurnStartedAt   time.Time
	FirstAttachedAt time.Time
	UpdatedAt       time.Time
}

// TurnPhase is what a DeliveryUpdate says about the turn.
type TurnPhase int

// Turn phases of a DeliveryUpdate.
const (
	// TurnUnchanged leaves the turn as it is.
	TurnUnchanged TurnPhase = iota
	// TurnStarted starts a turn (of TurnSeq, 0 for none).
	TurnStarted
	// TurnEnded ends the turn in progress.
	TurnEnded
)

// DeliveryUpdate is one change of a member's delivery state.
type DeliveryUpdate struct {
	// Position advances the position to this Seq; 0 leaves it, and one
	// older than the stored position is ignored.
	Position int64
	Turn     TurnPhase
	// TurnSeq is the message of a TurnStarted turn; 0 for none.
	TurnSeq int64
	// At is when the change happened; zero means the store's clock.
	At time.Time
}

// BacklogFilter bounds the backlog of a member whose runner never
// acknowledged anything: the newest messages addressed to it, sent by
// others, after its Since.
type BacklogFilter struct {
	Member string
	// Since is the member's SinceSeq: what came before is not its own.
	Since int64
	// Max is how many of the newest messages the backlog keeps (> 0).
	Max int
	// NotBefore leaves out messages created before it; zero keeps every
	// age.
	NotBefore time.Time
	// MaxOmitted caps the count of what was left out (> 0).
	MaxOmitted int
}

// Backlog is where a member's first replay starts.
type Backlog struct {
	// After is the Seq to replay after: the backlog is every message
	// addressed to the member past it.
	After int64
	// Omitted counts the messages addressed to the member, sent by
	// others, after Since and at or before After; at most MaxOmitted.
	Omitted int
}

// DeliveryStore keeps members' delivery states.
type DeliveryStore interface {
	// GetDelivery returns member's delivery state; ErrNotFound when its
	// runner never attached.
	GetDelivery(ctx context.Context, member string) (Delivery, error)
	// UpdateDelivery applies u to member's delivery state, creating it
	// (FirstAttachedAt = u.At) when absent, and returns the result.
	// ErrNotFound for an unknown member.
	UpdateDelivery(ctx context.Context, member string, u DeliveryUpdate) (Delivery, error)
	// DeliveryBacklog bounds a first replay as f says.
	DeliveryBacklog(ctx context.Context, f BacklogFilter) (Backlog, error)
}
