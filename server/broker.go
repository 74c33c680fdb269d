package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/hub"
	"svc/server/kek"
	"svc/server/teamconfig"
	"svc/store"
)

const logoutMethod = apiv1.Broker_Logout_FullMethodName

// TOTP parameters (spec: Authentication rule 1): 6 digits, 30 s steps, one
// step of skew either way.
const (
	totpDigits = otp.DigitsSix
	totpPeriod = 30
	totpSkew   = 1
)

// Limits of member fields.
const (
	maxRoleField     = 256
	maxInstructions  = 64 << 10
	maxPermissionArg = 64
)

// Broker implements apiv1.BrokerServer.
type Broker struct {
	apiv1.UnimplementedBrokerServer

	store   store.Store
	team    *Team
	kek     *kek.KEK // nil when no KEK is active
	limiter *auth.FailureLimiter
	version string
	now     func() time.Time
	log     *slog.Logger

	// lastStep remembers the last TOTP time step accepted per member, so a
	// code cannot be replayed within its validity window.
	stepMu   sync.Mutex
	lastStep map[string]int64

	// loginMu serializes TOTP logins; see login.
	loginMu sync.Mutex

	hub      *hub.Hub
	msgs     *messenger
	presence *presence
	push     *pushNotifier
	// purgeBlobs removes file content whose last reference went (a deleted
	// member's files); nil when the filesystem is disabled.
	purgeBlobs func(ctx context.Context, shas []string)
}

var _ apiv1.BrokerServer = (*Broker)(nil)

// Health implements apiv1.BrokerServer.
func (b *Broker) Health(context.Context, *apiv1.HealthRequest) (*apiv1.HealthResponse, error) {
	return &apiv1.HealthResponse{Status: "ok", Version: b.version}, nil
}

// GetBriefing implements apiv1.BrokerServer.
func (b *Broker) GetBriefing(ctx context.Context, _ *apiv1.GetBriefingRequest) (*apiv1.GetBriefingResponse, error) {
	p := mustPrincipal(ctx)
	me, ok := b.team.Member(p.Member)
	if !ok {
		return nil, auth.ErrUnauthenticated
	}
	team, presets := b.team.Info()
	pt := &apiv1.Team{Name: team.Name, Directive: team.Directive, Context: team.Context, PermissionPresets: map[string]*structpb.ListValue{}}
	for name, leaves := range presets {
		lv := &structpb.ListValue{}
		for _, l := range leaves {
			lv.Values = append(lv.Values, structpb.NewStringValue(l))
		}
		pt.PermissionPresets[name] = lv
	}
	open, err := b.openObjectives(ctx, me.Name)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.GetBriefingResponse{
		Member:         memberToProto(me, true),
		Team:           pt,
		OpenObjectives: open,
	}
	for _, m := range b.team.Members() {
		resp.Teammates = append(resp.Teammates, teammateToProto(m))
	}
	return resp, nil
}

// GetRoster implements apiv1.BrokerServer.
func (b *Broker) GetRoster(context.Context, *apiv1.GetRosterRequest) (*apiv1.GetRosterResponse, error) {
	resp := &apiv1.GetRosterResponse{}
	roles := map[string]*apiv1.Role{}
	for _, m := range b.team.Members() {
		resp.Teammates = append(resp.Teammates, teammateToProto(m))
		roles[m.Name] = roleToProto(m.Role)
	}
	resp.Connected = b.presence.list(b.hub.Connected, func(name string) (*apiv1.Role, bool) {
		r, ok := roles[name]
		return r, ok
	})
	return resp, nil
}

// ListMembers implements apiv1.BrokerServer.
func (b *Broker) ListMembers(ctx context.Context, _ *apiv1.ListMembersRequest) (*apiv1.ListMembersResponse, error) {
	manage := mustPrincipal(ctx).Has(auth.MembersManage)
	resp := &apiv1.ListMembersResponse{Members: []*apiv1.Member{}}
	for _, m := range b.team.Members() {
		resp.Members = append(resp.Members, memberToProto(m, manage))
	}
	return resp, nil
}

