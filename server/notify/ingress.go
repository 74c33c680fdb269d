package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"svc/server/apierr"
	"svc/server/hooks"
	"svc/store"
)

// Receipt statuses (docs/HOOKS.md, States).
const (
	StatusDelivered = "delivered"
	StatusDropped   = "dropped"
	StatusRejected  = "rejected"
	StatusFiltered  = "filtered"
	StatusDuplicate = "duplicate"
	StatusPending   = "pending"
	StatusExpired   = "expired"
	StatusCoalesced = "coalesced"
)

// Statuses are every status a receipt can have, for a metric's labels.
var Statuses = []string{StatusDelivered, StatusDropped, StatusRejected, StatusFiltered, StatusDuplicate, StatusPending, StatusExpired, StatusCoalesced}

// What receipts keep: receipts that hold nothing pending go after
// ReceiptRetention (well past the 24 h dedupe window). Anyone can post a
// request that fails verification, so a rejected receipt keeps the head
// of its body only (RejectedBodyKept bytes), goes after
// RejectedRetention, and an endpoint keeps its newest RejectedKept of
// them: a sender without the secret cannot grow the store without bound
// (docs/HOOKS.md, Receipts of rejected requests).
const (
	RejectedBodyKept  = 512
	ReceiptRetention  = 7 * 24 * time.Hour
	RejectedRetention = 24 * time.Hour
	RejectedKept      = 1000
)

// hookDeliveryKind is the data.kind of the messages a delivery becomes.
const hookDeliveryKind = "hook_delivery"

// ErrRejected answers an ingress request that failed verification: the
// gateway answers a bare 401, with no body and no detail. Its receipt is
// committed.
var ErrRejected = errors.New("hook: verification failed")

// Result is the answer to an accepted ingress request: 202 {id, status}.
type Result struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// hookOverrides are an ingress request's per-delivery policy overrides.
type hookOverrides struct {
	ifOffline, ifBusy, level string
}

// parseHookOverrides reads the query overrides if_offline, if_busy and
// level (400 on a bad value or a repeated parameter).
func parseHookOverrides(q url.Values) (hookOverrides, error) {
	var o hookOverrides
	for _, f := range []struct {
		name string
		dst  *string
		ok   func(string) bool
		want string
	}{
		{"if_offline", &o.ifOffline, func(v string) bool { return v == "drop" || v == "queue" }, "drop or queue"},
		{"if_busy", &o.ifBusy, func(v string) bool { return v == "now" || v == "wait" }, "now or wait"},
		{"level", &o.level, func(v string) bool { _, ok := levelRank[v]; return ok }, "a LogLevel (debug, info, notice, warning, error, critical)"},
	} {
		vs, ok := q[f.name]
		if !ok {
			continue
		}
		if len(vs) != 1 || !f.ok(vs[0]) {
			return o, apierr.Invalid(f.name, "must be %s, once", f.want)
		}
		*f.dst = vs[0]
	}
	return o, nil
}

