package activity

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"

	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/hub"
	"svc/server/otlp"
	"svc/store"
)

// failingActivity fails the next fail CommitActivity calls.
type failingActivity struct {
	store.ActivityStore
	fail atomic.Int32
}

func (f *failingActivity) CommitActivity(ctx context.Context, b store.ActivityBatch) ([]store.ActivityEvent, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("disk full")
	}
	return f.ActivityStore.CommitActivity(ctx, b)
}

// claudeRecord is a Claude Code log record named name with string
// attributes.
func claudeRecord(name string, pairs ...string) *logspb.LogRecord {
	lr := &logspb.LogRecord{TimeUnixNano: uint64(time.Now().UnixNano())}
	lr.Attributes = append(lr.Attributes, &commonpb.KeyValue{Key: "event.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: name}}})
	for i := 0; i+1 < len(pairs); i += 2 {
		lr.Attributes = append(lr.Attributes, &commonpb.KeyValue{Key: pairs[i], Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: pairs[i+1]}}})
	}
	return lr
}

func records(recs ...*logspb.LogRecord) []otlp.Record {
	return otlp.Records(&collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: recs}}}}})
}

const requestBody = `{"model":"claude-test","system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":"hi"}]}`

func bodyRecord(seq string) *logspb.LogRecord {
	return claudeRecord("claude_code.api_request_body", "model", "claude-test", "event.sequence", seq, "body", requestBody)
}

func accountingRecord(requestID string) *logspb.LogRecord {
	return claudeRecord("claude_code.api_request", "model", "claude-test", "request_id", requestID,
		"input_tokens", "10", "output_tokens", "5", "cache_read_tokens", "0", "cache_creation_tokens", "0", "cost_usd", "0.5", "duration_ms", "100")
}

func responseRecord(requestID string) *logspb.LogRecord {
	return claudeRecord("claude_code.api_response_body", "request_id", requestID,
		"body", `{"id":"msg_`+requestID+`","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn"}`)
}

// startTelemetry runs an activity writer and a telemetry component over st.
func startTelemetry(t *testing.T, st store.ActivityStore, flushAfter time.Duration, now func() time.Time) *telemetry {
	t.Helper()
	w := newWriter(st, hub.New(), discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	tel := newTelemetry(w, flushAfter, now, discardLogger())
	require.NoError(t, tel.load(context.Background(), st))
	return tel
}

func exchanges(t *testing.T, st store.ActivityStore, member string) []map[string]any {
	t.Helper()
	rows, err := st.ListActivity(context.Background(), store.ActivityFilter{Member: member, Kinds: []string{store.KindLLMExchange}, OldestFirst: true})
	require.NoError(t, err)
	out := make([]map[string]any, len(rows))
	for i, r := range rows {
		require.NoError(t, json.Unmarshal(r.Data, &out[i]))
	}
	return out
}

func TestTelemetryCommitsRowsWithTheirState(t *testing.T) {
	act := memActivity(t)
	tel := startTelemetry(t, act, time.Hour, time.Now)
	ctx := context.Background()

	rejected, err := tel.export(ctx, "ann", records(bodyRecord("1"), claudeRecord("claude_code.plugin_loaded")))
	require.NoError(t, err)
	require.Equal(t, int64(1), rejected, "a record svc does not use is counted")
	states, err := act.CorrelationStates(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1, "the queued body is stored with the acknowledgement")
	require.Equal(t, "ann", states[0].Member)

	// A broker restarted now finds the body and pairs it.
	tel2 := startTelemetry(t, act, time.Hour, time.Now)
	_, err = tel2.export(ctx, "ann", records(accountingRecord("req_1"), responseRecord("req_1")))
	require.NoError(t, err)
	ex := exchanges(t, act, "ann")
	require.Len(t, ex, 1)
	require.Equal(t, "req_1", ex[0]["requestId"])
	require.NotNil(t, ex[0]["messages"], "the body from before the restart is in the exchange")
	states, err = act.CorrelationStates(ctx)
	require.NoError(t, err)
	require.Empty(t, states, "a member with nothing waiting has no stored state")
}

func TestTelemetryFailedCommitLeavesStateAsAcknowledged(t *testing.T) {
	act := &failingActivity{ActivityStore: memActivity(t)}
	tel := startTelemetry(t, act, time.Hour, time.Now)
	ctx := context.Background()

	act.fail.Store(1)
	_, err := tel.export(ctx, "ann", records(bodyRecord("1")))
	require.Error(t, err, "the export is not acknowledged")
	// The exporter retries the same records; they must be taken once.
	_, err = tel.export(ctx, "ann", records(bodyRecord("1")))
	require.NoError(t, err)
	_, err = tel.export(ctx, "ann", records(accountingRecord("req_1"), responseRecord("req_1"), accountingRecord("req_2")))
	require.NoError(t, err)
	ex := exchanges(t, act, "ann")
	require.Len(t, ex, 2)
	byID := map[any]map[string]any{ex[0]["requestId"]: ex[0], ex[1]["requestId"]: ex[1]}
	require.NotNil(t, byID["req_1"]["messages"], "the retried body pairs with the first accounting record")
	require.Nil(t, byID["req_2"]["messages"], "no second copy of the body was queued by the failed attempt")
}

func TestTelemetryFlushRunsOnATimer(t *testing.T) {
	act := &failingActivity{ActivityStore: memActivity(t)}
	var clock atomic.Int64
	clock.Store(time.Now().UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()) }
	tel := startTelemetry(t, act, time.Minute, now)
	ctx := context.Background()

	_, err := tel.export(ctx, "ann", records(bodyRecord("1")))
	require.NoError(t, err)
	tel.flush(ctx)
	require.Empty(t, exchanges(t, act, "ann"), "a body younger than the flush age waits")

	clock.Add(time.Minute.Milliseconds())
	act.fail.Store(1)
	tel.flush(ctx)
	require.Empty(t, exchanges(t, act, "ann"), "a failed flush stores nothing")
	tel.flush(ctx)
	ex := exchanges(t, act, "ann")
	require.Len(t, ex, 1, "the flush that failed is done again, once")
	require.Equal(t, true, ex[0]["requestOnly"])
	states, err := act.CorrelationStates(ctx)
	require.NoError(t, err)
	require.Empty(t, states, "the flushed member's state is cleared with the row")

	// The loop itself flushes without being asked.
	_, err = tel.export(ctx, "bob", records(bodyRecord("1")))
	require.NoError(t, err)
	clock.Add(time.Minute.Milliseconds())
	tel.every = 10 * time.Millisecond
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { tel.run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return len(exchanges(t, act, "bob")) == 1 }, 5*time.Second, 10*time.Millisecond)
}

