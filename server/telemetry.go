package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"

	"svc/server/auth"
	"svc/server/otlp"
	"svc/store"
)

// DefaultOTLPFlushAfter is how long a telemetry record waits for its
// partner before it is stored alone (spec: about 120 s).
const DefaultOTLPFlushAfter = otlp.DefaultFlushAfter

// telemetry turns OTLP log exports into activity rows. Each export is
// correlated and its completed rows committed together with the member's
// new correlation state, so a record once acknowledged survives a crash
// however far it got; a timer flushes records that waited too long.
type telemetry struct {
	corr   *otlp.Correlator
	writer *activityWriter
	log    *slog.Logger
	now    func() time.Time
	// every is how often the flush runs.
	every time.Duration

	// gate is held shared by an export from its ingest to its commit, and
	// alone by the flush, which takes every member's due records at once.
	gate sync.RWMutex
	mu   sync.Mutex
	// members are the members that exported since the broker started (or
	// had state stored): the team bounds them.
	members map[string]*memberTelemetry
}

// memberTelemetry serializes one member's exports, so its state is
// committed in the order its records were taken.
type memberTelemetry struct {
	mu sync.Mutex
	// committed is the state stored last: what the correlator goes back to
	// when a commit fails, so the exporter's retry finds it as it was.
	committed []byte
}

func newTelemetry(w *activityWriter, flushAfter time.Duration, now func() time.Time, log *slog.Logger) *telemetry {
	if flushAfter <= 0 {
		flushAfter = DefaultOTLPFlushAfter
	}
	return &telemetry{
		corr:   otlp.NewCorrelator(otlp.Options{FlushAfter: flushAfter, Now: now}),
		writer: w, log: log, now: now,
		every:   min(max(flushAfter/12, 100*time.Millisecond), 10*time.Second),
		members: map[string]*memberTelemetry{},
	}
}

func (t *telemetry) member(name string) *memberTelemetry {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.members[name]
	if m == nil {
		m = &memberTelemetry{}
		t.members[name] = m
	}
	return m
}

// load restores the stored correlation states. A state that does not read
// is dropped (and logged): only records still waiting for a partner are
// lost.
func (t *telemetry) load(ctx context.Context, st store.ActivityStore) error {
	states, err := st.CorrelationStates(ctx)
	if err != nil {
		return err
	}
	for _, s := range states {
		if err := t.corr.Restore(s.Member, s.State); err != nil {
			t.log.ErrorContext(ctx, "telemetry state dropped", "member", s.Member, "err", err)
			continue
		}
		t.member(s.Member).committed = s.State
	}
	return nil
}

// export correlates one export of member's records and commits what it
// completed with the member's new state; it returns how many records could
// not be used.
func (t *telemetry) export(ctx context.Context, member string, req *collogspb.ExportLogsServiceRequest) (int64, error) {
	recs := otlp.Records(req)
	if len(recs) == 0 {
		return 0, nil
	}
	t.gate.RLock()
	defer t.gate.RUnlock()
	m := t.member(member)
	m.mu.Lock()
	defer m.mu.Unlock()
	evs, rejected := t.corr.Ingest(member, recs)
	b, state, err := t.batch(member, evs, m.committed)
	if err == nil && (len(b.Events) > 0 || len(b.States) > 0) {
		_, err = t.writer.write(ctx, b)
	}
	if err != nil {
		if rerr := t.corr.Restore(member, m.committed); rerr != nil {
			t.log.ErrorContext(ctx, "telemetry state not restored", "member", member, "err", rerr)
		}
		return 0, err
	}
	m.committed = state
	return int64(rejected), nil
}

// batch is what committing member's events and current state writes: the
// state only when it differs from the one committed.
func (t *telemetry) batch(member string, evs []otlp.Event, committed []byte) (store.ActivityBatch, []byte, error) {
	var b store.ActivityBatch
	for _, ev := range evs {
		data, err := json.Marshal(ev.Data)
		if err != nil {
			return b, nil, fmt.Errorf("encode %s row: %w", ev.Kind, err)
		}
		b.Events = append(b.Events, store.ActivityEvent{Member: member, Kind: ev.Kind, TS: ev.TS, Data: data})
	}
	state, err := t.corr.State(member)
	if err != nil {
		return b, nil, err
	}
	if !bytes.Equal(state, committed) {
		b.States = append(b.States, store.CorrelationState{Member: member, State: state})
	}
	return b, state, nil
}

