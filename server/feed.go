package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/hub"
	"svc/store"
)

// replayPage is how many stored messages a resuming stream reads at once;
// it bounds the memory of a resume (a message is at most ~200 KiB).
const replayPage = 100

// streamRetryAfter is the Retry-After of a stream refused because the
// member holds the most it may.
const streamRetryAfter = 5 * time.Second

// errFellBehind ends a stream the hub cut off.
var errFellBehind = apierr.Errorf(apierr.CodeUnavailable, "subscriber fell behind; resume with the last id")

// errCredentialExpired ends a stream whose credential (a federation JWT)
// reached its exp.
var errCredentialExpired = apierr.Errorf(apierr.CodeUnauthenticated, "the credential this stream was opened with expired: reconnect with a fresh one")

// Feed is one live stream of committed items (a member's messages, a
// member's activity): the items after a position, replayed from the store
// in order, then live ones from the hub, each exactly once.
type Feed struct {
	sub     *hub.Subscription
	last    int64
	backlog []*hub.Event
	live    bool // the store has nothing more after last; read the hub
	page    pager
	ids     *hub.IDs
	// gauge, when set, counts the feed as a live stream of its kind until
	// the first Close.
	gauge  *atomic.Int64
	closed atomic.Bool
	// onClose, when set, runs once, at the first Close.
	onClose func()
	// cuts, when set, count the feed once, at its first Close, when the
	// broker cut it (svc_streams_cut_total).
	cuts *cutCounters
	// reason is why the broker cut the feed, the first reason given; empty
	// when it did not.
	reason atomic.Pointer[string]
	// writes, when set, counts the writes that carried the feed's events to
	// an SSE client (svc_sse_writes_total).
	writes prometheus.Counter
}

// Why the broker cut a stream off (the reason label of
// svc_streams_cut_total; docs/PERFORMANCE.md).
const (
	// cutSlowReader: the stream fell a whole queue behind what was
	// published to it.
	cutSlowReader = "slow_reader"
	// cutWriteTimeout: one write to the client (an SSE write, a gRPC Send)
	// did not complete within its timeout.
	cutWriteTimeout = "write_timeout"
)

// cut records why the broker ends the feed; the first reason stands.
func (f *Feed) cut(reason string) { f.reason.CompareAndSwap(nil, &reason) }

// WriteTimedOut records that the feed ends because a write to its client
// did not complete in time: its Close counts it as cut for that reason.
func (f *Feed) WriteTimedOut() { f.cut(cutWriteTimeout) }

// Wrote counts one write that carried the feed's events to its SSE client
// (one or more events in one write; pings and the ready event are not
// counted), so that svc_deliveries_total over svc_sse_writes_total reads
// as events per write.
func (f *Feed) Wrote() {
	if f.writes != nil {
		f.writes.Inc()
	}
}

// cutReason is why the broker cut the feed, empty when it did not: a
// reason recorded, else slow_reader when the hub cut it off (its reader
// may have seen only the failed write that followed).
func (f *Feed) cutReason() string {
	if r := f.reason.Load(); r != nil {
		return *r
	}
	if f.sub.FellBehind() {
		return cutSlowReader
	}
	return ""
}

// pager reads a page of stored items after position after, oldest first:
// the events to deliver, the last position it read (items it skips, such
// as an earlier member's messages, count too), and whether more may follow.
type pager func(ctx context.Context, after int64, n int) (evs []*hub.Event, last int64, more bool, err error)

// newFeed returns a feed over sub: with resume, the items page reads after
// position after, then live ones; without, live ones only. The caller
// subscribed before calling, so nothing falls between replay and live.
func newFeed(sub *hub.Subscription, after int64, resume bool, page pager, ids *hub.IDs) *Feed {
	return &Feed{sub: sub, last: after, live: !resume, page: page, ids: ids}
}

// The wire ids of each kind of feed, one value each: an event's SSE frame
// is shared between the streams whose ids are the same value
// (hub.Event.Frame).
var (
	messageIDs  = &hub.IDs{Format: formatMessageID}
	activityIDs = &hub.IDs{Format: formatActivityID}
	teamIDs     = &hub.IDs{Format: formatTeamID}
)

// ID is the wire id of an event of this feed: the SSE id a client resumes
// from.
func (f *Feed) ID(ev *hub.Event) string { return f.ids.Format(ev.Seq) }

// Frame is ev as a server-sent event named name on this feed, as
// hub.AppendFrame renders it with ID(ev), rendered once per event and kind
// of feed and shared by every stream of that kind (read-only).
func (f *Feed) Frame(ev *hub.Event, name string) []byte { return ev.Frame(f.ids, name) }

// attach opens a feed of the caller's messages: with resume, every message
// after position after, then live ones; without, live ones only. The live
// subscription is taken before the store is read, so no message falls
// between replay and live delivery.
func (c *core) attach(ctx context.Context, p *auth.Principal, after int64, resume bool) (*Feed, error) {
	member := p.Member
	sub, err := c.subscribe(c.hub, member, p)
	if err != nil {
		return nil, err
	}
	if resume && after > 0 {
		// An id past the newest message comes from before a store reset (the
		// in-memory default starts over at every restart): everything in this
		// store is new to the client, so replay it all rather than skip ids
		// until they catch up.
		newest, err := c.store.LastMessageSeq(ctx)
		if err != nil {
			sub.Close()
			return nil, err
		}
		if after > newest {
			after = 0
		}
	}
	var since int64
	if resume {
		if since, err = c.memberSince(ctx, member); err != nil {
			sub.Close()
			return nil, err
		}
	}
	return newFeed(sub, after, resume, func(ctx context.Context, after int64, n int) ([]*hub.Event, int64, bool, error) {
		msgs, err := c.store.MessagesFor(ctx, member, after, n)
		if err != nil || len(msgs) == 0 {
			return nil, after, false, err
		}
		evs := make([]*hub.Event, 0, len(msgs))
		for _, m := range msgs {
			// What was addressed to an earlier member of this name is not
			// this member's.
			if m.Seq > since {
				evs = append(evs, hub.NewEvent(m.Seq, messageToProto(m)))
			}
		}
		return evs, msgs[len(msgs)-1].Seq, len(msgs) == n, nil
	}, messageIDs), nil
}