// Ingress takes one ingress request POST /hooks/<slug> from client (its
// address, "" when unknown): body holds at most MaxBody+1 bytes. In
// order: unknown slug 404, disabled 409, body over MaxBody 413, bad query
// overrides 400 (none of these is receipted); then verification. A
// verified request is charged to the endpoint's rate limit (429 over it,
// not receipted), then goes through dedupe, filters and delivery, each
// with its receipt. A failed one is charged to the failure budgets, of
// client and of the endpoint (429 over either, not receipted), and
// otherwise is ErrRejected with a rejected receipt. A result means the
// receipt and body are committed, with the messages when delivered.
func (s *Service) Ingress(ctx context.Context, client, slug string, query url.Values, h http.Header, body []byte) (Result, error) {
	if slug == "" || len(slug) > 32 {
		return Result{}, EndpointErr(store.ErrNotFound, slug)
	}
	e, err := Read(ctx, s.d.Store, slug)
	if err != nil {
		return Result{}, EndpointErr(err, slug)
	}
	if !e.Enabled {
		return Result{}, apierr.Errorf(apierr.CodeConflict, "notification endpoint %q is disabled", slug)
	}
	if len(body) > MaxBody {
		return Result{}, apierr.Errorf(apierr.CodePayloadTooLarge, "request body over %d bytes", MaxBody)
	}
	ov, err := parseHookOverrides(query)
	if err != nil {
		return Result{}, err
	}
	now := s.now()
	d := store.HookDelivery{
		ID: uuid.NewString(), Endpoint: slug, ReceivedAt: now, Size: len(body), Body: body,
		IfOffline: ov.ifOffline, IfBusy: ov.ifBusy, Level: ov.level,
	}
	// Verification comes before the endpoint's rate limit: were failures
	// charged to it, anyone could keep the endpoint answering 429 to its
	// real sender (docs/HOOKS.md, Limits).
	reason, secretHeader := s.verify(ctx, e, h, body, now)
	if reason != "" {
		if wait := s.allowReject(client, slug); wait > 0 {
			return Result{}, rateLimited(errTooManyRejects, wait)
		}
		d.Status, d.Reason = StatusRejected, reason
		// Anyone can post: what a sender without the secret makes the
		// broker keep is bounded. The head is enough to debug a signature.
		d.Body = d.Body[:min(len(d.Body), RejectedBodyKept)]
		if err := s.d.Commit.Commit(ctx, func(ctx context.Context, tx store.Tx) error {
			// With several brokers the failure counts in the store too,
			// with its receipt: the budgets hold for all brokers together,
			// and only a failure that is receipted costs a row.
			if err := s.chargeShared(ctx, tx, errTooManyRejects,
				sharedKey{rejectAddrKey + client, RejectAddrLimit}, sharedKey{rejectKey + slug, RejectLimit}); err != nil {
				return err
			}
			if err := addDelivery(ctx, tx, d); err != nil {
				return err
			}
			_, err := tx.PruneRejectedHookDeliveries(ctx, slug, now.Add(-RejectedRetention), RejectedKept)
			return err
		}); err != nil {
			return Result{}, err
		}
		s.count(StatusRejected)
		return Result{}, ErrRejected
	}
	if wait := s.limit.Allow(slug); wait > 0 {
		return Result{}, rateLimited(errRateLimit, wait)
	}
	if e.DedupeHeader != "" {
		d.DedupeKey = hooks.DedupeKey(h, e.DedupeHeader)
		// The header verification reads may carry the secret itself
		// (header-secret); receipts show dedupe keys, so such a key is
		// kept only as its hash.
		if d.DedupeKey != "" && strings.EqualFold(e.DedupeHeader, secretHeader) {
			sum := sha256.Sum256([]byte(d.DedupeKey))
			d.DedupeKey = "sha256:" + hex.EncodeToString(sum[:])
		}
	}
	// With several brokers the request counts in the store too, in the
	// transaction that stores its receipt.
	charge := func(ctx context.Context, tx store.Tx) error {
		return s.chargeShared(ctx, tx, errRateLimit, sharedKey{rateKey + slug, s.d.RateLimit})
	}
	d, err = s.deliver(ctx, e, d, true, "", charge)
	if err != nil {
		return Result{}, err
	}
	s.count(d.Status)
	return Result{ID: d.ID, Status: d.Status}, nil
}

// The ingress limits where several brokers serve the team
// (docs/DECISIONS.md, "Rate limits across brokers"). This broker's
// in-memory limiters answer first, so a flood they refuse costs the store
// nothing; what they let through is counted again in the store, with the
// other brokers' requests, in the transaction that stores its receipt.
// A request refused there stores nothing, its receipt included.
const (
	rateKey       = "hook:rate:"
	rejectKey     = "hook:reject:"
	rejectAddrKey = "hook:reject-addr:"

	errRateLimit      = "rate limit of this endpoint reached"
	errTooManyRejects = "too many failed verifications"
)

// sharedKey is one limit counted in the store: at most limit hits of key
// a minute.
type sharedKey struct {
	key   string
	limit int
}

