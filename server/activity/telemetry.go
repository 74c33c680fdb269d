package activity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/otlp"
	"svc/store"
)

// DefaultOTLPFlushAfter is how long a telemetry record waits for its
// partner before it is stored alone (docs/TELEMETRY.md).
const DefaultOTLPFlushAfter = otlp.DefaultFlushAfter

// telemetry turns OTLP log exports into activity rows. Each export is
// correlated and its completed rows committed together with the member's
// new correlation state, so a record once acknowledged survives a crash
// however far it got; a timer flushes records that waited too long.
type telemetry struct {
	corr   *otlp.Correlator
	writer *writer
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
	// slots bounds the exports decoded, correlated and committed at once:
	// ingest is CPU-bound, and left unbounded it takes every core from
	// chat.
	slots chan struct{}
	// slotWait bounds how long an export waits for a slot before it is
	// told to come back (503 with Retry-After, which exporters honour).
	slotWait time.Duration
	// earlyWait bounds how long an export that overtook an earlier one of
	// its member's (otlp.Correlator.Early) waits for it.
	earlyWait time.Duration
	// onHold, when set (tests), is called as an export starts waiting.
	onHold func()
}

// defaultEarlyWait is how long an export waits for the one it overtook:
// two exports in flight at once arrive milliseconds apart.
const defaultEarlyWait = 250 * time.Millisecond

