package agenttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Responses is a stub of the OpenAI Responses API on 127.0.0.1, scripted by
// the test, for the real Codex (point a custom model provider's base_url at
// URL()). POST /v1/responses answers with a streamed (SSE) response:
// response.created, the output items (response.output_item.added, text
// deltas, response.output_item.done) and response.completed with non-zero
// usage; every response has a unique id (resp_stub_<n>) and every request
// is recorded. Anything else is a 404.
//
// The script is a queue of RTurns: each agent request (one that offers
// tools) takes the head of the queue when the head accepts it (a turn with
// a Marker waits for a request whose latest user message holds it); any
// other request is answered with DefaultReply.
type Responses struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	script   []RTurn
	requests []RRequest
	served   int
	// answer, when set, answers the agent requests the script does not
	// take.
	answer func(RRequest) (RTurn, bool)
}

// RTurn is one scripted answer.
type RTurn struct {
	// Marker, when set, makes the turn wait for a request whose latest
	// user message contains it.
	Marker string
	// Text is the assistant message (DefaultReply when empty and no
	// function call).
	Text string
	// Call, when set, is a function call of that tool; Namespace is its
	// namespace (Codex offers MCP tools as functions in the namespace
	// mcp__<server>), Arguments a JSON object.
	Call      string
	Namespace string
	Arguments json.RawMessage
	// Hold, when not nil, makes the stub wait until it is closed before it
	// answers this turn (the request is already recorded): the model call
	// is in flight meanwhile. The wait also ends when the agent drops the
	// request. Close it in the test's cleanup too.
	Hold <-chan struct{}
}

// RRequest is one request the stub got.
type RRequest struct {
	Seq    int
	Path   string
	Header http.Header
	Body   []byte
	// Parsed is the decoded body (nil when it was not JSON).
	Parsed *ResponsesRequest
	// ResponseID is the id answered; Answer what was answered; Scripted
	// whether it came from the script.
	ResponseID string
	Answer     RTurn
	Scripted   bool
}

// ResponsesRequest is the part of a Responses API request tests read.
type ResponsesRequest struct {
	Model string            `json:"model"`
	Input []json.RawMessage `json:"input"`
	Tools []RTool           `json:"tools"`
}

// RTool is one entry of the request's tools: a function, or a namespace
// holding functions.
type RTool struct {
	Type  string  `json:"type"`
	Name  string  `json:"name"`
	Tools []RTool `json:"tools"`
}

// ToolNames lists the request's tools, a namespaced one as
// <namespace>/<name>.
func (r RRequest) ToolNames() []string {
	if r.Parsed == nil {
		return nil
	}
	var out []string
	for _, t := range r.Parsed.Tools {
		if t.Type == "namespace" {
			for _, in := range t.Tools {
				out = append(out, t.Name+"/"+in.Name)
			}
			continue
		}
		out = append(out, t.Name)
	}
	return out
}

