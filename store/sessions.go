package store

import (
	"context"
	"time"
)

// SessionHash is the SHA-256 of a session cookie value.
type SessionHash [32]byte

// Session is a human login created by TOTP.
type Session struct {
	ID         string // public name of the session; never the cookie or its hash
	Hash       SessionHash
	Member     string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
}

// SessionStore keeps human sessions by hash.
type SessionStore interface {
	// CreateSession stores a session; ErrPrecondition when the member does
	// not exist or the ID is empty, ErrConflict when the ID or hash is
	// taken.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns ErrNotFound for an unknown hash.
	GetSession(ctx context.Context, h SessionHash) (Session, error)
	// TouchSession slides the session's expiry; ErrNotFound when absent.
	TouchSession(ctx context.Context, h SessionHash, lastSeen, expires time.Time) error
	// DeleteSession removes a session; ErrNotFound when absent.
	DeleteSession(ctx context.Context, h SessionHash) error
	// DeleteExpiredSessions removes sessions whose expiry is at or before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)
	// ListSessions returns the member's sessions, expired ones included,
	// oldest first.
	ListSessions(ctx context.Context, member string) ([]Session, error)
	// DeleteSessionByID removes the member's session with that id and
	// returns it; ErrNotFound when the member has none such.
	DeleteSessionByID(ctx context.Context, member, id string) (Session, error)
	// DeleteMemberSessions removes every session of the member and returns
	// how many it removed.
	DeleteMemberSessions(ctx context.Context, member string) (int, error)
}
