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
	Name string
	// ID names the member apart from earlier and later members of its
	// name, as the config's entry does; "" from before ids.
	ID           string
	Role         *Role
	Instructions string
	Permissions  []string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// SinceSeq is the newest message Seq when this member was created, set
	// by the store: messages at or before it were addressed to an earlier
	// member of the name, if any.
	SinceSeq int64
}

// FormerMember is a deleted member: the id that named it apart from any
// later member of its name, and when and by whom it was deleted.
type FormerMember struct {
	ID        string
	Name      string
	DeletedAt time.Time
	DeletedBy string
}

// MemberStore keeps the mirror of the config file's members.
type MemberStore interface {
	// ReplaceMembers makes the stored member set equal to members: it upserts
	// every given member and deletes the others, cascading to their tokens
	// and sessions.
	ReplaceMembers(ctx context.Context, members []Member) error
	// PutMember inserts or updates one member. An insert stamps SinceSeq;
	// an update keeps it.
	PutMember(ctx context.Context, m Member) error
	// GetMember returns ErrNotFound for an unknown name.
	GetMember(ctx context.Context, name string) (Member, error)
	// ListMembers returns every member ordered by name.
	ListMembers(ctx context.Context) ([]Member, error)
	// DeleteMember removes a member with its tokens and sessions; ErrNotFound
	// when absent.
	DeleteMember(ctx context.Context, name string) error
	// PutFormerMember records a deleted member; recording an id again
	// changes nothing.
	PutFormerMember(ctx context.Context, m FormerMember) error
	// ListFormerMembers returns every deleted member recorded, by deletion
	// time.
	ListFormerMembers(ctx context.Context) ([]FormerMember, error)
}
