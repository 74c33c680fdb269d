package server

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"svc/server/apierr"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/clientaddr"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
	"svc/store/sqlite"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// enrollFixture is an Enrollment service on a fake clock, over an
// in-memory store with members admin (members.manage) and bob.
type enrollFixture struct {
	*Enrollment
	clock *fakeClock
	admin context.Context
	authn *auth.Authenticator
}

func mustEnrollment(t *testing.T, withKEK bool) *enrollFixture {
	t.Helper()
	ctx := context.Background()
	var k *kek.KEK
	if withKEK {
		key := make([]byte, kek.KeySize)
		_, err := rand.Read(key)
		require.NoError(t, err)
		k, err = kek.New(key)
		require.NoError(t, err)
	}
	f := &teamconfig.File{Store: teamconfig.Store{Members: []teamconfig.Member{
		{Name: "admin", Permissions: []string{auth.MembersManage}},
		{Name: "bob", Permissions: []string{}},
	}}}
	require.NoError(t, f.Validate())
	path := filepath.Join(t.TempDir(), "svc.json")
	require.NoError(t, teamconfig.Save(path, f))
	st, err := sqlite.Open(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	clock := &fakeClock{now: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
	team, err := NewTeam(ctx, path, f, st, clock.Now)
	require.NoError(t, err)
	s := New(Deps{Store: st, Team: team, KEK: k, Version: "test"}, WithNow(clock.Now))
	admin := auth.WithPrincipal(ctx, &auth.Principal{Member: "admin", Permissions: []string{auth.MembersManage}, Via: auth.ViaBearer, TokenID: "admin-token"})
	return &enrollFixture{Enrollment: newEnrollment(s.core, ""), clock: clock, admin: admin, authn: s.authn}
}

// from is a call context from a TCP client at addr.
func from(addr string) context.Context {
	tcp, _ := net.ResolveTCPAddr("tcp", addr)
	local, _ := net.ResolveTCPAddr("tcp", "127.0.0.1:7433")
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: tcp, LocalAddr: local})
	return metadata.NewIncomingContext(ctx, metadata.Pairs("user-agent", "svc-cli/1.0", ":authority", "broker.example:7433"))
}

func (f *enrollFixture) mint(t *testing.T) *apiv1.StartEnrollmentResponse {
	t.Helper()
	r, err := f.StartEnrollment(from("192.0.2.10:5555"), &apiv1.StartEnrollmentRequest{LabelHint: ptr("laptop")})
	require.NoError(t, err)
	return r
}

func (f *enrollFixture) poll(code string) (*apiv1.PollEnrollmentResponse, error) {
	return f.PollEnrollment(context.Background(), &apiv1.PollEnrollmentRequest{DeviceCode: code})
}

func TestEnrollmentMint(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	require.Len(t, r.GetDeviceCode(), 43, "base64url of 256 bits")
	require.Regexp(t, `^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`, r.GetUserCode())
	require.Equal(t, "http://broker.example:7433/ui/enroll", r.GetVerificationUri())
	require.Equal(t, "http://broker.example:7433/ui/enroll?code="+r.GetUserCode(), r.GetVerificationUriComplete())
	require.EqualValues(t, 300, r.GetExpiresIn())
	require.EqualValues(t, 5, r.GetInterval())

	list, err := f.ListPendingEnrollments(f.admin, nil)
	require.NoError(t, err)
	require.Len(t, list.GetPending(), 1)
	p := list.GetPending()[0]
	require.Equal(t, r.GetUserCode(), p.GetUserCode())
	require.Equal(t, "laptop", p.GetLabelHint())
	require.Equal(t, "192.0.2.10", p.GetSourceIp())
	require.Equal(t, "svc-cli/1.0", p.GetUserAgent())
	require.Equal(t, "pending", p.GetStatus())
	require.Equal(t, float64(f.clock.Now().Add(300*time.Second).UnixMilli()), p.GetExpiresAt())

	rec, err := f.store.GetEnrollmentByUserCode(context.Background(), strings.ReplaceAll(r.GetUserCode(), "-", ""))
	require.NoError(t, err)
	require.NotContains(t, string(rec.DeviceHash[:]), r.GetDeviceCode(), "only the hash is stored")

	f.publicURL = "https://svc.example.org"
	r2 := f.mint(t)
	require.Equal(t, "https://svc.example.org/ui/enroll", r2.GetVerificationUri())

	_, err = f.StartEnrollment(from("192.0.2.10:5555"), &apiv1.StartEnrollmentRequest{LabelHint: ptr(strings.Repeat("x", maxEnrollLabel+1))})
	requireCode(t, err, apierr.CodeBadRequest)
}

