package store

import (
	"context"
	"time"
)

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