// InputItem is one entry of the request's input the tests read.
type InputItem struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	CallID    string          `json:"call_id"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// Items decodes the request's input.
func (r RRequest) Items() []InputItem {
	if r.Parsed == nil {
		return nil
	}
	out := make([]InputItem, 0, len(r.Parsed.Input))
	for _, raw := range r.Parsed.Input {
		var it InputItem
		_ = json.Unmarshal(raw, &it)
		out = append(out, it)
	}
	return out
}

// Text joins the text of an input message.
func (it InputItem) Text() string {
	var parts []string
	for _, c := range it.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// UserTexts lists the text of every user message of the input, in order.
func (r RRequest) UserTexts() []string {
	var out []string
	for _, it := range r.Items() {
		if it.Type == "message" && it.Role == "user" {
			out = append(out, it.Text())
		}
	}
	return out
}

// LastUserText is the latest user message's text.
func (r RRequest) LastUserText() string {
	u := r.UserTexts()
	if len(u) == 0 {
		return ""
	}
	return u[len(u)-1]
}

// HasMarker tells whether the latest user message holds marker.
func (r RRequest) HasMarker(marker string) bool {
	return marker != "" && strings.Contains(r.LastUserText(), marker)
}

// IsAgentTurn tells whether the request offers tools.
func (r RRequest) IsAgentTurn() bool {
	return r.Path == "/v1/responses" && r.Parsed != nil && len(r.Parsed.Tools) > 0
}

// FunctionOutputs are the function_call_output items of the input.
func (r RRequest) FunctionOutputs() []InputItem {
	var out []InputItem
	for _, it := range r.Items() {
		if it.Type == "function_call_output" {
			out = append(out, it)
		}
	}
	return out
}

// NewResponses starts the stub, closed when the test ends.
func NewResponses(t testing.TB) *Responses {
	t.Helper()
	m := &Responses{t: t}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

// URL is the base URL for a provider's base_url (it ends in /v1).
func (m *Responses) URL() string { return m.srv.URL + "/v1" }

// Script queues turns.
func (m *Responses) Script(turns ...RTurn) *Responses {
	for _, tr := range turns {
		if tr.Call != "" && !json.Valid(tr.Arguments) {
			m.t.Fatalf("agenttest: call %s: arguments must be JSON, got %q", tr.Call, tr.Arguments)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.script = append(m.script, turns...)
	return m
}

// AnswerWith makes f answer every agent request the script does not take
// (f's false leaves it to DefaultReply). f runs with the stub's lock held
// and must only look at the request.
func (m *Responses) AnswerWith(f func(RRequest) (RTurn, bool)) *Responses {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answer = f
	return m
}

// Pending is the number of scripted turns not yet served.
func (m *Responses) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.script)
}

// Requests returns every request so far, in order.
func (m *Responses) Requests() []RRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]RRequest(nil), m.requests...)
}

// Usage is the usage the stub reports for a request of n body bytes.
func Usage(n int) (in, out int) { return n/4 + 1, 7 }

func (m *Responses) serve(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := RRequest{Path: hr.URL.Path, Header: hr.Header.Clone(), Body: body}
	var parsed ResponsesRequest
	if json.Unmarshal(body, &parsed) == nil {
		req.Parsed = &parsed
	}
	m.mu.Lock()
	m.served++
	req.Seq = m.served
	req.ResponseID = fmt.Sprintf("resp_stub_%d", req.Seq)
	if req.IsAgentTurn() && len(m.script) > 0 {
		head := m.script[0]
		if head.Marker == "" || req.HasMarker(head.Marker) {
			req.Answer, req.Scripted = head, true
			m.script = m.script[1:]
		}
	}
	if !req.Scripted && m.answer != nil && req.IsAgentTurn() {
		if a, ok := m.answer(req); ok {
			if a.Call != "" && !json.Valid(a.Arguments) {
				m.t.Errorf("agenttest: call %s: arguments must be JSON, got %q", a.Call, a.Arguments)
			}
			req.Answer = a
		}
	}
	if req.Answer.Text == "" && req.Answer.Call == "" {
		req.Answer.Text = DefaultReply
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
	if hr.Method != http.MethodPost || req.Path != "/v1/responses" || req.Parsed == nil {
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"message":"stub: no such endpoint","type":"invalid_request_error"}}`)
		return
	}
	w.Header().Set("content-type", "text/event-stream")
	w.Header().Set("x-request-id", "req_"+req.ResponseID)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	ev := func(typ string, d map[string]any) {
		d["type"] = typ
		b, _ := json.Marshal(d)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	id := req.ResponseID
	ev("response.created", map[string]any{"response": map[string]any{"id": id, "object": "response", "status": "in_progress", "model": parsed.Model, "output": []any{}}})
	var outputs []any
	idx := 0
	a := req.Answer
	if a.Text != "" {
		mid := fmt.Sprintf("msg_stub_%d", req.Seq)
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{"type": "message", "role": "assistant", "id": mid, "status": "in_progress", "content": []any{}}})
		ev("response.output_text.delta", map[string]any{"output_index": idx, "item_id": mid, "content_index": 0, "delta": a.Text})
		item := map[string]any{"type": "message", "role": "assistant", "id": mid, "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": a.Text, "annotations": []any{}}}}
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		outputs = append(outputs, item)
		idx++
	}
	if a.Call != "" {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_stub_%d", req.Seq), "call_id": fmt.Sprintf("call_stub_%d", req.Seq),
			"name": a.Call, "arguments": string(a.Arguments), "status": "completed"}
		if a.Namespace != "" {
			item["namespace"] = a.Namespace
		}
		ev("response.output_item.added", map[string]any{"output_index": idx, "item": item})
		ev("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		outputs = append(outputs, item)
	}
	in, out := Usage(len(body))
	ev("response.completed", map[string]any{"response": map[string]any{
		"id": id, "object": "response", "status": "completed", "model": parsed.Model, "output": outputs,
		"usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_tokens": in + out,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}})
}
