package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
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
	e, err := c.store.GetHookEndpoint(ctx, slug)
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
	if reason := c.verifyHook(ctx, e, h, body, now); reason != "" {
		d.Status, d.Reason = hookRejected, reason
		if err := c.commit(ctx, func(ctx context.Context, tx store.Tx) error {
			return addDelivery(ctx, tx, d)
		}); err != nil {
			return HookResult{}, err
		}
		return HookResult{}, ErrHookRejected
	}
	if e.DedupeHeader != "" {
		d.DedupeKey = c.hooks.DedupeKey(h, e.DedupeHeader)
	}
	d, err = c.deliverHook(ctx, e, d, true)
	if err != nil {
		return HookResult{}, err
	}
	return HookResult{ID: d.ID, Status: d.Status}, nil
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
func (c *core) verifyHook(ctx context.Context, e store.HookEndpoint, h http.Header, body []byte, now time.Time) string {
	a, sealed, purpose := e.Auth, e.Secret, hookEndpointPurpose(e.Slug)
	if e.AuthProfile != "" {
		p, err := c.store.GetHookProfile(ctx, e.AuthProfile)
		if err != nil {
			c.log.WarnContext(ctx, "hook profile unreadable: delivery rejected", "endpoint", e.Slug, "profile", e.AuthProfile, "err", err)
			return "profile unavailable"
		}
		a, sealed, purpose = p.Auth, p.Secret, hookProfilePurpose(p.Slug)
	}
	var secret string
	if len(sealed) > 0 {
		plain, err := c.open(sealed, purpose)
		if err != nil {
			c.log.WarnContext(ctx, "hook secret cannot be opened with the active KEK; set it again", "endpoint", e.Slug, "err", err)
			return "secret unavailable"
		}
		secret = string(plain)
	}
	err := c.hooks.Verify(hooks.Auth{Kind: a.Kind, HeaderName: a.HeaderName, Prefix: a.Prefix}, secret, h, body, now)
	if err == nil {
		return ""
	}
	var rj *hooks.Rejected
	if errors.As(err, &rj) && rj.Reason != "" {
		return rj.Reason
	}
	return "verification failed"
}

// hookRoute is where one delivery goes: the member copies and channels,
// resolved before the commit (the team may not be read inside it).
type hookRoute struct {
	members  []string // member targets that get a copy now
	dropped  []string // member targets dropped (offline, ifOffline drop)
	channels []string // channel ids
}

// routeHook resolves e's targets against the team and presence. Policy
// beyond immediate delivery is not built yet (docs/HOOKS.md): ifOffline
// drop drops an offline member's copy (no live stream); queue, ifBusy wait
// and debounce deliver now.
func (c *core) routeHook(e store.HookEndpoint, ov hookOverrides) hookRoute {
	ifOffline := policyOf(e).IfOffline
	if ov.ifOffline != "" {
		ifOffline = ov.ifOffline
	}
	var r hookRoute
	for _, t := range targetsOf(e) {
		switch {
		case t.Channel != "":
			r.channels = append(r.channels, t.Channel)
		case t.Member != "":
			if _, ok := c.team.Member(t.Member); !ok {
				r.dropped = append(r.dropped, t.Member)
			} else if ifOffline == "drop" && c.hub.Connected(t.Member) == 0 {
				r.dropped = append(r.dropped, t.Member)
			} else {
				r.members = append(r.members, t.Member)
			}
		}
	}
	return r
}

