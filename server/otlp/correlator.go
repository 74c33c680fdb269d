package otlp

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Event kinds a Correlator emits.
const (
	// KindLLMExchange is one model request and its response.
	KindLLMExchange = "llm_exchange"
	// KindToolAction is a tool decision or result.
	KindToolAction = "tool_action"
	// KindUserPrompt is a prompt the user gave the agent.
	KindUserPrompt = "user_prompt"
	// KindOpaqueHTTP is Codex telemetry stored without being read.
	KindOpaqueHTTP = "opaque_http"
)

const (
	// DefaultFlushAfter is how long a waiting record is kept: long enough
	// for a model's slowest answer, short enough that a lost accounting
	// record still shows up within minutes.
	DefaultFlushAfter = 120 * time.Second
	// DefaultMaxPending bounds each member's waiting records; an agent has
	// a handful in flight, so 256 is only reached by a broken producer.
	DefaultMaxPending = 256
	// DefaultMaxBytes bounds the bytes of each member's waiting records (and
	// so of its persisted state): 256 records of the ~60 KB bodies Claude
	// Code exports.
	DefaultMaxBytes = 16 << 20
	// bodyMemory is how long a session that sent a request body counts as
	// one that sends them (see Early).
	bodyMemory = 10 * time.Minute
	// maxSessions is how many sessions the correlator remembers before it
	// forgets the quiet ones; maxGap is the widest numbering gap Early
	// checks record by record.
	maxSessions = 1024
	maxGap      = 1024
)

// Event is one activity event: its kind, time and data as
// docs/TELEMETRY.md gives them. In llm_exchange data, system, messages and
// content are json.RawMessage (thinking removed), tools is []string, usage
// is map[string]any of int64, costUsd and durationMs are float64; in
// tool_action data, input is json.RawMessage.
type Event struct {
	// Kind is one of the Kind constants.
	Kind string
	// TS is the record's time, else the time Ingest took it.
	TS time.Time
	// Data is the event's data object, ready for encoding/json.
	Data map[string]any
}

