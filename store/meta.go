package store

import "context"

// Keys of the store's facts about itself (MetaStore).
const (
	// MetaTeamID is the id of the team the store belongs to, recorded at
	// its first boot; the team config records the same id, and a broker
	// refuses to pair a config with a store of another team.
	MetaTeamID = "team_id"
	// MetaKEKFingerprint is the fingerprint of the KEK the store's sealed
	// values are sealed under (kek.KEK.Fingerprint).
	MetaKEKFingerprint = "kek_fingerprint"
)

// SealedKind names a column of values sealed under the KEK.
type SealedKind string

// The sealed columns. A new one is added here, to ListSealed and
// SetSealed of every backend, and to the purposes of server/sealed.go, so
// that `svc kek rotate` re-seals it.
const (
	// SealedSecretValue is a secret's value; Key is its slug.
	SealedSecretValue SealedKind = "secret_value"
	// SealedToolCredential is a tool source's credential secret; Key is
	// its slug.
	SealedToolCredential SealedKind = "tool_credential"
	// SealedHookEndpointSecret is a hook endpoint's secret; Key is its
	// slug.
	SealedHookEndpointSecret SealedKind = "hook_endpoint_secret"
	// SealedHookProfileSecret is a hook profile's secret; Key is its slug.
	SealedHookProfileSecret SealedKind = "hook_profile_secret"
	// SealedEnrollmentToken is an approved enrollment's token plaintext;
	// Key is the enrollment id.
	SealedEnrollmentToken SealedKind = "enrollment_token"
)

// SealedKinds lists every sealed column.
var SealedKinds = []SealedKind{
	SealedSecretValue, SealedToolCredential, SealedHookEndpointSecret,
	SealedHookProfileSecret, SealedEnrollmentToken,
}

// SealedValue is one stored sealed value: its column, the key of its row
// and the sealed bytes as the server wrote them (opaque here).
type SealedValue struct {
	Kind  SealedKind
	Key   string
	Value []byte
}

// CensusCap is where Census stops counting messages and file entries.
const CensusCap = 10000

// Census counts what a store holds, for the checks at boot: a store with
// none of it is new.
type Census struct {
	Members int
	// Messages and FileEntries are counted up to CensusCap.
	Messages    int
	FileEntries int
	// Sealed counts the sealed values (ListSealed).
	Sealed int
}

// Empty reports whether the store holds no member, message, file entry or
// sealed value.
func (c Census) Empty() bool {
	return c.Members == 0 && c.Messages == 0 && c.FileEntries == 0 && c.Sealed == 0
}

// MetaStore keeps the store's facts about itself and reaches its sealed
// values as a whole (key rotation).
type MetaStore interface {
	// GetMeta returns the value of key; ErrNotFound when unset.
	GetMeta(ctx context.Context, key string) (string, error)
	// PutMeta sets key to value.
	PutMeta(ctx context.Context, key, value string) error
	// Census counts members, messages, file entries and sealed values.
	Census(ctx context.Context) (Census, error)
	// ListSealed returns every sealed value of every sealed column,
	// ordered by kind and key.
	ListSealed(ctx context.Context) ([]SealedValue, error)
	// SetSealed replaces one sealed value. An empty Value removes it: the
	// secret has no value, the tool source no credential, the hook
	// endpoint or profile no secret, the enrollment is deleted (its
	// device must start again). ErrNotFound when the row has no sealed
	// value of that kind.
	SetSealed(ctx context.Context, v SealedValue) error
}