// The server enforces the interval per device code from the previous poll;
// every slow_down adds 5 s (docs/ENROLLMENT.md).
func TestEnrollmentPollInterval(t *testing.T) {
	f := mustEnrollment(t, true)
	code := f.mint(t).GetDeviceCode()
	f.clock.Add(time.Second)
	steps := []struct {
		name  string
		after time.Duration
		want  apierr.Code
	}{
		{"first poll any time", 0, apierr.CodeAuthorizationPending},
		{"too early", 4 * time.Second, apierr.CodeSlowDown},
		{"early for the new interval", 9 * time.Second, apierr.CodeSlowDown},
		{"waited the interval", 15 * time.Second, apierr.CodeAuthorizationPending},
		{"a hair early", 15*time.Second - time.Millisecond, apierr.CodeSlowDown},
		{"waited again", 20 * time.Second, apierr.CodeAuthorizationPending},
	}
	for _, s := range steps {
		f.clock.Add(s.after)
		_, err := f.poll(code)
		requireCode(t, err, s.want)
	}
	rec, err := f.store.GetEnrollmentByDeviceHash(context.Background(), hashCode(code))
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, rec.Interval)
}

func hashCode(code string) store.DeviceCodeHash {
	return store.DeviceCodeHash(auth.HashToken(code)) // both are SHA-256 of the bytes
}

func TestEnrollmentLifetime(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	f.clock.Add(300*time.Second - time.Millisecond)
	_, err := f.poll(r.GetDeviceCode())
	requireCode(t, err, apierr.CodeAuthorizationPending)
	f.clock.Add(time.Millisecond)
	_, err = f.poll(r.GetDeviceCode())
	requireCode(t, err, apierr.CodeExpiredToken)
	_, err = f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), Member: ptr("bob")})
	requireCode(t, err, apierr.CodeNotFound)
	list, err := f.ListPendingEnrollments(f.admin, nil)
	require.NoError(t, err)
	require.Empty(t, list.GetPending())

	_, err = f.poll("never-minted")
	requireCode(t, err, apierr.CodeExpiredToken)
	_, err = f.poll("")
	requireCode(t, err, apierr.CodeBadRequest)
}

func TestEnrollmentApproveExisting(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	// Lower case and no dash are the same code.
	typed := strings.ToLower(strings.ReplaceAll(r.GetUserCode(), "-", ""))
	resp, err := f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: typed, Member: ptr("bob")})
	require.NoError(t, err)
	require.Equal(t, "bob", resp.GetMember().GetName())
	require.Equal(t, "enroll", resp.GetTokenInfo().GetOrigin())
	require.Equal(t, "laptop", resp.GetTokenInfo().GetLabel(), "the label defaults to the hint")
	require.Equal(t, "admin", resp.GetTokenInfo().GetCreatedBy())

	list, err := f.ListPendingEnrollments(f.admin, nil)
	require.NoError(t, err)
	require.Equal(t, "approved", list.GetPending()[0].GetStatus())

	_, err = f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: typed, Member: ptr("bob")})
	requireCode(t, err, apierr.CodeConflict)
	_, err = f.RejectEnrollment(f.admin, &apiv1.RejectEnrollmentRequest{UserCode: typed})
	requireCode(t, err, apierr.CodeConflict)

	got, err := f.poll(r.GetDeviceCode())
	require.NoError(t, err)
	require.Equal(t, "bob", got.GetMember())
	p, err := f.authn.Verify(context.Background(), auth.Credentials{Bearer: got.GetToken()})
	require.NoError(t, err)
	require.Equal(t, "bob", p.Member)
	require.Equal(t, resp.GetTokenInfo().GetId(), p.TokenID)

	f.clock.Add(time.Minute)
	_, err = f.poll(r.GetDeviceCode())
	requireCode(t, err, apierr.CodeExpiredToken, "one read")
}

