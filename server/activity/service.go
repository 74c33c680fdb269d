// Package activity is the activity and telemetry capability: the Activity
// service (uploads, lists, live streams, GenAI records, objective traces,
// usage and costs), OTLP ingest (the Logs and Metrics services and the
// correlator with its flush timer), ingest redaction, and the writer that
// group-commits them all to the activity store (docs/TELEMETRY.md). Its
// dependencies are explicit (Deps); it never imports the server root.
package activity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"svc/server/wire"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/genai"
	"svc/server/hub"
	"svc/server/pricing"
	"svc/store"
)

// activityKinds are every kind a row may have, and so every kind filter
// value.
var activityKinds = []string{store.KindLLMExchange, store.KindToolAction, store.KindObjectiveOpen, store.KindObjectiveClose, store.KindUserPrompt, store.KindOpaqueHTTP}

// closeReasons are the terminal reasons of an objective_close marker.
var closeReasons = []string{"done", "cancelled", "reassigned", "runner_shutdown"}

// Activity bounds (docs/TELEMETRY.md).
const (
	// maxUploadEvents is the most events one upload carries.
	maxUploadEvents = 500
	// maxActivityRows is the most rows one list or trace returns.
	maxActivityRows = 1000
	// maxListBytes bounds the data one list or trace carries: past it the
	// answer ends early ("up to 1000 rows") and the client pages on by
	// time. Large exchanges and inference records would otherwise make
	// answers of gigabytes.
	maxListBytes = 32 << 20
	// activityReplayPage is how many rows a resuming activity stream reads
	// at once: rows run to a megabyte, so fewer than messages.
	activityReplayPage = 16
	// maxEventData is the most bytes one event's data holds as JSON: the
	// REST body cap, so gRPC uploads store nothing REST could not.
	maxEventData = 1 << 20
	// MaxGenAIUpload is the most bytes one inference upload holds: full
	// contexts run to megabytes.
	MaxGenAIUpload = 16 << 20
	// maxObjectiveIDLen bounds an uploaded objectiveId.
	maxObjectiveIDLen = 128
	// maxTS is 9999-12-31T23:59:59.999Z in epoch ms: the last time a
	// timestamp may name.
	maxTS = 253402300799999
)

// errNoActivityStore answers activity calls of a broker built without an
// activity store (some tests).
var errNoActivityStore = apierr.Errorf(apierr.CodeUnavailable, "this broker keeps no activity")

// ErrShuttingDown answers writes that arrive after the writer stopped.
var ErrShuttingDown = apierr.Errorf(apierr.CodeUnavailable, "the broker is shutting down")

// Members is what the capability needs to know of the members that held
// a name (docs/DECISIONS.md, "A deleted member's data stays its own").
type Members interface {
	// Current is the id of the member named name now; ok is false when
	// the team has no such member.
	Current(name string) (id string, ok bool)
	// WasMember reports whether a deleted member is recorded under name.
	WasMember(name string) bool
	// Owner is whose a row written now under name is: its member's, else
	// that of the member of the name deleted last, else an unknown deleted
	// member's.
	Owner(name string) string
	// Label says whether id is a deleted member of name, and when it was
	// deleted when that is known.
	Label(name, id string) (deleted bool, at time.Time)
}

// Stream is one open live stream of activity rows.
type Stream interface{ Close() }

// Pager reads a page of stored rows after position after, oldest first:
// the events to deliver, the last position read, and whether more may
// follow.
type Pager = func(ctx context.Context, after int64, n int) (evs []*hub.Event, last int64, more bool, err error)

// Streams opens and serves live streams of rows: the broker's stream
// machinery (a subscription to the activity hub under the caller's
// credential, replay then live, the live-stream metrics, the send
// deadline), which chat streams share.
type Streams interface {
	// Open subscribes p to key's rows on the activity hub and returns a
	// stream of them: with lastID (a wire id, checked), the rows page
	// reads after it, then live ones; without, live ones only. newest is
	// the newest stored id: an id past it comes from before a store
	// reset, and every row is new to the client.
	Open(ctx context.Context, p *auth.Principal, key, lastID string, newest func(context.Context) (int64, error), page Pager) (Stream, error)
	// Serve sends first, then every event of s through send, until s
	// ends, ctx ends or a send fails.
	Serve(ctx context.Context, s Stream, first func() error, send func(*hub.Event) error) error
}

