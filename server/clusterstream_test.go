package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/server/cluster"
	"svc/server/hub"
	"svc/store"
)

// TestStreamRefusedWhenRevokedBeforeItSubscribed: with several brokers, a
// stream whose credential another broker revoked after this one
// authenticated it (the revocation handled here before the stream
// subscribed, so it ended nothing) is refused once subscribed, on a chat and a
// team stream (the activity stream subscribes the same way); one whose credential holds opens. Alone, a broker does
// not read the store again.
func TestStreamRefusedWhenRevokedBeforeItSubscribed(t *testing.T) {
	ctx := context.Background()
	b, _ := mustBroker(t)
	c := b.core
	now := time.Now()
	for _, id := range []string{"tok-live", "tok-revoked"} {
		require.NoError(t, c.store.CreateToken(ctx, store.Token{ID: id, Member: "bob", Hash: store.TokenHash{id[4]}, Label: id, CreatedAt: now, CreatedBy: "admin"}))
	}
	_, err := c.store.RevokeToken(ctx, "bob", "tok-revoked", now)
	require.NoError(t, err)
	require.NoError(t, c.store.CreateSession(ctx, store.Session{ID: "s1", Hash: store.SessionHash{1}, Member: "bob", CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(time.Hour)}))
	live := &auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "tok-live"}
	revoked := &auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "tok-revoked"}
	session := &auth.Principal{Member: "bob", Via: auth.ViaSession, Session: store.SessionHash{1}}
	gone := &auth.Principal{Member: "bob", Via: auth.ViaSession, Session: store.SessionHash{2}}
	notMember := &auth.Principal{Member: "carol", Via: auth.ViaBearer, TokenID: "tok-live"}

	sub, err := c.subscribe(c.hub, "bob", revoked)
	require.NoError(t, err, "a broker alone reads nothing again")
	sub.Close()

	c.revokes = &cluster.Fanout[store.Revocation]{} // several brokers
	for name, h := range map[string]func(p *auth.Principal) error{
		"chat": func(p *auth.Principal) error { s, err := c.subscribe(c.hub, p.Member, p); closeSub(s); return err },
		"team": func(p *auth.Principal) error {
			f, err := c.attachTeam(p)
			if f != nil {
				f.Close()
			}
			return err
		},
	} {
		require.NoError(t, h(live), name)
		require.NoError(t, h(session), name)
		require.ErrorIs(t, h(revoked), auth.ErrUnauthenticated, name)
		require.ErrorIs(t, h(gone), auth.ErrUnauthenticated, name)
		require.ErrorIs(t, h(notMember), auth.ErrUnauthenticated, name)
		require.Zero(t, c.hub.Connected("bob"), "%s: a refused stream does not count as connected", name)
	}
}

func closeSub(s *hub.Subscription) {
	if s != nil {
		s.Close()
	}
}
