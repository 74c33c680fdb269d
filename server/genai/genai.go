package genai

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Providers and APIs a Record names.
const (
	// ProviderAnthropic is Record.Provider for Anthropic Messages.
	ProviderAnthropic = "anthropic"
	// ProviderOpenAI is Record.Provider for both OpenAI APIs.
	ProviderOpenAI = "openai"
	// APIMessages is Record.API for Anthropic Messages.
	APIMessages = "messages"
	// APIChatCompletions is Record.API for OpenAI Chat Completions.
	APIChatCompletions = "chat.completions"
	// APIResponses is Record.API for OpenAI Responses.
	APIResponses = "responses"
)

// Part types, as in the OpenTelemetry GenAI message schemas.
const (
	// PartText is a text part: Content.
	PartText = "text"
	// PartToolCall is a tool call the model made: ID, Name, Arguments.
	PartToolCall = "tool_call"
	// PartToolCallResponse is a tool's output sent back: ID, Response.
	PartToolCallResponse = "tool_call_response"
)

// Bounds on the work one upload can cause.
const (
	// MaxDepth is the deepest JSON nesting accepted, counting the upload
	// object itself as 1. Real payloads nest about ten levels deep.
	MaxDepth = 64
	// MaxMessages bounds the input and output messages of one record. A
	// full 272k-token context holds a few thousand turns.
	MaxMessages = 10_000
	// MaxParts bounds the parts of one record, system instructions
	// included; a turn seldom has more than a few parts.
	MaxParts = 50_000
	// MaxTools bounds the tool definitions of one request. Claude Code
	// with a few MCP servers offers about a hundred.
	MaxTools = 10_000
	// maxTS is 9999-12-31T23:59:59.999Z in epoch ms, the last instant
	// RFC 3339 can write.
	maxTS = 253402300799999
)

var (
	// ErrInvalid is wrapped by every error DecodeUpload and Parse return.
	ErrInvalid = errors.New("invalid genai upload")
	// ErrUnknownProvider is wrapped (with ErrInvalid) when the response has
	// the shape of no supported provider, or of more than one.
	ErrUnknownProvider = errors.New("unknown genai provider")
)

// Upload is the decoded upload body.
type Upload struct {
	// TS is the capture time the runner gave ("ts", epoch ms); zero when
	// absent.
	TS time.Time
	// Request is the provider request, a JSON object.
	Request json.RawMessage
	// Response is the assembled provider response, a JSON object.
	Response json.RawMessage
}

// Usage is the token accounting of one inference. Input buckets are
// disjoint: InputTokens + CacheReadTokens + CacheCreationTokens is the
// whole prompt. ReasoningTokens is the part of OutputTokens spent on
// reasoning.
type Usage struct {
	// InputTokens counts prompt tokens neither read from nor written to the
	// cache.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens counts every generated token, reasoning included.
	OutputTokens int64 `json:"outputTokens"`
	// CacheReadTokens counts prompt tokens read from the cache.
	CacheReadTokens int64 `json:"cacheReadTokens"`
	// CacheCreationTokens counts prompt tokens written to the cache
	// (Anthropic only).
	CacheCreationTokens int64 `json:"cacheCreationTokens"`
	// ReasoningTokens counts the output tokens spent on reasoning (OpenAI
	// only).
	ReasoningTokens int64 `json:"reasoningTokens"`
}

// Part is one part of a message, in the OpenTelemetry GenAI shape: a text
// part (Content), a tool call (ID, Name, Arguments) or a tool call response
// (ID, Response).
type Part struct {
	// Type is PartText, PartToolCall or PartToolCallResponse.
	Type string `json:"type"`
	// Content is a text part's text.
	Content string `json:"content,omitempty"`
	// ID is the tool call's id, the same on the call and its response.
	ID string `json:"id,omitempty"`
	// Name is the called tool's name.
	Name string `json:"name,omitempty"`
	// Arguments is the tool call's arguments, valid JSON (usually an
	// object); absent when the provider gave none.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Response is the tool's output, valid JSON (usually a string); absent
	// when the provider gave none.
	Response json.RawMessage `json:"response,omitempty"`
}

// Message is one input or output message. Parts is never nil.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string `json:"role"`
	// Parts are the message's parts in order.
	Parts []Part `json:"parts"`
	// FinishReason is why generation stopped (output messages only).
	FinishReason string `json:"finishReason,omitempty"`
}

// Record is one inference mapped onto the OpenTelemetry GenAI shapes. Its
// slices are never nil.
type Record struct {
	// Provider is ProviderAnthropic or ProviderOpenAI.
	Provider string `json:"provider"`
	// API is APIMessages, APIChatCompletions or APIResponses.
	API string `json:"api"`
	// Model is the response's model, else the request's.
	Model string `json:"model,omitempty"`
	// ResponseID is the response's id.
	ResponseID string `json:"responseId,omitempty"`
	// Usage is the response's token accounting.
	Usage Usage `json:"usage"`
	// SystemInstructions are the system prompt's parts.
	SystemInstructions []Part `json:"systemInstructions"`
	// InputMessages are the request's conversation.
	InputMessages []Message `json:"inputMessages"`
	// OutputMessages are the response's messages (one per choice for Chat
	// Completions, one otherwise).
	OutputMessages []Message `json:"outputMessages"`
	// ToolDefinitions are the tools the request offered the model, each a
	// JSON object as the provider takes it (the OpenTelemetry
	// gen_ai.tool.definitions keep the source's format), in order.
	ToolDefinitions []json.RawMessage `json:"toolDefinitions"`
}

