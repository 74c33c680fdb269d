package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"svc/server/apierr"
	"svc/server/registry"
	"svc/server/wire"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/store"
)

// Device enrollment limits (docs/ENROLLMENT.md).
const (
	// enrollLifetime is how long a minted code pair may be approved.
	enrollLifetime = 300 * time.Second
	// enrollHold is how long an issued token waits for the device's poll.
	enrollHold = 5 * time.Minute
	// enrollInterval is the poll interval a device starts with.
	enrollInterval = 5 * time.Second
	// enrollSlowDown is what each slow_down adds to a device's interval.
	enrollSlowDown = 5 * time.Second
	// maxLiveEnrollments bounds the live records whatever the number of
	// client addresses: the per-address mint limit alone does not bound
	// the table against many addresses (an IPv6 block).
	maxLiveEnrollments = 1000
	// maxMintKeys bounds the addresses the mint limiter remembers.
	maxMintKeys = 100_000
	// enrollSweepEvery is how often the background sweep removes expired
	// records and revokes the tokens nobody collected.
	enrollSweepEvery = 15 * time.Second
	// Field bounds.
	maxEnrollLabel  = 128
	maxEnrollReason = 512
	maxUserAgent    = 256
	maxDeviceCode   = 256
)

// userCodeAlphabet is what a person types: 20 consonants without vowels
// (no words) and without look-alikes (RFC 8628 §6.1); 8 of them carry
// about 34.6 bits.
const (
	userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"
	userCodeLen      = 8
)

// Metadata the gateway sets on its local connection, trusted only
// there (like ConnKeyMD): the HTTP request's Host, scheme and User-Agent.
const (
	ForwardedHostMD   = "x-svc-host"
	ForwardedSchemeMD = "x-svc-scheme"
	// gatewayUserAgentMD is grpc-gateway's name for a forwarded
	// User-Agent header (the gateway's incoming header matcher).
	gatewayUserAgentMD = "grpcgateway-user-agent"
)

// Enrollment implements apiv1.EnrollmentServer: the device-code flow.
type Enrollment struct {
	apiv1.UnimplementedEnrollmentServer
	*core
	mints *auth.WindowLimiter
	// publicURL is the broker's base URL for verification URIs; empty
	// means the request's own scheme and host.
	publicURL string
}

var _ apiv1.EnrollmentServer = (*Enrollment)(nil)

func newEnrollment(c *core, publicURL string) *Enrollment {
	return &Enrollment{
		core:      c,
		mints:     auth.NewWindowLimiter(auth.EnrollMintLimit, auth.EnrollMintWindow, maxMintKeys, c.now),
		publicURL: strings.TrimRight(publicURL, "/"),
	}
}

