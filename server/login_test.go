package server

import (
	"context"
	"errors"
	"path/filepath"
	"svc/server/apierr"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
)

func code(t *testing.T, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(testTOTPSecret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	require.NoError(t, err)
	return c
}

func wrongCode(t *testing.T) string {
	t.Helper()
	now := time.Now()
	for _, c := range []string{"000000", "111111", "222222"} {
		ok := false
		for d := -1; d <= 1; d++ {
			ok = ok || c == code(t, now.Add(time.Duration(d)*30*time.Second))
		}
		if !ok {
			return c
		}
	}
	t.Fatal("no wrong code found")
	return ""
}

func rendered(err error) apierr.Code { return apierr.Render(err).Body.Error }

// A burst of parallel wrong codes must not get more than the global limit of
// failures through: check and count are one step.
func TestLoginLimitHoldsUnderConcurrency(t *testing.T) {
	b, _ := mustBroker(t)
	bad := wrongCode(t)
	var mu sync.Mutex
	counts := map[apierr.Code]int{}
	var wg sync.WaitGroup
	for range 60 {
		wg.Go(func() {
			_, err := b.CreateSession(context.Background(), &apiv1.CreateSessionRequest{Code: bad})
			mu.Lock()
			counts[rendered(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[apierr.Code]int{apierr.CodeUnauthenticated: auth.TOTPGlobalFailures, apierr.CodeRateLimited: 60 - auth.TOTPGlobalFailures}, counts)
}

// A member locked out by named failures cannot log in through the
// codeless form, even with a correct code (docs/DECISIONS.md, "Login
// limits: strangers cannot lock a member out").
func TestCodelessLoginHonoursMemberLockout(t *testing.T) {
	b, _ := mustBroker(t)
	ctx := context.Background()
	bad := wrongCode(t)
	member := "admin"
	for range auth.TOTPMemberFailures {
		_, err := b.CreateSession(ctx, &apiv1.CreateSessionRequest{Code: bad, Member: &member})
		require.Equal(t, apierr.CodeUnauthenticated, rendered(err))
	}
	_, err := b.CreateSession(ctx, &apiv1.CreateSessionRequest{Code: code(t, time.Now())})
	require.Equal(t, apierr.CodeRateLimited, rendered(err))
	require.Positive(t, apierr.Render(err).RetryAfter)
}

// A failed config write must leave the store as it was: rotating keeps the
// old tokens valid when the new hash cannot be made durable.
func TestRotateRollsBackWhenConfigWriteFails(t *testing.T) {
	b, path := mustBroker(t)
	tok, hash, err := auth.NewToken()
	require.NoError(t, err)
	_ = tok
	ctx := context.Background()
	require.NoError(t, b.store.CreateToken(ctx, store.Token{ID: "t1", Member: "bob", Hash: hash, Origin: "bootstrap", CreatedAt: time.Now()}))

	b.team.path = filepath.Join(path, "not-a-dir", "svc.json") // Save fails: parent is a file
	pctx := auth.WithPrincipal(ctx, &auth.Principal{Member: "bob", Via: auth.ViaBearer})
	_, err = b.RotateToken(pctx, &apiv1.RotateTokenRequest{Name: "bob"})
	require.Error(t, err)

	got, err := b.store.GetTokenByHash(ctx, hash)
	require.NoError(t, err)
	require.True(t, got.Active(time.Now()), "the old token must survive a failed rotate")
	tokens, err := b.store.ListTokens(ctx, "bob")
	require.NoError(t, err)
	require.Len(t, tokens, 1, "no new token may be stored")
}

// Re-creating a deleted name never revives the old member's tokens.
func TestCreateMemberClearsLeftoverRows(t *testing.T) {
	b, _ := mustBroker(t)
	ctx := context.Background()
	_, hash, err := auth.NewToken()
	require.NoError(t, err)
	// A store row the config does not know (e.g. a crash between writes).
	require.NoError(t, b.store.PutMember(ctx, store.Member{Name: "carol"}))
	require.NoError(t, b.store.CreateToken(ctx, store.Token{ID: "old", Member: "carol", Hash: hash, Origin: "bootstrap", CreatedAt: time.Now()}))

	pctx := auth.WithPrincipal(ctx, &auth.Principal{Member: "admin", Permissions: []string{auth.MembersManage}, Via: auth.ViaBearer})
	_, err = b.CreateMember(pctx, &apiv1.CreateMemberRequest{Name: "carol"})
	require.NoError(t, err)
	_, err = b.store.GetTokenByHash(ctx, hash)
	require.True(t, errors.Is(err, store.ErrNotFound), "leftover token must be gone, got %v", err)
}
