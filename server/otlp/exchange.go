package otlp

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// maxBodyBytes bounds a request or response body kept in state: a bigger
// body is handled as a truncated one (model only), so one record cannot
// hold more than this.
const maxBodyBytes = 256 << 10

// request is what an exchange keeps of an api_request_body: the parts
// llm_exchange shows, with thinking already removed.
type request struct {
	TS time.Time `json:"ts"`
	// BodyID is the request_body_id attribute Claude Code gives a body and
	// repeats on its response.
	BodyID    string          `json:"bodyId,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	System    json.RawMessage `json:"system,omitempty"`
	Messages  json.RawMessage `json:"messages,omitempty"`
	// Tools is nil when the request offered none, empty when it offered an
	// empty list.
	Tools []string `json:"tools"`
}

// response is what an exchange keeps of an api_response_body.
type response struct {
	// BodyID is the request_body_id of the request answered.
	BodyID     string          `json:"bodyId,omitempty"`
	Truncated  bool            `json:"truncated,omitempty"`
	ID         string          `json:"id,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	StopReason *string         `json:"stopReason,omitempty"`
	Usage      usage           `json:"usage"`
}

// accounting is an api_request record.
type accounting struct {
	TS         time.Time `json:"ts"`
	Model      string    `json:"model"`
	RequestID  string    `json:"requestId,omitempty"`
	Usage      usage     `json:"usage"`
	CostUSD    *float64  `json:"costUsd,omitempty"`
	DurationMs *float64  `json:"durationMs,omitempty"`
}

// usage holds token counts, each nil when the telemetry did not carry it.
type usage struct {
	Input         *int64 `json:"inputTokens,omitempty"`
	Output        *int64 `json:"outputTokens,omitempty"`
	CacheRead     *int64 `json:"cacheReadTokens,omitempty"`
	CacheCreation *int64 `json:"cacheCreationTokens,omitempty"`
}

// orElse fills each count u lacks from o.
func (u usage) orElse(o usage) usage {
	pick := func(a, b *int64) *int64 {
		if a != nil {
			return a
		}
		return b
	}
	return usage{
		Input:         pick(u.Input, o.Input),
		Output:        pick(u.Output, o.Output),
		CacheRead:     pick(u.CacheRead, o.CacheRead),
		CacheCreation: pick(u.CacheCreation, o.CacheCreation),
	}
}

