package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"google.golang.org/protobuf/types/known/structpb"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
)

// MaxDescription bounds the description of a registry entry or a tool.
const MaxDescription = 4 << 10

// Deps are what the kit needs of the broker.
type Deps struct {
	// Commit runs apply in the transaction of the message committer's next
	// batch and commits the messages it returns with it.
	Commit func(ctx context.Context, apply func(ctx context.Context, tx store.Tx) ([]store.Message, error)) error
	// Members are the names of the team's members, sorted; Holders those
	// who hold a permission leaf now. Both are read before a change goes to
	// the committer: the team must not be read inside apply.
	Members func() []string
	Holders func(leaf string) []string
	// KEK seals and opens write-only values; nil when none is active.
	KEK *kek.KEK
}

// Kit is the shared machinery of the registries: one per broker.
type Kit struct {
	d Deps
}

// New builds the kit.
func New(d Deps) *Kit { return &Kit{d: d} }

// Commit runs apply on the committer and commits the change it reports
// with its event messages, in one transaction. apply returns nil for a
// call that changed nothing (no event).
func (k *Kit) Commit(ctx context.Context, apply func(ctx context.Context, tx store.Tx) (*Change, error)) error {
	return k.d.Commit(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		ch, err := apply(ctx, tx)
		if err != nil || ch == nil {
			return nil, err
		}
		return ch.Messages()
	})
}

// Members are the names of the team's members, sorted.
func (k *Kit) Members() []string { return k.d.Members() }

// Holders are the members who hold leaf now.
func (k *Kit) Holders(leaf string) []string { return k.d.Holders(leaf) }

// KnownMember checks that name names a member: 400 otherwise.
func (k *Kit) KnownMember(field, name string) error {
	switch {
	case name == "":
		return apierr.Invalid(field, "is required")
	case !teamconfig.ValidName(name):
		return apierr.Invalid(field, "must be a member name")
	case !slices.Contains(k.d.Members(), name):
		return apierr.Invalid(field, "no member %q", name)
	}
	return nil
}

// ErrNoKEK answers a call that must seal or open a write-only value while
// no KEK is active.
var ErrNoKEK = apierr.Errorf(apierr.CodeUnavailable, "no key-encryption key is active: write-only secrets cannot be stored or read")

// Sealing is ErrNoKEK when no KEK is active, for a call that must check it
// before its other checks.
func (k *Kit) Sealing() error {
	if k.d.KEK == nil {
		return ErrNoKEK
	}
	return nil
}

// Seal encrypts a write-only value for purpose; ErrNoKEK without a KEK.
func (k *Kit) Seal(plaintext []byte, purpose string) ([]byte, error) {
	return Seal(k.d.KEK, plaintext, purpose)
}

// Open decrypts a value Seal made for purpose; ErrNoKEK without a KEK.
func (k *Kit) Open(sealed []byte, purpose string) ([]byte, error) {
	return Open(k.d.KEK, sealed, purpose)
}

// Seal encrypts plaintext under k as the stores keep it ({v, ct, iv}
// JSON); ErrNoKEK when k is nil.
func Seal(k *kek.KEK, plaintext []byte, purpose string) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKEK
	}
	s, err := k.Seal(plaintext, purpose)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// Open decrypts what Seal made; ErrNoKEK when k is nil.
func Open(k *kek.KEK, sealed []byte, purpose string) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKEK
	}
	var s kek.Sealed
	if err := json.Unmarshal(sealed, &s); err != nil {
		return nil, fmt.Errorf("sealed value: %w", err)
	}
	return k.Open(s, purpose)
}

// slugRE is the slug grammar of the registries: the channel slug grammar
// (1 to 32 characters of lowercase letters, digits and single dashes,
// alphanumeric at both ends). It has no underscore, so a toolbox name
// <slug>__<tool> splits at its first "__".
var slugRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)

// reservedSlugs are slugs a route path would shadow.
var reservedSlugs = []string{"resolve"}

// ValidSlug checks a registry slug.
func ValidSlug(field, s string) error {
	switch {
	case s == "":
		return apierr.Invalid(field, "is required")
	case len(s) > 32 || !slugRE.MatchString(s):
		return apierr.Invalid(field, "must be 1 to 32 lowercase letters, digits and single dashes, starting and ending with a letter or digit")
	case slices.Contains(reservedSlugs, s):
		return apierr.Invalid(field, "%q is reserved", s)
	}
	return nil
}

// Caller is the caller of a registry call; the interceptor guarantees one
// on every non-public method.
func Caller(ctx context.Context) *auth.Principal {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		panic("registry: non-public method reached without a principal")
	}
	return p
}

// NameList renders names as a JSON array (an entry's boundMembers).
func NameList(names []string) *structpb.ListValue {
	l := &structpb.ListValue{Values: make([]*structpb.Value, len(names))}
	for i, n := range names {
		l.Values[i] = structpb.NewStringValue(n)
	}
	return l
}
