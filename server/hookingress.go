package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hooks"
	"svc/store"
)

// MaxHookBody is the most bytes an ingress body may carry (hooks.md:
// Limits); the gateway reads one byte more to tell an oversized body.
const MaxHookBody = maxHookBody

// Receipt statuses (hooks.md: Delivery receipt) this branch produces.
const (
	hookDelivered = "delivered"
	hookDropped   = "dropped"
	hookRejected  = "rejected"
	hookFiltered  = "filtered"
	hookDuplicate = "duplicate"
	hookPending   = "pending"
	hookExpired   = "expired"
	hookCoalesced = "coalesced"
)

// What receipts keep: a rejected delivery keeps the head of its body
// only, and receipts that hold nothing pending go after
// hookReceiptRetention (well past the 24 h dedupe window), so a sender
// cannot grow the store without bound.
const (
	hookRejectedBody     = 4 << 10
	hookReceiptRetention = 7 * 24 * time.Hour
)

// hookDeliveryKind is the data.kind of the messages a delivery becomes.
const hookDeliveryKind = "hook_delivery"

// ErrHookRejected answers an ingress request that failed verification: the
// gateway answers a bare 401, with no body and no detail. Its receipt is
// committed.
var ErrHookRejected = errors.New("hook: verification failed")

// HookResult is the answer to an accepted ingress request: 202 {id, status}.
type HookResult struct {
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
		{"level", &o.level, func(v string) bool { return levels[v] }, "a LogLevel (debug, info, notice, warning, error, critical)"},
	} {
		vs, ok := q[f.name]
		if !ok {
			continue
		}
		if len(vs) != 1 || !f.ok(vs[0]) {
			return o, invalid(f.name, "must be %s, once", f.want)
		}
		*f.dst = vs[0]
	}
	return o, nil
}

// Hook takes one ingress request POST /hooks/<slug>: body holds at most
// MaxHookBody+1 bytes. In order: unknown slug 404, disabled 409, body over
// MaxHookBody 413, bad query overrides 400, over the endpoint's rate
// limit 429 (none of these is receipted); then verification
// (ErrHookRejected, with a rejected receipt), dedupe, filters and
// delivery, each with its receipt. A result means the receipt and body
// are committed, with the messages when delivered.
func (s *Server) Hook(ctx context.Context, slug string, query url.Values, h http.Header, body []byte) (HookResult, error) {
	return s.core.hook(ctx, slug, query, h, body)
}

