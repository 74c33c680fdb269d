package sqlite

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// tokenFixture is a file store with member ann holding token tok.
func tokenFixture(t *testing.T) (*DB, store.TokenHash) {
	t.Helper()
	db := MustOpen(t, tempPath(t, "svc.db"))
	ctx := t.Context()
	require.NoError(t, db.PutMember(ctx, store.Member{Name: "ann"}))
	h := store.TokenHash{1, 2, 3}
	require.NoError(t, db.CreateToken(ctx, store.Token{ID: "tok", Member: "ann", Hash: h, Origin: "rotate"}))
	return db, h
}

// behindTheStore changes tok's label without going through the store, so a
// read that still answers the old label came from the cache.
func behindTheStore(t *testing.T, db *DB, label string) {
	t.Helper()
	_, err := db.c.writer.ExecContext(t.Context(), `UPDATE tokens SET label = ? WHERE id = 'tok'`, label)
	require.NoError(t, err)
}

func TestTokenCache(t *testing.T) {
	errBoom := errors.New("boom")
	touchedAt := time.UnixMilli(1_700_000_000_123).UTC()
	tests := []struct {
		name     string
		change   func(ctx context.Context, db *DB) error
		revoked  bool // tok is revoked after change
		gone     bool // tok is gone after change
		label    string
		lastUsed time.Time // tok's LastUsedAt after change, when set
	}{
		{name: "no change keeps the cached row", change: func(context.Context, *DB) error { return nil }, label: "old"},
		{name: "revoke", change: func(ctx context.Context, db *DB) error {
			_, err := db.RevokeToken(ctx, "ann", "tok", time.Time{})
			return err
		}, revoked: true, label: "new"},
		{name: "revoke inside a transaction", change: func(ctx context.Context, db *DB) error {
			return db.WithTx(ctx, func(tx store.Tx) error {
				_, err := tx.RevokeToken(ctx, "ann", "tok", time.Time{})
				return err
			})
		}, revoked: true, label: "new"},
		{name: "revoke rolled back", change: func(ctx context.Context, db *DB) error {
			err := db.WithTx(ctx, func(tx store.Tx) error {
				if _, err := tx.RevokeToken(ctx, "ann", "tok", time.Time{}); err != nil {
					return err
				}
				return errBoom
			})
			if !errors.Is(err, errBoom) {
				return err
			}
			return nil
		}, label: "new"},
		{name: "revoke member tokens", change: func(ctx context.Context, db *DB) error {
			_, err := db.RevokeMemberTokens(ctx, "ann", time.Time{})
			return err
		}, revoked: true, label: "new"},
		{name: "touch moves the cached row's LastUsedAt", change: func(ctx context.Context, db *DB) error {
			return db.TouchToken(ctx, "tok", touchedAt)
		}, label: "old", lastUsed: touchedAt},
		{name: "delete member", change: func(ctx context.Context, db *DB) error {
			return db.DeleteMember(ctx, "ann")
		}, gone: true},
		{name: "replace members", change: func(ctx context.Context, db *DB) error {
			return db.ReplaceMembers(ctx, []store.Member{{Name: "bob"}})
		}, gone: true},
		{name: "another token created", change: func(ctx context.Context, db *DB) error {
			return db.CreateToken(ctx, store.Token{ID: "tok2", Member: "ann", Hash: store.TokenHash{9}, Origin: "rotate"})
		}, label: "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, h := tokenFixture(t)
			ctx := t.Context()
			behindTheStore(t, db, "old")
			tok, err := db.GetTokenByHash(ctx, h)
			require.NoError(t, err)
			require.Equal(t, "old", tok.Label)
			behindTheStore(t, db, "new")
			require.NoError(t, tt.change(ctx, db))
			tok, err = db.GetTokenByHash(ctx, h)
			if tt.gone {
				require.ErrorIs(t, err, store.ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.label, tok.Label, "label read after the change")
			require.Equal(t, tt.revoked, !tok.RevokedAt.IsZero(), "revoked after the change")
			if !tt.lastUsed.IsZero() {
				require.True(t, tt.lastUsed.Equal(tok.LastUsedAt), "LastUsedAt %v, want %v", tok.LastUsedAt, tt.lastUsed)
			}
		})
	}
}

// TestTokenCacheRevokeRace: readers hammer the token while it is revoked;
// every read that starts after RevokeToken returned sees it revoked.
func TestTokenCacheRevokeRace(t *testing.T) {
	db, h := tokenFixture(t)
	ctx := t.Context()
	var revoked atomic.Bool
	var wg sync.WaitGroup
	var stale atomic.Int64
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				after := revoked.Load()
				tok, err := db.GetTokenByHash(ctx, h)
				if err != nil {
					t.Error(err)
					return
				}
				if after && tok.RevokedAt.IsZero() {
					stale.Add(1)
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	_, err := db.RevokeToken(ctx, "ann", "tok", time.Time{})
	require.NoError(t, err)
	revoked.Store(true)
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	require.Zero(t, stale.Load(), "reads after the revoke answered saw the token unrevoked")
}

func TestTokenCacheBounded(t *testing.T) {
	var c tokenCache
	for i := range maxCachedTokens + 10 {
		_, _, gen := c.get(store.TokenHash{byte(i), byte(i >> 8)})
		c.put(gen, store.TokenHash{byte(i), byte(i >> 8)}, store.Token{})
	}
	require.LessOrEqual(t, len(c.rows), maxCachedTokens)
	_, _, gen := c.get(store.TokenHash{})
	c.begin()
	c.put(gen, store.TokenHash{42}, store.Token{ID: "x"})
	_, ok, gen2 := c.get(store.TokenHash{42})
	require.False(t, ok, "nothing is kept while a change is under way")
	c.put(gen2, store.TokenHash{42}, store.Token{ID: "x"})
	c.end()
	_, ok, _ = c.get(store.TokenHash{42})
	require.False(t, ok, "a row read during a change is not kept after it")
}