// deliverHook runs a verified delivery through dedupe (when dedupe),
// filters, content and frame, and delivers it now: one message per member
// copy on hook:<slug> and one per channel target on chan:<id>. The
// receipt, the body and the messages commit in one transaction; the
// receipt names the messages' ids.
func (c *core) deliverHook(ctx context.Context, e store.HookEndpoint, d store.HookDelivery, dedupe bool) (store.HookDelivery, error) {
	filtered := false
	if fs := filtersOf(e); len(fs) > 0 && !c.hooks.Match(fs, d.Body) {
		filtered = true
	}
	ov := hookOverrides{ifOffline: d.IfOffline, ifBusy: d.IfBusy, level: d.Level}
	level := e.Level
	if pl := policyOf(e).Level; pl != "" {
		level = pl
	}
	if ov.level != "" {
		level = ov.level
	}
	var (
		text  string
		route hookRoute
	)
	if !filtered {
		text = c.hooks.Render(hooks.Frame{Slug: e.Slug, DisplayName: e.DisplayName, Items: []hooks.Item{{
			DeliveryID: d.ID, Received: d.ReceivedAt, Content: c.hooks.Content(e.Template, d.Body),
		}}})
		route = c.routeHook(e, ov)
	}
	title := e.DisplayName
	if title == "" {
		title = e.Slug
	}
	from, hookThread := "hook:"+e.Slug, "hook:"+e.Slug
	data := func(thread string) ([]byte, error) {
		return json.Marshal(map[string]any{
			"kind": hookDeliveryKind, "thread": thread, "endpoint": e.Slug, "deliveryIds": []string{d.ID},
		})
	}
	out := d
	res := c.msgs.changeStored(ctx, func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		out = d
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
		var msgs []store.Message
		for _, m := range route.members {
			b, err := data(hookThread)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, store.Message{From: from, To: m, Thread: hookThread, Title: title, Body: text, Level: level, Data: b, Recipients: []string{m}})
		}
		for _, id := range route.channels {
			ch, err := tx.GetChannel(ctx, id)
			if errors.Is(err, store.ErrNotFound) || (err == nil && !ch.ArchivedAt.IsZero()) {
				continue // a channel gone or archived since: nobody to reach
			}
			if err != nil {
				return nil, err
			}
			members, err := tx.ListChannelMembers(ctx, id)
			if err != nil {
				return nil, err
			}
			var to []string
			for _, m := range members {
				to = append(to, m.Member)
			}
			if len(to) == 0 {
				continue
			}
			b, err := data("chan:" + id)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, store.Message{From: from, Thread: "chan:" + id, Title: title, Body: text, Level: level, Data: b, Recipients: to})
		}
		out.Status = hookDelivered
		if len(msgs) == 0 {
			out.Status, out.Reason = hookDropped, "no target reachable"
			if len(route.dropped) > 0 {
				out.Reason = "every member target offline (ifOffline drop)"
			}
		}
		return msgs, addDelivery(ctx, tx, out)
	}, func(ctx context.Context, tx store.Tx, msgs []store.Message) error {
		out.MessageIDs = make([]string, len(msgs))
		for i, m := range msgs {
			out.MessageIDs[i] = formatMessageID(m.Seq)
		}
		return tx.SetHookDeliveryMessages(ctx, out.ID, out.MessageIDs)
	})
	if res.err != nil {
		return store.HookDelivery{}, res.err
	}
	return out, nil
}

// ReplayNotificationDelivery implements apiv1.NotificationsServer: the
// stored raw body runs through the pipeline again with verification,
// dedupe and the rate limit skipped, under a fresh receipt (the
// overrides of the original apply again). A rejected receipt replays
// too: replay is the manager's decision.
func (n *Notifications) ReplayNotificationDelivery(ctx context.Context, req *apiv1.ReplayNotificationDeliveryRequest) (*apiv1.ReplayNotificationDeliveryResponse, error) {
	if err := validDeliveryID(req.GetId()); err != nil {
		return nil, err
	}
	orig, err := n.store.GetHookDelivery(ctx, req.GetId())
	if err != nil {
		return nil, deliveryErr(err, req.GetId())
	}
	e, err := n.store.GetHookEndpoint(ctx, orig.Endpoint)
	if err != nil {
		return nil, endpointErr(err, orig.Endpoint)
	}
	d := store.HookDelivery{
		ID: newID(), Endpoint: e.Slug, ReceivedAt: n.now(), Size: len(orig.Body), Body: orig.Body,
		IfOffline: orig.IfOffline, IfBusy: orig.IfBusy, Level: orig.Level, Reason: "replay of " + orig.ID,
	}
	d, err = n.deliverHook(ctx, e, d, false)
	if err != nil {
		return nil, err
	}
	return &apiv1.ReplayNotificationDeliveryResponse{Delivery: deliveryToProto(d, false)}, nil
}
