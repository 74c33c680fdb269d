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

// Objective statuses.
const (
	StatusActive    = "active"
	StatusBlocked   = "blocked"
	StatusDone      = "done"
	StatusCancelled = "cancelled"
)

// Attachment is a file attached to an objective, described as it was when
// attached.
type Attachment struct {
	Path     string
	Name     string
	Size     int64
	MimeType string
	// EntryID is the filesystem entry that was checked, so grants reach that
	// file and no other later written at Path.
	EntryID int64
}

// Objective is a unit of structured work.
type Objective struct {
	ID          string
	Title       string
	Outcome     string
	Body        string
	Status      string
	Assignee    string
	Originator  string
	Watchers    []string
	Attachments []Attachment
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time // zero unless done
	Result      *string   // set on completion
	BlockReason *string   // set while blocked
}

// ObjectiveEvent is one entry of an objective's append-only audit log.
type ObjectiveEvent struct {
	ID          int64 // assigned by the store
	ObjectiveID string
	Kind        string
	Actor       string
	CreatedAt   time.Time
	Payload     []byte // JSON object; nil when none
}

// ObjectiveFilter selects objectives; empty fields match everything.
type ObjectiveFilter struct {
	Assignee string
	Statuses []string
}

// ObjectiveStore keeps objectives and their audit logs.
type ObjectiveStore interface {
	// CreateObjective stores a new objective; ErrConflict when the id exists.
	CreateObjective(ctx context.Context, o Objective) error
	// GetObjective returns ErrNotFound for an unknown id.
	GetObjective(ctx context.Context, id string) (Objective, error)
	// ListObjectives returns matching objectives, newest first.
	ListObjectives(ctx context.Context, f ObjectiveFilter) ([]Objective, error)
	// UpdateObjective replaces every mutable field of the objective with o's;
	// ErrNotFound when absent.
	UpdateObjective(ctx context.Context, o Objective) error
	// AppendObjectiveEvents stores events in order and returns them with ID
	// set; ErrPrecondition when an objective is absent.
	AppendObjectiveEvents(ctx context.Context, evs []ObjectiveEvent) ([]ObjectiveEvent, error)
	// ListObjectiveEvents returns an objective's events, oldest first.
	ListObjectiveEvents(ctx context.Context, objectiveID string) ([]ObjectiveEvent, error)
}

// Everyone is the grantee that stands for every member (a file attached to a
// general broadcast).
const Everyone = "*"

// Kinds of filesystem entries.
const (
	FsFile = "file"
	FsDir  = "dir"
)

