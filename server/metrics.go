package server

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"svc/server/connguard"
	"svc/server/hub"
	"svc/store"
)

// Stream kinds of svc_live_streams.
const (
	streamSSE      = "sse"
	streamGRPC     = "grpc"
	streamActivity = "activity"
)

// metrics is what GET /metrics shows (docs/PERFORMANCE.md: Metrics). The
// hot paths touch only counters and histograms whose labels are resolved
// here, once: an update is an atomic add, never a lock or a map lookup.
// Labels come from small fixed sets, never from member names. The engines
// (hub, groupcommit, store) import nothing of it: the hubs count in
// atomics of their own that the registry reads at scrape time.
type metrics struct {
	reg *prometheus.Registry

	pushDM, pushChannel, pushBroadcast, pushOther prometheus.Counter
	// streams are the live streams by kind (sse, grpc, activity).
	streamsSSE, streamsGRPC, streamsActivity, streamsTeam atomic.Int64
	// cutChat and cutActivity count the streams the broker cut, by reason.
	cutChat, cutActivity, cutTeam cutCounters
	// writesChat, writesActivity and writesTeam count the writes that
	// carried events to SSE streams, by stream.
	writesChat, writesActivity, writesTeam prometheus.Counter

	msgBatch, msgCommit prometheus.Histogram
	actBatch, actCommit prometheus.Histogram

	otlpStored, otlpRejected prometheus.Counter
	// hooks counts inbound hook requests by status, resolved once.
	hooks   map[string]prometheus.Counter
	hookVec *prometheus.CounterVec

	pushSent, pushFailed, pushGone prometheus.Counter

	// storage are the disk's metrics (storagemetrics.go).
	storage *storageMetrics
}

// commitBuckets are the commit latency buckets in seconds: an fsync on a
// fast disk is well under a millisecond, a stall is hundreds.
var commitBuckets = []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1.024, 2.048}

// batchBuckets are the batch size buckets (the messenger takes up to 512,
// the activity writer up to 64).
var batchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}

// newMetrics registers the broker's metrics, the Go runtime's and the
// process's; chat and act are the hubs of chat and activity streams.
func newMetrics(chat, act *hub.Hub, sc *StoreCommits) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	if sc != nil {
		m.reg.MustRegister(sc.main, sc.activity)
	}
	pushes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_pushes_total", Help: "Messages committed, by kind: dm, channel, broadcast, or other (written by the broker: objectives, hooks, registries).",
	}, []string{"kind"})
	m.pushDM, m.pushChannel = pushes.WithLabelValues("dm"), pushes.WithLabelValues("channel")
	m.pushBroadcast, m.pushOther = pushes.WithLabelValues("broadcast"), pushes.WithLabelValues("other")

	streams := func(kind string, n *atomic.Int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_live_streams", Help: "Live streams open now, by kind: sse and grpc (chat), activity and team (SSE or gRPC).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(n.Load()) })
	}
	delivered := func(stream string, h *hub.Hub) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "svc_deliveries_total", Help: "Events handed to live streams, by stream: chat or activity.", ConstLabels: prometheus.Labels{"stream": stream},
		}, func() float64 {
			d, _ := h.Stats()
			return float64(d)
		})
	}
	hist := func(name, help, writer string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: buckets, ConstLabels: prometheus.Labels{"writer": writer},
		})
	}
	const (
		batchHelp  = "Changes per group commit, by writer: messages (the messenger) or activity (the activity writer)."
		commitHelp = "Seconds one group commit's store transaction took, fsync included, by writer."
	)
	m.msgBatch = hist("svc_commit_batch_size", batchHelp, "messages", batchBuckets)
	m.actBatch = hist("svc_commit_batch_size", batchHelp, "activity", batchBuckets)
	m.msgCommit = hist("svc_commit_seconds", commitHelp, "messages", commitBuckets)
	m.actCommit = hist("svc_commit_seconds", commitHelp, "activity", commitBuckets)

	otlp := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_otlp_records_total", Help: "OTLP log records taken, by outcome: stored (correlated into activity) or rejected (unknown event or unparsable attributes).",
	}, []string{"outcome"})
	m.otlpStored, m.otlpRejected = otlp.WithLabelValues("stored"), otlp.WithLabelValues("rejected")
	hooks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_hook_deliveries_total", Help: "Inbound hook requests, by the status their receipt was given on arrival.",
	}, []string{"status"})
	m.hookVec = hooks
	m.hooks = map[string]prometheus.Counter{"other": hooks.WithLabelValues("other")}
	webpush := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_webpush_total", Help: "Browser push sends, by result: sent, failed, or gone (the subscription expired and was removed).",
	}, []string{"result"})
	m.pushSent, m.pushFailed, m.pushGone = webpush.WithLabelValues("sent"), webpush.WithLabelValues("failed"), webpush.WithLabelValues("gone")

	// A stream is counted once, when it has really ended (Feed.Close), not
	// when the hub cut it off: a stream stuck in a write is still live.
	cuts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_streams_cut_total", Help: "Live streams the broker cut off, counted once each when it ended, by stream (chat, activity or team) and reason: slow_reader (fell a whole queue behind) or write_timeout (a write to the client did not complete in time).",
	}, []string{"stream", "reason"})
	for _, c := range []struct {
		cc     *cutCounters
		stream string
	}{{&m.cutChat, "chat"}, {&m.cutActivity, "activity"}, {&m.cutTeam, "team"}} {
		c.cc.slowReader = cuts.WithLabelValues(c.stream, cutSlowReader)
		c.cc.writeTimeout = cuts.WithLabelValues(c.stream, cutWriteTimeout)
	}

	writes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "svc_sse_writes_total", Help: "Writes that carried events to SSE streams (each one or more events; pings not counted), by stream: chat, activity or team. svc_deliveries_total over it is events per write.",
	}, []string{"stream"})
	m.writesChat, m.writesActivity, m.writesTeam = writes.WithLabelValues("chat"), writes.WithLabelValues("activity"), writes.WithLabelValues("team")

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		pushes,
		streams(streamSSE, &m.streamsSSE), streams(streamGRPC, &m.streamsGRPC), streams(streamActivity, &m.streamsActivity),
		streams(streamTeam, &m.streamsTeam),
		delivered("chat", chat), delivered("activity", act),
		cuts, writes,
		m.msgBatch, m.actBatch, m.msgCommit, m.actCommit,
		otlp, hooks, webpush,
	)
	m.storage = newStorageMetrics(m.reg)
	return m
}

