package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// API is a model API the proxy recognizes by the request path.
type API string

// The model APIs whose calls are captured.
const (
	// APIResponses is OpenAI Responses: POST …/responses.
	APIResponses API = "responses"
	// APIChatCompletions is OpenAI Chat Completions: POST …/chat/completions.
	APIChatCompletions API = "chat.completions"
	// APIMessages is Anthropic Messages: POST …/messages.
	APIMessages API = "messages"
)

// apiOf names the model API of a request path relative to the upstream
// base, "" for a call that is no model call (a model list, a token count,
// a compaction).
func apiOf(method, path string) API {
	if method != "POST" {
		return ""
	}
	path = strings.TrimRight(path, "/")
	switch {
	case strings.HasSuffix(path, "/responses"):
		return APIResponses
	case strings.HasSuffix(path, "/chat/completions"):
		return APIChatCompletions
	case strings.HasSuffix(path, "/messages"):
		return APIMessages
	}
	return ""
}

// errNoResponse: the stream never named the response it carries.
var errNoResponse = errors.New("the stream holds no response")

// Reassemble turns the body of a streamed (text/event-stream) response of
// api into the JSON of the same call answered without streaming. A stream
// cut before its end gives what arrived: an OpenAI Responses response
// without its terminal event has status "incomplete" with reason
// "interrupted"; a Chat Completions choice or an Anthropic message without
// its finish has a null finish_reason or stop_reason. It fails only when
// the stream never named its response (no response.created or terminal
// event, no chunk, no message_start).
func Reassemble(api API, body []byte) ([]byte, error) {
	evs := parseSSE(body)
	switch api {
	case APIResponses:
		return reassembleResponses(evs)
	case APIChatCompletions:
		return reassembleChat(evs)
	case APIMessages:
		return reassembleMessages(evs)
	}
	return nil, errors.New("capture: unknown api " + string(api))
}

// fields is a JSON object whose members are kept as they came.
type fields map[string]json.RawMessage

// object decodes a JSON object, nil for anything else.
func object(raw []byte) fields {
	var f fields
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil
	}
	return f
}

// str is a JSON string's value, "" for anything else.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// isNull says whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// mustJSON marshals a value the caller built from valid parts.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("capture: " + err.Error())
	}
	return b
}

// sortedKeys are m's keys in order.
func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// --- OpenAI Responses ---

// respItem is one output item as its events built it.
type respItem struct {
	added fields          // from response.output_item.added
	done  json.RawMessage // from response.output_item.done
	text  map[int]*strings.Builder
	args  strings.Builder
}

