package store

import (
	"context"
	"time"
)

// Role is a member's title and description.
type Role struct {
	Title       string
	Description string
}

// Member is the stored mirror of a member entry of the team config file. The
// config file is the authority for members; the store keeps a copy so that
// every other table can reference members by name.
type Member struct {
	Name         string
	Role         *Role
	Instructions string
	Permissions  []string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// TokenHash is the SHA-256 of a bearer token plaintext. Plaintexts are never
// stored.
type TokenHash [32]byte

// Token is a bearer token row. Revoked tokens are kept (RevokedAt set) so that
// a hash seeded from the config file is never revived after a revoke.
type Token struct {
	ID         string
	Member     string
	Hash       TokenHash
	Label      string
	Origin     string // bootstrap, rotate or enroll
	CreatedAt  time.Time
	CreatedBy  string
	LastUsedAt time.Time // zero when never used
	ExpiresAt  time.Time // zero when it never expires
	RevokedAt  time.Time // zero while active
}

// Active reports whether the token authenticates at now.
func (t Token) Active(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// SessionHash is the SHA-256 of a session cookie value.
type SessionHash [32]byte

// Session is a human login created by TOTP.
type Session struct {
	Hash       SessionHash
	Member     string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
}

// MemberStore keeps the mirror of the config file's members.
type MemberStore interface {
	// ReplaceMembers makes the stored member set equal to members: it upserts
	// every given member and deletes the others, cascading to their tokens
	// and sessions.
	ReplaceMembers(ctx context.Context, members []Member) error
	// PutMember inserts or updates one member.
	PutMember(ctx context.Context, m Member) error
	// GetMember returns ErrNotFound for an unknown name.
	GetMember(ctx context.Context, name string) (Member, error)
	// ListMembers returns every member ordered by name.
	ListMembers(ctx context.Context) ([]Member, error)
	// DeleteMember removes a member with its tokens and sessions; ErrNotFound
	// when absent.
	DeleteMember(ctx context.Context, name string) error
}

// TokenStore keeps bearer tokens by hash.
type TokenStore interface {
	// CreateToken stores a new token: ErrConflict when the id or hash exists,
	// ErrPrecondition when the member does not.
	CreateToken(ctx context.Context, t Token) error
	// GetTokenByHash is an indexed exact lookup; it returns revoked tokens too
	// and ErrNotFound when no row has the hash.
	GetTokenByHash(ctx context.Context, h TokenHash) (Token, error)
	// ListTokens returns the member's tokens, oldest first.
	ListTokens(ctx context.Context, member string) ([]Token, error)
	// RevokeToken marks the member's active token revoked and returns it;
	// ErrNotFound when no active token with that id belongs to the member.
	RevokeToken(ctx context.Context, member, id string, at time.Time) (Token, error)
	// RevokeMemberTokens revokes every active token of the member and returns
	// how many it revoked.
	RevokeMemberTokens(ctx context.Context, member string, at time.Time) (int, error)
	// TouchToken records a use of the token.
	TouchToken(ctx context.Context, id string, at time.Time) error
}

// SessionStore keeps human sessions by hash.
type SessionStore interface {
	// CreateSession stores a session; ErrPrecondition when the member does
	// not exist.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns ErrNotFound for an unknown hash.
	GetSession(ctx context.Context, h SessionHash) (Session, error)
	// TouchSession slides the session's expiry; ErrNotFound when absent.
	TouchSession(ctx context.Context, h SessionHash, lastSeen, expires time.Time) error
	// DeleteSession removes a session; ErrNotFound when absent.
	DeleteSession(ctx context.Context, h SessionHash) error
	// DeleteExpiredSessions removes sessions whose expiry is at or before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)
}

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
	// Since keeps only messages created at or after it; zero means unbounded.
	Since time.Time
	Limit int // at most this many; <= 0 means 50
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

// Channel is a named conversation. Its ID is stable; its Slug may change.
type Channel struct {
	ID         string
	Slug       string
	CreatedAt  time.Time
	CreatedBy  string
	ArchivedAt time.Time // zero while live
}

// ChannelMember is one member's membership of a channel.
type ChannelMember struct {
	Channel string // channel id
	Member  string
	Role    string // admin or member
}

// ChannelStore keeps channels and their members.
type ChannelStore interface {
	// CreateChannel stores a channel and its creator as admin: ErrConflict
	// when the id or slug is taken.
	CreateChannel(ctx context.Context, c Channel) error
	// GetChannel finds a channel by id, or else by slug; ErrNotFound.
	GetChannel(ctx context.Context, idOrSlug string) (Channel, error)
	// ListChannels returns every channel ordered by slug.
	ListChannels(ctx context.Context) ([]Channel, error)
	// RenameChannel changes the slug: ErrConflict when taken, ErrNotFound.
	RenameChannel(ctx context.Context, id, slug string) (Channel, error)
	// ArchiveChannel sets ArchivedAt; ErrNotFound.
	ArchiveChannel(ctx context.Context, id string, at time.Time) (Channel, error)
	// PutChannelMember adds a member or sets its role; ErrPrecondition when
	// the channel or member does not exist.
	PutChannelMember(ctx context.Context, m ChannelMember) error
	// DeleteChannelMember removes a membership; ErrNotFound when absent.
	DeleteChannelMember(ctx context.Context, channel, member string) error
	// ListChannelMembers returns a channel's members ordered by name.
	ListChannelMembers(ctx context.Context, channel string) ([]ChannelMember, error)
	// MemberChannels returns the memberships of a member.
	MemberChannels(ctx context.Context, member string) ([]ChannelMember, error)
}

// PushSubscription is a browser's Web Push subscription.
type PushSubscription struct {
	ID        string
	Member    string
	Endpoint  string
	P256dh    string
	Auth      string
	CreatedAt time.Time
}

// PushSubscriptionStore keeps browser push subscriptions.
type PushSubscriptionStore interface {
	// PutPushSubscription stores s, or, when its endpoint is known, moves that
	// subscription to s.Member with s's keys and returns it with its old id.
	PutPushSubscription(ctx context.Context, s PushSubscription) (PushSubscription, error)
	// ListPushSubscriptions returns the member's subscriptions; every
	// member's when member is empty.
	ListPushSubscriptions(ctx context.Context, member string) ([]PushSubscription, error)
	// DeletePushSubscription removes the member's subscription (any member's
	// when member is empty); ErrNotFound when absent.
	DeletePushSubscription(ctx context.Context, member, id string) error
}

// Tx is the set of operations available inside one transaction.
type Tx interface {
	MemberStore
	TokenStore
	SessionStore
	MessageStore
	ChannelStore
	PushSubscriptionStore
}

// Store is the main store.
type Store interface {
	Tx
	// WithTx runs fn in one write transaction, committing when fn returns nil
	// and rolling back otherwise. fn must use only tx.
	WithTx(ctx context.Context, fn func(tx Tx) error) error
	Close() error
}

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