// FsEntry is a file or directory of the virtual filesystem.
//
// Paths are canonical absolute virtual paths (server/vfs.Parse output): the
// store checks only that a path is clean, absolute and at least two
// segments deep. A member's home "/<name>" has no row: it exists exactly
// while the member does, and the store reads it as a directory owned by the
// member (ID 0, times of the member row). The root "/" has no entry.
type FsEntry struct {
	ID        int64  // assigned by the store; stays with the entry across moves; 0 for a home
	Path      string // e.g. "/alice/notes/a.txt"
	Owner     string // member name; not a foreign key, entries outlive members
	Kind      string // FsFile or FsDir
	Size      int64  // bytes of a file's content; 0 for a directory
	MimeType  string // of a file; "" for a directory
	Blob      string // hex SHA-256 of a file's content; "" for a directory
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Name returns the last segment of the entry's path.
func (e FsEntry) Name() string {
	for i := len(e.Path) - 1; i >= 0; i-- {
		if e.Path[i] == '/' {
			return e.Path[i+1:]
		}
	}
	return e.Path
}

// FsContent is the new content of a file for ReplaceFile.
type FsContent struct {
	Blob      string // hex SHA-256 of the content
	Size      int64
	MimeType  string
	UpdatedAt time.Time // the clock's time when zero
}

// FsMove renames a file for MoveEntry.
type FsMove struct {
	From      string
	To        string
	Owner     string    // new owner; "" keeps the entry's
	UpdatedAt time.Time // the clock's time when zero
}

// FsStore keeps the virtual filesystem's entries, blobs and read grants.
//
// The store counts the file entries that reference each blob. A method that
// drops a blob's last reference deletes the blob's row and returns its sha
// in purged; after the transaction commits, the caller removes the content
// (server/vfs Blobs.Purge, which re-checks BlobReferenced under the blob's
// lock, so purging a sha that was referenced again meanwhile is safe).
// Every method is atomic on its own and inside WithTx.
type FsStore interface {
	// GetEntry returns the entry at path, a home as a directory of its
	// member; ErrNotFound when there is none.
	GetEntry(ctx context.Context, path string) (FsEntry, error)
	// ListDir returns the direct children of dir ordered by name. For "/"
	// it returns every home (one per member). ErrNotFound when dir does not
	// exist; ErrPrecondition when dir is a file.
	ListDir(ctx context.Context, dir string) ([]FsEntry, error)
	// ListTree returns every entry below dir (dir itself excluded) ordered
	// by path, bytewise; below "/" that is every stored entry. Homes are not
	// included. An absent dir gives an empty list.
	ListTree(ctx context.Context, dir string) ([]FsEntry, error)
	// CreateEntry stores a new file or directory and returns it with ID set
	// and zero times taken from the clock; a file references its Blob.
	// ErrConflict when path is taken; ErrPrecondition when the parent is
	// not an existing directory (or a member's home), the path is not at
	// least two segments deep, Owner is empty, or Kind, Blob, Size and
	// MimeType do not agree (a directory has none of them). A failed
	// create writes nothing, so inside WithTx the transaction can go on and
	// try another name (the "suffix" collision strategy).
	CreateEntry(ctx context.Context, e FsEntry) (FsEntry, error)
	// ReplaceFile sets the content, size, MIME type and update time of the
	// file at path, keeping its ID, owner, creation time and grants. It
	// returns the updated entry and the sha of the old blob if that lost
	// its last reference. ErrNotFound when absent; ErrPrecondition when
	// path is a directory.
	ReplaceFile(ctx context.Context, path string, c FsContent) (entry FsEntry, purged []string, err error)
	// DeleteEntry removes the file or empty directory at path with its
	// grants. ErrNotFound when absent (a home included); ErrPrecondition
	// when path is a directory with children.
	DeleteEntry(ctx context.Context, path string) (purged []string, err error)
	// DeleteTree removes the entry at path and everything below it, grants
	// included, and returns how many entries it removed. For a home it
	// empties the home. ErrNotFound when path is neither an entry nor a
	// home; ErrPrecondition for "/".
	DeleteTree(ctx context.Context, path string) (removed int, purged []string, err error)
	// MoveEntry moves the file m.From to m.To, keeping its ID (so its
	// grants), blob and creation time. ErrNotFound when m.From is absent;
	// ErrConflict when m.To exists; ErrPrecondition when m.From is a
	// directory or m.To's parent is not an existing directory or home.
	MoveEntry(ctx context.Context, m FsMove) (FsEntry, error)
	// GrantEntries grants read of the files with the given entry IDs to
	// each grantee (a member name or Everyone): exactly the files that were
	// checked, wherever they are now, never whatever a path names by the
	// time the grant commits. IDs of no file (absent, or a directory) and
	// grantees that are neither a member nor Everyone are skipped; grants
	// that exist are kept. A member's grants go when the member does.
	GrantEntries(ctx context.Context, ids []int64, grantees []string) error
	// HasGrant reports whether the file at path is granted to member or to
	// Everyone; false when there is no such file.
	HasGrant(ctx context.Context, path, member string) (bool, error)
	// SharedWith returns the files granted to member or to Everyone that
	// lie outside member's own home, ordered by path.
	SharedWith(ctx context.Context, member string) ([]FsEntry, error)
	// BlobReferenced reports whether any file entry references sha.
	BlobReferenced(ctx context.Context, sha string) (bool, error)
}

// Tx is the set of operations available inside one transaction.
type Tx interface {
	MemberStore
	TokenStore
	SessionStore
	MessageStore
	ChannelStore
	PushSubscriptionStore
	ObjectiveStore
	FsStore
	// Savepoint runs fn inside a savepoint of the transaction: when fn
	// returns an error, what it wrote is rolled back and the transaction
	// goes on.
	Savepoint(ctx context.Context, fn func() error) error
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