// Options tunes a Correlator; zero values take the defaults.
type Options struct {
	// FlushAfter is how long a record waits for its partner, counted from
	// the Ingest that took it (not from the record's own time, so a
	// producer's clock cannot keep state alive). Default DefaultFlushAfter.
	FlushAfter time.Duration
	// MaxPending bounds each member's waiting records: queued bodies,
	// exchanges waiting for a response and held responses together.
	// Default DefaultMaxPending.
	MaxPending int
	// MaxBytes bounds the bytes those records keep. Default
	// DefaultMaxBytes.
	MaxBytes int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Correlator turns records into activity events, keeping per member the
// records that wait for a partner. It is safe for concurrent use.
type Correlator struct {
	opts    Options
	mu      sync.Mutex
	members map[string]*memberState
	// sessions is what Early needs of each recent session (member and
	// session.id).
	sessions map[sessionKey]*sessionSeen
}

// sessionKey names one agent session of a member.
type sessionKey struct{ member, session string }

// sessionSeen is what the correlator took of one session's records.
type sessionSeen struct {
	bodyAt time.Time // the last request body
	seen   time.Time // the last record
	maxSeq int64     // the highest event.sequence
}

// NewCorrelator returns a correlator with no state.
func NewCorrelator(o Options) *Correlator {
	if o.FlushAfter <= 0 {
		o.FlushAfter = DefaultFlushAfter
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Correlator{opts: o, members: map[string]*memberState{}, sessions: map[sessionKey]*sessionSeen{}}
}

// Kinds of waiting records.
const (
	itemBody    = "body"    // an api_request_body no accounting claimed yet
	itemClaimed = "claimed" // body and accounting, waiting for the response
	itemHeld    = "held"    // an api_response_body before its accounting
	// itemCodexCall is a Codex API request waiting for the token counts
	// of its response (see codexRecord).
	itemCodexCall = "codex_call"
)

// item is one waiting record of a member.
type item struct {
	Kind string `json:"kind"`
	// Order is the member's arrival counter: the lowest is the oldest.
	Order uint64 `json:"order"`
	// Seen is when Ingest took the record (or, claimed, the accounting).
	Seen time.Time `json:"seen"`
	// BodySeen is, claimed, when Ingest took the body, kept (with Session
	// and Seq) to queue the body again if its response names another.
	BodySeen  *time.Time  `json:"bodySeen,omitempty"`
	Model     string      `json:"model,omitempty"`
	Session   string      `json:"session,omitempty"`
	Seq       *int64      `json:"seq,omitempty"`
	RequestID string      `json:"requestId,omitempty"`
	Req       *request    `json:"req,omitempty"`
	Acct      *accounting `json:"acct,omitempty"`
	Resp      *response   `json:"resp,omitempty"`
	Codex     *codexCall  `json:"codex,omitempty"`
}

// codexCall is a Codex record of one model call: its time and public
// attributes.
type codexCall struct {
	TS    time.Time         `json:"ts"`
	Attrs map[string]string `json:"attrs"`
}

// size is what the item counts toward MaxBytes.
func (it *item) size() int {
	n := 128 + len(it.Model) + len(it.Session) + len(it.RequestID)
	if it.Codex != nil {
		for k, v := range it.Codex.Attrs {
			n += len(k) + len(v)
		}
	}
	if it.Req != nil {
		n += it.Req.size()
	}
	if it.Acct != nil {
		n += len(it.Acct.Model) + len(it.Acct.RequestID)
	}
	if it.Resp != nil {
		n += it.Resp.size()
	}
	return n
}

// memberState is one member's waiting records, oldest first.
type memberState struct {
	items []*item
	bytes int
	next  uint64
}

func (s *memberState) add(it *item) {
	it.Order = s.next
	s.next++
	s.items = append(s.items, it)
	s.bytes += it.size()
}

func (s *memberState) remove(i int) *item {
	it := s.items[i]
	s.items = slices.Delete(s.items, i, i+1)
	s.bytes -= it.size()
	return it
}

// find returns the index of the first item of kind with requestID, or -1.
func (s *memberState) find(kind, requestID string) int {
	return slices.IndexFunc(s.items, func(it *item) bool { return it.Kind == kind && it.RequestID == requestID })
}

// findBody returns the index of the queued body of model with bodyID, or -1.
func (s *memberState) findBody(model, bodyID string) int {
	if bodyID == "" {
		return -1
	}
	return slices.IndexFunc(s.items, func(it *item) bool {
		return it.Kind == itemBody && it.Model == model && it.Req.BodyID == bodyID
	})
}

// claimable returns the index of the body an accounting record of model
// and session claims, or -1: the lowest event.sequence of that model (bodies
// without one after those with one, arrival order breaking ties). Sessions
// number their events apart, so when both records name a session they must
// match.
func (s *memberState) claimable(model, session string) int {
	best := -1
	for i, it := range s.items {
		if it.Kind != itemBody || it.Model != model || (session != "" && it.Session != "" && it.Session != session) {
			continue
		}
		if best < 0 || seqBefore(it, s.items[best]) {
			best = i
		}
	}
	return best
}

func seqBefore(a, b *item) bool {
	switch {
	case a.Seq != nil && b.Seq != nil && *a.Seq != *b.Seq:
		return *a.Seq < *b.Seq
	case (a.Seq == nil) != (b.Seq == nil):
		return a.Seq != nil
	}
	return a.Order < b.Order
}

// Ingest adds one export's records of member and returns the events
// completed by it, oldest first, and how many records it could not use.
//
// Within one export, request bodies are taken first, then accounting
// records, then response bodies, so a batch that reorders them pairs them
// all the same. A response whose accounting record never comes is dropped
// when Due finds it old, not emitted: alone it has no model and nothing a
// reader could place. Evicting a held response (past MaxPending or
// MaxBytes) drops it likewise, without counting it in rejected, which
// counts only the records of this export.
func (c *Correlator) Ingest(member string, recs []Record) (events []Event, rejected int) {
	now := c.opts.Now()
	// Everything but the pairing (parsing bodies above all) runs before
	// the lock, so one member's big export does not hold up the others.
	var waiting []prepared
	for _, r := range recs {
		p, ok := prepare(r, now)
		switch {
		case !ok:
			rejected++
		case p.drop:
		case p.event != nil:
			events = append(events, *p.event)
		default:
			waiting = append(waiting, p)
		}
	}
	sort.SliceStable(waiting, func(a, b int) bool { return waiting[a].stage < waiting[b].stage })

	c.mu.Lock()
	defer c.mu.Unlock()
	c.note(member, recs, now)
	st := c.members[member]
	if st == nil {
		st = &memberState{}
		c.members[member] = st
	}
	events = c.enforce(st, events) // a restored state may be over the limits
	for _, p := range waiting {
		switch p.stage {
		case stageBody:
			p.body.Seen = now
			st.add(p.body)
		case stageAccounting:
			events = st.account(events, p.acct, p.session, now)
		case stageResponse:
			events = st.respond(events, p.requestID, p.resp, now)
		case stageCodex:
			events = st.codex(events, p.codex, p.codexTokens, now)
		}
		events = c.enforce(st, events)
	}
	if len(st.items) == 0 {
		delete(c.members, member)
	}
	sort.SliceStable(events, func(a, b int) bool { return events[a].TS.Before(events[b].TS) })
	return events, rejected
}

// note records what Early needs of recs: each session's highest
// event.sequence and when it last sent a request body.
func (c *Correlator) note(member string, recs []Record, now time.Time) {
	for _, r := range recs {
		seq := parseInt(r.Attrs["event.sequence"])
		body := r.Name == "api_request_body"
		if r.Agent == Codex || (seq == nil && !body) {
			continue
		}
		k := sessionKey{member, r.Attrs["session.id"]}
		s := c.sessions[k]
		if s == nil {
			c.forgetQuiet(now)
			s = &sessionSeen{maxSeq: -1}
			c.sessions[k] = s
		}
		s.seen = now
		if seq != nil {
			s.maxSeq = max(s.maxSeq, *seq)
		}
		if body {
			s.bodyAt = now
		}
	}
}

// forgetQuiet makes room for a session: past maxSessions it forgets those
// quiet for bodyMemory, and if all are recent, all of them (Early then
// lets exports through unheld until it has learnt them again).
func (c *Correlator) forgetQuiet(now time.Time) {
	if len(c.sessions) < maxSessions {
		return
	}
	for k, s := range c.sessions {
		if !s.seen.Add(bodyMemory).After(now) {
			delete(c.sessions, k)
		}
	}
	if len(c.sessions) >= maxSessions {
		clear(c.sessions)
	}
}

// Early reports whether recs, an export of member's, hold an accounting
// record that has overtaken the export carrying its request body: an
// exporter with two exports in flight (Claude Code's gRPC exporter on
// shutdown) can deliver a request's accounting and response before its
// body, and the exchange would be stored without either. It holds when the
// record's session sent bodies in the last 10 minutes, no body of its
// model waits in state or in recs, and a record numbered between the
// session's highest event.sequence taken and the record's own is in
// neither: the missing body is on its way. The caller then holds the
// export back briefly (see server/activity/telemetry.go); Early changes nothing.
func (c *Correlator) Early(member string, recs []Record) bool {
	type acct struct {
		session, model string
		seq            int64
	}
	// The accounting records first: most exports hold none, and those pay
	// one pass over their records and no allocation.
	var accts []acct
	for _, r := range recs {
		if r.Agent == Codex || r.Name != "api_request" {
			continue
		}
		a := r.Attrs
		if seq := parseInt(a["event.sequence"]); seq != nil && a["model"] != "" && a["request_id"] != "" {
			accts = append(accts, acct{a["session.id"], a["model"], *seq})
		}
	}
	if len(accts) == 0 {
		return false
	}
	inExport := map[string]map[int64]bool{} // session → sequence numbers
	bodies := map[[2]string]bool{}          // session, model
	for _, r := range recs {
		if r.Agent == Codex {
			continue
		}
		a := r.Attrs
		session := a["session.id"]
		if seq := parseInt(a["event.sequence"]); seq != nil {
			if inExport[session] == nil {
				inExport[session] = map[int64]bool{}
			}
			inExport[session][*seq] = true
		}
		if r.Name == "api_request_body" {
			bodies[[2]string{session, a["model"]}] = true
		}
	}
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ac := range accts {
		s := c.sessions[sessionKey{member, ac.session}]
		if s == nil || !s.bodyAt.Add(bodyMemory).After(now) || bodies[[2]string{ac.session, ac.model}] {
			continue
		}
		if st := c.members[member]; st != nil && st.claimable(ac.model, ac.session) >= 0 {
			continue
		}
		if s.maxSeq >= ac.seq-1 {
			continue
		}
		if ac.seq-s.maxSeq > maxGap {
			return true
		}
		for q := s.maxSeq + 1; q < ac.seq; q++ {
			if !inExport[ac.session][q] {
				return true
			}
		}
	}
	return false
}

// Stages of a record that pairs, in the order Ingest takes them.
const (
	stageBody = iota
	stageAccounting
	stageResponse
	// stageCodex records keep their order among themselves; they pair
	// with nothing of Claude's.
	stageCodex
)

// prepared is a record read for Ingest: either the event it gives alone,
// or what it brings to pairing.
type prepared struct {
	event     *Event
	stage     int
	body      *item       // stageBody
	acct      *accounting // stageAccounting
	session   string      // stageAccounting
	requestID string      // stageResponse
	resp      *response   // stageResponse
	// stageCodex: an API request, or (codexTokens) the token counts of
	// a response.
	codex       *codexCall
	codexTokens bool
	// drop: the record is used, and says nothing worth a row.
	drop bool
}

// prepare reads r, reporting whether it is usable: without the private
// attributes, timed by now when it has no time.
func prepare(r Record, now time.Time) (prepared, bool) {
	r.Attrs = publicAttrs(r.Attrs)
	if r.Time.IsZero() {
		r.Time = now
	}
	if r.Agent == Codex {
		return codexRecord(r), true
	}
	a := r.Attrs
	switch r.Name {
	case "api_request_body":
		model := a["model"]
		if model == "" || !hasKey(a, "body") {
			return prepared{}, false
		}
		var seq *int64
		if s, ok := a["event.sequence"]; ok {
			if seq = parseInt(s); seq == nil {
				return prepared{}, false
			}
		}
		req := parseRequest(a["body"], a["request_body_id"], r.Time)
		return prepared{stage: stageBody, body: &item{Kind: itemBody, Model: model, Session: a["session.id"], Seq: seq, Req: req}}, true

	case "api_request":
		acct := &accounting{
			TS:        r.Time,
			Model:     a["model"],
			RequestID: a["request_id"],
			Usage: usage{
				Input:         attrInt(a, "input_tokens"),
				Output:        attrInt(a, "output_tokens"),
				CacheRead:     attrInt(a, "cache_read_tokens"),
				CacheCreation: attrInt(a, "cache_creation_tokens"),
			},
			CostUSD:    attrFloat(a, "cost_usd"),
			DurationMs: attrFloat(a, "duration_ms"),
		}
		if acct.Model == "" {
			return prepared{}, false
		}
		return prepared{stage: stageAccounting, acct: acct, session: a["session.id"]}, true

	case "api_response_body":
		id := a["request_id"]
		if id == "" || !hasKey(a, "body") {
			return prepared{}, false
		}
		resp := parseResponse(a["body"], a["request_body_id"], a["message.id"])
		return prepared{stage: stageResponse, requestID: id, resp: resp}, true

	case "tool_decision", "tool_result":
		ev, ok := toolAction(r)
		if !ok {
			return prepared{}, false
		}
		return prepared{event: &ev}, true

	case "user_prompt":
		ev := userPrompt(r)
		return prepared{event: &ev}, true
	}
	return prepared{}, false
}

// account applies an accounting record: it claims a queued body of its
// model and waits for its response, or completes at once.
func (s *memberState) account(events []Event, acct *accounting, session string, now time.Time) []Event {
	var held *response
	if acct.RequestID != "" {
		if i := s.find(itemHeld, acct.RequestID); i >= 0 {
			held = s.remove(i).Resp
		}
	}
	// A held response names its body exactly; else the oldest claims.
	i := -1
	if held != nil {
		i = s.findBody(acct.Model, held.BodyID)
	}
	if i < 0 {
		i = s.claimable(acct.Model, session)
	}
	var body *item
	if i >= 0 {
		body = s.remove(i)
	}
	if held != nil || body == nil || acct.RequestID == "" {
		// Complete, or nothing to wait for: no body, or no id a response
		// could name.
		var req *request
		if body != nil {
			req = body.Req
		}
		return append(events, exchange(req, acct, held, false))
	}
	if i := s.find(itemClaimed, acct.RequestID); i >= 0 {
		old := s.remove(i)
		events = append(events, exchange(old.Req, old.Acct, nil, false))
	}
	s.add(&item{
		Kind: itemClaimed, Seen: now, Model: acct.Model, RequestID: acct.RequestID, Req: body.Req, Acct: acct,
		BodySeen: &body.Seen, Session: body.Session, Seq: body.Seq,
	})
	return events
}

// respond applies a response body: it completes the exchange of its
// request id, or waits for its accounting record.
func (s *memberState) respond(events []Event, requestID string, resp *response, now time.Time) []Event {
	if i := s.find(itemClaimed, requestID); i >= 0 {
		it := s.remove(i)
		req := it.Req
		if resp.BodyID != "" && req.BodyID != "" && req.BodyID != resp.BodyID {
			// The oldest body was not this request's (its own request
			// failed, say): take the body the response names, and queue the
			// claimed one again.
			if j := s.findBody(it.Model, resp.BodyID); j >= 0 {
				req = s.remove(j).Req
				s.add(&item{Kind: itemBody, Seen: *it.BodySeen, Model: it.Model, Session: it.Session, Seq: it.Seq, Req: it.Req})
			}
		}
		return append(events, exchange(req, it.Acct, resp, false))
	}
	if i := s.find(itemHeld, requestID); i >= 0 {
		s.remove(i) // a repeated response replaces the one held
	}
	s.add(&item{Kind: itemHeld, Seen: now, RequestID: requestID, Resp: resp})
	return events
}

// codexRecord reads a Codex record; every one is usable. For each model
// call Codex sends an api_request record (its HTTP status and duration),
// then one sse_event record per event of the streamed response: most say
// only which event passed, one response.completed carries the token
// counts. They become one opaque_http row per call (docs/TELEMETRY.md,
// "Codex records"):
//
//   - a successful (2xx) api_request waits, per conversation.id, for the
//     token counts; the row is the api_request with the token counts'
//     attributes it lacks added. Another api_request of the conversation,
//     or FlushAfter, stores it alone;
//   - token counts nothing waits for are a row of their own;
//   - an sse_event that carries no attribute beyond what every Codex
//     record carries (its kind and a duration) is dropped, unless its kind
//     tells of a failure; so is a record with no name and no attributes
//     (the exporter's own log lines);
//   - anything else is a row, as before.
func codexRecord(r Record) prepared {
	a := r.Attrs
	switch {
	case r.Name == "api_request" && strings.HasPrefix(a["http.response.status_code"], "2"):
		return prepared{stage: stageCodex, codex: &codexCall{TS: r.Time, Attrs: a}}
	case r.Name == "sse_event" && (hasKey(a, "input_token_count") || hasKey(a, "output_token_count")):
		return prepared{stage: stageCodex, codex: &codexCall{TS: r.Time, Attrs: a}, codexTokens: true}
	case codexNoise(r):
		return prepared{drop: true}
	}
	ev := codexEvent(r)
	return prepared{event: &ev}
}

// codexEnvelope are the attributes every Codex record carries (Codex
// 0.169), besides which a progress event of a stream says nothing.
var codexEnvelope = map[string]bool{
	"app.version": true, "conversation.id": true, "event.name": true, "event.timestamp": true, "model": true,
	"originator": true, "slug": true, "terminal.type": true, "user.id": true, "session.id": true, "prompt.id": true,
	"event.kind": true, "duration_ms": true,
}

// codexNoise reports whether r says nothing a row should keep: an SSE
// event of a response that carries only the envelope and is no failure,
// or a record with neither name nor attributes.
func codexNoise(r Record) bool {
	if r.Name == "" {
		return len(r.Attrs) == 0
	}
	kind := strings.ToLower(r.Attrs["event.kind"])
	if r.Name != "sse_event" || kind == "" {
		return false
	}
	for _, bad := range []string{"fail", "error", "incomplete", "cancel"} {
		if strings.Contains(kind, bad) {
			return false
		}
	}
	for k := range r.Attrs {
		if !codexEnvelope[k] {
			return false
		}
	}
	return true
}

// codex applies a Codex API request, which waits for its token counts, or
// token counts, which complete the request of their conversation.
func (s *memberState) codex(events []Event, c *codexCall, tokens bool, now time.Time) []Event {
	conv := c.Attrs["conversation.id"]
	i := slices.IndexFunc(s.items, func(it *item) bool { return it.Kind == itemCodexCall && it.Session == conv })
	if !tokens {
		if i >= 0 {
			// Its response never brought token counts.
			events = append(events, codexCallEvent(s.remove(i).Codex))
		}
		s.add(&item{Kind: itemCodexCall, Seen: now, Session: conv, Codex: c})
		return events
	}
	if i < 0 {
		return append(events, codexEvent(Record{Name: "sse_event", Time: c.TS, Attrs: c.Attrs}))
	}
	req := s.remove(i).Codex
	folded := &codexCall{TS: req.TS, Attrs: maps.Clone(req.Attrs)}
	for k, v := range c.Attrs {
		if _, ok := folded.Attrs[k]; !ok && k != "event.kind" {
			folded.Attrs[k] = v
		}
	}
	return append(events, codexCallEvent(folded))
}

// codexCallEvent is the row of a Codex API request.
func codexCallEvent(c *codexCall) Event {
	return codexEvent(Record{Name: "api_request", Time: c.TS, Attrs: c.Attrs})
}

// codexEvent renders a Codex-style record: one that is not a readable
// tool action or prompt is stored opaque.
func codexEvent(r Record) Event {
	switch r.Name {
	case "tool_decision", "tool_result":
		if ev, ok := toolAction(r); ok {
			return ev
		}
	case "user_prompt":
		return userPrompt(r)
	}
	return Event{Kind: KindOpaqueHTTP, TS: r.Time, Data: map[string]any{
		"event":      string(Codex) + "." + r.Name,
		"attributes": r.Attrs,
	}}
}

// publicAttrs returns attrs without the private attributes: attrs itself
// when it holds none (the decoders have removed them already, and nothing
// the correlator does writes to the map), else a copy without them.
// Copying every record's map was 3% of the ingest CPU (docs/PERFORMANCE.md,
// "The protobuf path and the store side").
func publicAttrs(attrs map[string]string) map[string]string {
	if attrs == nil {
		return map[string]string{}
	}
	for _, k := range privateAttrs {
		if _, ok := attrs[k]; ok {
			out := maps.Clone(attrs)
			for _, k := range privateAttrs {
				delete(out, k)
			}
			return out
		}
	}
	return attrs
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// exchange renders an llm_exchange from what the records carried; its time
// is the accounting record's, else the body's.
func exchange(req *request, acct *accounting, resp *response, requestOnly bool) Event {
	ev := Event{Kind: KindLLMExchange}
	var model string
	switch {
	case acct != nil:
		ev.TS, model = acct.TS, acct.Model
	case req != nil:
		ev.TS = req.TS
	}
	ev.Data = exchangeData(model, req, acct, resp, requestOnly)
	return ev
}

// toolAction renders a tool_decision or tool_result; it needs tool_name.
// The tool's input is the tool_input or tool_parameters (Claude) or
// arguments (Codex) attribute, the first present, when it is JSON; its output the output attribute (Codex); the
// call id the call_id (Codex) or tool_use_id (Claude) attribute.
func toolAction(r Record) (Event, bool) {
	a := r.Attrs
	tool := a["tool_name"]
	if tool == "" {
		return Event{}, false
	}
	d := map[string]any{"tool": tool, "source": "otlp"}
	if r.Name == "tool_decision" {
		d["phase"] = "decision"
		if v, ok := a["decision"]; ok {
			d["decision"] = v
		}
	} else {
		d["phase"] = "result"
		switch a["success"] {
		case "true":
			d["success"] = true
		case "false":
			d["success"] = false
		}
		if v := attrFloat(a, "duration_ms"); v != nil {
			d["durationMs"] = *v
		}
		if v := a["error"]; v != "" {
			d["error"] = v
		}
		if v, ok := a["output"]; ok {
			d["result"] = v
		}
	}
	for _, k := range []string{"tool_input", "tool_parameters", "arguments"} {
		if s, ok := a[k]; ok {
			if v, err := decodeJSONValue([]byte(s)); err == nil && v != nil {
				if in := cleanJSON(v); in != nil {
					d["input"] = in
				}
			}
			break
		}
	}
	for _, k := range []string{"call_id", "tool_use_id"} {
		if v := a[k]; v != "" {
			d["callId"] = v
			break
		}
	}
	return Event{Kind: KindToolAction, TS: r.Time, Data: d}, true
}

// userPrompt renders a user_prompt: the text only when the agent exported
// it.
func userPrompt(r Record) Event {
	d := map[string]any{}
	if v, ok := r.Attrs["prompt"]; ok {
		d["prompt"] = v
	}
	if v := attrInt(r.Attrs, "prompt_length"); v != nil {
		d["promptLength"] = *v
	}
	return Event{Kind: KindUserPrompt, TS: r.Time, Data: d}
}

// flush renders a waiting record that will wait no longer: a body as a
// request-only exchange, a claimed exchange without its response; a held
// response gives nothing.
func flush(it *item) (Event, bool) {
	switch it.Kind {
	case itemBody:
		ev := exchange(it.Req, nil, nil, true)
		ev.Data["model"] = it.Model
		return ev, true
	case itemClaimed:
		return exchange(it.Req, it.Acct, nil, false), true
	case itemCodexCall:
		return codexCallEvent(it.Codex), true
	}
	return Event{}, false
}

// enforce flushes the member's oldest records while it holds more than
// MaxPending of them or more than MaxBytes.
func (c *Correlator) enforce(st *memberState, events []Event) []Event {
	for len(st.items) > 0 && (len(st.items) > c.opts.MaxPending || st.bytes > c.opts.MaxBytes) {
		if ev, ok := flush(st.remove(0)); ok {
			events = append(events, ev)
		}
	}
	return events
}

// Due returns, per member, the events of records that waited FlushAfter or
// longer at now (request-only exchanges for unclaimed bodies, exchanges
// without response for claimed ones), removing them from state. Held
// responses that waited as long are dropped. A member whose state changed
// is in the map even when that gave no event (an empty slice), so the
// caller knows to persist its new state.
func (c *Correlator) Due(now time.Time) map[string][]Event {
	out := map[string][]Event{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for member, st := range c.members {
		changed := false
		events := []Event{}
		for i := 0; i < len(st.items); {
			if st.items[i].Seen.Add(c.opts.FlushAfter).After(now) {
				i++
				continue
			}
			changed = true
			if ev, ok := flush(st.remove(i)); ok {
				events = append(events, ev)
			}
		}
		if !changed {
			continue
		}
		sort.SliceStable(events, func(a, b int) bool { return events[a].TS.Before(events[b].TS) })
		out[member] = events
		if len(st.items) == 0 {
			delete(c.members, member)
		}
	}
	return out
}

// Drain returns the events of every record member has waiting, as Due
// would give them once they waited their time, oldest first, and forgets
// the member's state: its member is gone, and a member of the same name
// created later must not inherit them.
func (c *Correlator) Drain(member string) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.members[member]
	delete(c.members, member)
	if st == nil {
		return nil
	}
	var events []Event
	for len(st.items) > 0 {
		if ev, ok := flush(st.remove(0)); ok {
			events = append(events, ev)
		}
	}
	sort.SliceStable(events, func(a, b int) bool { return events[a].TS.Before(events[b].TS) })
	return events
}

// stateVersion is the version of the State encoding.
const stateVersion = 1

// stateJSON is the persisted form of a member's state.
type stateJSON struct {
	V     int     `json:"v"`
	Next  uint64  `json:"next"`
	Items []*item `json:"items"`
}

// State returns member's pending state as JSON, nil when it has none.
func (c *Correlator) State(member string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.members[member]
	if st == nil || len(st.items) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(stateJSON{V: stateVersion, Next: st.next, Items: st.items})
	if err != nil {
		return nil, fmt.Errorf("encode otlp state: %w", err)
	}
	return b, nil
}

// errBadState answers a state Restore cannot read.
var errBadState = errors.New("invalid otlp correlation state")

// Restore replaces member's pending state with one State returned; empty
// state clears it. A state holding more than MaxPending records is kept as
// it is and trimmed by the next Ingest.
func (c *Correlator) Restore(member string, state []byte) error {
	if len(state) == 0 {
		c.mu.Lock()
		delete(c.members, member)
		c.mu.Unlock()
		return nil
	}
	var s stateJSON
	if err := json.Unmarshal(state, &s); err != nil {
		return fmt.Errorf("%w: %w", errBadState, err)
	}
	if s.V != stateVersion {
		return fmt.Errorf("%w: version %d", errBadState, s.V)
	}
	st := &memberState{next: s.Next}
	for _, it := range s.Items {
		if !validItem(it) {
			return errBadState
		}
		st.items = append(st.items, it)
		st.bytes += it.size()
		st.next = max(st.next, it.Order+1)
	}
	slices.SortStableFunc(st.items, func(a, b *item) int {
		switch {
		case a.Order < b.Order:
			return -1
		case a.Order > b.Order:
			return 1
		}
		return 0
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(st.items) == 0 {
		delete(c.members, member)
	} else {
		c.members[member] = st
	}
	return nil
}

// validItem reports whether it has what its kind needs.
func validItem(it *item) bool {
	if it == nil {
		return false
	}
	switch it.Kind {
	case itemBody:
		return it.Model != "" && it.Req != nil
	case itemClaimed:
		return it.RequestID != "" && it.Req != nil && it.Acct != nil && it.Acct.Model != "" && it.BodySeen != nil
	case itemHeld:
		return it.RequestID != "" && it.Resp != nil
	case itemCodexCall:
		return it.Codex != nil
	}
	return false
}

// Members lists the members with pending state, sorted.
func (c *Correlator) Members() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.members))
}

// pending is how many records member has waiting.
func (c *Correlator) pending(member string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.members[member]; st != nil {
		return len(st.items)
	}
	return 0
}
