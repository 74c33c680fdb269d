package store

import (
	"context"
	"time"
)

// Message is one committed chat message. Thread is the routing key the
// broker files it under: "chan:general" for broadcasts, "dm:<a>:<b>" (names
// sorted) for DMs, "chan:<id>", "obj:<id>" and so on for threads.
type Message struct {
	Seq         int64 // assigned by the store, in commit order
	From        string
	To          string // the DM recipient; empty otherwise
	Thread      string
	Title       string
	Body        string
	Level       string
	Data        []byte // JSON object; nil when none
	Meta        []byte // JSON object; nil when none
	Attachments []string
	CreatedAt   time.Time
	// All addresses every member but the sender (general broadcasts);
	// otherwise Recipients lists the targets.
	All        bool
	Recipients []string
	// The reply chain (docs/RUNNER.md, Loop guard), stamped by the broker
	// from its delivery state when the message commits. ReplyTo is the
	// message of the turn its sender was in (0: none); Hops counts the
	// agent-to-agent hops since a message sent outside a turn (0 for one);
	// Chain is the first message of its chain (0: this message starts one
	// or was sent outside a turn); LoopStopped says it went past the hop
	// bound and wakes no agent.
	ReplyTo     int64
	Hops        int
	Chain       int64
	LoopStopped bool
}

// MessageFilter selects one thread's messages, newest first.
type MessageFilter struct {
	Thread string
	// Viewer, when set, keeps only messages the viewer sent or was addressed
	// by.
	Viewer string
	Before time.Time // exclusive; zero means unbounded
	// BeforeSeq keeps only messages older than this Seq; 0 means unbounded.
	BeforeSeq int64
	// AfterSeq keeps only messages with a Seq above it; 0 means unbounded.
	AfterSeq int64
	Limit    int // at most this many; <= 0 means 50
}

// MessageStore keeps chat messages.
type MessageStore interface {
	// AppendMessages stores messages in order and returns them with Seq set.
	AppendMessages(ctx context.Context, msgs []Message) ([]Message, error)
	// ListMessages returns a thread's messages newest first.
	ListMessages(ctx context.Context, f MessageFilter) ([]Message, error)
	// MessagesFor returns, oldest first, up to limit messages after seq that
	// were addressed to member.
	MessagesFor(ctx context.Context, member string, after int64, limit int) ([]Message, error)
	// LastMessageSeq returns the newest message's Seq, 0 when there is none.
	LastMessageSeq(ctx context.Context) (int64, error)
}
