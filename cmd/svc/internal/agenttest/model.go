package agenttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// DefaultReply is what the stub model says to a request no scripted turn
// answers, so the agent always finishes its turn instead of hanging.
const DefaultReply = "OK."

// Model is a stub of the Anthropic Messages API on 127.0.0.1, scripted by
// the test. Point the agent at it with RunOptions.ModelURL = m.URL().
//
// Answered:
//   - POST /v1/messages (any query, e.g. ?beta=true), streaming (SSE) or not:
//     a turn taken from the script, else DefaultReply;
//   - POST /v1/messages/count_tokens: {"input_tokens": N};
//   - anything else: 404 with an Anthropic-style error body.
//
// Every response carries a unique `request-id` header (req_stub_<n>), which
// Claude Code reports as the request_id of its api_request event, and every
// message carries non-zero usage numbers (input_tokens, output_tokens,
// cache_read_input_tokens, cache_creation_input_tokens).
//
// The script is a queue of turns. Each POST /v1/messages that is an agent
// turn (see IsAgentTurn and TakeScriptWhen) takes the turn at the head of
// the queue if that turn accepts it (a turn queued with a marker waits for
// a request whose latest user message holds the marker); any other request
// gets DefaultReply and leaves the queue alone.
type Model struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	script   []Turn
	requests []Request
	served   int
	def      string
	takes    func(Request) bool
	// answer, when set, answers the agent turns the script does not take.
	answer func(Request) (Turn, bool)
}

// Turn is one scripted answer of the stub model.
type Turn struct {
	// Marker, when set, makes the turn wait for an agent request whose
	// latest user message contains it (Request.HasMarker).
	Marker string
	// Text is the assistant's text. With ToolName set it is sent as a text
	// block before the tool_use block (may be empty).
	Text string
	// ToolName and ToolInput (a JSON object) make the turn a tool_use: the
	// agent runs the tool and sends its tool_result in its next request.
	ToolName  string
	ToolInput json.RawMessage
	// Hold, when not nil, makes the stub wait until it is closed before it
	// answers this turn (the request is already recorded, so Requests shows
	// it): a test can look at the agent while the turn is in progress. The
	// wait also ends when the agent drops the request. Close it in the
	// test's cleanup too, or the stub cannot shut down while it waits.
	Hold <-chan struct{}
}

// Request is one HTTP request the stub received, with what it answered.
type Request struct {
	Seq    int // 1-based order of arrival
	Method string
	Path   string // URL path, without the query
	Query  string
	Header http.Header
	Body   []byte

	// RequestID is the request-id header the stub answered with ("" for a
	// 404).
	RequestID string
	// Messages is the decoded body of a /v1/messages or count_tokens call.
	Messages *MessagesRequest
	// Scripted tells whether a scripted turn answered; Answer is that turn
	// (or the default reply) for /v1/messages calls.
	Scripted bool
	Answer   Turn
}

// MessagesRequest is the part of a Messages API request body the stub and
// tests look at.
type MessagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []Message       `json:"messages"`
	Tools     []ToolDef       `json:"tools"`
}

// Message is one entry of MessagesRequest.Messages; Content is either a
// string or a list of blocks (see Blocks).
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// ToolDef is one entry of the request's tools list.
type ToolDef struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// ContentBlock is a content block of a message (text, tool_use, tool_result,
// image, ...); only the fields tests need are decoded.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Blocks returns the message's content as blocks: a string content becomes
// one text block.
func (m Message) Blocks() []ContentBlock {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || string(c) == "null" {
		return nil
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(c, &s) == nil {
			return []ContentBlock{{Type: "text", Text: s}}
		}
		return nil
	}
	var blocks []ContentBlock
	_ = json.Unmarshal(c, &blocks)
	return blocks
}

// Text is the message's text: its text blocks and the text of its
// tool_result blocks, joined by newlines.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Blocks() {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_result":
			parts = append(parts, b.ResultText())
		}
	}
	return strings.Join(parts, "\n")
}