// chargeShared counts a hit of every key in tx, when other brokers serve
// the team; over any one of them it answers 429 with msg, and tx's
// savepoint drops the hits counted before it.
func (s *Service) chargeShared(ctx context.Context, tx store.Tx, msg string, keys ...sharedKey) error {
	if s.d.Shared.On == nil || !s.d.Shared.On() {
		return nil
	}
	for _, k := range keys {
		wait, err := s.d.Shared.Count(ctx, tx, k.key, k.limit, time.Minute)
		if err != nil {
			return err
		}
		if wait > 0 {
			return rateLimited(msg, wait)
		}
	}
	return nil
}

// rateLimited answers 429 with msg and Retry-After wait; never receipted.
func rateLimited(msg string, wait time.Duration) error {
	return &apierr.Error{Code: apierr.CodeRateLimited, Message: msg, RetryAfter: wait}
}

// allowReject charges a failed verification to client's budget, then to
// the endpoint's, and answers zero or how long until one is allowed.
func (s *Service) allowReject(client, slug string) time.Duration {
	if wait := s.rejectAddrs.Allow(client); wait > 0 {
		return wait
	}
	return s.rejects.Allow(slug)
}

// countHook counts an inbound hook request by its receipt's status on
// arrival; the statuses are the broker's own, a small fixed set.

// addDelivery stores a receipt: an endpoint deleted meanwhile is 404.
func addDelivery(ctx context.Context, tx store.Tx, d store.HookDelivery) error {
	err := tx.AddHookDelivery(ctx, d)
	if errors.Is(err, store.ErrPrecondition) {
		return EndpointErr(store.ErrNotFound, d.Endpoint)
	}
	return err
}

// verifyHook checks a request against the endpoint's verification (its
// profile's when it names one) and answers "" or the rejection reason. It
// fails closed: no secret, a secret the KEK cannot open, or a profile gone
// reject.
func (s *Service) verify(ctx context.Context, e Endpoint, h http.Header, body []byte, now time.Time) (reason, header string) {
	a, sealed, purpose := e.Auth, e.Secret, EndpointPurpose(e.Slug)
	if e.AuthProfile != "" {
		p, err := s.d.Store.GetHookProfile(ctx, e.AuthProfile)
		if err != nil {
			s.d.Log.WarnContext(ctx, "hook profile unreadable: delivery rejected", "endpoint", e.Slug, "profile", e.AuthProfile, "err", err)
			return "profile unavailable", ""
		}
		a, sealed, purpose = p.Auth, p.Secret, ProfilePurpose(p.Slug)
	}
	var secret string
	if len(sealed) > 0 {
		plain, err := s.open(sealed, purpose)
		if err != nil {
			s.d.Log.WarnContext(ctx, "hook secret cannot be opened with the active KEK; set it again", "endpoint", e.Slug, "err", err)
			return "secret unavailable", ""
		}
		secret = string(plain)
	}
	ha := hooks.Auth{Kind: a.Kind, HeaderName: a.HeaderName, Prefix: a.Prefix}
	err := hooks.Verify(ha, secret, h, body, now)
	if err == nil {
		return "", ha.WithDefaults().HeaderName
	}
	var rj *hooks.Rejected
	if errors.As(err, &rj) && rj.Reason != "" {
		return rj.Reason, ""
	}
	return "verification failed", ""
}