// DecodeUpload decodes an upload body: a JSON object whose "request" and
// "response" are JSON objects and whose "ts", when present and not null, is
// an integer count of epoch milliseconds from 0 to the end of year 9999.
// Other top-level keys are ignored; keys match exactly, case included.
func DecodeUpload(b []byte) (Upload, error) {
	if err := checkDepth(b, "upload"); err != nil {
		return Upload{}, err
	}
	o, err := asObj(trimSpace(b), "upload")
	if err != nil {
		return Upload{}, err
	}
	var u Upload
	if v := o["ts"]; !isNull(v) {
		ms, err := asInt(v, "ts")
		if err != nil {
			return Upload{}, err
		}
		if ms < 0 || ms > maxTS {
			return Upload{}, invalid("ts", "out of range")
		}
		u.TS = time.UnixMilli(ms).UTC()
	}
	for _, f := range []struct {
		key string
		dst *json.RawMessage
	}{{"request", &u.Request}, {"response", &u.Response}} {
		v := o[f.key]
		if isNull(v) {
			return Upload{}, invalid(f.key, "missing")
		}
		if kindOf(v) != '{' {
			return Upload{}, invalid(f.key, "not an object")
		}
		*f.dst = v
	}
	return u, nil
}

// Parse maps an upload onto a Record, detecting the provider from the
// response's shape and checking the request against it. It never panics;
// every error wraps ErrInvalid.
func Parse(u Upload) (Record, error) {
	req, err := rootObj(u.Request, "request")
	if err != nil {
		return Record{}, err
	}
	resp, err := rootObj(u.Response, "response")
	if err != nil {
		return Record{}, err
	}
	m := &mapper{rec: Record{
		SystemInstructions: []Part{},
		InputMessages:      []Message{},
		OutputMessages:     []Message{},
		ToolDefinitions:    []json.RawMessage{},
	}}
	var api func(req, resp obj) error
	switch detect(resp) {
	case APIMessages:
		m.rec.Provider, m.rec.API, api = ProviderAnthropic, APIMessages, m.anthropic
	case APIChatCompletions:
		m.rec.Provider, m.rec.API, api = ProviderOpenAI, APIChatCompletions, m.chat
	case APIResponses:
		m.rec.Provider, m.rec.API, api = ProviderOpenAI, APIResponses, m.responses
	default:
		return Record{}, fmt.Errorf("%w: %w: the response is no anthropic message, chat.completion or response", ErrInvalid, ErrUnknownProvider)
	}
	if err := api(req, resp); err != nil {
		return Record{}, err
	}
	if m.rec.Model, err = resp.str("model", "response"); err != nil {
		return Record{}, err
	}
	if m.rec.Model == "" {
		if m.rec.Model, err = req.str("model", "request"); err != nil {
			return Record{}, err
		}
	}
	if m.rec.ResponseID, err = resp.str("id", "response"); err != nil {
		return Record{}, err
	}
	if m.rec.ToolDefinitions, err = toolDefinitions(req); err != nil {
		return Record{}, err
	}
	return m.rec, nil
}

// toolDefinitions are the request's "tools", which every provider sends as
// an array of objects (Anthropic's {name, description, input_schema},
// OpenAI's {type: function, …}, Codex's namespaces), kept as sent so a
// trace shows what the model was offered.
func toolDefinitions(req obj) ([]json.RawMessage, error) {
	tools, err := req.arr("tools", "request")
	if err != nil {
		return nil, err
	}
	if len(tools) > MaxTools {
		return nil, invalid("request.tools", fmt.Sprintf("more than %d tools", MaxTools))
	}
	out := make([]json.RawMessage, 0, len(tools))
	for i, t := range tools {
		if kindOf(t) != '{' {
			return nil, invalid(fmt.Sprintf("request.tools[%d]", i), "not an object")
		}
		out = append(out, trimSpace(t))
	}
	return out, nil
}

// detect names the API whose response shape resp has, or "" for none or
// more than one.
func detect(resp obj) string {
	var found []string
	if t, err := resp.str("type", ""); err == nil && t == "message" {
		found = append(found, APIMessages)
	}
	switch o, _ := resp.str("object", ""); o {
	case "chat.completion":
		found = append(found, APIChatCompletions)
	case "response":
		found = append(found, APIResponses)
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// rootObj checks the nesting of a request or response and decodes it.
func rootObj(raw json.RawMessage, p string) (obj, error) {
	if err := checkDepth(raw, p); err != nil {
		return nil, err
	}
	return asObj(trimSpace(raw), p)
}

// mapper builds one Record, counting messages and parts against the bounds.
type mapper struct {
	rec   Record
	msgs  int
	parts int
}

// part appends one part to parts, counting it.
func (m *mapper) part(parts []Part, pt Part, p string) ([]Part, error) {
	m.parts++
	if m.parts > MaxParts {
		return parts, invalid(p, fmt.Sprintf("more than %d parts", MaxParts))
	}
	return append(parts, pt), nil
}

// message appends one message to msgs, counting it (its parts were counted
// as they were made).
func (m *mapper) message(msgs []Message, msg Message, p string) ([]Message, error) {
	m.msgs++
	if m.msgs > MaxMessages {
		return msgs, invalid(p, fmt.Sprintf("more than %d messages", MaxMessages))
	}
	if msg.Parts == nil {
		msg.Parts = []Part{}
	}
	return append(msgs, msg), nil
}
