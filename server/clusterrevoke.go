package server

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"svc/server/cluster"
	"svc/store"
)

// Revocation across brokers (docs/DECISIONS.md, "Revocation and login
// limits across brokers"): unary calls read credentials from the shared
// store, so a revoke is refused everywhere with its commit; live streams
// are each broker's own, so a revoke that ends streams is written to the
// revocations log in its own transaction and fanned out like a message:
// every broker ends the streams it holds, and one that missed the NATS
// news reads the log.

// What a revocations log entry names: the streams of the member opened
// with these credentials end.
const (
	revokeAll      = "all"      // every stream (the member was deleted)
	revokeTokens   = "tokens"   // streams opened with a bearer token
	revokeSessions = "sessions" // streams opened with a web session
	revokeActivity = "activity" // activity streams (activity.read was lost)
	revokeCred     = "cred:"    // + one stream credential (feed.go's streamCred)
)

const (
	// revocationsKept is how long log entries stay: a broker needs one
	// only until it has read past it, which is within a poll or two of its
	// commit while the broker reaches the store; a day covers any outage
	// short of one that already ended its streams with its store.
	revocationsKept = 24 * time.Hour
	// clusterPruneEvery is how often a broker prunes the shared log and
	// limit counters; every broker does, and a delete is idempotent.
	clusterPruneEvery = 10 * time.Minute
)

// revocation is one revoke that ends live streams, on its way through its
// transaction.
type revocation struct {
	c      *core
	r      store.Revocation
	logged bool
}

// revocation starts a revoke of member's streams that what names.
func (c *core) revocation(member, what string) *revocation {
	return &revocation{c: c, r: store.Revocation{Member: member, What: what}}
}

// log appends the revoke to the log in tx when several brokers serve the
// team; alone, the broker's own streams are all there is, and nothing is
// written.
func (v *revocation) log(ctx context.Context, tx store.Tx) error {
	if v.c.revokes == nil {
		return nil
	}
	r, err := tx.AddRevocation(ctx, v.r)
	if err != nil {
		return err
	}
	v.r, v.logged = r, true
	return nil
}

// apply, after the commit, ends this broker's streams at once and hands
// the entry to the fan-out for every other broker.
func (v *revocation) apply() {
	v.c.endStreams(v.r)
	if v.logged {
		v.c.revokes.Committed([]store.Revocation{v.r})
	}
}

// endStreams ends the live streams r names on this broker. Ending a
// stream twice (the revoking broker hears its own entry back) does
// nothing.
func (c *core) endStreams(r store.Revocation) {
	switch r.What {
	case revokeAll:
		c.disconnect(r.Member, nil)
	case revokeTokens:
		c.disconnect(r.Member, isTokenCred)
	case revokeSessions:
		c.disconnect(r.Member, isSessionCred)
	case revokeActivity:
		c.act.Disconnect(r.Member, nil)
	default:
		cred, ok := strings.CutPrefix(r.What, revokeCred)
		if !ok || cred == "" {
			// A newer broker's kind: ending every stream of the member is
			// the safe reading (its clients reconnect).
			c.log.Warn("revocation of an unknown kind: ending every stream of the member", "member", r.Member, "what", r.What, "id", r.ID)
			c.disconnect(r.Member, nil)
			return
		}
		c.disconnect(r.Member, func(s string) bool { return s == cred })
	}
}

// revocationLog is the revocations log as the fan-out reads it.
type revocationLog struct{ st store.Store }

func (l revocationLog) Range(ctx context.Context, after, upTo int64) ([]store.Revocation, error) {
	return l.st.RevocationsBetween(ctx, after, upTo)
}

func (l revocationLog) Last(ctx context.Context) (int64, error) { return l.st.LastRevocationID(ctx) }

// RevocationPoll is how often the revocations fan-out reads the log's
// newest id, the default (cluster.DefaultPoll) when 0. Tests of several
// brokers lengthen it to show a revoke came over NATS, not from the poll.
var RevocationPoll time.Duration

// joinRevocations fans the revocations log out on svc.<team>.revoke and
// prunes the shared log and limit counters; JoinCluster calls it.
func (s *Server) joinRevocations(ctx context.Context, nc *nats.Conn, team, origin string) error {
	c := s.core
	f, err := cluster.New(ctx, cluster.Config[store.Revocation]{
		Conn: nc, Subject: "svc." + team + ".revoke", Origin: origin, Store: revocationLog{c.store}, Poll: RevocationPoll,
		ID: func(r store.Revocation) int64 { return r.ID },
		Deliver: func(rs []store.Revocation) {
			for _, r := range rs {
				c.endStreams(r)
			}
		},
		Log: c.log, Signer: c.signer,
	})
	if err != nil {
		return err
	}
	c.revokes = f
	c.fanMetrics("revoke", f.Stats)
	s.run = append(s.run, f.Run, c.pruneShared)
	return nil
}

// pruneShared deletes revocations past revocationsKept and limit hits
// past the longest window that counts them, every clusterPruneEvery.
func (c *core) pruneShared(ctx context.Context) {
	t := time.NewTicker(clusterPruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := c.now()
		if _, err := c.store.PruneRevocations(ctx, now.Add(-revocationsKept)); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "revocations prune failed; the next one retries", "err", err)
		}
		if _, err := c.store.PruneLimitHits(ctx, now.Add(-sharedLimitsKept)); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "limit hits prune failed; the next one retries", "err", err)
		}
	}
}