// subscribe takes a live subscription of h for key, held by p and opened
// with p's credential (so revoking it ends the stream), mapping the hub's
// refusals.
func (c *core) subscribe(h *hub.Hub, key string, p *auth.Principal) (*hub.Subscription, error) {
	sub, err := h.SubscribeAs(key, p.Member, streamCred(p))
	if err == nil && p.Via == auth.ViaJWT && !p.ExpiresAt.IsZero() {
		// Nothing revokes a JWT: its exp is the one bound on what it can
		// read (docs/FEDERATION.md, "Token lifetime").
		sub.EndAt(p.ExpiresAt)
	}
	if err == nil && c.clustered() {
		if err := c.credentialLive(p); err != nil {
			sub.Close()
			return nil, err
		}
	}
	switch {
	case errors.Is(err, hub.ErrClosed):
		return nil, errShuttingDown
	case errors.Is(err, hub.ErrTooMany):
		return nil, &apierr.Error{Code: apierr.CodeRateLimited, RetryAfter: streamRetryAfter,
			Message: fmt.Sprintf("%s holds %d live streams of this kind, the most one member may: close one first", p.Member, c.maxStreams)}
	}
	return sub, err
}

// streamCred names the credential a stream was opened with, so revoking it
// ends the stream.
func streamCred(p *auth.Principal) string {
	switch p.Via {
	case auth.ViaSession:
		return sessionCred(p.Session)
	case auth.ViaJWT:
		// No revocation names a JWT; the member's removal ends its streams.
		return "jwt:" + p.JWTHash
	}
	return "token:" + p.TokenID
}

// sessionCred names a session as the credential of its streams.
func sessionCred(h store.SessionHash) string { return "session:" + hex.EncodeToString(h[:]) }

// isTokenCred reports whether a stream credential is a bearer token.
func isTokenCred(c string) bool { return strings.HasPrefix(c, "token:") }

// isSessionCred reports whether a stream credential is a session.
func isSessionCred(c string) bool { return strings.HasPrefix(c, "session:") }

// Close ends the feed's live subscription. The first Close is when the
// stream really ended: it stops counting as live, and counts as cut when
// the broker cut it.
func (f *Feed) Close() {
	f.sub.Close()
	if !f.closed.CompareAndSwap(false, true) {
		return
	}
	if f.gauge != nil {
		f.gauge.Add(-1)
	}
	if f.cuts != nil {
		f.cuts.count(f.cutReason())
	}
	if f.onClose != nil {
		f.onClose()
	}
}

// counted counts f, when it opened, as a live stream of kind until it
// closes (svc_live_streams), and as cut when it ends so
// (svc_streams_cut_total).
func (c *core) counted(f *Feed, err error, kind string) (*Feed, error) {
	if err != nil || c.metrics == nil {
		return f, err
	}
	f.gauge = c.metrics.streamGauge(kind)
	f.cuts = c.metrics.streamCuts(kind)
	f.writes = c.metrics.sseWrites(kind)
	f.gauge.Add(1)
	return f, nil
}

// runnerFeed marks f, when it opened and runner is set, as a runner stream
// of member until it closes (presence.runnerDetached).
func (c *core) runnerFeed(f *Feed, err error, runner bool, member string) (*Feed, error) {
	if err != nil || !runner {
		return f, err
	}
	c.presence.runnerAttached(member)
	c.runnerConnected(context.Background(), member)
	f.onClose = func() { c.presence.runnerDetached(member) }
	return f, nil
}

// Next returns the next item. It returns (nil, nil) when tick fires first
// (a nil tick never fires), errFellBehind when the hub cut the feed off,
// errShuttingDown when the hub closed.
func (f *Feed) Next(ctx context.Context, tick <-chan time.Time) (*hub.Event, error) {
	for {
		if len(f.backlog) > 0 {
			ev := f.backlog[0]
			f.backlog = f.backlog[1:]
			return ev, nil
		}
		if !f.live {
			evs, last, more, err := f.page(ctx, f.last, replayPage)
			if err != nil {
				return nil, err
			}
			f.backlog, f.live = evs, !more
			f.last = max(f.last, last)
			continue
		}
		if f.sub.FellBehind() {
			// What the hub still queued is not delivered: a reader already
			// a queue behind would only hold the stream (and that queue)
			// longer, and resumes from the store by its last id.
			f.cut(cutSlowReader)
			return nil, errFellBehind
		}
		ev, open := f.sub.Next()
		switch {
		case ev != nil:
			if ev.Seq <= f.last {
				continue // already replayed from the store
			}
			f.last = ev.Seq
			return ev, nil
		case !open:
			if f.sub.FellBehind() {
				return nil, errFellBehind
			}
			if f.sub.Expired() {
				return nil, errCredentialExpired
			}
			return nil, errShuttingDown
		}
		select {
		case <-f.sub.Ready():
		case <-tick:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Buffered returns the next item when one is ready without waiting.
func (f *Feed) Buffered() *hub.Event {
	if len(f.backlog) > 0 || !f.live || f.sub.FellBehind() {
		return nil
	}
	for {
		ev, _ := f.sub.Next()
		if ev == nil {
			return nil
		}
		if ev.Seq <= f.last {
			continue
		}
		f.last = ev.Seq
		return ev
	}
}