// The issued token waits 5 minutes; unread, it is revoked with the record.
func TestEnrollmentHoldExpiry(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	f.clock.Add(4 * time.Minute) // the hold counts from the approval
	resp, err := f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), Member: ptr("bob"), Label: ptr("desk")})
	require.NoError(t, err)
	require.Equal(t, "desk", resp.GetTokenInfo().GetLabel())
	f.clock.Add(5*time.Minute - time.Millisecond)
	list, err := f.ListPendingEnrollments(f.admin, nil)
	require.NoError(t, err)
	require.Len(t, list.GetPending(), 1, "still held")
	f.clock.Add(time.Millisecond)
	_, err = f.poll(r.GetDeviceCode())
	requireCode(t, err, apierr.CodeExpiredToken)

	tokens, err := f.store.ListTokens(context.Background(), "bob")
	require.NoError(t, err)
	var found bool
	for _, tok := range tokens {
		if tok.ID == resp.GetTokenInfo().GetId() {
			found = true
			require.False(t, tok.RevokedAt.IsZero(), "the orphan token is revoked")
		}
	}
	require.True(t, found)
}

// The background sweep revokes an uncollected token without any call.
func TestEnrollmentSweepRevokes(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	resp, err := f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), Member: ptr("bob")})
	require.NoError(t, err)
	f.clock.Add(enrollHold)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.run(ctx); close(done) }() // it sweeps at once
	require.Eventually(t, func() bool {
		_, err := f.store.GetEnrollmentByDeviceHash(context.Background(), hashCode(r.GetDeviceCode()))
		return errors.Is(err, store.ErrNotFound)
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	<-done
	tokens, err := f.store.ListTokens(context.Background(), "bob")
	require.NoError(t, err)
	for _, tok := range tokens {
		if tok.ID == resp.GetTokenInfo().GetId() {
			require.False(t, tok.RevokedAt.IsZero())
		}
	}
	_, err = f.store.GetEnrollmentByDeviceHash(context.Background(), hashCode(r.GetDeviceCode()))
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestEnrollmentApproveNewMember(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	req := &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), NewMember: &apiv1.NewEnrollmentMember{
		Name: "carol", Role: &apiv1.Role{Title: "dev"}, Permissions: []string{auth.ActivityRead}, Instructions: ptr("be kind"),
	}}
	// A name taken is 409 and leaves the record pending.
	req.NewMember.Name = "bob"
	_, err := f.ApproveEnrollment(f.admin, req)
	requireCode(t, err, apierr.CodeConflict)
	req.NewMember.Name = "carol"
	resp, err := f.ApproveEnrollment(f.admin, req)
	require.NoError(t, err)
	require.Equal(t, "carol", resp.GetMember().GetName())
	m, ok := f.team.Member("carol")
	require.True(t, ok)
	require.Equal(t, []string{auth.ActivityRead}, m.Permissions)
	require.Equal(t, "be kind", m.Instructions)
	require.Empty(t, m.TokenHash, "enrollment tokens live in the store only")
	got, err := f.poll(r.GetDeviceCode())
	require.NoError(t, err)
	require.Equal(t, "carol", got.GetMember())
	p, err := f.authn.Verify(context.Background(), auth.Credentials{Bearer: got.GetToken()})
	require.NoError(t, err)
	require.Equal(t, "carol", p.Member)
}