// Deps are the capability's dependencies.
type Deps struct {
	// Store is the activity store; nil: the broker keeps no activity, and
	// every call answers 503.
	Store store.ActivityStore
	// Hub carries committed rows to the live streams of their member.
	Hub     *hub.Hub
	Streams Streams
	Members Members
	// Secrets decrypts every secret value the team holds, for ingest
	// redaction; call SecretsChanged once a change to any of them commits.
	Secrets func(ctx context.Context) ([]string, error)
	// Objective reads an objective for its trace, an apierr not-found
	// error when there is none (objectives are the core's).
	Objective func(ctx context.Context, id string) (store.Objective, error)
	// Prices is the model price table costs are computed with (nil: the
	// table shipped in the binary).
	Prices *pricing.Table
	// FlushAfter is how long a telemetry record waits for its partner
	// before it is stored alone (<= 0: DefaultOTLPFlushAfter).
	FlushAfter time.Duration
	// Observe, when set, times one commit of the writer: n batches that
	// started at start.
	Observe func(n int, start time.Time)
	// Exported, when set, counts the OTLP records of an export: stored
	// (correlated into activity) and rejected.
	Exported func(stored, rejected int64)
	Now      func() time.Time
	Log      *slog.Logger
}

// Service is the activity capability. It implements apiv1.ActivityServer;
// OTLPLogs and OTLPMetrics are its OTLP services. Run its loops with Run.
type Service struct {
	apiv1.UnimplementedActivityServer
	d      Deps
	prices *pricing.Table
	// writer commits rows and tel correlates OTLP telemetry into them
	// (both nil without an activity store).
	writer    *writer
	tel       *telemetry
	redactors redactors
}

var _ apiv1.ActivityServer = (*Service)(nil)

// New returns a Service over d, its correlation state loaded from the
// activity store.
func New(d Deps) *Service {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Service{d: d, prices: d.Prices}
	if s.prices == nil {
		s.prices = pricing.Shipped()
	}
	if d.Store != nil {
		s.writer = newWriter(d.Store, d.Hub, d.Log)
		s.writer.observe, s.writer.owner, s.writer.render = d.Observe, d.Members.Owner, s.activityRow
		s.tel = newTelemetry(s.writer, d.FlushAfter, d.Now, d.Log)
		if err := s.tel.load(context.Background(), d.Store); err != nil {
			d.Log.Error("telemetry state not loaded: records waiting for a partner are lost", "err", err)
		}
	}
	return s
}

// FanOut has committed rows go to fan instead of this broker's live
// streams; fan hands every broker's rows, in commit order, to the returned
// deliver (several brokers; server/clusteractivity.go). Call it before
// Run. Without a writer (no activity store) deliver does nothing.
func (s *Service) FanOut(fan func(rows []store.ActivityEvent)) (deliver func(rows []store.ActivityEvent)) {
	if s.writer == nil {
		return func([]store.ActivityEvent) {}
	}
	s.writer.fan = fan
	return s.writer.deliver
}

// Run runs the writer and the telemetry flush timer until ctx ends.
func (s *Service) Run(ctx context.Context) {
	if s.writer == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.writer.run(ctx) })
	wg.Go(func() { s.tel.run(ctx) })
	wg.Wait()
}

// Enabled reports whether the broker keeps activity (an activity store).
func (s *Service) Enabled() bool { return s.writer != nil }

// Write commits b to the activity store (objective markers, approval
// decisions, tool actions the broker records) and returns its rows once
// durable.
func (s *Service) Write(ctx context.Context, b store.ActivityBatch) ([]store.ActivityEvent, error) {
	if s.writer == nil {
		return nil, errNoActivityStore
	}
	return s.writer.write(ctx, b)
}

// Disconnect ends the live activity streams key holds whose credential
// match accepts (every one when match is nil).
func (s *Service) Disconnect(key string, match func(cred string) bool) {
	s.d.Hub.Disconnect(key, match)
}

// CloseStreams ends every live activity stream and refuses new ones.
func (s *Service) CloseStreams() { s.d.Hub.Close() }

// DrainTelemetry stores what member's telemetry still had waiting as rows
// of the member whose id is id, which is being deleted (see
// telemetry.drain); nothing without an activity store.
func (s *Service) DrainTelemetry(ctx context.Context, member, id string) error {
	if s.tel == nil || id == "" {
		return nil
	}
	return s.tel.drain(ctx, member, id)
}

