package server

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"svc/server/apierr"
	"svc/server/wire"
	"sync"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/teamconfig"
	"svc/store"
)

// TOTP parameters (RFC 6238 as authenticator apps read it): 6 digits, 30 s steps, one
// step of skew either way.
const (
	totpDigits = otp.DigitsSix
	totpPeriod = 30
	totpSkew   = 1
)

// brokerSessions serves human sign-in: TOTP enrollment, login and
// sessions.
type brokerSessions struct {
	*core
	limiter *auth.FailureLimiter

	// lastStep remembers the last TOTP time step accepted per member, so a
	// code cannot be replayed within its validity window.
	stepMu   sync.Mutex
	lastStep map[string]int64

	// loginMu serializes TOTP logins with each other and with TOTP
	// enrollment: a login verified against a secret stores its session
	// before a re-enrollment can end the member's sessions. See login.
	loginMu sync.Mutex
}

func newBrokerSessions(c *core) *brokerSessions {
	return &brokerSessions{core: c, limiter: auth.NewFailureLimiter(c.now), lastStep: map[string]int64{}}
}

// EnrollTotp implements apiv1.BrokerServer.
func (b *brokerSessions) EnrollTotp(ctx context.Context, req *apiv1.EnrollTotpRequest) (*apiv1.EnrollTotpResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	if b.kek == nil {
		return nil, apierr.Errorf(apierr.CodeUnavailable, "no active KEK: TOTP secrets cannot be stored")
	}
	team, _ := b.team.Info()
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer: "svc " + team.Name, AccountName: req.GetName(), Period: totpPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1,
	})
	if err != nil {
		return nil, err
	}
	sealed, err := teamconfig.SealTOTP(b.kek, req.GetName(), key.Secret())
	if err != nil {
		return nil, err
	}
	// The authenticator bound before is gone, and so is every session it
	// opened: they end in the same transaction as the config write, and no
	// login verified against the old secret is still on its way to a
	// session (loginMu).
	b.loginMu.Lock()
	defer b.loginMu.Unlock()
	rev := b.revocation(req.GetName(), revokeSessions)
	if err := b.team.changeMember(ctx, req.GetName(), func(m *teamconfig.Member) error {
		m.TOTPSecret = sealed
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.DeleteMemberSessions(ctx, req.GetName()); err != nil {
			return err
		}
		if b.clustered() {
			// The new authenticator's codes start afresh on every broker.
			if err := tx.ForgetTOTPStep(ctx, req.GetName()); err != nil {
				return err
			}
		}
		return rev.log(ctx, tx)
	}); err != nil {
		return nil, err
	}
	rev.apply()
	b.stepMu.Lock()
	delete(b.lastStep, req.GetName())
	b.stepMu.Unlock()
	return &apiv1.EnrollTotpResponse{TotpSecret: key.Secret(), TotpUri: key.URL()}, nil
}

var totpCodeRE = regexp.MustCompile(`^[0-9]{6}$`)

// CreateSession implements apiv1.BrokerServer.
func (b *brokerSessions) CreateSession(ctx context.Context, req *apiv1.CreateSessionRequest) (*apiv1.CreateSessionResponse, error) {
	if !totpCodeRE.MatchString(req.GetCode()) {
		return nil, apierr.Invalid("code", "must be 6 digits")
	}
	id, hash, err := auth.NewSessionID()
	if err != nil {
		return nil, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	source := mintKey(b.clientIP(ctx, md))
	b.loginMu.Lock()
	matched, err := b.loginOnce(ctx, req, source)
	if err != nil {
		b.loginMu.Unlock()
		return nil, err
	}
	now := b.now()
	s := store.Session{ID: newID(), Hash: hash, Member: matched, CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(auth.SessionTTL)}
	err = b.store.CreateSession(ctx, s)
	b.loginMu.Unlock()
	if err != nil {
		return nil, err
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.SessionCookie(id, int(auth.SessionTTL/time.Second))))
	m, _ := b.team.Member(matched)
	return &apiv1.CreateSessionResponse{Session: sessionToProto(m, s.ExpiresAt)}, nil
}

// login matches a TOTP code to a member under the failure limits; source
// is the client's address key ("" when unknown). The caller holds loginMu:
// check, verification and the failure count happen under it, so a burst
// of parallel attempts cannot slip past a limit between check and count.
//
// Every failure counts globally, for the member named (when it is one) and
// for the source. The global limit covers the codeless form and names that
// are no member's; an attempt naming a real member is covered by that
// member's limit and the source's, so strangers' failures elsewhere cannot
// lock a member out (docs/DECISIONS.md, "Login limits: strangers cannot
// lock a member out").
func (b *brokerSessions) login(lim loginLimits, req *apiv1.CreateSessionRequest, source string) (string, error) {
	named := ""
	var candidates []teamconfig.Member
	if req.Member != nil {
		// Only known names get a per-member counter, so memory stays bounded.
		if m, ok := b.team.Member(req.GetMember()); ok {
			named = m.Name
			candidates = append(candidates, m)
		}
	} else {
		candidates = b.team.Members()
	}
	attempt := auth.Attempt{Member: named, Source: source, Global: named == ""}
	if wait, err := lim.check(attempt); err != nil || wait > 0 {
		return "", cmp.Or(err, rateLimited(wait))
	}
	for _, m := range candidates {
		if ok, err := b.verifyTOTP(lim, m, req.GetCode()); err != nil {
			return "", err
		} else if !ok {
			continue
		}
		// The codeless form is covered by the matched member's limit too
		// (docs/DECISIONS.md, Sessions and TOTP): a locked-out member
		// cannot log in by leaving out the name.
		if wait, err := lim.check(auth.Attempt{Member: m.Name}); err != nil || wait > 0 {
			return "", cmp.Or(err, rateLimited(wait))
		}
		return m.Name, nil
	}
	if err := lim.fail(attempt); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%w: invalid code", auth.ErrUnauthenticated)
}