// CreateMember implements apiv1.BrokerServer.
func (b *Broker) CreateMember(ctx context.Context, req *apiv1.CreateMemberRequest) (*apiv1.CreateMemberResponse, error) {
	p := mustPrincipal(ctx)
	if !teamconfig.ValidName(req.GetName()) {
		return nil, invalid("name", "must be 1 to 64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit")
	}
	if err := validateRole(req.GetRole()); err != nil {
		return nil, err
	}
	if len(req.GetInstructions()) > maxInstructions {
		return nil, invalid("instructions", "at most %d bytes", maxInstructions)
	}
	_, presets := b.team.Info()
	perms, err := resolvePermissions(req.GetPermissions(), presets)
	if err != nil {
		return nil, err
	}
	plaintext, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	entry := teamconfig.Member{
		Name: req.GetName(), Role: roleFromProto(req.GetRole()), Instructions: req.GetInstructions(),
		Permissions: perms, RawPermissions: nonNil(slices.Clone(req.GetPermissions())),
		TokenHash: teamconfig.FormatTokenHash(hash),
	}
	now := b.now()
	err = b.team.change(ctx, func(f *teamconfig.File) error {
		if f.MemberIndex(entry.Name) >= 0 {
			return Errorf(CodeConflict, "member %q already exists", entry.Name)
		}
		f.Store.Members = append(f.Store.Members, entry)
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		// Rows left by an earlier member of this name (say, a crash between
		// a config write and its mirror) must never authenticate the new one.
		if err := tx.DeleteMember(ctx, entry.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := tx.PutMember(ctx, toStoreMember(entry, now)); err != nil {
			return err
		}
		return tx.CreateToken(ctx, store.Token{
			ID: newID(), Member: entry.Name, Hash: hash, Label: "initial", Origin: "bootstrap",
			CreatedAt: now, CreatedBy: p.Member,
		})
	})
	if err != nil {
		return nil, err
	}
	b.log.InfoContext(ctx, "member created", "member", entry.Name, "by", p.Member)
	return &apiv1.CreateMemberResponse{Member: teammateToProto(entry), Token: plaintext}, nil
}

// UpdateMember implements apiv1.BrokerServer.
func (b *Broker) UpdateMember(ctx context.Context, req *apiv1.UpdateMemberRequest) (*apiv1.UpdateMemberResponse, error) {
	if err := validateRole(req.GetRole()); err != nil {
		return nil, err
	}
	if len(req.GetInstructions()) > maxInstructions {
		return nil, invalid("instructions", "at most %d bytes", maxInstructions)
	}
	var perms, raw []string
	if req.Permissions != nil {
		for i, v := range req.GetPermissions().GetValues() {
			s, ok := v.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return nil, invalid(fmt.Sprintf("permissions[%d]", i), "must be a string")
			}
			raw = append(raw, s.StringValue)
		}
		_, presets := b.team.Info()
		var err error
		if perms, err = resolvePermissions(raw, presets); err != nil {
			return nil, err
		}
	}
	var updated teamconfig.Member
	err := b.team.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(req.GetName())
		if i < 0 {
			return Errorf(CodeNotFound, "member %q not found", req.GetName())
		}
		m := &f.Store.Members[i]
		if req.Role != nil {
			m.Role = roleFromProto(req.Role)
		}
		if req.Instructions != nil {
			m.Instructions = req.GetInstructions()
		}
		if req.Permissions != nil {
			m.Permissions, m.RawPermissions = perms, nonNil(raw)
		}
		updated = cloneMember(*m)
		return checkAdminRemains(f)
	}, func(ctx context.Context, tx store.Tx) error {
		return tx.PutMember(ctx, toStoreMember(updated, b.now()))
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.UpdateMemberResponse{Member: teammateToProto(updated)}, nil
}

