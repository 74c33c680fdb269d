package store

import (
	"context"
	"time"
)

// Secret is an environment secret of the registry. Value is the sealed
// value as the server encrypted it (opaque here); nil when none is set.
type Secret struct {
	Slug        string
	EnvName     string
	Description string
	Enabled     bool
	AllMembers  bool
	Value       []byte
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// Bound are the members bound to it, by name; filled by reads.
	Bound []string
}

// SecretStore keeps environment secrets, their sealed values and their
// bindings to members.
type SecretStore interface {
	// CreateSecret stores a secret (Bound is ignored): ErrConflict when the
	// slug or the envName is taken.
	CreateSecret(ctx context.Context, s Secret) error
	// GetSecret returns a secret with its bindings; ErrNotFound.
	GetSecret(ctx context.Context, slug string) (Secret, error)
	// ListSecrets returns every secret with its bindings, by slug.
	ListSecrets(ctx context.Context) ([]Secret, error)
	// UpdateSecret replaces the envName, description, enabled, allMembers
	// and updatedAt of the secret s.Slug: ErrConflict when the envName is
	// taken, ErrNotFound.
	UpdateSecret(ctx context.Context, s Secret) error
	// DeleteSecret removes a secret with its value and bindings;
	// ErrNotFound.
	DeleteSecret(ctx context.Context, slug string) error
	// SetSecretValue replaces a secret's sealed value (nil clears it);
	// ErrNotFound.
	SetSecretValue(ctx context.Context, slug string, value []byte, at time.Time) error
	// PutSecretBinding binds a member (binding twice is no change):
	// ErrNotFound for an unknown secret, ErrPrecondition for an unknown
	// member.
	PutSecretBinding(ctx context.Context, slug, member string) error
	// DeleteSecretBinding removes a binding; ErrNotFound when absent.
	DeleteSecretBinding(ctx context.Context, slug, member string) error
}