// ResultText is the text of a tool_result block, whose content is a string
// or a list of text blocks.
func (b ContentBlock) ResultText() string {
	c := bytes.TrimSpace(b.Content)
	if len(c) == 0 {
		return ""
	}
	if c[0] == '"' {
		var s string
		_ = json.Unmarshal(c, &s)
		return s
	}
	var inner []ContentBlock
	_ = json.Unmarshal(c, &inner)
	var parts []string
	for _, ib := range inner {
		if ib.Type == "text" {
			parts = append(parts, ib.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// LastUser returns the latest user message of a /v1/messages request, or
// false when there is none.
func (r Request) LastUser() (Message, bool) {
	if r.Messages == nil {
		return Message{}, false
	}
	for i := len(r.Messages.Messages) - 1; i >= 0; i-- {
		if r.Messages.Messages[i].Role == "user" {
			return r.Messages.Messages[i], true
		}
	}
	return Message{}, false
}

// LastUserText is the text of the latest user message. Claude Code adds its
// own reminders and context to user turns: look for a marker in it
// (HasMarker) rather than comparing it with what the test wrote.
func (r Request) LastUserText() string {
	m, _ := r.LastUser()
	return m.Text()
}

// HasMarker tells whether the latest user message contains marker.
func (r Request) HasMarker(marker string) bool {
	return marker != "" && strings.Contains(r.LastUserText(), marker)
}

// ToolResults returns the tool_result blocks of the latest user message.
func (r Request) ToolResults() []ContentBlock {
	m, ok := r.LastUser()
	if !ok {
		return nil
	}
	var out []ContentBlock
	for _, b := range m.Blocks() {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// IsAgentTurn tells whether a request is a step of the agent's own loop (it
// offers the model tools), as opposed to a side request of Claude Code such
// as a quota probe or a title/summary generation, which offers none. Only
// agent turns consume the script.
func (r Request) IsAgentTurn() bool {
	return r.Path == "/v1/messages" && r.Messages != nil && len(r.Messages.Tools) > 0
}

// NewModel starts a stub model on 127.0.0.1:0, closed when the test ends.
func NewModel(t testing.TB) *Model {
	t.Helper()
	m := &Model{t: t, def: DefaultReply, takes: Request.IsAgentTurn}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// URL is the base URL to give the agent as ANTHROPIC_BASE_URL.
func (m *Model) URL() string { return m.srv.URL }

// Default sets the text answered to requests no scripted turn takes.
func (m *Model) Default(text string) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.def = text
	return m
}

// TakeScriptWhen replaces IsAgentTurn as the test of which /v1/messages
// requests may consume the script (e.g. for a run with `--tools ""`, whose
// agent turns offer no tools).
func (m *Model) TakeScriptWhen(f func(Request) bool) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.takes = f
	return m
}

// AnswerWith makes f answer every agent turn the script does not take
// (f's false leaves it to the default reply): a model that always does
// something, like one that answers every message it is shown. f runs with
// the stub's lock held and must only look at the request.
func (m *Model) AnswerWith(f func(Request) (Turn, bool)) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answer = f
	return m
}

// Script queues turns as given.
func (m *Model) Script(turns ...Turn) *Model {
	for _, tr := range turns {
		if tr.ToolName != "" {
			if !json.Valid(tr.ToolInput) || !bytes.HasPrefix(bytes.TrimSpace(tr.ToolInput), []byte("{")) {
				m.t.Fatalf("agenttest: tool %s: input must be a JSON object, got %q", tr.ToolName, tr.ToolInput)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = append(m.script, turns...)
	return m
}

// Reply queues a text answer for the next agent turn.
func (m *Model) Reply(text string) *Model {
	return m.Script(Turn{Text: text})
}

// CallTool queues a tool_use of the tool name with the JSON object
// inputJSON for the next agent turn; the agent's following request carries
// the tool_result and takes the turn queued after this one.
func (m *Model) CallTool(name, inputJSON string) *Model {
	return m.Script(Turn{ToolName: name, ToolInput: json.RawMessage(inputJSON)})
}

// ReplyOn queues a text answer that waits for an agent turn whose latest
// user message contains marker.
func (m *Model) ReplyOn(marker, text string) *Model {
	return m.Script(Turn{Marker: marker, Text: text})
}

// CallToolOn queues a tool_use that waits for an agent turn whose latest
// user message contains marker.
func (m *Model) CallToolOn(marker, name, inputJSON string) *Model {
	return m.Script(Turn{Marker: marker, ToolName: name, ToolInput: json.RawMessage(inputJSON)})
}

// Pending is the number of scripted turns not yet served.
func (m *Model) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.script)
}

// Requests returns a copy of every request received so far, in order.
func (m *Model) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.requests...)
}

// AgentTurns returns the received requests that were agent turns.
func (m *Model) AgentTurns() []Request {
	var out []Request
	for _, r := range m.Requests() {
		if r.IsAgentTurn() {
			out = append(out, r)
		}
	}
	return out
}

// RequestIDs returns the request-id headers the stub answered with.
func (m *Model) RequestIDs() []string {
	var out []string
	for _, r := range m.Requests() {
		if r.RequestID != "" {
			out = append(out, r.RequestID)
		}
	}
	return out
}

func (m *Model) serve(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{
		Method: hr.Method,
		Path:   hr.URL.Path,
		Query:  hr.URL.RawQuery,
		Header: hr.Header.Clone(),
		Body:   body,
	}
	known := hr.Method == http.MethodPost &&
		(req.Path == "/v1/messages" || req.Path == "/v1/messages/count_tokens")
	if known {
		var mr MessagesRequest
		if err := json.Unmarshal(body, &mr); err != nil {
			m.record(&req)
			writeError(w, http.StatusBadRequest, "invalid_request_error", "stub: body is not JSON: "+err.Error())
			return
		}
		req.Messages = &mr
	}

	m.mu.Lock()
	m.served++
	n := m.served
	req.Seq = n
	if known {
		req.RequestID = fmt.Sprintf("req_stub_%d", n)
	}
	if req.Path == "/v1/messages" && known {
		req.Answer = Turn{Text: m.def}
		if m.takes(req) && len(m.script) > 0 {
			head := m.script[0]
			if head.Marker == "" || req.HasMarker(head.Marker) {
				req.Answer, req.Scripted = head, true
				m.script = m.script[1:]
			}
		}
		if !req.Scripted && m.answer != nil && m.takes(req) {
			if a, ok := m.answer(req); ok {
				req.Answer = a
			}
		}
	}
	m.requests = append(m.requests, req)
	m.mu.Unlock()

	if req.Answer.Hold != nil {
		select {
		case <-req.Answer.Hold:
		case <-hr.Context().Done():
			return
		}
	}
	if !known {
		writeError(w, http.StatusNotFound, "not_found_error", "stub: no such endpoint "+hr.Method+" "+hr.URL.Path)
		return
	}
	w.Header().Set("request-id", req.RequestID)
	w.Header().Set("anthropic-organization-id", "00000000-0000-4000-8000-000000000000")
	inTok := estimateTokens(body)
	if req.Path == "/v1/messages/count_tokens" {
		writeJSON(w, map[string]any{"input_tokens": inTok})
		return
	}
	u := usageFor(inTok, req.Answer)
	if req.Messages.Stream {
		m.stream(w, n, req, u)
		return
	}
	writeJSON(w, messageJSON(n, req, u))
}

func (m *Model) record(req *Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.served++
	req.Seq = m.served
	m.requests = append(m.requests, *req)
}

type usage struct {
	Input, Output, CacheRead, CacheCreation int
}

// estimateTokens makes plausible token counts from the body size (about 4
// bytes a token), never zero.
func estimateTokens(body []byte) int {
	return len(body)/4 + 1
}

// usageFor splits the prompt tokens the way a cached conversation does:
// most read from the cache, some written to it, a few uncached.
func usageFor(promptTokens int, a Turn) usage {
	in := promptTokens%40 + 3
	rest := promptTokens - in
	if rest < 2 {
		rest = 2
	}
	read := rest * 3 / 4
	out := len(a.Text)/4 + 1
	if a.ToolName != "" {
		out += len(a.ToolInput)/4 + 12
	}
	return usage{Input: in, Output: out, CacheRead: read, CacheCreation: rest - read}
}

func (u usage) json(output int) map[string]any {
	return map[string]any{
		"input_tokens":                u.Input,
		"output_tokens":               output,
		"cache_read_input_tokens":     u.CacheRead,
		"cache_creation_input_tokens": u.CacheCreation,
		"service_tier":                "standard",
	}
}

func modelName(req Request) string {
	if req.Messages != nil && req.Messages.Model != "" {
		return req.Messages.Model
	}
	return "claude-stub"
}

func toolUseID(n int) string { return fmt.Sprintf("toolu_stub_%d", n) }

// messageJSON is the non-streaming answer.
func messageJSON(n int, req Request, u usage) map[string]any {
	a := req.Answer
	var content []map[string]any
	if a.Text != "" || a.ToolName == "" {
		content = append(content, map[string]any{"type": "text", "text": a.Text})
	}
	stop := "end_turn"
	if a.ToolName != "" {
		content = append(content, map[string]any{
			"type": "tool_use", "id": toolUseID(n), "name": a.ToolName, "input": a.ToolInput,
		})
		stop = "tool_use"
	}
	return map[string]any{
		"id":            fmt.Sprintf("msg_stub_%d", n),
		"type":          "message",
		"role":          "assistant",
		"model":         modelName(req),
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage":         u.json(u.Output),
	}
}

// stream answers as the Messages API does with "stream": true.
func (m *Model) stream(w http.ResponseWriter, n int, req Request, u usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	a := req.Answer
	send("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": fmt.Sprintf("msg_stub_%d", n), "type": "message", "role": "assistant",
			"model": modelName(req), "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": u.json(1),
		},
	})
	send("ping", map[string]any{"type": "ping"})
	idx := 0
	if a.Text != "" || a.ToolName == "" {
		send("content_block_start", map[string]any{
			"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "text", "text": ""},
		})
		for _, chunk := range split(a.Text, 3) {
			send("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "text_delta", "text": chunk},
			})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := "end_turn"
	if a.ToolName != "" {
		stop = "tool_use"
		send("content_block_start", map[string]any{
			"type": "content_block_start", "index": idx,
			"content_block": map[string]any{
				"type": "tool_use", "id": toolUseID(n), "name": a.ToolName, "input": map[string]any{},
			},
		})
		for _, chunk := range split(string(a.ToolInput), 2) {
			send("content_block_delta", map[string]any{
				"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": chunk},
			})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	}
	send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output},
	})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// split cuts s into at most k pieces on rune boundaries (one piece if short).
func split(s string, k int) []string {
	r := []rune(s)
	if len(r) < 2*k {
		return []string{s}
	}
	var out []string
	size := (len(r) + k - 1) / k
	for i := 0; i < len(r); i += size {
		j := min(i+size, len(r))
		out = append(out, string(r[i:j]))
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]any{"type": typ, "message": msg},
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
