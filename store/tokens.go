package store

import (
	"context"
	"time"
)

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
