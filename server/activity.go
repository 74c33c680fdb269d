package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/genai"
	"svc/server/hub"
	"svc/store"
)

// Activity kinds besides the objective markers (spec: Activity).
const (
	kindLLMExchange = "llm_exchange"
	kindToolAction  = "tool_action"
	kindUserPrompt  = "user_prompt"
	kindOpaqueHTTP  = "opaque_http"
)

// activityKinds are every kind a row may have, and so every kind filter
// value.
var activityKinds = []string{kindLLMExchange, kindToolAction, activityOpen, activityClose, kindUserPrompt, kindOpaqueHTTP}

// closeReasons are the terminal reasons of an objective_close marker.
var closeReasons = []string{"done", "cancelled", "reassigned", "runner_shutdown"}

// Activity bounds.
const (
	// maxUploadEvents is the most events one upload carries (spec).
	maxUploadEvents = 500
	// maxActivityRows is the most rows one list or trace returns (spec).
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
var errNoActivityStore = Errorf(CodeUnavailable, "this broker keeps no activity")

// Activity implements apiv1.ActivityServer: activity streams, inference
// records, objective traces and usage.
type Activity struct {
	apiv1.UnimplementedActivityServer
	*core
}

var _ apiv1.ActivityServer = (*Activity)(nil)

// ownStream checks that p writes its own stream (gate: self).
func (c *core) ownStream(p *auth.Principal, name string) error {
	if name == "" {
		return invalid("name", "is required")
	}
	if name != p.Member {
		return fmt.Errorf("%w: you may only write your own activity", auth.ErrForbidden)
	}
	if c.actWriter == nil {
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
func (c *core) readableStream(p *auth.Principal, name string) (string, error) {
	if name == "" {
		return "", invalid("name", "is required")
	}
	if name != p.Member && !p.Has(auth.ActivityRead) {
		return "", fmt.Errorf("%w: reading another member's activity needs %s", auth.ErrForbidden, auth.ActivityRead)
	}
	m, ok := c.team.Member(name)
	if !ok && !(p.Has(auth.ActivityRead) && c.ids.wasMember(name)) {
		return "", Errorf(CodeNotFound, "no member %q", name)
	}
	if c.activity == nil {
		return "", errNoActivityStore
	}
	if p.Has(auth.ActivityRead) {
		return "", nil
	}
	return m.ID, nil
}

// UploadActivity implements apiv1.ActivityServer: 1 to 500 events into the
// caller's own stream, answered once they are committed.
func (s *Activity) UploadActivity(ctx context.Context, req *apiv1.UploadActivityRequest) (*apiv1.UploadActivityResponse, error) {
	p := mustPrincipal(ctx)
	if err := s.ownStream(p, req.GetName()); err != nil {
		return nil, err
	}
	in := req.GetEvents()
	if len(in) == 0 || len(in) > maxUploadEvents {
		return nil, invalid("events", "must hold 1 to %d events, not %d", maxUploadEvents, len(in))
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
	rows, err := s.actWriter.write(ctx, store.ActivityBatch{Events: evs})
	if err != nil {
		return nil, err
	}
	return &apiv1.UploadActivityResponse{Accepted: int32(len(rows))}, nil
}

// eventFromProto checks one uploaded event, field naming it in errors.
func eventFromProto(field string, e *apiv1.ActivityEventInput, now time.Time) (store.ActivityEvent, error) {
	ev := store.ActivityEvent{Kind: e.GetKind(), TS: now}
	if !slices.Contains(activityKinds, ev.Kind) {
		return ev, invalid(field+".kind", "must be one of %s", strings.Join(activityKinds, ", "))
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
			return ev, invalid(field+".objectiveId", "must be 1 to %d bytes without control characters", maxObjectiveIDLen)
		}
		ev.ObjectiveID = id
	}
	if e.GetData() == nil {
		return ev, invalid(field+".data", "is required: a JSON object")
	}
	switch ev.Kind {
	case activityOpen, activityClose:
		if ev.ObjectiveID == "" {
			return ev, invalid(field+".objectiveId", "is required for %s", ev.Kind)
		}
		if ev.Kind == activityClose && !slices.Contains(closeReasons, e.GetData().GetFields()["reason"].GetStringValue()) {
			return ev, invalid(field+".data.reason", "must be one of %s", strings.Join(closeReasons, ", "))
		}
	}
	if ev.Kind == kindLLMExchange {
		ev.ResponseID = e.GetData().GetFields()["responseId"].GetStringValue()
	}
	data, err := protojson.Marshal(e.GetData())
	if err != nil {
		return ev, invalid(field+".data", "%v", err)
	}
	if len(data) > maxEventData {
		return ev, Errorf(CodePayloadTooLarge, "%s.data: over %d bytes", field, maxEventData)
	}
	ev.Data = data
	return ev, nil
}

// msParam reads an epoch-ms time of the wire.
func msParam(field string, v float64) (time.Time, error) {
	if math.IsNaN(v) || v < 0 || v > maxTS {
		return time.Time{}, invalid(field, "must be a time in epoch milliseconds")
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
		return f, t, invalid("to", "must not be before from")
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
		return 0, invalid("limit", "must be at least 1")
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
				return nil, invalid("kind", "%q is not one of %s", k, strings.Join(activityKinds, ", "))
			}
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	return out, nil
}

// ListActivity implements apiv1.ActivityServer: newest first, at most 1,000.
func (s *Activity) ListActivity(ctx context.Context, req *apiv1.ListActivityRequest) (*apiv1.ListActivityResponse, error) {
	p := mustPrincipal(ctx)
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
	rows, err := s.activity.ListActivity(ctx, f)
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
func (s *Activity) StreamActivity(req *apiv1.StreamActivityRequest, stream apiv1.Activity_StreamActivityServer) error {
	ctx := stream.Context()
	p := mustPrincipal(ctx)
	f, err := s.attachActivity(ctx, p, req.GetName(), req.GetLastId())
	f, err = s.counted(f, err, streamActivity)
	if err != nil {
		return err
	}
	defer f.Close()
	ready := &apiv1.ActivityStreamReady{Member: req.GetName()}
	return serveFeed(ctx, f, func() error {
		return stream.Send(&apiv1.StreamActivityResponse{Event: &apiv1.StreamActivityResponse_Ready{Ready: ready}})
	}, func(ev *hub.Event) error {
		return stream.Send(&apiv1.StreamActivityResponse{Event: &apiv1.StreamActivityResponse_Row{Row: ev.Value.(*apiv1.ActivityRow)}})
	})
}

// attachActivity opens a feed of member's activity for p (gate:
// read/self): with lastID, every row after it, then live ones; without,
// live ones only. As for messages, the live subscription is taken before
// the store is read.
func (c *core) attachActivity(ctx context.Context, p *auth.Principal, member, lastID string) (*Feed, error) {
	id, err := c.readableStream(p, member)
	if err != nil {
		return nil, err
	}
	after, err := ParseMessageID(lastID)
	if err != nil {
		return nil, err
	}
	resume := lastID != ""
	sub, err := c.subscribe(c.actHub, member, p)
	if err != nil {
		return nil, err
	}
	if resume && after > 0 {
		// An id past the newest row comes from before a store reset: every
		// row here is new to the client.
		newest, err := c.activity.LastActivityID(ctx)
		if err != nil {
			sub.Close()
			return nil, err
		}
		if after > newest {
			after = 0
		}
	}
	return newFeed(sub, after, resume, func(ctx context.Context, after int64, n int) ([]*hub.Event, int64, bool, error) {
		n = min(n, activityReplayPage)
		rows, err := c.activity.ActivityAfter(ctx, member, id, after, n)
		if err != nil || len(rows) == 0 {
			return nil, after, false, err
		}
		evs := make([]*hub.Event, len(rows))
		for i, r := range rows {
			evs[i] = hub.NewEvent(r.ID, c.activityRow(r))
		}
		return evs, rows[len(rows)-1].ID, len(rows) == n, nil
	}, formatActivityID), nil
}

// UploadGenAi implements apiv1.ActivityServer: one inference of the caller,
// {ts?, request, response}. The bytes are kept as they came (once per
// SHA-256); the record is their parse.
func (s *Activity) UploadGenAi(ctx context.Context, req *apiv1.UploadGenAiRequest) (*apiv1.UploadGenAiResponse, error) {
	p := mustPrincipal(ctx)
	if err := s.ownStream(p, req.GetName()); err != nil {
		return nil, err
	}
	body := req.GetBody()
	if len(body) > MaxGenAIUpload {
		return nil, Errorf(CodePayloadTooLarge, "inference upload over %d bytes", MaxGenAIUpload)
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
		ID: newID(), Member: p.Member, TS: u.TS, Provider: parsed.Provider, API: parsed.API,
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
	rec.MemberUID = s.ids.owner(rec.Member)
	if _, err := s.actWriter.write(ctx, store.ActivityBatch{GenAI: []store.GenAIRecord{rec}}); err != nil {
		return nil, err
	}
	return &apiv1.UploadGenAiResponse{Inference: s.genaiRecord(rec)}, nil
}

// genaiInvalid answers an upload the genai engine refused.
func genaiInvalid(err error) error {
	msg := strings.TrimPrefix(err.Error(), genai.ErrInvalid.Error()+": ")
	return &Error{Code: CodeBadRequest, Message: "inference upload: " + msg, Err: err}
}

// ListGenAi implements apiv1.ActivityServer: oldest first, at most 1,000.
func (s *Activity) ListGenAi(ctx context.Context, req *apiv1.ListGenAiRequest) (*apiv1.ListGenAiResponse, error) {
	p := mustPrincipal(ctx)
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
		return nil, invalid("view", "must be summary or absent")
	}
	if f.From, f.To, err = timeRange(req.From, req.To); err != nil {
		return nil, err
	}
	if f.Limit, err = listLimit(req.Limit); err != nil {
		return nil, err
	}
	recs, err := s.activity.ListGenAI(ctx, f)
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
func (s *Activity) GetGenAi(ctx context.Context, req *apiv1.GetGenAiRequest) (*apiv1.GetGenAiResponse, error) {
	p := mustPrincipal(ctx)
	id, err := s.readableStream(p, req.GetName())
	if err != nil {
		return nil, err
	}
	notFound := Errorf(CodeNotFound, "no inference record %q of %s", req.GetId(), req.GetName())
	r, err := s.activity.GetGenAI(ctx, req.GetName(), req.GetId())
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
		Id: r.ID, Member: r.Member, Ts: ms(r.TS), Provider: r.Provider, Api: r.API, Model: r.Model, ResponseId: r.ResponseID,
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
func (s *Activity) GetUsage(ctx context.Context, req *apiv1.GetUsageRequest) (*apiv1.GetUsageResponse, error) {
	p := mustPrincipal(ctx)
	id, err := s.readableStream(p, req.GetName())
	if err != nil {
		return nil, err
	}
	from, to, err := timeRange(req.From, req.To)
	if err != nil {
		return nil, err
	}
	gs, err := s.activity.ActivityUsage(ctx, s.usageFilter(req.GetName(), id, from, to))
	if err != nil {
		return nil, err
	}
	sum := newUsageSum(s.prices)
	sum.add(req.GetName(), gs)
	if cur := s.ids.current(req.GetName()); cur != "" {
		// The member itself is listed, used or not.
		sum.member(req.GetName(), cur)
	}
	return &apiv1.GetUsageResponse{Usage: sum.total, Models: modelList(sum.models), Members: s.memberList(sum)}, nil
}
