package postgres

import (
	"context"
	"fmt"
	"time"

	"svc/store"
)

const pairingColumns = `hash, issuer, audience, jwks_url, created_by, created_at, expires_at`

// CreatePairingCode deletes expired codes, checks the bound and stores c.
// It runs several statements: DB runs it in a transaction.
func (q queries) CreatePairingCode(ctx context.Context, c store.PairingCode, max int) error {
	created := q.orNow(c.CreatedAt).UnixMilli()
	if _, err := q.w.ExecContext(ctx, `DELETE FROM pairing_codes WHERE expires_at <= ?`, created); err != nil {
		return translate("create pairing code", err)
	}
	var n int
	if err := q.w.QueryRowContext(ctx, `SELECT count(*) FROM pairing_codes`).Scan(&n); err != nil {
		return translate("create pairing code", err)
	}
	if n >= max {
		return fmt.Errorf("create pairing code: %d codes outstanding: %w", n, store.ErrPrecondition)
	}
	_, err := q.w.ExecContext(ctx, `INSERT INTO pairing_codes (`+pairingColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.Hash[:], c.Issuer, c.Audience, c.JWKSURL, c.CreatedBy, created, c.ExpiresAt.UnixMilli())
	return translate("create pairing code", err)
}

// CreatePairingCode runs queries.CreatePairingCode in a transaction.
func (db *DB) CreatePairingCode(ctx context.Context, c store.PairingCode, max int) error {
	_, err := inTx(ctx, db, func(q queries) (struct{}, error) {
		return struct{}{}, q.CreatePairingCode(ctx, c, max)
	})
	return err
}

// ConsumePairingCode deletes and returns the unexpired code in one
// statement, so two lookups cannot both have it. The lookup is public:
// a code that does not exist is answered from the read pool, so guesses
// never queue for the one writer.
func (q queries) ConsumePairingCode(ctx context.Context, h store.PairingHash, now time.Time) (store.PairingCode, error) {
	var (
		c                store.PairingCode
		hash             []byte
		created, expires int64
		exists           bool
	)
	if err := q.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pairing_codes WHERE hash = ? AND expires_at > ?)`,
		h[:], now.UnixMilli()).Scan(&exists); err != nil {
		return store.PairingCode{}, translate("consume pairing code", err)
	}
	if !exists {
		return store.PairingCode{}, fmt.Errorf("consume pairing code: %w", store.ErrNotFound)
	}
	err := q.w.QueryRowContext(ctx, `DELETE FROM pairing_codes WHERE hash = ? AND expires_at > ? RETURNING `+pairingColumns,
		h[:], now.UnixMilli()).Scan(&hash, &c.Issuer, &c.Audience, &c.JWKSURL, &c.CreatedBy, &created, &expires)
	if err != nil {
		return store.PairingCode{}, translate("consume pairing code", err)
	}
	copy(c.Hash[:], hash)
	c.CreatedAt, c.ExpiresAt = fromMS(created), fromMS(expires)
	return c, nil
}