func (s *Service) now() time.Time { return s.d.Now() }

// principal returns the caller; the broker's interceptors guarantee one on
// every non-public method.
func principal(ctx context.Context) *auth.Principal {
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		panic("activity: non-public method reached without a principal")
	}
	return p
}

// ownStream checks that p writes its own stream (gate: self).
func (s *Service) ownStream(p *auth.Principal, name string) error {
	if name == "" {
		return apierr.Invalid("name", "is required")
	}
	if name != p.Member {
		return fmt.Errorf("%w: you may only write your own activity", auth.ErrForbidden)
	}
	if s.writer == nil {
		return errNoActivityStore
	}
	return nil
}

// readableStream checks that p may read name's activity (gate: read/self):
// its own, or any member's with activity.read. It returns the member id p
// reads: a holder of activity.read reads every member the name has had
// (""), a member only itself, never an earlier, deleted member of its name
// (docs/DECISIONS.md, "A deleted member's data stays its own"). A name
// no member has now is 404, except to a holder of activity.read when a
// deleted member had it: what that member left is read until pruned,
// whether or not the name was taken again.
func (s *Service) readableStream(p *auth.Principal, name string) (string, error) {
	if name == "" {
		return "", apierr.Invalid("name", "is required")
	}
	if name != p.Member && !p.Has(auth.ActivityRead) {
		return "", fmt.Errorf("%w: reading another member's activity needs %s", auth.ErrForbidden, auth.ActivityRead)
	}
	id, ok := s.d.Members.Current(name)
	if !ok && !(p.Has(auth.ActivityRead) && s.d.Members.WasMember(name)) {
		return "", apierr.Errorf(apierr.CodeNotFound, "no member %q", name)
	}
	if s.d.Store == nil {
		return "", errNoActivityStore
	}
	if p.Has(auth.ActivityRead) {
		return "", nil
	}
	return id, nil
}

// UploadActivity implements apiv1.ActivityServer: 1 to 500 events into the
// caller's own stream, answered once they are committed.
func (s *Service) UploadActivity(ctx context.Context, req *apiv1.UploadActivityRequest) (*apiv1.UploadActivityResponse, error) {
	p := principal(ctx)
	if err := s.ownStream(p, req.GetName()); err != nil {
		return nil, err
	}
	in := req.GetEvents()
	if len(in) == 0 || len(in) > maxUploadEvents {
		return nil, apierr.Invalid("events", "must hold 1 to %d events, not %d", maxUploadEvents, len(in))
	}
	now := s.now()
	evs := make([]store.ActivityEvent, len(in))
	for i, e := range in {
		ev, err := eventFromProto(fmt.Sprintf("events[%d]", i), e, now)
		if err != nil {
			return nil, err
		}
		ev.Member = p.Member
		evs[i] = ev
	}
	red, err := s.redactor(ctx)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		ev := &evs[i]
		ev.Data = red.Bytes(ev.Data)
		ev.ObjectiveID = red.String(ev.ObjectiveID)
		ev.ResponseID = red.String(ev.ResponseID)
	}
	rows, err := s.writer.write(ctx, store.ActivityBatch{Events: evs})
	if err != nil {
		return nil, err
	}
	return &apiv1.UploadActivityResponse{Accepted: int32(len(rows))}, nil
}

