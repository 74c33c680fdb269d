package store

import (
	"context"
	"time"
)

// PairingHash is the SHA-256 of a pairing code. Codes are never stored.
type PairingHash [32]byte

// PairingCode is a one-time pairing code of platform connect: the jwt
// block a lookup of the code answers once.
type PairingCode struct {
	Hash      PairingHash
	Issuer    string
	Audience  string
	JWKSURL   string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// PlatformStore keeps pairing codes.
type PlatformStore interface {
	// CreatePairingCode stores c, first deleting every code expired at
	// c.CreatedAt. ErrPrecondition when max unexpired codes are already
	// outstanding, ErrConflict when the hash is taken; nothing is stored
	// then.
	CreatePairingCode(ctx context.Context, c PairingCode, max int) error
	// ConsumePairingCode deletes the code with hash h and returns it when it
	// is unexpired at now; ErrNotFound when there is none (never stored,
	// consumed or expired). Two concurrent consumers never both get it.
	ConsumePairingCode(ctx context.Context, h PairingHash, now time.Time) (PairingCode, error)
}