func TestEnrollmentApproveBadInput(t *testing.T) {
	f := mustEnrollment(t, true)
	code := f.mint(t).GetUserCode()
	for _, tc := range []struct {
		name string
		req  *apiv1.ApproveEnrollmentRequest
		want apierr.Code
	}{
		{"neither", &apiv1.ApproveEnrollmentRequest{UserCode: code}, apierr.CodeBadRequest},
		{"both", &apiv1.ApproveEnrollmentRequest{UserCode: code, Member: ptr("bob"), NewMember: &apiv1.NewEnrollmentMember{Name: "x"}}, apierr.CodeBadRequest},
		{"unknown member", &apiv1.ApproveEnrollmentRequest{UserCode: code, Member: ptr("nobody")}, apierr.CodeBadRequest},
		{"bad new name", &apiv1.ApproveEnrollmentRequest{UserCode: code, NewMember: &apiv1.NewEnrollmentMember{Name: "bad name"}}, apierr.CodeBadRequest},
		{"unknown preset", &apiv1.ApproveEnrollmentRequest{UserCode: code, NewMember: &apiv1.NewEnrollmentMember{Name: "dave", Permissions: []string{"nope"}}}, apierr.CodeBadRequest},
		{"no user code", &apiv1.ApproveEnrollmentRequest{Member: ptr("bob")}, apierr.CodeBadRequest},
		{"malformed user code", &apiv1.ApproveEnrollmentRequest{UserCode: "AAAA-AAAA", Member: ptr("bob")}, apierr.CodeBadRequest},
		{"unknown user code", &apiv1.ApproveEnrollmentRequest{UserCode: "BBBB-BBBB", Member: ptr("bob")}, apierr.CodeNotFound},
		{"empty label", &apiv1.ApproveEnrollmentRequest{UserCode: code, Member: ptr("bob"), Label: ptr("")}, apierr.CodeBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.ApproveEnrollment(f.admin, tc.req)
			requireCode(t, err, tc.want)
		})
	}
	list, err := f.ListPendingEnrollments(f.admin, nil)
	require.NoError(t, err)
	require.Equal(t, "pending", list.GetPending()[0].GetStatus(), "refusals change nothing")
	_, ok := f.team.Member("dave")
	require.False(t, ok)
}

// A caller authenticated by the token a record issued cannot decide it.
func TestEnrollmentSelfApproval(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	resp, err := f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), NewMember: &apiv1.NewEnrollmentMember{Name: "dev", Permissions: []string{auth.MembersManage}}})
	require.NoError(t, err)
	device := auth.WithPrincipal(context.Background(), &auth.Principal{
		Member: "dev", Permissions: []string{auth.MembersManage}, Via: auth.ViaBearer, TokenID: resp.GetTokenInfo().GetId(),
	})
	_, err = f.ApproveEnrollment(device, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), Member: ptr("dev")})
	requireCode(t, err, apierr.CodeForbidden)
	_, err = f.RejectEnrollment(device, &apiv1.RejectEnrollmentRequest{UserCode: r.GetUserCode()})
	requireCode(t, err, apierr.CodeForbidden)
	_, err = f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), Member: ptr("dev")})
	requireCode(t, err, apierr.CodeConflict, "another approver learns it is decided")
}

func TestEnrollmentReject(t *testing.T) {
	f := mustEnrollment(t, true)
	r := f.mint(t)
	_, err := f.RejectEnrollment(f.admin, &apiv1.RejectEnrollmentRequest{UserCode: r.GetUserCode(), Reason: ptr("unknown laptop")})
	require.NoError(t, err)
	for range 2 { // until the lifetime ends, every poll is told
		_, err = f.poll(r.GetDeviceCode())
		requireCode(t, err, apierr.CodeAccessDenied)
		require.Equal(t, "unknown laptop", apierr.Render(err).Body.ErrorDescription)
		f.clock.Add(10 * time.Second)
	}
	_, err = f.RejectEnrollment(f.admin, &apiv1.RejectEnrollmentRequest{UserCode: r.GetUserCode()})
	requireCode(t, err, apierr.CodeConflict)
	_, err = f.RejectEnrollment(f.admin, &apiv1.RejectEnrollmentRequest{UserCode: r.GetUserCode(), Reason: ptr(strings.Repeat("x", maxEnrollReason+1))})
	requireCode(t, err, apierr.CodeBadRequest)
	f.clock.Add(enrollLifetime)
	_, err = f.poll(r.GetDeviceCode())
	requireCode(t, err, apierr.CodeExpiredToken)
}