// eventFromProto checks one uploaded event, field naming it in errors.
func eventFromProto(field string, e *apiv1.ActivityEventInput, now time.Time) (store.ActivityEvent, error) {
	ev := store.ActivityEvent{Kind: e.GetKind(), TS: now}
	if !slices.Contains(activityKinds, ev.Kind) {
		return ev, apierr.Invalid(field+".kind", "must be one of %s", strings.Join(activityKinds, ", "))
	}
	if e.Ts != nil {
		ts, err := msParam(field+".ts", e.GetTs())
		if err != nil {
			return ev, err
		}
		ev.TS = ts
	}
	if e.ObjectiveId != nil {
		id := e.GetObjectiveId()
		if id == "" || len(id) > maxObjectiveIDLen || strings.ContainsFunc(id, unicode.IsControl) {
			return ev, apierr.Invalid(field+".objectiveId", "must be 1 to %d bytes without control characters", maxObjectiveIDLen)
		}
		ev.ObjectiveID = id
	}
	if e.GetData() == nil {
		return ev, apierr.Invalid(field+".data", "is required: a JSON object")
	}
	switch ev.Kind {
	case store.KindObjectiveOpen, store.KindObjectiveClose:
		if ev.ObjectiveID == "" {
			return ev, apierr.Invalid(field+".objectiveId", "is required for %s", ev.Kind)
		}
		if ev.Kind == store.KindObjectiveClose && !slices.Contains(closeReasons, e.GetData().GetFields()["reason"].GetStringValue()) {
			return ev, apierr.Invalid(field+".data.reason", "must be one of %s", strings.Join(closeReasons, ", "))
		}
	}
	if ev.Kind == store.KindLLMExchange {
		ev.ResponseID = e.GetData().GetFields()["responseId"].GetStringValue()
	}
	data, err := protojson.Marshal(e.GetData())
	if err != nil {
		return ev, apierr.Invalid(field+".data", "%v", err)
	}
	if len(data) > maxEventData {
		return ev, apierr.Errorf(apierr.CodePayloadTooLarge, "%s.data: over %d bytes", field, maxEventData)
	}
	ev.Data = data
	return ev, nil
}

// msParam reads an epoch-ms time of the wire.
func msParam(field string, v float64) (time.Time, error) {
	if math.IsNaN(v) || v < 0 || v > maxTS {
		return time.Time{}, apierr.Invalid(field, "must be a time in epoch milliseconds")
	}
	return time.UnixMilli(int64(v)), nil
}

// timeRange reads optional from and to bounds.
func timeRange(from, to *float64) (f, t time.Time, err error) {
	if from != nil {
		if f, err = msParam("from", *from); err != nil {
			return f, t, err
		}
	}
	if to != nil {
		if t, err = msParam("to", *to); err != nil {
			return f, t, err
		}
	}
	if from != nil && to != nil && t.Before(f) {
		return f, t, apierr.Invalid("to", "must not be before from")
	}
	return f, t, nil
}

// listLimit reads an optional limit: at least 1, at most maxActivityRows
// (more is that many).
func listLimit(v *int32) (int, error) {
	if v == nil {
		return maxActivityRows, nil
	}
	if *v < 1 {
		return 0, apierr.Invalid("limit", "must be at least 1")
	}
	return min(int(*v), maxActivityRows), nil
}

