package store

import (
	"context"
	"time"
)

// ActiveTurn is what the loop guard reads of a member's turn in progress:
// its message and where that message sits in its reply chain.
type ActiveTurn struct {
	// Seq is the turn's message; 0 for a turn with no message.
	Seq int64
	// Hops is the hops of the turn's message; 0 with none.
	Hops int
	// Chain is the first message of the turn message's chain (the turn
	// message itself when it starts one); 0 with no message.
	Chain int64
}

// LoopStop records the first stop of a reply chain.
type LoopStop struct {
	// Chain is the chain's first message.
	Chain int64
	// Message is the first message of the chain that was stopped.
	Message int64
	At      time.Time
}

// LoopStore keeps what the loop guard needs beside the messages' own
// reply-chain fields.
type LoopStore interface {
	// ActiveTurn returns member's turn in progress, and false when it has
	// none (no turn active, or its runner never attached).
	ActiveTurn(ctx context.Context, member string) (ActiveTurn, bool, error)
	// ReplyPath returns the message seq and the messages it replies to,
	// following ReplyTo, newest first: at most limit messages.
	ReplyPath(ctx context.Context, seq int64, limit int) ([]Message, error)
	// AddLoopStop records a chain's first stop and reports whether it was
	// the first; a chain already stopped keeps its record.
	AddLoopStop(ctx context.Context, s LoopStop) (bool, error)
	// ListAgents returns, by name, the members whose runner attached (a
	// delivery state exists): the agents, as the loop guard tells them
	// from people.
	ListAgents(ctx context.Context) ([]string, error)
}
