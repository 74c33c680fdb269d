package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	apiv1 "svc/gen/svc/v1"
	"svc/server/cluster"
	"svc/server/hub"
	"svc/store"
)

// Several brokers of one team: each publishes its committed messages on
// NATS and hands its hub every broker's messages in commit order
// (server/cluster; docs/DECISIONS.md, "Several brokers: fan-out on NATS").

// MessageRanger is what a store offers brokers that share it: every
// message with after < seq <= upTo, oldest first, with its recipients.
// The PostgreSQL store has it.
type MessageRanger interface {
	MessagesBetween(ctx context.Context, after, upTo int64) ([]store.Message, error)
}

// clusterMsg is a committed message as the fan-out carries it. pm is the
// committing broker's rendering (the one its writer was answered with);
// it does not travel.
type clusterMsg struct {
	store.Message
	pm *apiv1.Message
}

// clusterStore reads what other brokers committed.
type clusterStore struct {
	st store.Store
	r  MessageRanger
}

func (c clusterStore) Range(ctx context.Context, after, upTo int64) ([]clusterMsg, error) {
	msgs, err := c.r.MessagesBetween(ctx, after, upTo)
	if err != nil {
		return nil, err
	}
	out := make([]clusterMsg, len(msgs))
	for i, m := range msgs {
		out[i] = clusterMsg{Message: m}
	}
	return out, nil
}

func (c clusterStore) Last(ctx context.Context) (int64, error) { return c.st.LastMessageSeq(ctx) }

// joinWithin bounds JoinCluster's store reads and NATS round trip.
const joinWithin = 10 * time.Second

// JoinCluster makes this broker one of several serving the team over nc:
// from now on its committed messages go out on NATS, and its streams get
// every broker's messages, in commit order, through the fan-out, which
// Run runs. Call it once, after New and before Run. The store must be a
// MessageRanger.
func (s *Server) JoinCluster(ctx context.Context, nc *nats.Conn) error {
	c := s.core
	r, ok := c.store.(MessageRanger)
	if !ok {
		return errors.New("several brokers need a store that reads messages by id range (PostgreSQL)")
	}
	ctx, cancel := context.WithTimeout(ctx, joinWithin)
	defer cancel()
	team, err := c.store.GetMeta(ctx, store.MetaTeamID)
	if err != nil {
		return fmt.Errorf("the team id that names the NATS subjects: %w", err)
	}
	// One origin names this broker on every subject, so what it sends
	// and the logs of every broker about it read alike.
	origin := brokerOrigin()
	c.log.Info("joined the team's other brokers over NATS", "origin", origin)
	if c.kek != nil {
		c.signer = cluster.NewSigner(c.kek.Derive(cluster.SignerLabel))
	} else {
		c.log.Warn("no KEK: what this broker sends its peers over NATS is unsigned, so they read every message from the database")
	}
	f, err := cluster.New(ctx, cluster.Config[clusterMsg]{
		Conn: nc, Subject: "svc." + team + ".msg", Origin: origin, Store: clusterStore{st: c.store, r: r}, Signer: c.signer,
		ID: func(m clusterMsg) int64 { return m.Seq }, Deliver: c.deliverRemote, Log: c.log,
	})
	if err != nil {
		return err
	}
	c.msgs.fan = f
	c.fanMetrics("msg", f.Stats)
	s.run = append(s.run, f.Run)
	if err := s.joinHooks(nc, team, origin); err != nil {
		return err
	}
	if err := s.joinRevocations(ctx, nc, team, origin); err != nil {
		return err
	}
	if err := s.joinActivity(ctx, nc, team, origin); err != nil {
		return err
	}
	if err := s.joinPresence(nc, team, origin); err != nil {
		return err
	}
	return s.joinMembers(nc, team)
}

// brokerOrigin names this broker to the others for as long as it runs:
// its host name (when short enough) and 8 random bytes, as one broker
// restarted on the same host is another. At most maxOriginLen bytes.
func brokerOrigin() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	origin := hex.EncodeToString(b[:])
	if h, err := os.Hostname(); err == nil && h != "" && len(h)+1+len(origin) <= maxOriginLen {
		origin = h + "-" + origin // names the holder in the leases table
	}
	return origin
}

// deliverRemote hands the hub a run of messages in commit order, as the
// committer does on a single broker: one publish, each stream woken once.
func (c *core) deliverRemote(msgs []clusterMsg) {
	items := make([]hub.Item, len(msgs))
	for i, m := range msgs {
		pm := m.pm
		if pm == nil {
			pm = messageToProto(m.Message)
		}
		items[i] = hub.Item{Ev: hub.NewEvent(m.Seq, pm), All: m.All, Sender: m.From, Recipients: m.Recipients}
	}
	c.hub.PublishBatch(items)
}

// fanMetrics shows a fan-out's counters on /metrics under kind (msg,
// act, revoke): what an operator of several brokers watches to see NATS
// carry the traffic (store records stay near zero while the brokers sign,
// and grow with every batch NATS loses or no key covers).
func (c *core) fanMetrics(kind string, stats func() cluster.Stats) {
	if c.metrics == nil {
		return
	}
	labels := prometheus.Labels{"kind": kind}
	count := func(name, help string, v func(cluster.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(stats())) })
	}
	c.metrics.reg.MustRegister(
		count("svc_cluster_published_total", "Committed batches this broker published on NATS, by kind: msg (chat), act (activity) or revoke.",
			func(s cluster.Stats) uint64 { return s.Published }),
		count("svc_cluster_received_total", "Other brokers' batches taken from NATS, by kind.",
			func(s cluster.Stats) uint64 { return s.Received }),
		count("svc_cluster_rejected_total", "NATS messages dropped as malformed or with a bad signature, by kind.",
			func(s cluster.Stats) uint64 { return s.Rejected }),
		count("svc_cluster_store_records_total", "Other brokers' records read from the store (holes, the tail, batches too large or unsigned), by kind.",
			func(s cluster.Stats) uint64 { return s.StoreRecords }),
	)
}