// kindFilter reads kind values, repeated or comma-separated.
func kindFilter(vs []string) ([]string, error) {
	var out []string
	for _, v := range vs {
		for k := range strings.SplitSeq(v, ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			if !slices.Contains(activityKinds, k) {
				return nil, apierr.Invalid("kind", "%q is not one of %s", k, strings.Join(activityKinds, ", "))
			}
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// ListActivity implements apiv1.ActivityServer: newest first, at most 1,000.
func (s *Service) ListActivity(ctx context.Context, req *apiv1.ListActivityRequest) (*apiv1.ListActivityResponse, error) {
	p := principal(ctx)
	id, err := s.readableStream(p, req.GetName())
	if err != nil {
		return nil, err
	}
	f := store.ActivityFilter{Member: req.GetName(), MemberUID: id, MaxBytes: maxListBytes}
	if f.From, f.To, err = timeRange(req.From, req.To); err != nil {
		return nil, err
	}
	if f.Kinds, err = kindFilter(req.GetKind()); err != nil {
		return nil, err
	}
	if f.Limit, err = listLimit(req.Limit); err != nil {
		return nil, err
	}
	rows, err := s.d.Store.ListActivity(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.ListActivityResponse{Activity: make([]*apiv1.ActivityRow, len(rows))}
	for i, r := range rows {
		resp.Activity[i] = s.activityRow(r)
	}
	return resp, nil
}

// StreamActivity implements apiv1.ActivityServer.
func (s *Service) StreamActivity(req *apiv1.StreamActivityRequest, stream apiv1.Activity_StreamActivityServer) error {
	ctx := stream.Context()
	p := principal(ctx)
	f, err := s.Attach(ctx, p, req.GetName(), req.GetLastId())
	if err != nil {
		return err
	}
	defer f.Close()
	ready := &apiv1.ActivityStreamReady{Member: req.GetName()}
	return s.d.Streams.Serve(ctx, f, func() error {
		return stream.Send(&apiv1.StreamActivityResponse{Event: &apiv1.StreamActivityResponse_Ready{Ready: ready}})
	}, func(ev *hub.Event) error {
		return stream.Send(&apiv1.StreamActivityResponse{Event: &apiv1.StreamActivityResponse_Row{Row: ev.Value.(*apiv1.ActivityRow)}})
	})
}

// Attach opens a stream of member's activity for p (gate: read/self):
// with lastID, every row after it, then live ones; without, live ones
// only. As for messages, the live subscription is taken before the store
// is read. It serves StreamActivity and the SSE route.
func (s *Service) Attach(ctx context.Context, p *auth.Principal, member, lastID string) (Stream, error) {
	id, err := s.readableStream(p, member)
	if err != nil {
		return nil, err
	}
	return s.d.Streams.Open(ctx, p, member, lastID, s.d.Store.LastActivityID, func(ctx context.Context, after int64, n int) ([]*hub.Event, int64, bool, error) {
		n = min(n, activityReplayPage)
		rows, err := s.d.Store.ActivityAfter(ctx, member, id, after, n)
		if err != nil || len(rows) == 0 {
			return nil, after, false, err
		}
		evs := make([]*hub.Event, len(rows))
		for i, r := range rows {
			evs[i] = hub.NewEvent(r.ID, s.activityRow(r))
		}
		return evs, rows[len(rows)-1].ID, len(rows) == n, nil
	})
}

// UploadGenAi implements apiv1.ActivityServer: one inference of the caller,
// {ts?, request, response}. The bytes are kept as they came (once per
// SHA-256); the record is their parse.
func (s *Service) UploadGenAi(ctx context.Context, req *apiv1.UploadGenAiRequest) (*apiv1.UploadGenAiResponse, error) {
	p := principal(ctx)
	if err := s.ownStream(p, req.GetName()); err != nil {
		return nil, err
	}
	body := req.GetBody()
	if len(body) > MaxGenAIUpload {
		return nil, apierr.Errorf(apierr.CodePayloadTooLarge, "inference upload over %d bytes", MaxGenAIUpload)
	}
	// Redacted as it came, so the bytes kept and the record parsed from
	// them hold no secret.
	red, err := s.redactor(ctx)
	if err != nil {
		return nil, err
	}
	body = red.Bytes(body)
	u, err := genai.DecodeUpload(body)
	if err != nil {
		return nil, genaiInvalid(err)
	}
	parsed, err := genai.Parse(u)
	if err != nil {
		return nil, genaiInvalid(err)
	}
	rec := store.GenAIRecord{
		ID: uuid.NewString(), Member: p.Member, TS: u.TS, Provider: parsed.Provider, API: parsed.API,
		Model: parsed.Model, ResponseID: parsed.ResponseID,
		Usage: store.GenAIUsage{
			InputTokens: parsed.Usage.InputTokens, OutputTokens: parsed.Usage.OutputTokens,
			CacheReadTokens: parsed.Usage.CacheReadTokens, CacheCreationTokens: parsed.Usage.CacheCreationTokens,
			ReasoningTokens: parsed.Usage.ReasoningTokens,
		},
		Raw: body,
	}
	if rec.TS.IsZero() {
		rec.TS = s.now()
	}
	if rec.SystemInstructions, err = json.Marshal(parsed.SystemInstructions); err != nil {
		return nil, err
	}
	if rec.ToolDefinitions, err = json.Marshal(parsed.ToolDefinitions); err != nil {
		return nil, err
	}
	if rec.InputMessages, err = json.Marshal(parsed.InputMessages); err != nil {
		return nil, err
	}
	if rec.OutputMessages, err = json.Marshal(parsed.OutputMessages); err != nil {
		return nil, err
	}
	rec.MemberUID = s.d.Members.Owner(rec.Member)
	if _, err := s.writer.write(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{rec}}); err != nil {
		return nil, err
	}
	return &apiv1.UploadGenAiResponse{Inference: s.genaiRecord(rec)}, nil
}

// genaiInvalid answers an upload the genai engine refused.
func genaiInvalid(err error) error {
	msg := strings.TrimPrefix(err.Error(), genai.ErrInvalid.Error()+": ")
	return &apierr.Error{Code: apierr.CodeBadRequest, Message: "inference upload: " + msg, Err: err}
}

// ListGenAi implements apiv1.ActivityServer: oldest first, at most 1,000.
func (s *Service) ListGenAi(ctx context.Context, req *apiv1.ListGenAiRequest) (*apiv1.ListGenAiResponse, error) {
	p := principal(ctx)
	id, err := s.readableStream(p, req.GetName())
	if err != nil {
		return nil, err
	}
	f := store.GenAIFilter{Member: req.GetName(), MemberUID: id, MaxBytes: maxListBytes}
	switch req.GetView() {
	case "":
	case "summary":
		f.Summary = true
	default:
		return nil, apierr.Invalid("view", "must be summary or absent")
	}
	if f.From, f.To, err = timeRange(req.From, req.To); err != nil {
		return nil, err
	}
	if f.Limit, err = listLimit(req.Limit); err != nil {
		return nil, err
	}
	recs, err := s.d.Store.ListGenAI(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &apiv1.ListGenAiResponse{Inferences: make([]*apiv1.GenAiRecord, len(recs))}
	for i, r := range recs {
		resp.Inferences[i] = s.genaiRecord(r)
	}
	return resp, nil
}

// GetGenAi implements apiv1.ActivityServer. An id that is absent or
// another member's is the same 404.
func (s *Service) GetGenAi(ctx context.Context, req *apiv1.GetGenAiRequest) (*apiv1.GetGenAiResponse, error) {
	p := principal(ctx)
	id, err := s.readableStream(p, req.GetName())
	if err != nil {
		return nil, err
	}
	notFound := apierr.Errorf(apierr.CodeNotFound, "no inference record %q of %s", req.GetId(), req.GetName())
	r, err := s.d.Store.GetGenAI(ctx, req.GetName(), req.GetId())
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, notFound
		}
		return nil, err
	}
	if id != "" && r.MemberUID != id {
		// An earlier member's of the name: not this member's to read.
		return nil, notFound
	}
	return &apiv1.GetGenAiResponse{Inference: s.genaiRecord(r)}, nil
}

// genaiToProto converts a stored record; a summary (nil arrays) has no
// message arrays. RawSHA never crosses the wire.
func genaiToProto(r store.GenAIRecord) *apiv1.GenAiRecord {
	out := &apiv1.GenAiRecord{
		Id: r.ID, Member: r.Member, Ts: wire.MS(r.TS), Provider: r.Provider, Api: r.API, Model: r.Model, ResponseId: r.ResponseID,
		Usage: &apiv1.GenAiUsage{
			InputTokens: float64(r.Usage.InputTokens), OutputTokens: float64(r.Usage.OutputTokens),
			CacheReadTokens: float64(r.Usage.CacheReadTokens), CacheCreationTokens: float64(r.Usage.CacheCreationTokens),
			ReasoningTokens: float64(r.Usage.ReasoningTokens),
		},
	}
	out.SystemInstructions = listValue(r.SystemInstructions)
	out.ToolDefinitions = listValue(r.ToolDefinitions)
	out.InputMessages = listValue(r.InputMessages)
	out.OutputMessages = listValue(r.OutputMessages)
	return out
}

// listValue parses a stored JSON array; nil (a summary) stays absent.
func listValue(b []byte) *structpb.ListValue {
	if b == nil {
		return nil
	}
	l := &structpb.ListValue{}
	if err := protojson.Unmarshal(b, l); err != nil {
		return &structpb.ListValue{}
	}
	return l
}

// GetUsage implements apiv1.ActivityServer: a member's model usage over a
// time range, with the costs the price table gives what carried none, in
// total, per model and per member of the name the caller may read.
func (s *Service) GetUsage(ctx context.Context, req *apiv1.GetUsageRequest) (*apiv1.GetUsageResponse, error) {
	p := principal(ctx)
	id, err := s.readableStream(p, req.GetName())
	if err != nil {
		return nil, err
	}
	from, to, err := timeRange(req.From, req.To)
	if err != nil {
		return nil, err
	}
	gs, err := s.d.Store.ActivityUsage(ctx, s.usageFilter(req.GetName(), id, from, to))
	if err != nil {
		return nil, err
	}
	sum := newUsageSum(s.prices)
	sum.add(req.GetName(), gs)
	if cur, _ := s.d.Members.Current(req.GetName()); cur != "" {
		// The member itself is listed, used or not.
		sum.member(req.GetName(), cur)
	}
	return &apiv1.GetUsageResponse{Usage: sum.total, Models: modelList(sum.models), Members: s.memberList(sum)}, nil
}