// ingestSlots is how many exports are taken at once: half the cores, at
// least one, so chat always has cores of its own.
func ingestSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// slot waits for an ingest slot and returns its release.
func (t *telemetry) slot(ctx context.Context) (func(), error) {
	timer := time.NewTimer(t.slotWait)
	defer timer.Stop()
	select {
	case t.slots <- struct{}{}:
		return func() { <-t.slots }, nil
	case <-timer.C:
		return nil, &apierr.Error{Code: apierr.CodeUnavailable, RetryAfter: 5 * time.Second, Message: "telemetry ingest is saturated; retry later"}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// memberTelemetry serializes one member's exports, so its state is
// committed in the order its records were taken.
type memberTelemetry struct {
	mu sync.Mutex
	// committed is the state stored last: what the correlator goes back to
	// when a commit fails, so the exporter's retry finds it as it was.
	committed []byte
	// changed is closed (and replaced) when an export of the member's
	// commits; guarded by telemetry.mu.
	changed chan struct{}
}

func newTelemetry(w *writer, flushAfter time.Duration, now func() time.Time, log *slog.Logger) *telemetry {
	if flushAfter <= 0 {
		flushAfter = DefaultOTLPFlushAfter
	}
	return &telemetry{
		corr:   otlp.NewCorrelator(otlp.Options{FlushAfter: flushAfter, Now: now}),
		writer: w, log: log, now: now,
		every:     min(max(flushAfter/12, 100*time.Millisecond), 10*time.Second),
		members:   map[string]*memberTelemetry{},
		slots:     make(chan struct{}, ingestSlots()),
		slotWait:  30 * time.Second,
		earlyWait: defaultEarlyWait,
	}
}

func (t *telemetry) member(name string) *memberTelemetry {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.members[name]
	if m == nil {
		m = &memberTelemetry{changed: make(chan struct{})}
		t.members[name] = m
	}
	return m
}

// changed returns a channel closed when the next export of member's
// commits.
func (t *telemetry) changed(member string) <-chan struct{} {
	m := t.member(member)
	t.mu.Lock()
	defer t.mu.Unlock()
	return m.changed
}

// committed wakes those waiting for an export of m's to commit.
func (t *telemetry) committed(m *memberTelemetry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	close(m.changed)
	m.changed = make(chan struct{})
}

// awaitEarlier holds back an export of member's that overtook an earlier
// one (otlp.Correlator.Early) until that one commits or earlyWait passes;
// then the export goes on as it is, so a body that never comes costs
// earlyWait once.
func (t *telemetry) awaitEarlier(ctx context.Context, member string, recs []otlp.Record) {
	timer := time.NewTimer(t.earlyWait)
	defer timer.Stop()
	if t.onHold != nil {
		t.onHold()
	}
	for {
		ch := t.changed(member)
		if !t.corr.Early(member, recs) {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
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

// prepared is an export correlated and ready to commit. It holds the
// flush gate (shared) and its member's lock until commit releases them.
type prepared struct {
	member   string
	m        *memberTelemetry
	batch    store.ActivityBatch
	state    []byte
	rejected int64
}

// prepare correlates one export of member's records. On success the
// caller must commit the result.
func (t *telemetry) prepare(member string, recs []otlp.Record) (*prepared, error) {
	t.gate.RLock()
	m := t.member(member)
	m.mu.Lock()
	evs, rejected := t.corr.Ingest(member, recs)
	b, state, err := t.batch(member, evs, m.committed)
	if err != nil {
		t.restore(member, m)
		m.mu.Unlock()
		t.gate.RUnlock()
		return nil, err
	}
	return &prepared{member: member, m: m, batch: b, state: state, rejected: int64(rejected)}, nil
}

// commit stores a prepared export (its rows and its member's new state) and
// releases its locks; it returns how many records could not be used. When
// the commit fails the state goes back to what was committed, so the
// exporter's retry finds it as it was.
func (t *telemetry) commit(ctx context.Context, p *prepared) (int64, error) {
	defer t.gate.RUnlock()
	defer p.m.mu.Unlock()
	if len(p.batch.Events) > 0 || len(p.batch.States) > 0 {
		if _, err := t.writer.write(ctx, p.batch); err != nil {
			t.restore(p.member, p.m)
			return 0, err
		}
	}
	p.m.committed = p.state
	t.committed(p.m)
	return p.rejected, nil
}

// export correlates and commits one export of member's records; it
// returns how many records could not be used.
func (t *telemetry) export(ctx context.Context, member string, recs []otlp.Record) (int64, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	p, err := t.prepare(member, recs)
	if err != nil {
		return 0, err
	}
	return t.commit(ctx, p)
}

// restore puts member's correlator state back to what was committed.
func (t *telemetry) restore(member string, m *memberTelemetry) {
	if err := t.corr.Restore(member, m.committed); err != nil {
		t.log.Error("telemetry state not restored", "member", member, "err", err)
	}
}

// batch is what committing member's events and current state writes: the
// state only when it differs from the one committed.
func (t *telemetry) batch(member string, evs []otlp.Event, committed []byte) (store.ActivityBatch, []byte, error) {
	var b store.ActivityBatch
	for _, ev := range evs {
		data, err := ev.MarshalData()
		if err != nil {
			return b, nil, fmt.Errorf("encode %s row: %w", ev.Kind, err)
		}
		row := store.ActivityEvent{Member: member, Kind: ev.Kind, TS: ev.TS, Data: data}
		if ev.Kind == store.KindLLMExchange {
			row.ResponseID, _ = ev.Data["responseId"].(string)
		}
		b.Events = append(b.Events, row)
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
		if !errors.Is(err, ErrShuttingDown) {
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
	s *Service
}

var _ collogspb.LogsServiceServer = (*OTLPLogs)(nil)

// OTLPLogs returns the service's OTLP LogsService.
func (s *Service) OTLPLogs() *OTLPLogs { return &OTLPLogs{s: s} }

// Export implements collogspb.LogsServiceServer.
func (l *OTLPLogs) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	return l.s.exportLogs(ctx, principal(ctx), func() ([]otlp.Record, error) {
		if err := otlp.CheckDepth(req); err != nil {
			return nil, apierr.Invalid("resourceLogs", "values nest more than %d levels deep", otlp.MaxValueDepth)
		}
		return otlp.Records(req), nil
	})
}

// Encodings of an OTLP/HTTP body.
const (
	OTLPProtobuf = "protobuf"
	OTLPJSON     = "json"
)

// ExportLogs takes one OTLP/HTTP export of p, for the OTLP/HTTP route: b
// is the body, encoded as encoding (OTLPProtobuf or OTLPJSON) says; it is
// decoded in p's ingest slot.
func (s *Service) ExportLogs(ctx context.Context, p *auth.Principal, encoding string, b []byte) (*collogspb.ExportLogsServiceResponse, error) {
	return s.exportLogs(ctx, p, func() ([]otlp.Record, error) {
		var recs []otlp.Record
		var err error
		if encoding == OTLPJSON {
			recs, err = otlp.DecodeJSONRecords(b)
		} else {
			recs, err = otlp.DecodeProtoRecords(b)
		}
		if err != nil {
			return nil, &apierr.Error{Code: apierr.CodeBadRequest, Message: "body: not an OTLP logs export: " + err.Error(), Err: err}
		}
		return recs, nil
	})
}

// exportLogs takes one export of p's records: it waits for an ingest slot,
// then decodes (decode), correlates and commits.
func (s *Service) exportLogs(ctx context.Context, p *auth.Principal, decode func() ([]otlp.Record, error)) (*collogspb.ExportLogsServiceResponse, error) {
	if err := bearerOnly(p); err != nil {
		return nil, err
	}
	if s.tel == nil {
		return nil, errNoActivityStore
	}
	// The slot is held through the commit: what one export costs, its
	// decoding and its write alike, counts against the cores it may take.
	release, err := s.tel.slot(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { release() }()
	recs, err := decode()
	if err != nil {
		return nil, err
	}
	// Redacted before anything reads them: the correlator's state is
	// stored too.
	red, err := s.redactor(ctx)
	if err != nil {
		return nil, err
	}
	redactRecords(red, recs)
	if s.tel.corr.Early(p.Member, recs) {
		// The export it overtook needs a slot to commit: give this one up
		// while waiting.
		release()
		release = func() {}
		s.tel.awaitEarlier(ctx, p.Member, recs)
		if release, err = s.tel.slot(ctx); err != nil {
			release = func() {}
			return nil, err
		}
	}
	rejected, err := s.tel.export(ctx, p.Member, recs)
	if err != nil {
		return nil, err
	}
	if s.d.Exported != nil {
		s.d.Exported(max(int64(len(recs))-rejected, 0), rejected)
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

// bearerOnly refuses telemetry sent with a session: exporters hold tokens
// (or federation JWTs, which ride the same Authorization header).
func bearerOnly(p *auth.Principal) error {
	if !p.BearerPlane() {
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
	if err := bearerOnly(principal(ctx)); err != nil {
		return nil, err
	}
	return &colmetricspb.ExportMetricsServiceResponse{}, nil
}

// drain stores every record member still has waiting as rows of the
// member whose id is id, and deletes its correlation state: the member is
// being deleted, and a member created later under its name must not
// inherit what it left (docs/DECISIONS.md, "A deleted member's data stays
// its own"). When the write fails the state stays, and the flush timer
// stores it as the name's last deleted member's.
func (t *telemetry) drain(ctx context.Context, member, id string) error {
	t.gate.Lock()
	defer t.gate.Unlock()
	m := t.member(member)
	m.mu.Lock()
	defer m.mu.Unlock()
	evs := t.corr.Drain(member)
	b, _, err := t.batch(member, evs, m.committed)
	if err == nil {
		for i := range b.Events {
			b.Events[i].MemberUID = id
		}
		if len(b.Events) > 0 || len(b.States) > 0 {
			_, err = t.writer.write(ctx, b)
		}
	}
	if err != nil {
		t.restore(member, m)
		return err
	}
	m.committed = nil
	return nil
}