// StartEnrollment implements apiv1.EnrollmentServer.
func (e *Enrollment) StartEnrollment(ctx context.Context, req *apiv1.StartEnrollmentRequest) (*apiv1.StartEnrollmentResponse, error) {
	label := req.GetLabelHint()
	if len(label) > maxEnrollLabel {
		return nil, apierr.Invalid("labelHint", "at most %d bytes", maxEnrollLabel)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ip := e.clientIP(ctx, md)
	key := mintKey(ip)
	if wait := e.mints.Allow(key); wait > 0 {
		return nil, errMintLimit(wait)
	}
	deviceCode, err := randomDeviceCode()
	if err != nil {
		return nil, err
	}
	now := e.now()
	rec := store.Enrollment{
		ID: newID(), DeviceHash: sha256.Sum256([]byte(deviceCode)), LabelHint: label,
		SourceIP: ip, UserAgent: userAgent(ctx, md), Status: store.EnrollmentPending,
		CreatedAt: now, ExpiresAt: now.Add(enrollLifetime), Interval: enrollInterval,
	}
	// A user code is unique among stored records; a collision (rare: 20^8
	// codes) draws again.
	for range 8 {
		if rec.UserCode, err = newUserCode(); err != nil {
			return nil, err
		}
		err = e.store.WithTx(ctx, func(tx store.Tx) error {
			if err := e.sweep(ctx, tx, now); err != nil {
				return err
			}
			if err := e.mintShared(ctx, tx, key, now); err != nil {
				return err
			}
			n, err := tx.CountEnrollments(ctx, now)
			if err != nil {
				return err
			}
			if n >= maxLiveEnrollments {
				// Rare: list them to tell when the oldest expires.
				live, err := tx.ListEnrollments(ctx, now)
				if err != nil {
					return err
				}
				return &apierr.Error{Code: apierr.CodeRateLimited, Message: "too many pending enrollments", RetryAfter: live[0].ExpiresAt.Sub(now)}
			}
			if err := tx.CreateEnrollment(ctx, rec); err != nil {
				return err
			}
			return e.mintedShared(ctx, tx, key, now)
		})
		if !errors.Is(err, store.ErrConflict) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	base := e.baseURL(ctx, md)
	shown := FormatUserCode(rec.UserCode)
	return &apiv1.StartEnrollmentResponse{
		DeviceCode: deviceCode, UserCode: shown,
		VerificationUri:         base + "/ui/enroll",
		VerificationUriComplete: base + "/ui/enroll?" + url.Values{"code": {shown}}.Encode(),
		ExpiresIn:               int32(enrollLifetime / time.Second),
		Interval:                int32(enrollInterval / time.Second),
	}, nil
}

// pollOutcome is what a poll found, decided inside its transaction.
type pollOutcome struct {
	err    *apierr.Error
	token  string
	member string
}

// PollEnrollment implements apiv1.EnrollmentServer.
func (e *Enrollment) PollEnrollment(ctx context.Context, req *apiv1.PollEnrollmentRequest) (*apiv1.PollEnrollmentResponse, error) {
	code := req.GetDeviceCode()
	if code == "" {
		return nil, apierr.Invalid("deviceCode", "is required")
	}
	if len(code) > maxDeviceCode {
		return nil, apierr.Invalid("deviceCode", "at most %d bytes", maxDeviceCode)
	}
	h := store.DeviceCodeHash(sha256.Sum256([]byte(code)))
	now := e.now()
	// Polls are public: a code that names no record is answered from the
	// read pool, so guessing never queues behind the one writer.
	if _, err := e.store.GetEnrollmentByDeviceHash(ctx, h); errors.Is(err, store.ErrNotFound) {
		return nil, apierr.Errorf(apierr.CodeExpiredToken, "the device code is unknown, expired or already used")
	} else if err != nil {
		return nil, err
	}
	var out pollOutcome
	err := e.store.WithTx(ctx, func(tx store.Tx) error {
		out = pollOutcome{}
		if err := e.sweep(ctx, tx, now); err != nil {
			return err
		}
		rec, err := tx.GetEnrollmentByDeviceHash(ctx, h)
		if errors.Is(err, store.ErrNotFound) || err == nil && !rec.Live(now) {
			out.err = apierr.Errorf(apierr.CodeExpiredToken, "the device code is unknown, expired or already used")
			return nil
		}
		if err != nil {
			return err
		}
		if !rec.LastPollAt.IsZero() && now.Sub(rec.LastPollAt) < rec.Interval {
			rec.Interval += enrollSlowDown
			rec.LastPollAt = now
			out.err = apierr.Errorf(apierr.CodeSlowDown, "polled before the interval elapsed; poll every %d s", int(rec.Interval/time.Second))
			return tx.UpdateEnrollment(ctx, rec)
		}
		rec.LastPollAt = now
		switch rec.Status {
		case store.EnrollmentApproved:
			plain, err := e.open([]byte(rec.SealedToken), enrollTokenPurpose(rec.ID))
			if errors.Is(err, registry.ErrNoKEK) {
				return err
			}
			if err != nil {
				return fmt.Errorf("enrollment %s: %w", rec.ID, err)
			}
			out.token, out.member = string(plain), rec.Member
			// One read: the plaintext goes with the record, in the
			// transaction that read it.
			return tx.DeleteEnrollment(ctx, rec.ID)
		case store.EnrollmentRejected:
			out.err = &apierr.Error{Code: apierr.CodeAccessDenied, Message: "the enrollment was rejected", Description: rec.Reason}
		default:
			out.err = apierr.Errorf(apierr.CodeAuthorizationPending, "waiting for approval")
		}
		return tx.UpdateEnrollment(ctx, rec)
	})
	if err != nil {
		return nil, err
	}
	if out.err != nil {
		return nil, out.err
	}
	return &apiv1.PollEnrollmentResponse{Token: out.token, Member: out.member}, nil
}

// ListPendingEnrollments implements apiv1.EnrollmentServer.
func (e *Enrollment) ListPendingEnrollments(ctx context.Context, _ *apiv1.ListPendingEnrollmentsRequest) (*apiv1.ListPendingEnrollmentsResponse, error) {
	recs, err := e.store.ListEnrollments(ctx, e.now())
	if err != nil {
		return nil, err
	}
	resp := &apiv1.ListPendingEnrollmentsResponse{Pending: make([]*apiv1.PendingEnrollment, 0, len(recs))}
	for _, r := range recs {
		resp.Pending = append(resp.Pending, &apiv1.PendingEnrollment{
			UserCode: FormatUserCode(r.UserCode), LabelHint: r.LabelHint, SourceIp: r.SourceIP,
			UserAgent: r.UserAgent, CreatedAt: wire.MS(r.CreatedAt), ExpiresAt: wire.MS(r.ExpiresAt), Status: r.Status,
		})
	}
	return resp, nil
}

// ApproveEnrollment implements apiv1.EnrollmentServer.
func (e *Enrollment) ApproveEnrollment(ctx context.Context, req *apiv1.ApproveEnrollmentRequest) (*apiv1.ApproveEnrollmentResponse, error) {
	p := mustPrincipal(ctx)
	if e.kek == nil {
		return nil, registry.ErrNoKEK
	}
	code, err := parseUserCodeField(req.GetUserCode())
	if err != nil {
		return nil, err
	}
	if (req.Member == nil) == (req.NewMember == nil) {
		return nil, apierr.Invalid("member", "exactly one of member and newMember is required")
	}
	if req.Label != nil && (req.GetLabel() == "" || len(req.GetLabel()) > maxEnrollLabel) {
		return nil, apierr.Invalid("label", "must be 1 to %d bytes", maxEnrollLabel)
	}
	if req.Member != nil {
		if err := e.knownMember("member", req.GetMember()); err != nil {
			return nil, err
		}
	}
	now := e.now()
	rec, err := e.decidable(ctx, e.store, p, code, now)
	if err != nil {
		return nil, err
	}
	label := rec.LabelHint
	if req.Label != nil {
		label = req.GetLabel()
	}
	if label == "" {
		label = "enrolled device"
	}
	plaintext, hash, err := auth.NewToken()
	if err != nil {
		return nil, err
	}
	sealedJSON, err := e.seal([]byte(plaintext), enrollTokenPurpose(rec.ID))
	if err != nil {
		return nil, err
	}
	tok := store.Token{ID: newID(), Hash: hash, Label: label, Origin: "enroll", CreatedAt: now, CreatedBy: p.Member}
	// hold marks the record approved in the transaction that stores the
	// token, after checking again that nobody decided it meanwhile.
	hold := func(ctx context.Context, tx store.Tx, member string) error {
		cur, err := e.decidable(ctx, tx, p, code, now)
		if err != nil {
			return err
		}
		if cur.ID != rec.ID {
			return apierr.Errorf(apierr.CodeNotFound, "no pending enrollment %s", FormatUserCode(code))
		}
		cur.Status, cur.Member, cur.TokenID, cur.SealedToken = store.EnrollmentApproved, member, tok.ID, string(sealedJSON)
		cur.ExpiresAt = now.Add(enrollHold)
		return tx.UpdateEnrollment(ctx, cur)
	}
	var member *apiv1.Teammate
	if nm := req.GetNewMember(); nm != nil {
		tok.Member = nm.GetName()
		entry, err := e.createMember(ctx, &apiv1.CreateMemberRequest{
			Name: nm.GetName(), Role: nm.GetRole(), Instructions: nm.Instructions, Permissions: nm.GetPermissions(),
		}, tok, false, func(ctx context.Context, tx store.Tx) error {
			return hold(ctx, tx, nm.GetName())
		})
		if err != nil {
			return nil, err
		}
		member = teammateToProto(entry)
	} else {
		name := req.GetMember()
		tok.Member = name
		err := e.store.WithTx(ctx, func(tx store.Tx) error {
			if err := tx.CreateToken(ctx, tok); err != nil {
				if errors.Is(err, store.ErrPrecondition) {
					return apierr.Invalid("member", "no member %q", name)
				}
				return err
			}
			return hold(ctx, tx, name)
		})
		if err != nil {
			return nil, err
		}
		m, ok := e.team.Member(name)
		if !ok {
			return nil, apierr.Invalid("member", "no member %q", name)
		}
		member = teammateToProto(m)
	}
	e.log.InfoContext(ctx, "enrollment approved", "member", tok.Member, "by", p.Member, "token_id", tok.ID)
	return &apiv1.ApproveEnrollmentResponse{Member: member, TokenInfo: tokenToProto(tok)}, nil
}

// RejectEnrollment implements apiv1.EnrollmentServer.
func (e *Enrollment) RejectEnrollment(ctx context.Context, req *apiv1.RejectEnrollmentRequest) (*apiv1.RejectEnrollmentResponse, error) {
	p := mustPrincipal(ctx)
	code, err := parseUserCodeField(req.GetUserCode())
	if err != nil {
		return nil, err
	}
	if len(req.GetReason()) > maxEnrollReason {
		return nil, apierr.Invalid("reason", "at most %d bytes", maxEnrollReason)
	}
	now := e.now()
	err = e.store.WithTx(ctx, func(tx store.Tx) error {
		if err := e.sweep(ctx, tx, now); err != nil {
			return err
		}
		rec, err := e.decidable(ctx, tx, p, code, now)
		if err != nil {
			return err
		}
		rec.Status, rec.Reason = store.EnrollmentRejected, req.GetReason()
		return tx.UpdateEnrollment(ctx, rec)
	})
	if err != nil {
		return nil, err
	}
	e.log.InfoContext(ctx, "enrollment rejected", "by", p.Member)
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RejectEnrollmentResponse{}, nil
}

// enrollmentReader is what decidable reads through: the store or a
// transaction.
type enrollmentReader interface {
	GetEnrollmentByUserCode(ctx context.Context, userCode string) (store.Enrollment, error)
}

// decidable returns the live record of code for p to approve or reject:
// 404 when there is none (unknown or expired), 403 when p authenticated
// with the token this record issued (a device cannot decide its own
// enrollment), 409 when it is already approved or rejected.
func (e *Enrollment) decidable(ctx context.Context, r enrollmentReader, p *auth.Principal, code string, now time.Time) (store.Enrollment, error) {
	rec, err := r.GetEnrollmentByUserCode(ctx, code)
	if errors.Is(err, store.ErrNotFound) || err == nil && !rec.Live(now) {
		return rec, apierr.Errorf(apierr.CodeNotFound, "no pending enrollment %s", FormatUserCode(code))
	}
	if err != nil {
		return rec, err
	}
	if p.Via == auth.ViaBearer && rec.TokenID != "" && rec.TokenID == p.TokenID {
		return rec, fmt.Errorf("%w: a device cannot decide its own enrollment", auth.ErrForbidden)
	}
	if rec.Status != store.EnrollmentPending {
		return rec, apierr.Errorf(apierr.CodeConflict, "enrollment %s is already %s", FormatUserCode(code), rec.Status)
	}
	return rec, nil
}

// sweep deletes the records expired at now and revokes the tokens of
// approvals whose hold ended unread: nobody holds their plaintext, so none
// may stay usable.
func (e *Enrollment) sweep(ctx context.Context, tx store.Tx, now time.Time) error {
	gone, err := tx.DeleteExpiredEnrollments(ctx, now)
	if err != nil {
		return err
	}
	for _, r := range gone {
		if r.Status != store.EnrollmentApproved || r.TokenID == "" {
			continue
		}
		if _, err := tx.RevokeToken(ctx, r.Member, r.TokenID, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		e.log.InfoContext(ctx, "enrollment token revoked: the device never collected it", "member", r.Member, "token_id", r.TokenID)
	}
	return nil
}

// run sweeps expired records every enrollSweepEvery until ctx ends, so an
// uncollected token is revoked even when no enrollment call comes.
func (e *Enrollment) run(ctx context.Context) {
	t := time.NewTicker(enrollSweepEvery)
	defer t.Stop()
	for {
		err := e.store.WithTx(ctx, func(tx store.Tx) error { return e.sweep(ctx, tx, e.now()) })
		if err != nil && ctx.Err() == nil {
			e.log.WarnContext(ctx, "enrollment sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// enrollTokenPurpose binds a sealed token to its record.
func enrollTokenPurpose(id string) string { return "svc/enrollment-token/" + id }

// baseURL is the broker's base for verification URIs: the configured
// public URL, else the scheme and host the client reached.
func (e *Enrollment) baseURL(ctx context.Context, md metadata.MD) string {
	if e.publicURL != "" {
		return e.publicURL
	}
	scheme, host := "http", ""
	pr, ok := peer.FromContext(ctx)
	if ok && fromGateway(pr) {
		if v := md.Get(ForwardedSchemeMD); len(v) > 0 && v[0] == "https" {
			scheme = "https"
		}
		if v := md.Get(ForwardedHostMD); len(v) > 0 {
			host = v[0]
		}
	} else {
		if ok && pr.AuthInfo != nil {
			if _, tls := pr.AuthInfo.(credentials.TLSInfo); tls {
				scheme = "https"
			}
		}
		if v := md.Get(":authority"); len(v) > 0 {
			host = v[0]
		}
	}
	if !validHost(host) {
		host = "localhost"
		if ok && pr.LocalAddr != nil && !fromGateway(pr) {
			host = pr.LocalAddr.String()
		}
	}
	return scheme + "://" + host
}

// validHost accepts a host[:port] a URL can carry and nothing that could
// change the URL's shape.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	u, err := url.Parse("http://" + h)
	return err == nil && u.Host == h && u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == "" &&
		!strings.ContainsAny(h, " \t\\%")
}

// ClientAddrMD carries the HTTP client's address from the gateway to the
// services over the local connection: the TCP peer's, or the client a
// trusted proxy named. It is trusted only there (like ConnKeyMD).
const ClientAddrMD = "x-svc-client"

// forwardedForMD is X-Forwarded-For as a native gRPC client (a proxy in
// front of the broker) sends it; read only from a trusted proxy.
const forwardedForMD = "x-forwarded-for"

// clientIP is the caller's address: the one the gateway named on its local
// connection, else the TCP peer of a native gRPC call, or the client it
// names in X-Forwarded-For when that peer is a trusted proxy
// (docs/DECISIONS.md, Reverse proxies). A client-sent X-Forwarded-For
// from anyone else is never read.
func (c *core) clientIP(ctx context.Context, md metadata.MD) string {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.Addr == nil {
		return ""
	}
	if fromGateway(pr) {
		if v := md.Get(ClientAddrMD); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	ap, err := netip.ParseAddrPort(pr.Addr.String())
	if err != nil {
		return ""
	}
	return c.proxies.Client(ap.Addr(), md.Get(forwardedForMD)).String()
}

// mintKey is the mint limiter's key of an address: IPv6 clients are
// counted per /64, which one subscriber usually holds whole.
func mintKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}

// userAgent is the caller's User-Agent, made valid UTF-8 and cut to
// maxUserAgent bytes: the REST client's header as the gateway forwarded
// it, or a native client's gRPC user agent.
func userAgent(ctx context.Context, md metadata.MD) string {
	key := "user-agent"
	if pr, ok := peer.FromContext(ctx); ok && fromGateway(pr) {
		key = gatewayUserAgentMD
	}
	v := md.Get(key)
	if len(v) == 0 {
		return ""
	}
	return apierr.TruncateUTF8(strings.ToValidUTF8(v[0], "\uFFFD"), maxUserAgent)
}

func randomDeviceCode() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// newUserCode draws a normalized user code uniformly from the alphabet.
func newUserCode() (string, error) {
	out := make([]byte, userCodeLen)
	for i := range out {
		out[i] = userCodeAlphabet[randIndex(len(userCodeAlphabet))]
	}
	return string(out), nil
}

// randIndex returns a uniform index below n (n <= 256) by rejection.
func randIndex(n int) int {
	limit := 256 - 256%n
	var b [1]byte
	for {
		_, _ = rand.Read(b[:])
		if int(b[0]) < limit {
			return int(b[0]) % n
		}
	}
}

// ParseUserCode normalizes a user code as a person may type it: any case,
// with or without the dash (and the spaces a copy may bring around it). It
// returns the 8 alphabet characters, or false.
func ParseUserCode(s string) (string, bool) {
	if len(s) > 3*userCodeLen {
		return "", false
	}
	s = strings.TrimSpace(s)
	if len(s) == userCodeLen+1 && s[userCodeLen/2] == '-' {
		s = s[:userCodeLen/2] + s[userCodeLen/2+1:]
	}
	if len(s) != userCodeLen {
		return "", false
	}
	out := make([]byte, userCodeLen)
	for i := range userCodeLen {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if !strings.ContainsRune(userCodeAlphabet, rune(c)) {
			return "", false
		}
		out[i] = c
	}
	return string(out), true
}

// FormatUserCode shows a normalized user code as XXXX-XXXX.
func FormatUserCode(code string) string {
	if len(code) != userCodeLen {
		return code
	}
	return code[:userCodeLen/2] + "-" + code[userCodeLen/2:]
}

func parseUserCodeField(s string) (string, error) {
	if s == "" {
		return "", apierr.Invalid("userCode", "is required")
	}
	code, ok := ParseUserCode(s)
	if !ok {
		return "", apierr.Invalid("userCode", "must be 8 letters from %s, as XXXX-XXXX or without the dash", userCodeAlphabet)
	}
	return code, nil
}
