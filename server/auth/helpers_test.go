package auth_test

import (
	"context"
	"encoding/hex"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/store"
	"svc/store/sqlite"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// newFakeClock starts at a whole millisecond, the store's precision.
func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fakeMembers is a MemberLookup with a function field.
type fakeMembers struct {
	permissions func(name string) ([]string, bool)
}

func (f fakeMembers) MemberPermissions(name string) ([]string, bool) { return f.permissions(name) }

// membersOf answers from a fixed map.
func membersOf(m map[string][]string) fakeMembers {
	return fakeMembers{permissions: func(name string) ([]string, bool) {
		p, ok := m[name]
		return p, ok
	}}
}

// mustOpenStore returns an in-memory store on clk, closed at cleanup.
func mustOpenStore(tb testing.TB, clk *fakeClock) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), "", sqlite.WithNow(clk.Now))
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, db.Close()) })
	return db
}

// mustPutMember stores a member.
func mustPutMember(tb testing.TB, st store.MemberStore, name string) {
	tb.Helper()
	require.NoError(tb, st.PutMember(context.Background(), store.Member{Name: name, Permissions: []string{}}))
}

// mustToken mints a token for member and stores it with the given id and
// fields taken from tmpl; it returns the plaintext.
func mustToken(tb testing.TB, st store.TokenStore, id, member string, tmpl store.Token) string {
	tb.Helper()
	plain, hash, err := auth.NewToken()
	require.NoError(tb, err)
	tmpl.ID, tmpl.Member, tmpl.Hash = id, member, hash
	if tmpl.Origin == "" {
		tmpl.Origin = "rotate"
	}
	require.NoError(tb, st.CreateToken(context.Background(), tmpl))
	return plain
}

// mustSession creates a session for member and returns its cookie value.
func mustSession(tb testing.TB, st store.SessionStore, member string, tmpl store.Session) string {
	tb.Helper()
	id, hash, err := auth.NewSessionID()
	require.NoError(tb, err)
	tmpl.ID, tmpl.Hash, tmpl.Member = hex.EncodeToString(hash[:8]), hash, member
	require.NoError(tb, st.CreateSession(context.Background(), tmpl))
	return id
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