// data renders u as llm_exchange's usage object, nil when u is empty.
func (u usage) data() map[string]any {
	m := map[string]any{}
	for k, v := range map[string]*int64{
		"inputTokens": u.Input, "outputTokens": u.Output,
		"cacheReadTokens": u.CacheRead, "cacheCreationTokens": u.CacheCreation,
	} {
		if v != nil {
			m[k] = *v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// parseRequest reads an Anthropic Messages request body. A body that is too
// big, not JSON or not an object (the producer truncates big bodies, which
// breaks their JSON) gives a truncated request. Only system, messages and
// the tools' names are read; the rest is skipped, not decoded.
func parseRequest(body, bodyID string, ts time.Time) *request {
	r := &request{TS: ts, BodyID: bodyID}
	if !validBody(body) {
		r.Truncated = true
		return r
	}
	got := topLevel(body, "system", "messages", "tools")
	r.System = cleanRaw(got[0])
	if got[1].IsArray() {
		r.Messages = cleanRaw(got[1])
	}
	if got[2].IsArray() {
		r.Tools = []string{}
		got[2].ForEach(func(_, t gjson.Result) bool {
			if name := t.Get("name"); t.IsObject() && name.Type == gjson.String {
				r.Tools = append(r.Tools, name.String())
			}
			return true
		})
	}
	if r.size() > maxBodyBytes {
		return &request{TS: ts, BodyID: bodyID, Truncated: true}
	}
	return r
}

// parseResponse reads an Anthropic Messages response body; a body that is
// too big or not a JSON object gives a truncated response. messageID (the
// message.id attribute) stands in for the body's id when it has none.
func parseResponse(body, bodyID, messageID string) *response {
	r := &response{BodyID: bodyID, ID: messageID}
	if !validBody(body) {
		r.Truncated = true
		return r
	}
	got := topLevel(body, "id", "content", "stop_reason", "usage")
	if got[0].Type == gjson.String && got[0].String() != "" {
		r.ID = got[0].String()
	}
	r.Content = cleanRaw(got[1])
	if got[2].Type == gjson.String {
		s := got[2].String()
		r.StopReason = &s
	}
	if u := got[3]; u.IsObject() {
		n := u.Get
		r.Usage = usage{
			Input: rawInt(n("input_tokens")), Output: rawInt(n("output_tokens")),
			CacheRead: rawInt(n("cache_read_input_tokens")), CacheCreation: rawInt(n("cache_creation_input_tokens")),
		}
	}
	if r.size() > maxBodyBytes {
		return &response{BodyID: bodyID, ID: messageID, Truncated: true}
	}
	return r
}

// topLevel reads the values of keys in the JSON object body, as
// gjson.GetMany(body, keys...) does when no key holds a path character (the
// first of a key given twice, an absent key's zero Result), in one pass over
// the body: GetMany reads from the start for each key, and a request's
// "tools" comes after its long "messages" (docs/PERFORMANCE.md, "The
// protobuf path and the store side").
func topLevel(body string, keys ...string) []gjson.Result {
	got := make([]gjson.Result, len(keys))
	left := len(keys)
	gjson.Parse(body).ForEach(func(k, v gjson.Result) bool {
		name := k.String()
		for i, key := range keys {
			if key == name && !got[i].Exists() {
				got[i] = v
				left--
			}
		}
		return left > 0
	})
	return got
}

// validBody reports whether body is one JSON object of at most
// maxBodyBytes, checked before anything is read from it.
func validBody(body string) bool {
	if len(body) > maxBodyBytes {
		return false
	}
	t := strings.TrimLeft(body, " \t\r\n")
	return t != "" && t[0] == '{' && gjson.Valid(body)
}

// rawInt reads a JSON number as an integer, nil when v is not one.
func rawInt(v gjson.Result) *int64 {
	if v.Type != gjson.Number {
		return nil
	}
	return parseInt(v.Raw)
}

// needsCleaning reports whether raw JSON must be decoded and encoded again:
// it could hold a thinking block (it names one, or spells something with
// \u escapes, which could name one), or it is not valid UTF-8 (which the
// round trip replaces, as every JSON reader of the row would need).
func needsCleaning(b []byte) bool {
	return bytes.Contains(b, []byte("thinking")) || bytes.Contains(b, []byte(`\u`)) || !utf8.Valid(b)
}

// cleanRaw returns a value's JSON with its thinking blocks removed (nil for
// null, absent, or a thinking block itself). JSON that cannot hold one is
// kept as it came, unread; the rest is decoded, stripped and encoded again.
func cleanRaw(v gjson.Result) json.RawMessage {
	if !v.Exists() || v.Type == gjson.Null {
		return nil
	}
	b := json.RawMessage(v.Raw)
	if !needsCleaning(b) {
		return b
	}
	x, err := decodeJSONValue(b)
	if err != nil || x == nil {
		return nil
	}
	return cleanJSON(x)
}

func (r *request) size() int {
	n := len(r.BodyID) + len(r.System) + len(r.Messages)
	for _, t := range r.Tools {
		n += len(t) + 3
	}
	return n
}

func (r *response) size() int {
	n := len(r.BodyID) + len(r.ID) + len(r.Content)
	if r.StopReason != nil {
		n += len(*r.StopReason)
	}
	return n
}

// isThinking reports whether v is an extended-thinking content block.
func isThinking(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	t, _ := m["type"].(string)
	return t == "thinking" || t == "redacted_thinking"
}

// stripThinking removes every thinking block from v, at any depth: as an
// array element or as an object member. Blocks only appear in content
// arrays, but thinking must never be stored, so nothing is left to where a
// producer puts it.
func stripThinking(v any) any {
	switch x := v.(type) {
	case []any:
		out := x[:0]
		for _, e := range x {
			if !isThinking(e) {
				out = append(out, stripThinking(e))
			}
		}
		return out
	case map[string]any:
		for k, e := range x {
			if isThinking(e) {
				delete(x, k)
			} else {
				x[k] = stripThinking(e)
			}
		}
	}
	return v
}

// cleanJSON encodes v with its thinking blocks removed, nil when v itself
// is one.
func cleanJSON(v any) json.RawMessage {
	if isThinking(v) {
		return nil
	}
	b, err := encodeJSONValue(stripThinking(v))
	if err != nil {
		return nil
	}
	return b
}

// parseInt reads an integer attribute, accepting an integral float
// ("12.0"); nil when s is not one.
func parseInt(s string) *int64 {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return &n
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return nil
	}
	n := int64(f)
	return &n
}

// parseFloat reads a finite number attribute, nil when s is not one.
func parseFloat(s string) *float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// attrInt reads attribute key as an integer, nil when absent or not one.
func attrInt(attrs map[string]string, key string) *int64 {
	s, ok := attrs[key]
	if !ok {
		return nil
	}
	return parseInt(s)
}

// attrFloat reads attribute key as a number, nil when absent or not one.
func attrFloat(attrs map[string]string, key string) *float64 {
	s, ok := attrs[key]
	if !ok {
		return nil
	}
	return parseFloat(s)
}

// exchangeData renders an llm_exchange: the keys the telemetry carried,
// plus model, truncated, requestOnly and source always.
func exchangeData(model string, req *request, acct *accounting, resp *response, requestOnly bool) map[string]any {
	d := map[string]any{"model": model, "requestOnly": requestOnly, "source": "otlp"}
	truncated := false
	var u usage
	if acct != nil {
		if acct.RequestID != "" {
			d["requestId"] = acct.RequestID
		}
		if acct.CostUSD != nil {
			d["costUsd"] = *acct.CostUSD
		}
		if acct.DurationMs != nil {
			d["durationMs"] = *acct.DurationMs
		}
		u = acct.Usage
	}
	if req != nil {
		truncated = truncated || req.Truncated
		if len(req.System) > 0 {
			d["system"] = req.System
		}
		if len(req.Messages) > 0 {
			d["messages"] = req.Messages
		}
		if req.Tools != nil {
			d["tools"] = append([]string{}, req.Tools...)
		}
	}
	if resp != nil {
		truncated = truncated || resp.Truncated
		if resp.ID != "" {
			d["responseId"] = resp.ID
		}
		if len(resp.Content) > 0 {
			d["content"] = resp.Content
		}
		if resp.StopReason != nil {
			d["stopReason"] = *resp.StopReason
		}
		u = u.orElse(resp.Usage)
	}
	if m := u.data(); m != nil {
		d["usage"] = m
	}
	d["truncated"] = truncated
	return d
}