// reassembleResponses takes the response of the terminal event
// (response.completed, response.incomplete, response.failed) over the one
// response.created or response.in_progress gave, and rebuilds its output
// from the item events when it has none (some servers leave it out of the
// terminal event; Codex does not need it).
func reassembleResponses(evs []sseEvent) ([]byte, error) {
	var base, final fields
	terminal := ""
	items := map[int]*respItem{}
	item := func(i int) *respItem {
		it := items[i]
		if it == nil {
			it = &respItem{text: map[int]*strings.Builder{}}
			items[i] = it
		}
		return it
	}
	for _, e := range evs {
		var ev struct {
			Type         string          `json:"type"`
			Response     json.RawMessage `json:"response"`
			OutputIndex  int             `json:"output_index"`
			ContentIndex int             `json:"content_index"`
			Item         json.RawMessage `json:"item"`
			Delta        json.RawMessage `json:"delta"`
		}
		if json.Unmarshal(e.data, &ev) != nil {
			continue
		}
		if ev.Type == "" {
			ev.Type = e.name
		}
		switch ev.Type {
		case "response.created", "response.in_progress", "response.queued":
			if r := object(ev.Response); r != nil {
				base = r
			}
		case "response.completed", "response.incomplete", "response.failed":
			if r := object(ev.Response); r != nil {
				final, terminal = r, strings.TrimPrefix(ev.Type, "response.")
			}
		case "response.output_item.added":
			if it := object(ev.Item); it != nil {
				item(ev.OutputIndex).added = it
			}
		case "response.output_item.done":
			if object(ev.Item) != nil {
				item(ev.OutputIndex).done = ev.Item
			}
		case "response.output_text.delta":
			it := item(ev.OutputIndex)
			b := it.text[ev.ContentIndex]
			if b == nil {
				b = &strings.Builder{}
				it.text[ev.ContentIndex] = b
			}
			b.WriteString(str(ev.Delta))
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			item(ev.OutputIndex).args.WriteString(str(ev.Delta))
		}
	}
	if base == nil && final == nil {
		return nil, errNoResponse
	}
	resp := fields{}
	for k, v := range base {
		resp[k] = v
	}
	for k, v := range final {
		if !isNull(v) || isNull(resp[k]) {
			resp[k] = v
		}
	}
	resp["object"] = mustJSON("response")
	delete(resp, "type") // a Responses response has none; it would read as a message
	if str(resp["status"]) == "" || terminal == "" {
		switch terminal {
		case "":
			resp["status"] = mustJSON("incomplete")
			resp["incomplete_details"] = mustJSON(map[string]string{"reason": "interrupted"})
		default:
			resp["status"] = mustJSON(terminal)
		}
	}
	var out []json.RawMessage
	if err := json.Unmarshal(resp["output"], &out); err != nil || len(out) == 0 {
		out = []json.RawMessage{}
		for _, i := range sortedKeys(items) {
			if it := items[i].rebuild(); it != nil {
				out = append(out, it)
			}
		}
		resp["output"] = mustJSON(out)
	}
	return json.Marshal(resp)
}

// rebuild is the item as output_item.done gave it, else the added item
// with the text and arguments its deltas carried; nil with neither.
func (it *respItem) rebuild() json.RawMessage {
	if it.done != nil {
		return it.done
	}
	if it.added == nil {
		return nil
	}
	f := fields{}
	for k, v := range it.added {
		f[k] = v
	}
	switch str(f["type"]) {
	case "message":
		var content []any
		for _, i := range sortedKeys(it.text) {
			content = append(content, map[string]any{"type": "output_text", "text": it.text[i].String(), "annotations": []any{}})
		}
		if content != nil {
			f["content"] = mustJSON(content)
		}
	case "function_call":
		if it.args.Len() > 0 {
			f["arguments"] = mustJSON(it.args.String())
		}
	case "custom_tool_call":
		if it.args.Len() > 0 {
			f["input"] = mustJSON(it.args.String())
		}
	}
	if str(f["status"]) == "in_progress" {
		f["status"] = mustJSON("incomplete")
	}
	return mustJSON(f)
}

// --- OpenAI Chat Completions ---

type chatChoice struct {
	role       string
	content    strings.Builder
	hasContent bool
	refusal    strings.Builder
	hasRefusal bool
	calls      map[int]*chatCall
	fnCall     *chatCall // the deprecated function_call
	finish     *string
}

type chatCall struct {
	id, typ, name string
	args          strings.Builder
}