func rateLimited(wait time.Duration) error {
	return &apierr.Error{Code: apierr.CodeRateLimited, Message: "too many failed logins; retry later", RetryAfter: wait}
}

// verifyTOTP checks code against the member's secret for the current step
// and one step either side, in constant time, refusing a step at or before
// the last one accepted (lim keeps it).
func (b *brokerSessions) verifyTOTP(lim loginLimits, m teamconfig.Member, code string) (bool, error) {
	if b.kek == nil || !m.HasTOTP() {
		return false, nil
	}
	secret, err := teamconfig.OpenTOTP(b.kek, m)
	if err != nil {
		b.log.Warn("totp secret unreadable; re-enroll the member", "member", m.Name, "err", err)
		return false, nil
	}
	now := b.now()
	step := now.Unix() / totpPeriod
	opts := totp.ValidateOpts{Period: totpPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1}
	matchedStep := int64(-1)
	for d := int64(-totpSkew); d <= totpSkew; d++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix((step+d)*totpPeriod, 0), opts)
		if err != nil {
			return false, nil
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			matchedStep = step + d
		}
	}
	if matchedStep < 0 {
		return false, nil
	}
	return lim.claimStep(m.Name, matchedStep)
}

// GetSession implements apiv1.BrokerServer.
func (b *brokerSessions) GetSession(ctx context.Context, _ *apiv1.GetSessionRequest) (*apiv1.GetSessionResponse, error) {
	p := mustPrincipal(ctx)
	m, ok := b.team.Member(p.Member)
	if !ok {
		return nil, auth.ErrUnauthenticated
	}
	return &apiv1.GetSessionResponse{Session: sessionToProto(m, p.ExpiresAt)}, nil
}

// ListSessions implements apiv1.BrokerServer: the member's live sessions,
// oldest first, the caller's own marked current.
func (b *brokerSessions) ListSessions(ctx context.Context, req *apiv1.ListSessionsRequest) (*apiv1.ListSessionsResponse, error) {
	p := mustPrincipal(ctx)
	if err := b.manageOrSelf(p, req.GetName()); err != nil {
		return nil, err
	}
	sessions, err := b.store.ListSessions(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	now := b.now()
	resp := &apiv1.ListSessionsResponse{Sessions: []*apiv1.SessionInfo{}}
	for _, s := range sessions {
		if !s.ExpiresAt.IsZero() && !now.Before(s.ExpiresAt) {
			continue // expired; the hourly sweep deletes it
		}
		resp.Sessions = append(resp.Sessions, &apiv1.SessionInfo{
			Id: s.ID, CreatedAt: wire.MS(s.CreatedAt), LastSeenAt: wire.MS(s.LastSeenAt), ExpiresAt: wire.OptMS(s.ExpiresAt),
			Current: p.Via == auth.ViaSession && p.Session == s.Hash,
		})
	}
	return resp, nil
}

// RevokeSession implements apiv1.BrokerServer: the session ends at once,
// with its live streams; ending the caller's own also clears its cookie.
func (b *brokerSessions) RevokeSession(ctx context.Context, req *apiv1.RevokeSessionRequest) (*apiv1.RevokeSessionResponse, error) {
	p := mustPrincipal(ctx)
	if err := b.manageOrSelf(p, req.GetName()); err != nil {
		return nil, err
	}
	// The delete and its revocations log entry commit together
	// (clusterrevoke.go).
	var (
		s   store.Session
		rev *revocation
	)
	err := b.store.WithTx(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.DeleteSessionByID(ctx, req.GetName(), req.GetId()); err != nil {
			return err
		}
		rev = b.revocation(s.Member, revokeCred+sessionCred(s.Hash))
		return rev.log(ctx, tx)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(apierr.CodeNotFound, "no session %q of member %q", req.GetId(), req.GetName())
	}
	if err != nil {
		return nil, err
	}
	rev.apply()
	if p.Via == auth.ViaSession && p.Session == s.Hash {
		_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.ClearSessionCookie()))
	}
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RevokeSessionResponse{}, nil
}

// Logout implements apiv1.BrokerServer.
func (b *brokerSessions) Logout(ctx context.Context, _ *apiv1.LogoutRequest) (*apiv1.LogoutResponse, error) {
	p := mustPrincipal(ctx)
	if p.Via == auth.ViaSession {
		rev := b.revocation(p.Member, revokeCred+streamCred(p))
		err := b.store.WithTx(ctx, func(tx store.Tx) error {
			if err := tx.DeleteSession(ctx, p.Session); err != nil {
				return err
			}
			return rev.log(ctx, tx)
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		rev.apply()
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.ClearSessionCookie()))
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.LogoutResponse{}, nil
}

func sessionToProto(m teamconfig.Member, expires time.Time) *apiv1.Session {
	return &apiv1.Session{Member: m.Name, Role: roleToProto(m.Role), Permissions: nonNil(m.Permissions), ExpiresAt: wire.OptMS(expires)}
}
