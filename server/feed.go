package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

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
var errFellBehind = Errorf(CodeUnavailable, "subscriber fell behind; resume with the last id")

// Feed is one member's stream: the messages after a position, replayed
// from the store in order, then live ones, each exactly once.
type Feed struct {
	c       *core
	member  string
	since   int64 // replay skips ids at or below it: an earlier member of this name
	sub     *hub.Subscription
	last    int64
	backlog []store.Message
	live    bool // the store has nothing more after last; read the hub
}

// attach opens a feed of the caller's messages: with resume, every message
// after position after, then live ones; without, live ones only. The live
// subscription is taken before the store is read, so no message falls
// between replay and live delivery.
func (c *core) attach(ctx context.Context, p *auth.Principal, after int64, resume bool) (*Feed, error) {
	member := p.Member
	sub, err := c.hub.Subscribe(member, streamCred(p))
	if errors.Is(err, hub.ErrClosed) {
		return nil, errShuttingDown
	}
	if errors.Is(err, hub.ErrTooMany) {
		return nil, &Error{Code: CodeRateLimited, RetryAfter: streamRetryAfter,
			Message: fmt.Sprintf("%s holds %d live streams, the most one member may: close one first", member, c.maxStreams)}
	}
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
	f := &Feed{c: c, member: member, sub: sub, last: after, live: !resume}
	if resume {
		if f.since, err = c.memberSince(ctx, member); err != nil {
			sub.Close()
			return nil, err
		}
	}
	return f, nil
}

// streamCred names the credential a stream was opened with, so revoking it
// ends the stream.
func streamCred(p *auth.Principal) string {
	if p.Via == auth.ViaSession {
		return sessionCred(p.Session)
	}
	return "token:" + p.TokenID
}

// sessionCred names a session as the credential of its streams.
func sessionCred(h store.SessionHash) string { return "session:" + hex.EncodeToString(h[:]) }

// isTokenCred reports whether a stream credential is a bearer token.
func isTokenCred(c string) bool { return strings.HasPrefix(c, "token:") }

// isSessionCred reports whether a stream credential is a session.
func isSessionCred(c string) bool { return strings.HasPrefix(c, "session:") }

// Close ends the feed's live subscription.
func (f *Feed) Close() { f.sub.Close() }

// Next returns the next message. It returns (nil, nil) when tick fires
// first (a nil tick never fires), errFellBehind when the hub cut the feed
// off, errShuttingDown when the hub closed.
func (f *Feed) Next(ctx context.Context, tick <-chan time.Time) (*hub.Event, error) {
	for {
		if len(f.backlog) > 0 {
			m := f.backlog[0]
			f.backlog = f.backlog[1:]
			f.last = m.Seq
			if m.Seq <= f.since {
				continue
			}
			return hub.NewEvent(m.Seq, messageToProto(m)), nil
		}
		if !f.live {
			page, err := f.c.store.MessagesFor(ctx, f.member, f.last, replayPage)
			if err != nil {
				return nil, err
			}
			f.backlog, f.live = page, len(page) < replayPage
			continue
		}
		select {
		case ev, ok := <-f.sub.C():
			if !ok {
				if f.sub.FellBehind() {
					return nil, errFellBehind
				}
				return nil, errShuttingDown
			}
			if ev.Seq <= f.last {
				continue // already replayed from the store
			}
			f.last = ev.Seq
			return ev, nil
		case <-tick:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Buffered returns the next message when one is ready without waiting.
func (f *Feed) Buffered() *hub.Event {
	if len(f.backlog) > 0 || !f.live {
		return nil
	}
	for {
		select {
		case ev, ok := <-f.sub.C():
			if !ok {
				return nil
			}
			if ev.Seq <= f.last {
				continue
			}
			f.last = ev.Seq
			return ev
		default:
			return nil
		}
	}
}