// guardMetrics shows what the connection guard counts: the connections
// open now that have not authenticated, and what it turned away at its
// bounds. Without them an operator sees refused clients only as their
// complaints.
func guardMetrics(g *connguard.Guard) []prometheus.Collector {
	refused := func(kind string, n func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "svc_unauthenticated_refused_total", Help: "Turned away at the bounds of unauthenticated connections, by kind: connection (closed at accept: its address, or the broker, at the bound) or request (through a trusted proxy: the client it names at the bound).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(n()) })
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "svc_unauthenticated_connections", Help: "Connections open now that have not authenticated, which count toward the bounds (a trusted proxy's included).",
		}, func() float64 { return float64(g.Open()) }),
		refused("connection", g.Refused), refused("request", g.RefusedRequests),
	}
}

// pushed counts a committed message: a push (dm, channel, broadcast) when
// push is set, otherwise one the broker wrote.
func (m *metrics) pushed(s *store.Message, push bool) {
	switch {
	case !push:
		m.pushOther.Inc()
	case s.All:
		m.pushBroadcast.Inc()
	case s.To != "":
		m.pushDM.Inc()
	case strings.HasPrefix(s.Thread, "chan:"):
		m.pushChannel.Inc()
	default:
		m.pushOther.Inc()
	}
}

// hooked counts an inbound hook request whose receipt got status.
// hookStatuses names the statuses an inbound hook receipt can be given
// (the notify capability's), so each has its series from the start; any
// other status counts as "other". New calls it before serving.
func (m *metrics) hookStatuses(statuses []string) {
	for _, st := range statuses {
		m.hooks[st] = m.hookVec.WithLabelValues(st)
	}
}

func (m *metrics) hooked(status string) {
	c, ok := m.hooks[status]
	if !ok {
		c = m.hooks["other"]
	}
	c.Inc()
}

// commitTimer observes one group commit of n changes that started at start.
func commitTimer(batch, took prometheus.Histogram, n int, start time.Time) {
	batch.Observe(float64(n))
	took.Observe(time.Since(start).Seconds())
}

// cutCounters count one stream's cuts by reason, resolved once.
type cutCounters struct {
	slowReader, writeTimeout prometheus.Counter
}

// count counts a stream that ended cut for reason; "" (not cut) counts
// nothing.
func (c *cutCounters) count(reason string) {
	switch reason {
	case cutSlowReader:
		c.slowReader.Inc()
	case cutWriteTimeout:
		c.writeTimeout.Inc()
	}
}

// streamCuts returns the cut counters of the streams of kind: chat (sse,
// grpc) or activity.
func (m *metrics) streamCuts(kind string) *cutCounters {
	switch kind {
	case streamActivity:
		return &m.cutActivity
	case streamTeam:
		return &m.cutTeam
	}
	return &m.cutChat
}

// sseWrites returns the counter of writes to SSE streams of kind: chat
// (sse), activity or team; nil for gRPC chat streams, whose transport
// batches their sends into writes of its own.
func (m *metrics) sseWrites(kind string) prometheus.Counter {
	switch kind {
	case streamSSE:
		return m.writesChat
	case streamActivity:
		return m.writesActivity
	case streamTeam:
		return m.writesTeam
	}
	return nil
}

// streamGauge returns the live-stream count of kind.
func (m *metrics) streamGauge(kind string) *atomic.Int64 {
	switch kind {
	case streamSSE:
		return &m.streamsSSE
	case streamGRPC:
		return &m.streamsGRPC
	case streamTeam:
		return &m.streamsTeam
	default:
		return &m.streamsActivity
	}
}

// StoreCommits times the stores' COMMITs (fsync included) for
// svc_store_commit_seconds: the stores are opened before the server, so
// serve builds one, hands Main and Activity to the stores as their commit
// observers, and the server with WithStoreCommits.
type StoreCommits struct {
	main, activity prometheus.Histogram
}

// NewStoreCommits returns the histograms of both stores.
func NewStoreCommits() *StoreCommits {
	h := func(st string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "svc_store_commit_seconds", Help: "Seconds the store's COMMIT took (the WAL fsync with synchronous=FULL), by store: main or activity.",
			Buckets: commitBuckets, ConstLabels: prometheus.Labels{"store": st},
		})
	}
	return &StoreCommits{main: h("main"), activity: h("activity")}
}

// Main observes one COMMIT of the main store.
func (s *StoreCommits) Main(took time.Duration) { s.main.Observe(took.Seconds()) }

// Activity observes one COMMIT of the activity store.
func (s *StoreCommits) Activity(took time.Duration) { s.activity.Observe(took.Seconds()) }

// WithStoreCommits shows sc's histograms on GET /metrics.
func WithStoreCommits(sc *StoreCommits) Option { return func(o *options) { o.storeCommits = sc } }

// Metrics returns the registry GET /metrics serves.
func (s *Server) Metrics() prometheus.Gatherer { return s.core.metrics.reg }