// TestTelemetryIngestSlots: an export waits for one of a bounded number
// of slots before anything of it is decoded; one that waits too long is
// told to come back, with nothing stored, and an abandoned one stops
// waiting.
func TestTelemetryIngestSlots(t *testing.T) {
	act := memActivity(t)
	tel := startTelemetry(t, act, time.Hour, time.Now)
	tel.slotWait = 20 * time.Millisecond
	c := &Service{tel: tel, d: Deps{Secrets: (&fakeSecrets{}).Values}}
	ann := &auth.Principal{Member: "ann", Via: auth.ViaBearer}
	ctx := context.Background()
	var decoded atomic.Int32
	decode := func() ([]otlp.Record, error) {
		decoded.Add(1)
		return records(accountingRecord("req_slot")), nil
	}

	for range cap(tel.slots) {
		tel.slots <- struct{}{} // every slot busy
	}
	_, err := c.exportLogs(ctx, ann, decode)
	var e *apierr.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, apierr.CodeUnavailable, e.Code)
	require.Positive(t, e.RetryAfter, "exporters are told when to come back")
	require.Zero(t, decoded.Load(), "nothing is decoded without a slot")
	require.Empty(t, exchanges(t, act, "ann"))

	tel.slotWait = time.Hour
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.exportLogs(cctx, ann, decode)
	require.ErrorIs(t, err, context.Canceled, "a caller that went away stops waiting")

	<-tel.slots // one slot frees
	_, err = c.exportLogs(ctx, ann, decode)
	require.NoError(t, err)
	require.Equal(t, int32(1), decoded.Load())
	require.Len(t, exchanges(t, act, "ann"), 1)
	require.Len(t, tel.slots, cap(tel.slots)-1, "the slot is given back after the commit")
}

// withSeq numbers lr in its session.
func withSeq(lr *logspb.LogRecord, seq string) *logspb.LogRecord {
	lr.Attributes = append(lr.Attributes, &commonpb.KeyValue{Key: "event.sequence", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: seq}}})
	return lr
}

// TestTelemetryOvertakenExportIsWaitedFor: an exporter with two exports in
// flight (Claude Code's gRPC exporter on shutdown) can deliver a request's
// accounting and response before its body. The later export waits for the
// earlier one, so the exchange keeps its body and its response; when the
// body never comes it waits only briefly and is stored without it.
func TestTelemetryOvertakenExportIsWaitedFor(t *testing.T) {
	act := memActivity(t)
	tel := startTelemetry(t, act, time.Hour, time.Now)
	tel.earlyWait = time.Minute // the body below always comes
	held := make(chan struct{}, 1)
	tel.onHold = func() { held <- struct{}{} }
	c := &Service{tel: tel, d: Deps{Secrets: (&fakeSecrets{}).Values}}
	ann := &auth.Principal{Member: "ann", Via: auth.ViaBearer}
	ctx := context.Background()
	export := func(recs ...*logspb.LogRecord) error {
		_, err := c.exportLogs(ctx, ann, func() ([]otlp.Record, error) { return records(recs...), nil })
		return err
	}

	require.NoError(t, export(bodyRecord("1"), withSeq(accountingRecord("req_1"), "2"), withSeq(responseRecord("req_1"), "3")))
	require.Len(t, exchanges(t, act, "ann"), 1)

	later := make(chan error, 1)
	go func() {
		later <- export(withSeq(accountingRecord("req_2"), "5"), withSeq(responseRecord("req_2"), "6"))
	}()
	<-held
	require.Len(t, exchanges(t, act, "ann"), 1, "the overtaking export waits")
	require.NoError(t, export(bodyRecord("4")))
	require.NoError(t, <-later)
	ex := exchanges(t, act, "ann")
	require.Len(t, ex, 2)
	require.Equal(t, "req_2", ex[1]["requestId"])
	require.NotNil(t, ex[1]["messages"], "the body that came second is in the exchange")
	require.Equal(t, "msg_req_2", ex[1]["responseId"], "and so is the response")

	// A body that never comes: the export waits earlyWait, then the
	// accounting record is an exchange on its own, as without the wait.
	tel.earlyWait = 20 * time.Millisecond
	require.NoError(t, export(withSeq(accountingRecord("req_3"), "9")))
	<-held
	ex = exchanges(t, act, "ann")
	require.Len(t, ex, 3)
	require.Equal(t, "req_3", ex[2]["requestId"])
	require.Nil(t, ex[2]["messages"])
	require.Len(t, tel.slots, 0, "the slots are all given back")
}
