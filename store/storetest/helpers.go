package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// base is a fixed instant with a sub-millisecond part, so that tests notice a
// store that keeps more or less than millisecond precision.
var base = time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC)

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

func tokenHash(s string) store.TokenHash { return sha256.Sum256([]byte("token:" + s)) }

func sessionHash(s string) store.SessionHash { return sha256.Sum256([]byte("session:" + s)) }

// ms is how the suite compares times: stores keep millisecond precision and
// the zero time stays zero.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func member(name string) store.Member {
	return store.Member{
		Name:         name,
		Role:         &store.Role{Title: "Role of " + name, Description: "Does " + name + " things."},
		Instructions: "Instructions for " + name + ".",
		Permissions:  []string{"publish", "read"},
		CreatedAt:    at(0),
		UpdatedAt:    at(time.Second),
	}
}

func token(id, memberName string) store.Token {
	return store.Token{
		ID:        id,
		Member:    memberName,
		Hash:      tokenHash(id),
		Label:     "label " + id,
		Origin:    "enroll",
		CreatedAt: at(time.Minute),
		CreatedBy: "admin",
	}
}

func session(key, memberName string) store.Session {
	return store.Session{
		ID:         "id-" + key,
		Hash:       sessionHash(key),
		Member:     memberName,
		CreatedAt:  at(0),
		LastSeenAt: at(time.Minute),
		ExpiresAt:  at(time.Hour),
	}
}

func mustPutMembers(t *testing.T, s store.MemberStore, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, s.PutMember(context.Background(), member(n)))
	}
}

func mustCreateTokens(t *testing.T, s store.TokenStore, tokens ...store.Token) {
	t.Helper()
	for _, tok := range tokens {
		require.NoError(t, s.CreateToken(context.Background(), tok))
	}
}

// memberView is a Member with comparable times.
type memberView struct {
	Name         string
	Role         *store.Role
	Instructions string
	Permissions  []string
	CreatedAt    int64
	UpdatedAt    int64
}

func viewMember(m store.Member) memberView {
	return memberView{m.Name, m.Role, m.Instructions, m.Permissions, ms(m.CreatedAt), ms(m.UpdatedAt)}
}

// memberContent is a Member without the times a store may manage itself.
type memberContent struct {
	Name         string
	Role         *store.Role
	Instructions string
	Permissions  []string
}

func contentOf(m store.Member) memberContent {
	perms := m.Permissions
	if perms == nil {
		perms = []string{}
	}
	return memberContent{m.Name, m.Role, m.Instructions, perms}
}

func contentsOf(ms []store.Member) []memberContent {
	out := make([]memberContent, 0, len(ms))
	for _, m := range ms {
		out = append(out, contentOf(m))
	}
	return out
}

// tokenView is a Token with comparable times.
type tokenView struct {
	ID, Member                                  string
	Hash                                        store.TokenHash
	Label, Origin, CreatedBy                    string
	CreatedAt, LastUsedAt, ExpiresAt, RevokedAt int64
}

func viewToken(t store.Token) tokenView {
	return tokenView{
		ID: t.ID, Member: t.Member, Hash: t.Hash, Label: t.Label, Origin: t.Origin, CreatedBy: t.CreatedBy,
		CreatedAt: ms(t.CreatedAt), LastUsedAt: ms(t.LastUsedAt), ExpiresAt: ms(t.ExpiresAt), RevokedAt: ms(t.RevokedAt),
	}
}

func tokenIDs(ts []store.Token) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

// sessionView is a Session with comparable times.
type sessionView struct {
	ID                               string
	Hash                             store.SessionHash
	Member                           string
	CreatedAt, LastSeenAt, ExpiresAt int64
}

func viewSession(s store.Session) sessionView {
	return sessionView{s.ID, s.Hash, s.Member, ms(s.CreatedAt), ms(s.LastSeenAt), ms(s.ExpiresAt)}
}

// eventView is an ActivityEvent with a comparable time.
type eventView struct {
	ID          int64
	Member      string
	MemberUID   string
	Kind        string
	TS          int64
	ObjectiveID string
	Data        string
}

func viewEvent(e store.ActivityEvent) eventView {
	return eventView{e.ID, e.Member, e.MemberUID, e.Kind, ms(e.TS), e.ObjectiveID, string(e.Data)}
}

func viewEvents(es []store.ActivityEvent) []eventView {
	out := make([]eventView, 0, len(es))
	for _, e := range es {
		out = append(out, viewEvent(e))
	}
	return out
}

// GrantPaths grants read of the files at paths to grantees, for tests that
// name files by path: entries that are absent are skipped, as GrantEntries
// skips directories.
func GrantPaths(ctx context.Context, s store.Tx, paths, grantees []string) error {
	var ids []int64
	for _, p := range paths {
		e, err := s.GetEntry(ctx, p)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return err
		}
		ids = append(ids, e.ID)
	}
	return s.GrantEntries(ctx, ids, grantees)
}