func (c *core) hook(ctx context.Context, slug string, query url.Values, h http.Header, body []byte) (HookResult, error) {
	if validRegistrySlug("slug", slug) != nil {
		return HookResult{}, endpointErr(store.ErrNotFound, slug)
	}
	e, err := readEndpoint(ctx, c.store, slug)
	if err != nil {
		return HookResult{}, endpointErr(err, slug)
	}
	if !e.Enabled {
		return HookResult{}, Errorf(CodeConflict, "notification endpoint %q is disabled", slug)
	}
	if len(body) > maxHookBody {
		return HookResult{}, Errorf(CodePayloadTooLarge, "request body over %d bytes", maxHookBody)
	}
	ov, err := parseHookOverrides(query)
	if err != nil {
		return HookResult{}, err
	}
	if wait := c.hookLimit.Allow(slug); wait > 0 {
		return HookResult{}, &Error{Code: CodeRateLimited, Message: "rate limit of this endpoint reached", RetryAfter: wait}
	}
	now := c.now()
	d := store.HookDelivery{
		ID: newID(), Endpoint: slug, ReceivedAt: now, Size: len(body), Body: body,
		IfOffline: ov.ifOffline, IfBusy: ov.ifBusy, Level: ov.level,
	}
	reason, secretHeader := c.verifyHook(ctx, e, h, body, now)
	if reason != "" {
		d.Status, d.Reason = hookRejected, reason
		// Anyone can post: what a sender without the secret makes the
		// broker keep is bounded. The head is enough to debug a signature.
		d.Body = d.Body[:min(len(d.Body), hookRejectedBody)]
		if err := c.commit(ctx, func(ctx context.Context, tx store.Tx) error {
			return addDelivery(ctx, tx, d)
		}); err != nil {
			return HookResult{}, err
		}
		c.countHook(hookRejected)
		return HookResult{}, ErrHookRejected
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
	d, err = c.deliverHook(ctx, e, d, true)
	if err != nil {
		return HookResult{}, err
	}
	c.countHook(d.Status)
	return HookResult{ID: d.ID, Status: d.Status}, nil
}

// countHook counts an inbound hook request by its receipt's status on
// arrival; the statuses are the broker's own, a small fixed set.
func (c *core) countHook(status string) {
	if c.metrics != nil {
		c.metrics.hooked(status)
	}
}

// addDelivery stores a receipt: an endpoint deleted meanwhile is 404.
func addDelivery(ctx context.Context, tx store.Tx, d store.HookDelivery) error {
	err := tx.AddHookDelivery(ctx, d)
	if errors.Is(err, store.ErrPrecondition) {
		return endpointErr(store.ErrNotFound, d.Endpoint)
	}
	return err
}

// verifyHook checks a request against the endpoint's verification (its
// profile's when it names one) and answers "" or the rejection reason. It
// fails closed: no secret, a secret the KEK cannot open, or a profile gone
// reject.
func (c *core) verifyHook(ctx context.Context, e hookEndpoint, h http.Header, body []byte, now time.Time) (reason, header string) {
	a, sealed, purpose := e.Auth, e.Secret, hookEndpointPurpose(e.Slug)
	if e.AuthProfile != "" {
		p, err := c.store.GetHookProfile(ctx, e.AuthProfile)
		if err != nil {
			c.log.WarnContext(ctx, "hook profile unreadable: delivery rejected", "endpoint", e.Slug, "profile", e.AuthProfile, "err", err)
			return "profile unavailable", ""
		}
		a, sealed, purpose = p.Auth, p.Secret, hookProfilePurpose(p.Slug)
	}
	var secret string
	if len(sealed) > 0 {
		plain, err := c.open(sealed, purpose)
		if err != nil {
			c.log.WarnContext(ctx, "hook secret cannot be opened with the active KEK; set it again", "endpoint", e.Slug, "err", err)
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
func (c *core) deliverHook(ctx context.Context, e hookEndpoint, d store.HookDelivery, dedupe bool) (store.HookDelivery, error) {
	filtered := false
	if len(e.filters) > 0 && !hooks.Match(e.filters, d.Body) {
		filtered = true
	}
	level := hookLevel(e, d.Level)
	var (
		item  hookItem
		route hookRoute
	)
	if !filtered {
		item = hookItem{ID: d.ID, ReceivedAt: d.ReceivedAt.UnixMilli(), Content: hooks.Content(e.Template, d.Body)}
		route = c.routeHook(e)
	}
	debounce := e.policy.DebounceMs > 0 && level != levelCritical
	out := d
	var t *hookTally
	res := c.msgs.changeStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		out, t = d, newHookTally()
		if dedupe && d.DedupeKey != "" {
			seen, err := tx.HookDedupeSeen(ctx, e.Slug, d.DedupeKey, d.ReceivedAt.Add(-hookDedupeWindow))
			if err != nil {
				return nil, err
			}
			if seen {
				out.Status = hookDuplicate
				return nil, addDelivery(ctx, tx, out)
			}
		}
		if filtered {
			out.Status = hookFiltered
			return nil, addDelivery(ctx, tx, out)
		}
		out.Status = hookPending
		if err := addDelivery(ctx, tx, out); err != nil {
			return nil, err
		}
		if debounce {
			if err := c.bufferHook(ctx, tx, t, e, out, item, level, route); err != nil {
				return nil, err
			}
		} else {
			if err := c.dispatchHook(ctx, tx, t, e, out, []hookItem{item}, level, 0, route); err != nil {
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
	if res.err != nil {
		return store.HookDelivery{}, res.err
	}
	if t != nil && t.added > 0 {
		c.hookSched.poke()
	}
	return out, nil
}

// ReplayNotificationDelivery implements apiv1.NotificationsServer: the
// stored raw body runs through the pipeline again with verification,
// dedupe and the rate limit skipped, under a fresh receipt (the
// overrides of the original apply again). A rejected receipt replays
// too, without its overrides, when its whole body was kept: replay is the
// manager's decision.
func (n *Notifications) ReplayNotificationDelivery(ctx context.Context, req *apiv1.ReplayNotificationDeliveryRequest) (*apiv1.ReplayNotificationDeliveryResponse, error) {
	if err := validDeliveryID(req.GetId()); err != nil {
		return nil, err
	}
	orig, err := n.store.GetHookDelivery(ctx, req.GetId())
	if err != nil {
		return nil, deliveryErr(err, req.GetId())
	}
	e, err := readEndpoint(ctx, n.store, orig.Endpoint)
	if err != nil {
		return nil, endpointErr(err, orig.Endpoint)
	}
	if len(orig.Body) < orig.Size {
		return nil, Errorf(CodeConflict, "delivery %s was rejected and only the first %d bytes of its body were kept: it cannot be replayed", orig.ID, hookRejectedBody)
	}
	d := store.HookDelivery{
		ID: newID(), Endpoint: e.Slug, ReceivedAt: n.now(), Size: len(orig.Body), Body: orig.Body,
		IfOffline: orig.IfOffline, IfBusy: orig.IfBusy, Level: orig.Level, Reason: "replay of " + orig.ID,
	}
	if orig.Status == hookRejected {
		// Its overrides came from a sender that did not verify.
		d.IfOffline, d.IfBusy, d.Level = "", "", ""
	}
	d, err = n.deliverHook(ctx, e, d, false)
	if err != nil {
		return nil, err
	}
	return &apiv1.ReplayNotificationDeliveryResponse{Delivery: deliveryToProto(d, false)}, nil
}