// reassembleChat folds chat.completion.chunk events into a chat.completion:
// each choice's deltas concatenated into one message, tool calls by index
// with their argument fragments joined, the last finish_reason and usage.
func reassembleChat(evs []sseEvent) ([]byte, error) {
	head := fields{}
	seen := false
	var usage json.RawMessage
	choices := map[int]*chatChoice{}
	for _, e := range evs {
		if bytes.Equal(bytes.TrimSpace(e.data), []byte("[DONE]")) {
			continue
		}
		var c struct {
			ID                string          `json:"id"`
			Created           json.RawMessage `json:"created"`
			Model             string          `json:"model"`
			SystemFingerprint json.RawMessage `json:"system_fingerprint"`
			ServiceTier       json.RawMessage `json:"service_tier"`
			Usage             json.RawMessage `json:"usage"`
			Error             json.RawMessage `json:"error"`
			Choices           []struct {
				Index int `json:"index"`
				Delta struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					Refusal   *string `json:"refusal"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
					FunctionCall *struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function_call"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(e.data, &c) != nil || !isNull(c.Error) {
			continue
		}
		seen = true
		for k, v := range map[string]json.RawMessage{"created": c.Created, "system_fingerprint": c.SystemFingerprint, "service_tier": c.ServiceTier} {
			if !isNull(v) {
				head[k] = v
			}
		}
		if c.ID != "" {
			head["id"] = mustJSON(c.ID)
		}
		if c.Model != "" {
			head["model"] = mustJSON(c.Model)
		}
		if !isNull(c.Usage) {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			cc := choices[ch.Index]
			if cc == nil {
				cc = &chatChoice{calls: map[int]*chatCall{}}
				choices[ch.Index] = cc
			}
			d := ch.Delta
			if d.Role != "" {
				cc.role = d.Role
			}
			if d.Content != nil {
				cc.content.WriteString(*d.Content)
				cc.hasContent = true
			}
			if d.Refusal != nil {
				cc.refusal.WriteString(*d.Refusal)
				cc.hasRefusal = true
			}
			for _, tc := range d.ToolCalls {
				call := cc.calls[tc.Index]
				if call == nil {
					call = &chatCall{}
					cc.calls[tc.Index] = call
				}
				if tc.ID != "" {
					call.id = tc.ID
				}
				if tc.Type != "" {
					call.typ = tc.Type
				}
				call.name += tc.Function.Name
				call.args.WriteString(tc.Function.Arguments)
			}
			if fc := d.FunctionCall; fc != nil {
				if cc.fnCall == nil {
					cc.fnCall = &chatCall{}
				}
				cc.fnCall.name += fc.Name
				cc.fnCall.args.WriteString(fc.Arguments)
			}
			if ch.FinishReason != nil {
				cc.finish = ch.FinishReason
			}
		}
	}
	if !seen {
		return nil, errNoResponse
	}
	resp := head
	resp["object"] = mustJSON("chat.completion")
	if _, ok := resp["id"]; !ok {
		resp["id"] = mustJSON("")
	}
	out := []any{}
	for _, i := range sortedKeys(choices) {
		cc := choices[i]
		role := cc.role
		if role == "" {
			role = "assistant"
		}
		msg := map[string]any{"role": role, "content": nil}
		if cc.hasContent {
			msg["content"] = cc.content.String()
		}
		if cc.hasRefusal {
			msg["refusal"] = cc.refusal.String()
		}
		if len(cc.calls) > 0 {
			var calls []any
			for _, j := range sortedKeys(cc.calls) {
				call := cc.calls[j]
				typ := call.typ
				if typ == "" {
					typ = "function"
				}
				calls = append(calls, map[string]any{"id": call.id, "type": typ,
					"function": map[string]any{"name": call.name, "arguments": call.args.String()}})
			}
			msg["tool_calls"] = calls
		}
		if fc := cc.fnCall; fc != nil {
			msg["function_call"] = map[string]any{"name": fc.name, "arguments": fc.args.String()}
		}
		out = append(out, map[string]any{"index": i, "message": msg, "finish_reason": cc.finish})
	}
	resp["choices"] = mustJSON(out)
	if usage != nil {
		resp["usage"] = usage
	}
	return json.Marshal(resp)
}

// --- Anthropic Messages ---

type msgBlock struct {
	start     fields
	text      strings.Builder
	json      strings.Builder
	citations []json.RawMessage
}

// reassembleMessages builds the message of message_start from the content
// blocks (text deltas joined, tool input JSON parsed from its fragments,
// thinking dropped) and the stop reason and usage of message_delta.
func reassembleMessages(evs []sseEvent) ([]byte, error) {
	var msg fields
	var usage fields
	var delta fields
	blocks := map[int]*msgBlock{}
	for _, e := range evs {
		var ev struct {
			Type         string          `json:"type"`
			Message      json.RawMessage `json:"message"`
			Index        int             `json:"index"`
			ContentBlock json.RawMessage `json:"content_block"`
			Delta        json.RawMessage `json:"delta"`
			Usage        json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(e.data, &ev) != nil {
			continue
		}
		if ev.Type == "" {
			ev.Type = e.name
		}
		switch ev.Type {
		case "message_start":
			if m := object(ev.Message); m != nil {
				msg = m
				if u := object(m["usage"]); u != nil {
					usage = u
				}
			}
		case "content_block_start":
			if b := object(ev.ContentBlock); b != nil {
				blocks[ev.Index] = &msgBlock{start: b}
			}
		case "content_block_delta":
			b := blocks[ev.Index]
			if b == nil {
				continue
			}
			var d struct {
				Type        string          `json:"type"`
				Text        string          `json:"text"`
				PartialJSON string          `json:"partial_json"`
				Citation    json.RawMessage `json:"citation"`
			}
			if json.Unmarshal(ev.Delta, &d) != nil {
				continue
			}
			switch d.Type {
			case "text_delta":
				b.text.WriteString(d.Text)
			case "input_json_delta":
				b.json.WriteString(d.PartialJSON)
			case "citations_delta":
				if !isNull(d.Citation) {
					b.citations = append(b.citations, d.Citation)
				}
			}
		case "message_delta":
			if d := object(ev.Delta); d != nil {
				if delta == nil {
					delta = fields{}
				}
				for k, v := range d {
					delta[k] = v
				}
			}
			if u := object(ev.Usage); u != nil {
				if usage == nil {
					usage = fields{}
				}
				for k, v := range u {
					if !isNull(v) {
						usage[k] = v
					}
				}
			}
		}
	}
	if msg == nil {
		return nil, errNoResponse
	}
	content := []json.RawMessage{}
	for _, i := range sortedKeys(blocks) {
		if b := blocks[i].rebuild(); b != nil {
			content = append(content, b)
		}
	}
	msg["type"] = mustJSON("message")
	delete(msg, "object") // a message has none; it would read as an OpenAI shape
	msg["content"] = mustJSON(content)
	for _, k := range []string{"stop_reason", "stop_sequence"} {
		if v, ok := delta[k]; ok {
			msg[k] = v
		}
	}
	if usage != nil {
		msg["usage"] = mustJSON(usage)
	}
	return json.Marshal(msg)
}

// rebuild is the finished content block, nil for thinking, which is never
// captured.
func (b *msgBlock) rebuild() json.RawMessage {
	typ := str(b.start["type"])
	switch typ {
	case "thinking", "redacted_thinking":
		return nil
	}
	f := fields{}
	for k, v := range b.start {
		f[k] = v
	}
	if typ == "text" {
		f["text"] = mustJSON(str(f["text"]) + b.text.String())
		if len(b.citations) > 0 {
			var cs []json.RawMessage
			_ = json.Unmarshal(f["citations"], &cs)
			f["citations"] = mustJSON(append(cs, b.citations...))
		}
	}
	if b.json.Len() > 0 {
		in := []byte(b.json.String())
		if json.Valid(in) {
			f["input"] = in
		} else {
			f["input"] = mustJSON(b.json.String()) // cut mid-way: kept as text
		}
	}
	return mustJSON(f)
}

// shapeOf names the API whose non-streamed response shape resp has, as
// the broker detects it, "" for none: an error body or a foreign shape is
// not an inference.
func shapeOf(resp []byte) API {
	f := object(resp) // keys match exactly, as the broker matches them
	if f == nil {
		return ""
	}
	typ, obj := str(f["type"]), str(f["object"])
	switch {
	case typ == "message" && obj != "chat.completion" && obj != "response":
		return APIMessages
	case obj == "chat.completion" && typ != "message":
		return APIChatCompletions
	case obj == "response" && typ != "message":
		return APIResponses
	}
	return ""
}