func TestEnrollmentRateLimit(t *testing.T) {
	f := mustEnrollment(t, true)
	for i := range auth.EnrollMintLimit {
		_, err := f.StartEnrollment(from("[2001:db8:1:2::1]:4000"), &apiv1.StartEnrollmentRequest{})
		require.NoError(t, err, "mint %d", i+1)
		f.clock.Add(time.Minute)
	}
	// Another address in the same /64 shares the count.
	_, err := f.StartEnrollment(from("[2001:db8:1:2::99]:4000"), &apiv1.StartEnrollmentRequest{})
	requireCode(t, err, apierr.CodeRateLimited)
	require.Equal(t, 50*time.Minute, apierr.Render(err).RetryAfter)
	_, err = f.StartEnrollment(from("[2001:db8:1:3::1]:4000"), &apiv1.StartEnrollmentRequest{})
	require.NoError(t, err, "another /64 is another client")
	_, err = f.StartEnrollment(from("198.51.100.1:4000"), &apiv1.StartEnrollmentRequest{})
	require.NoError(t, err)
	f.clock.Add(50 * time.Minute)
	_, err = f.StartEnrollment(from("[2001:db8:1:2::99]:4000"), &apiv1.StartEnrollmentRequest{})
	require.NoError(t, err, "the window slid")
}

