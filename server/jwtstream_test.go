package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/hub"
)

// TestJWTStreamEndsAtExp: a stream opened with a federation JWT ends when
// the JWT expires, with an unauthenticated error that says so; one opened
// with a bearer token is not cut at its expiry (docs/FEDERATION.md, "Token
// lifetime").
func TestJWTStreamEndsAtExp(t *testing.T) {
	jwtAt := func(exp time.Time) *auth.Principal {
		return &auth.Principal{Member: "bob", Via: auth.ViaJWT, JWTHash: "ab", ExpiresAt: exp}
	}
	tests := []struct {
		name    string
		p       *auth.Principal
		wantEnd bool
	}{
		{name: "a JWT expiring soon", p: jwtAt(time.Now().Add(50 * time.Millisecond)), wantEnd: true},
		{name: "a JWT already expired when the stream opened", p: jwtAt(time.Now().Add(-time.Second)), wantEnd: true},
		{name: "a JWT an hour away", p: jwtAt(time.Now().Add(time.Hour))},
		{name: "a token past its expiry", p: &auth.Principal{Member: "bob", Via: auth.ViaBearer, TokenID: "t1", ExpiresAt: time.Now().Add(-time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &core{store: mustMemStore(t), hub: hub.New()}
			f, err := b.attach(context.Background(), tt.p, 0, false)
			require.NoError(t, err)
			defer f.Close()
			if tt.wantEnd {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, err := f.Next(ctx, nil)
				require.ErrorIs(t, err, errCredentialExpired)
				require.Equal(t, apierr.CodeUnauthenticated, err.(*apierr.Error).Code)
				require.Zero(t, b.hub.Connected("bob"), "the expired stream still counts as connected")
				return
			}
			// Still open well past the short JWT's exp: an event published
			// now is delivered.
			time.Sleep(100 * time.Millisecond)
			b.hub.Publish(hub.NewEvent(1, &apiv1.Message{Body: "still here"}), false, "alice", []string{"bob"})
			ev, err := f.Next(context.Background(), nil)
			require.NoError(t, err)
			require.Equal(t, "still here", ev.Value.(*apiv1.Message).GetBody())
		})
	}
}

// TestSubscriptionEndAt: EndAt ends a subscription at its time and marks it
// expired; a subscription closed first is not marked, and its timer is
// stopped.
func TestSubscriptionEndAt(t *testing.T) {
	h := hub.New()
	s, err := h.Subscribe("bob", "jwt:ab")
	require.NoError(t, err)
	s.EndAt(time.Now().Add(20 * time.Millisecond))
	select {
	case <-s.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end at its time")
	}
	_, open := s.Next()
	require.False(t, open)
	require.True(t, s.Expired())

	c, err := h.Subscribe("bob", "jwt:cd")
	require.NoError(t, err)
	c.EndAt(time.Now().Add(50 * time.Millisecond))
	c.Close()
	time.Sleep(100 * time.Millisecond)
	require.False(t, c.Expired(), "a subscription closed before its time is not expired")
}