// run flushes due records every t.every until ctx ends.
func (t *telemetry) run(ctx context.Context) {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.flush(ctx)
		}
	}
}

// flush stores every record that waited its time, with the new states of
// their members, in one commit. When the commit fails the records go back,
// to be flushed next time.
func (t *telemetry) flush(ctx context.Context) {
	t.gate.Lock()
	defer t.gate.Unlock()
	due := t.corr.Due(t.now())
	if len(due) == 0 {
		return
	}
	var all store.ActivityBatch
	states := make(map[string][]byte, len(due))
	var err error
	for member, evs := range due {
		m := t.member(member)
		var b store.ActivityBatch
		if b, states[member], err = t.batch(member, evs, m.committed); err != nil {
			break
		}
		all.Events = append(all.Events, b.Events...)
		all.States = append(all.States, b.States...)
	}
	if err == nil {
		_, err = t.writer.write(ctx, all)
	}
	if err != nil {
		if !errors.Is(err, errShuttingDown) {
			t.log.ErrorContext(ctx, "telemetry flush failed; retrying later", "members", len(due), "err", err)
		}
		for member := range due {
			_ = t.corr.Restore(member, t.member(member).committed)
		}
		return
	}
	for member, st := range states {
		t.member(member).committed = st
	}
}

// OTLPLogs implements OTLP's LogsService: an agent's log records, correlated
// into its activity. The member is the bearer token's.
type OTLPLogs struct {
	collogspb.UnimplementedLogsServiceServer
	*core
}

var _ collogspb.LogsServiceServer = (*OTLPLogs)(nil)

// Export implements collogspb.LogsServiceServer.
func (s *OTLPLogs) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	return s.exportLogs(ctx, mustPrincipal(ctx), req)
}

// exportLogs takes one export of p's records.
func (c *core) exportLogs(ctx context.Context, p *auth.Principal, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	if err := bearerOnly(p); err != nil {
		return nil, err
	}
	if c.tel == nil {
		return nil, errNoActivityStore
	}
	if err := otlp.CheckDepth(req); err != nil {
		return nil, invalid("resourceLogs", "values nest more than %d levels deep", otlp.MaxValueDepth)
	}
	rejected, err := c.tel.export(ctx, p.Member, req)
	if err != nil {
		return nil, err
	}
	resp := &collogspb.ExportLogsServiceResponse{}
	if rejected > 0 {
		resp.PartialSuccess = &collogspb.ExportLogsPartialSuccess{
			RejectedLogRecords: rejected,
			ErrorMessage:       fmt.Sprintf("%d log records were not used: unknown event names or attributes that do not parse", rejected),
		}
	}
	return resp, nil
}

// bearerOnly refuses telemetry sent with a session: exporters hold tokens.
func bearerOnly(p *auth.Principal) error {
	if p.Via != auth.ViaBearer {
		return fmt.Errorf("%w: telemetry export needs a bearer token", auth.ErrUnauthenticated)
	}
	return nil
}

// OTLPMetrics implements OTLP's MetricsService: accepted and discarded, so
// an agent exporting metrics too gets no errors.
type OTLPMetrics struct {
	colmetricspb.UnimplementedMetricsServiceServer
}

var _ colmetricspb.MetricsServiceServer = (*OTLPMetrics)(nil)

// Export implements colmetricspb.MetricsServiceServer.
func (OTLPMetrics) Export(ctx context.Context, _ *colmetricspb.ExportMetricsServiceRequest) (*colmetricspb.ExportMetricsServiceResponse, error) {
	if err := bearerOnly(mustPrincipal(ctx)); err != nil {
		return nil, err
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}
