package server

import (
	"context"
	"errors"
	"fmt"

	"svc/server/kek"
	"svc/server/registry"
	"svc/store"
)

// sealedPurpose is the additional data a stored sealed value was sealed
// with: the purpose its service uses.
func sealedPurpose(v store.SealedValue) (string, error) {
	switch v.Kind {
	case store.SealedSecretValue:
		return registry.Secrets.PurposeOf(v.Key), nil
	case store.SealedToolCredential:
		return registry.ToolSources.PurposeOf(v.Key), nil
	case store.SealedHookEndpointSecret:
		return registry.NotificationEndpoints.PurposeOf(v.Key), nil
	case store.SealedHookProfileSecret:
		return registry.NotificationProfiles.PurposeOf(v.Key), nil
	case store.SealedEnrollmentToken:
		return enrollTokenPurpose(v.Key), nil
	}
	return "", fmt.Errorf("sealed value of unknown kind %q", v.Kind)
}

// SealedValueError names a stored sealed value that could not be opened.
type SealedValueError struct {
	Kind store.SealedKind
	Key  string
	Err  error
}

func (e *SealedValueError) Error() string {
	return fmt.Sprintf("%s %q: %v", e.Kind, e.Key, e.Err)
}

func (e *SealedValueError) Unwrap() error { return e.Err }

// openStored opens one stored sealed value with k.
func openStored(k *kek.KEK, v store.SealedValue) ([]byte, error) {
	purpose, err := sealedPurpose(v)
	if err != nil {
		return nil, err
	}
	pt, err := registry.Open(k, v.Value, purpose)
	if err != nil {
		return nil, &SealedValueError{Kind: v.Kind, Key: v.Key, Err: err}
	}
	return pt, nil
}

// CheckSealed opens every sealed value of st with k and names the first
// that does not open: how a store that recorded no KEK fingerprint (one
// from before the fingerprint) proves its key.
func CheckSealed(ctx context.Context, st store.MetaStore, k *kek.KEK) error {
	vs, err := st.ListSealed(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if _, err := openStored(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Reseal opens every sealed value of tx with from, seals it again under to
// and records to's fingerprint, in tx: with one transaction the store is
// under one key or the other, never both. It refuses (changing nothing)
// when a value does not open with from, and reports how many it re-sealed.
func Reseal(ctx context.Context, tx store.Tx, from, to *kek.KEK) (int, error) {
	vs, err := tx.ListSealed(ctx)
	if err != nil {
		return 0, err
	}
	for _, v := range vs {
		pt, err := openStored(from, v)
		if err != nil {
			return 0, err
		}
		purpose, _ := sealedPurpose(v)
		sealed, err := registry.Seal(to, pt, purpose)
		if err != nil {
			return 0, err
		}
		v.Value = sealed
		if err := tx.SetSealed(ctx, v); err != nil {
			return 0, err
		}
	}
	return len(vs), tx.PutMeta(ctx, store.MetaKEKFingerprint, to.Fingerprint())
}

// DropSealed removes every sealed value of tx (what a lost KEK sealed can
// never be opened again) and records k's fingerprint. It returns what it
// removed, so the operator can be told what to set again.
func DropSealed(ctx context.Context, tx store.Tx, k *kek.KEK) ([]store.SealedValue, error) {
	vs, err := tx.ListSealed(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		v.Value = nil
		if err := tx.SetSealed(ctx, v); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	return vs, tx.PutMeta(ctx, store.MetaKEKFingerprint, k.Fingerprint())
}