// DeleteMember implements apiv1.BrokerServer.
func (b *Broker) DeleteMember(ctx context.Context, req *apiv1.DeleteMemberRequest) (*apiv1.DeleteMemberResponse, error) {
	var purged []string
	err := b.team.change(ctx, func(f *teamconfig.File) error {
		i := f.MemberIndex(req.GetName())
		if i < 0 {
			return Errorf(CodeNotFound, "member %q not found", req.GetName())
		}
		f.Store.Members = slices.Delete(f.Store.Members, i, i+1)
		return checkAdminRemains(f)
	}, func(ctx context.Context, tx store.Tx) error {
		// The member's files go with it, so a re-created name inherits
		// none; their content is purged once this commits.
		_, gone, err := tx.DeleteTree(ctx, "/"+req.GetName())
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		purged = gone
		// Deleting the mirror row cascades to the member's tokens and
		// sessions, so its credentials stop working with this response.
		if err := tx.DeleteMember(ctx, req.GetName()); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b.purgeBlobs != nil && len(purged) > 0 {
		b.purgeBlobs(ctx, purged)
	}
	b.hub.Disconnect(req.GetName(), nil)
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.DeleteMemberResponse{}, nil
}

// RotateToken implements apiv1.BrokerServer.
func (b *Broker) RotateToken(ctx context.Context, req *apiv1.RotateTokenRequest) (*apiv1.RotateTokenResponse, error) {
	p := mustPrincipal(ctx)
	if err := b.manageOrSelf(p, req.GetName()); err != nil {
		return nil, err
	}
	plaintext, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	now := b.now()
	tok := store.Token{ID: newID(), Member: req.GetName(), Hash: hash, Label: "rotated", Origin: "rotate", CreatedAt: now, CreatedBy: p.Member}
	// The config keeps the newest token's hash, so an in-memory store still
	// knows the member's credential after a restart.
	err = b.team.changeMember(ctx, req.GetName(), func(m *teamconfig.Member) error {
		m.TokenHash = teamconfig.FormatTokenHash(hash)
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		if _, err := tx.RevokeMemberTokens(ctx, req.GetName(), now); err != nil {
			return err
		}
		return tx.CreateToken(ctx, tok)
	})
	if err != nil {
		return nil, err
	}
	// Every token of the member is revoked: so are the streams they opened.
	b.hub.Disconnect(req.GetName(), isTokenCred)
	return &apiv1.RotateTokenResponse{Token: plaintext, TokenInfo: tokenToProto(tok)}, nil
}

// ListTokens implements apiv1.BrokerServer.
func (b *Broker) ListTokens(ctx context.Context, req *apiv1.ListTokensRequest) (*apiv1.ListTokensResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	tokens, err := b.store.ListTokens(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	now := b.now()
	resp := &apiv1.ListTokensResponse{Tokens: []*apiv1.TokenInfo{}}
	for _, t := range tokens {
		if t.Active(now) {
			resp.Tokens = append(resp.Tokens, tokenToProto(t))
		}
	}
	return resp, nil
}

// RevokeToken implements apiv1.BrokerServer.
func (b *Broker) RevokeToken(ctx context.Context, req *apiv1.RevokeTokenRequest) (*apiv1.RevokeTokenResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	notFound := Errorf(CodeNotFound, "no active token %q for member %q", req.GetId(), req.GetName())
	tokens, err := b.store.ListTokens(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(tokens, func(t store.Token) bool { return t.ID == req.GetId() && t.RevokedAt.IsZero() })
	if i < 0 {
		return nil, notFound
	}
	revoked := teamconfig.FormatTokenHash(tokens[i].Hash)
	err = b.team.changeMember(ctx, req.GetName(), func(m *teamconfig.Member) error {
		if m.TokenHash == revoked {
			m.TokenHash = ""
		}
		return nil
	}, func(ctx context.Context, tx store.Tx) error {
		_, err := tx.RevokeToken(ctx, req.GetName(), req.GetId(), b.now())
		if errors.Is(err, store.ErrNotFound) {
			return notFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	revokedCred := "token:" + req.GetId()
	b.hub.Disconnect(req.GetName(), func(c string) bool { return c == revokedCred })
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RevokeTokenResponse{}, nil
}

// EnrollTotp implements apiv1.BrokerServer.
func (b *Broker) EnrollTotp(ctx context.Context, req *apiv1.EnrollTotpRequest) (*apiv1.EnrollTotpResponse, error) {
	if err := b.manageOrSelf(mustPrincipal(ctx), req.GetName()); err != nil {
		return nil, err
	}
	if b.kek == nil {
		return nil, Errorf(CodeUnavailable, "no active KEK: TOTP secrets cannot be stored")
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
	if err := b.team.changeMember(ctx, req.GetName(), func(m *teamconfig.Member) error {
		m.TOTPSecret = sealed
		return nil
	}, nil); err != nil {
		return nil, err
	}
	b.stepMu.Lock()
	delete(b.lastStep, req.GetName())
	b.stepMu.Unlock()
	return &apiv1.EnrollTotpResponse{TotpSecret: key.Secret(), TotpUri: key.URL()}, nil
}

var totpCodeRE = regexp.MustCompile(`^[0-9]{6}$`)

// CreateSession implements apiv1.BrokerServer.
func (b *Broker) CreateSession(ctx context.Context, req *apiv1.CreateSessionRequest) (*apiv1.CreateSessionResponse, error) {
	if !totpCodeRE.MatchString(req.GetCode()) {
		return nil, invalid("code", "must be 6 digits")
	}
	matched, err := b.login(req)
	if err != nil {
		return nil, err
	}
	id, hash, err := auth.NewSessionID()
	if err != nil {
		return nil, err
	}
	now := b.now()
	s := store.Session{Hash: hash, Member: matched, CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(auth.SessionTTL)}
	if err := b.store.CreateSession(ctx, s); err != nil {
		return nil, err
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.SessionCookie(id, int(auth.SessionTTL/time.Second))))
	m, _ := b.team.Member(matched)
	return &apiv1.CreateSessionResponse{Session: sessionToProto(m, s.ExpiresAt)}, nil
}

// login matches a TOTP code to a member under the failure limits. Check,
// verification and the failure count happen under one lock, so a burst of
// parallel attempts cannot slip past a limit between check and count.
func (b *Broker) login(req *apiv1.CreateSessionRequest) (string, error) {
	b.loginMu.Lock()
	defer b.loginMu.Unlock()
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
	if wait := b.limiter.Check(named); wait > 0 {
		return "", rateLimited(wait)
	}
	for _, m := range candidates {
		if !b.verifyTOTP(m, req.GetCode()) {
			continue
		}
		// The codeless form is covered by the matched member's limit too
		// (CONTRACT §5): a locked-out member cannot log in by leaving out
		// the name.
		if wait := b.limiter.Check(m.Name); wait > 0 {
			return "", rateLimited(wait)
		}
		return m.Name, nil
	}
	b.limiter.Fail(named)
	return "", fmt.Errorf("%w: invalid code", auth.ErrUnauthenticated)
}

func rateLimited(wait time.Duration) error {
	return &Error{Code: CodeRateLimited, Message: "too many failed logins; retry later", RetryAfter: wait}
}

// verifyTOTP checks code against the member's secret for the current step
// and one step either side, in constant time, refusing a step at or before
// the last one accepted.
func (b *Broker) verifyTOTP(m teamconfig.Member, code string) bool {
	if b.kek == nil || !m.HasTOTP() {
		return false
	}
	secret, err := teamconfig.OpenTOTP(b.kek, m)
	if err != nil {
		b.log.Warn("totp secret unreadable; re-enroll the member", "member", m.Name, "err", err)
		return false
	}
	now := b.now()
	step := now.Unix() / totpPeriod
	opts := totp.ValidateOpts{Period: totpPeriod, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1}
	matchedStep := int64(-1)
	for d := int64(-totpSkew); d <= totpSkew; d++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix((step+d)*totpPeriod, 0), opts)
		if err != nil {
			return false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			matchedStep = step + d
		}
	}
	if matchedStep < 0 {
		return false
	}
	b.stepMu.Lock()
	defer b.stepMu.Unlock()
	if last, ok := b.lastStep[m.Name]; ok && matchedStep <= last {
		return false
	}
	b.lastStep[m.Name] = matchedStep
	return true
}

// GetSession implements apiv1.BrokerServer.
func (b *Broker) GetSession(ctx context.Context, _ *apiv1.GetSessionRequest) (*apiv1.GetSessionResponse, error) {
	p := mustPrincipal(ctx)
	m, ok := b.team.Member(p.Member)
	if !ok {
		return nil, auth.ErrUnauthenticated
	}
	return &apiv1.GetSessionResponse{Session: sessionToProto(m, p.ExpiresAt)}, nil
}

// Logout implements apiv1.BrokerServer.
func (b *Broker) Logout(ctx context.Context, _ *apiv1.LogoutRequest) (*apiv1.LogoutResponse, error) {
	p := mustPrincipal(ctx)
	if p.Via == auth.ViaSession {
		if err := b.store.DeleteSession(ctx, p.Session); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		ended := streamCred(p)
		b.hub.Disconnect(p.Member, func(c string) bool { return c == ended })
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", auth.ClearSessionCookie()))
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.LogoutResponse{}, nil
}

func sessionToProto(m teamconfig.Member, expires time.Time) *apiv1.Session {
	return &apiv1.Session{Member: m.Name, Role: roleToProto(m.Role), Permissions: nonNil(m.Permissions), ExpiresAt: optMS(expires)}
}

// manageOrSelf admits members.manage holders and the member itself, and
// answers 404 for an unknown member.
func (b *Broker) manageOrSelf(p *auth.Principal, name string) error {
	if p.Member != name && !p.Has(auth.MembersManage) {
		return fmt.Errorf("%w: requires members.manage or being %s", auth.ErrForbidden, name)
	}
	if _, ok := b.team.Member(name); !ok {
		return Errorf(CodeNotFound, "member %q not found", name)
	}
	return nil
}

func validateRole(r *apiv1.Role) error {
	if r == nil {
		return nil
	}
	if len(r.GetTitle()) > maxRoleField {
		return invalid("role.title", "at most %d bytes", maxRoleField)
	}
	if len(r.GetDescription()) > maxInstructions {
		return invalid("role.description", "at most %d bytes", maxInstructions)
	}
	return nil
}

func resolvePermissions(entries []string, presets map[string][]string) ([]string, error) {
	if len(entries) > maxPermissionArg {
		return nil, invalid("permissions", "at most %d entries", maxPermissionArg)
	}
	perms, err := auth.Resolve(entries, presets)
	var unknown *auth.UnknownPermissionError
	if errors.As(err, &unknown) {
		return nil, invalid("permissions", "unknown permission or preset %q", unknown.Name)
	}
	return perms, err
}

// mustPrincipal returns the caller; the interceptor guarantees one on every
// non-public method.
func mustPrincipal(ctx context.Context) *auth.Principal {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		panic("server: non-public method reached without a principal")
	}
	return p
}