// deliverHook runs a verified delivery through dedupe (when dedupe),
// filters, content, debounce and the per-target policy (hookpolicy.go).
// The receipt, the body, the messages delivered now and any pending row
// (queued, held, buffered) commit in one transaction; the receipt names
// the messages' ids.
//
// replayedBy names the member replaying a delivery that failed
// verification: its frame says it is unverified.
//
// charge (nil: none) runs first in the transaction: an error from it
// stores nothing and is deliver's answer (a limit counted in the store).
func (s *Service) deliver(ctx context.Context, e Endpoint, d store.HookDelivery, dedupe bool, replayedBy string, charge func(ctx context.Context, tx store.Tx) error) (store.HookDelivery, error) {
	filtered := false
	if len(e.Filters) > 0 && !hooks.Match(e.Filters, d.Body) {
		filtered = true
	}
	level := hookLevel(e, d.Level)
	var (
		item  hookItem
		route hookRoute
	)
	if !filtered {
		item = hookItem{ID: d.ID, ReceivedAt: d.ReceivedAt.UnixMilli(), Content: hooks.Content(e.Template, d.Body), ReplayedBy: replayedBy}
		route = s.routeHook(e)
	}
	debounce := e.Policy.DebounceMs > 0 && level != levelCritical
	out := d
	var t *hookTally
	err := s.d.Commit.CommitStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		out, t = d, s.newTally()
		if charge != nil {
			if err := charge(ctx, tx); err != nil {
				return nil, err
			}
		}
		if dedupe && d.DedupeKey != "" {
			seen, err := tx.HookDedupeSeen(ctx, e.Slug, d.DedupeKey, d.ReceivedAt.Add(-dedupeWindow))
			if err != nil {
				return nil, err
			}
			if seen {
				out.Status = StatusDuplicate
				return nil, addDelivery(ctx, tx, out)
			}
		}
		if filtered {
			out.Status = StatusFiltered
			return nil, addDelivery(ctx, tx, out)
		}
		out.Status = StatusPending
		if err := addDelivery(ctx, tx, out); err != nil {
			return nil, err
		}
		if debounce {
			if err := s.bufferHook(ctx, tx, t, e, out, item, level, route); err != nil {
				return nil, err
			}
		} else {
			// Only its own pending rows change the receipt from here.
			t.wrote(out)
			if err := s.dispatchHook(ctx, tx, t, e, out, []hookItem{item}, level, 0, route); err != nil {
				return nil, err
			}
			t.touch(out.ID)
		}
		if err := t.finish(ctx, tx); err != nil {
			return nil, err
		}
		if st, ok := t.status[out.ID]; ok {
			out.Status, out.Reason = st.status, st.reason
		}
		return t.msgs, nil
	}, func(ctx context.Context, tx store.Tx, msgs []store.Message) error {
		if err := t.stored(ctx, tx, msgs); err != nil {
			return err
		}
		out.MessageIDs = t.ids[out.ID]
		return nil
	})
	if err != nil {
		return store.HookDelivery{}, err
	}
	if t != nil && t.added > 0 {
		s.rowsAdded()
	}
	return out, nil
}

// Replay runs the stored raw body of receipt orig through the pipeline
// again with verification, dedupe and the rate limit skipped, under a
// fresh receipt (the overrides of the original apply again). A rejected
// receipt replays too, without its overrides, when its whole body was
// kept: replay is the manager's decision, and its frame says it is
// unverified and that by (the member replaying) replayed it.
func (s *Service) Replay(ctx context.Context, orig store.HookDelivery, by string) (store.HookDelivery, error) {
	e, err := Read(ctx, s.d.Store, orig.Endpoint)
	if err != nil {
		return store.HookDelivery{}, EndpointErr(err, orig.Endpoint)
	}
	if len(orig.Body) < orig.Size {
		return store.HookDelivery{}, apierr.Errorf(apierr.CodeConflict, "delivery %s was rejected and only the first %d bytes of its body were kept: it cannot be replayed", orig.ID, RejectedBodyKept)
	}
	d := store.HookDelivery{
		ID: uuid.NewString(), Endpoint: e.Slug, ReceivedAt: s.now(), Size: len(orig.Body), Body: orig.Body,
		IfOffline: orig.IfOffline, IfBusy: orig.IfBusy, Level: orig.Level, Reason: "replay of " + orig.ID,
	}
	if orig.Status == StatusRejected {
		// Its overrides came from a sender that did not verify.
		d.IfOffline, d.IfBusy, d.Level = "", "", ""
	}
	replayedBy := ""
	if orig.Status == StatusRejected {
		replayedBy = by
		if replayedBy == "" {
			replayedBy = "a member"
		}
	}
	return s.deliver(ctx, e, d, false, replayedBy, nil)
}

// EndpointErr names an unknown endpoint.
func EndpointErr(err error, slug string) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errorf(apierr.CodeNotFound, "no notification endpoint %q", slug)
	}
	return err
}