// Many addresses cannot grow the table past the live cap.
func TestEnrollmentLiveCap(t *testing.T) {
	f := mustEnrollment(t, true)
	ctx := context.Background()
	now := f.clock.Now()
	for i := range maxLiveEnrollments {
		rec := store.Enrollment{
			ID: newID(), DeviceHash: hashCode(newID()), UserCode: userCodeN(i),
			Status: store.EnrollmentPending, CreatedAt: now, ExpiresAt: now.Add(enrollLifetime), Interval: enrollInterval,
		}
		require.NoError(t, f.store.CreateEnrollment(ctx, rec))
	}
	_, err := f.StartEnrollment(from("203.0.113.5:1"), &apiv1.StartEnrollmentRequest{})
	requireCode(t, err, apierr.CodeRateLimited)
	require.Equal(t, enrollLifetime, apierr.Render(err).RetryAfter)
	f.clock.Add(enrollLifetime)
	_, err = f.StartEnrollment(from("203.0.113.6:1"), &apiv1.StartEnrollmentRequest{})
	require.NoError(t, err, "expired records are swept and make room")
	n, err := f.store.CountEnrollments(ctx, f.clock.Now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// userCodeN is a distinct valid user code for each n.
func userCodeN(n int) string {
	out := []byte("BBBBBBBB")
	for i := len(out) - 1; n > 0; i-- {
		out[i] = userCodeAlphabet[n%len(userCodeAlphabet)]
		n /= len(userCodeAlphabet)
	}
	return string(out)
}

func TestEnrollmentWithoutKEK(t *testing.T) {
	f := mustEnrollment(t, false)
	r := f.mint(t) // minting needs no KEK
	_, err := f.ApproveEnrollment(f.admin, &apiv1.ApproveEnrollmentRequest{UserCode: r.GetUserCode(), Member: ptr("bob")})
	requireCode(t, err, apierr.CodeUnavailable)
	require.Equal(t, 503, apierr.Render(err).HTTPStatus)
	_, err = f.poll(r.GetDeviceCode())
	requireCode(t, err, apierr.CodeAuthorizationPending, "nothing was approved")
	tokens, err := f.store.ListTokens(context.Background(), "bob")
	require.NoError(t, err)
	require.Empty(t, tokens, "a refused approve stores nothing")
}

func TestParseUserCode(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"BCDF-GHJK", "BCDFGHJK", true},
		{"bcdf-ghjk", "BCDFGHJK", true},
		{"bcdfghjk", "BCDFGHJK", true},
		{" BcDf-GhJk ", "BCDFGHJK", true},
		{"BCDFG-HJK", "", false},
		{"BCDF--GHJK", "", false},
		{"AEIO-UBCD", "", false},
		{"BCDF-GHJ", "", false},
		{"BCDF-GHJKL", "", false},
		{"", "", false},
		{"BCDF-GHJ\u212a", "", false}, // Kelvin sign folds to K in Unicode, not here
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := ParseUserCode(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseUserCode(f *testing.F) {
	for _, s := range []string{"BCDF-GHJK", "bcdfghjk", "", "\x00", "BCDF-GHJ\u212a", "ÄÄÄÄ-ÄÄÄÄ", "--------", " zzzz-zzzz "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		code, ok := ParseUserCode(s)
		if !ok {
			require.Empty(t, code)
			return
		}
		require.Len(t, code, userCodeLen)
		for _, c := range code {
			require.Contains(t, userCodeAlphabet, string(c))
		}
		shown := FormatUserCode(code)
		again, ok := ParseUserCode(shown)
		require.True(t, ok, "the shown form parses")
		require.Equal(t, code, again, "round trip")
		again, ok = ParseUserCode(code)
		require.True(t, ok)
		require.Equal(t, code, again, "idempotent")
		lower, ok := ParseUserCode(strings.ToLower(shown))
		require.True(t, ok)
		require.Equal(t, code, lower, "case-insensitive")
	})
}

// TestClientIP: the address per-address limits count and approvers see.
// A trusted proxy's X-Forwarded-For names the client of a native call;
// anyone else's is ignored; on the gateway's connection the gateway's
// answer is taken, and a client cannot forge it on a native call.
func TestClientIP(t *testing.T) {
	proxies, err := clientaddr.Parse("127.0.0.1")
	require.NoError(t, err)
	c := &core{proxies: proxies}
	tcp := func(addr string) *peer.Peer {
		a, _ := net.ResolveTCPAddr("tcp", addr)
		return &peer.Peer{Addr: a, LocalAddr: a}
	}
	tests := []struct {
		name string
		peer *peer.Peer
		md   []string
		want string
	}{
		{"native, untrusted peer", tcp("192.0.2.10:5555"), nil, "192.0.2.10"},
		{"native, untrusted peer's header ignored", tcp("192.0.2.10:5555"), []string{"x-forwarded-for", "198.51.100.1"}, "192.0.2.10"},
		{"native, trusted proxy names the client", tcp("127.0.0.1:5555"), []string{"x-forwarded-for", "203.0.113.9, 198.51.100.1"}, "198.51.100.1"},
		{"native, trusted proxy without the header", tcp("127.0.0.1:5555"), nil, "127.0.0.1"},
		{"native, the gateway's key is not trusted", tcp("192.0.2.10:5555"), []string{ClientAddrMD, "198.51.100.1"}, "192.0.2.10"},
		{"gateway names the client", gatewayPeer, []string{ClientAddrMD, "198.51.100.1", "x-forwarded-for", "203.0.113.9"}, "198.51.100.1"},
		{"gateway without a client", gatewayPeer, []string{"x-forwarded-for", "203.0.113.9"}, ""},
		{"no peer", nil, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.peer != nil {
				ctx = peer.NewContext(ctx, tc.peer)
			}
			require.Equal(t, tc.want, c.clientIP(ctx, metadata.Pairs(tc.md...)))
		})
	}
	// Without trusted proxies nobody's header is read.
	require.Equal(t, "127.0.0.1", (&core{}).clientIP(peer.NewContext(context.Background(), tcp("127.0.0.1:1")), metadata.Pairs("x-forwarded-for", "198.51.100.1")))
}
