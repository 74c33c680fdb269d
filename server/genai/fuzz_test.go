package genai_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"svc/server/genai"
)

// addUploadSeeds seeds a fuzz target with every fixture's upload and edge
// cases.
func addUploadSeeds(f *testing.F) {
	for _, set := range [][]fixture{anthropicFixtures, chatFixtures, responsesFixtures} {
		for _, fx := range set {
			f.Add(body(fx.req, fx.resp))
		}
	}
	for _, s := range []string{
		"", "\x00", "null", "{}", "[]", `"x"`, "{", "{}}",
		`{"request":{},"response":{}}`,
		`{"ts":1,"request":{"messages":[]},"response":{"type":"message","content":[]}}`,
		`{"ts":-0,"request":{"input":"x"},"response":{"object":"response"}}`,
		`{"ts":1e3,"request":{},"response":{}}`,
		`{"request":{"messages":[{"role":"user","content":"\ud800\u0000\u00e9"}]},"response":{"object":"chat.completion","choices":[]}}`,
		"{\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]},\"response\":{\"type\":\"message\",\"content\":[]}}",
		`{"request":{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"x":{"type":"thinking","thinking":"` + marker + `"}}}]}]},"response":{"type":"message","content":[]}}`,
		`{"request":{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"n","arguments":"{\"type\":\"reasoning\",\"text\":\"` + marker + `\"}"}}]}]},"response":{"object":"chat.completion","choices":[]}}`,
		`{"request":{"input":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"` + marker + `"}]}]},"response":{"object":"response","type":"thinking","output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"` + marker + `"}]}]}}`,
		`{"request":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `,"response":{}}`,
	} {
		f.Add([]byte(s))
	}
}

func FuzzDecodeUpload(f *testing.F) {
	addUploadSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := genai.DecodeUpload(data)
		if err != nil {
			require.ErrorIs(t, err, genai.ErrInvalid)
			require.Equal(t, genai.Upload{}, u)
			return
		}
		for _, raw := range []json.RawMessage{u.Request, u.Response} {
			require.True(t, json.Valid(raw))
			require.Equal(t, byte('{'), raw[0])
		}
		if !u.TS.IsZero() {
			require.GreaterOrEqual(t, u.TS.UnixMilli(), int64(0))
		}

		// Round trip: the upload re-encoded decodes to the same upload.
		again := map[string]any{"request": u.Request, "response": u.Response}
		if !u.TS.IsZero() {
			again["ts"] = u.TS.UnixMilli()
		}
		b, err := json.Marshal(again)
		require.NoError(t, err)
		u2, err := genai.DecodeUpload(b)
		require.NoError(t, err)
		require.True(t, u.TS.Equal(u2.TS))
		requireSameJSON(t, u.Request, u2.Request)
		requireSameJSON(t, u.Response, u2.Response)
	})
}

func FuzzParse(f *testing.F) {
	addUploadSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := genai.DecodeUpload(data)
		if err != nil {
			return
		}
		rec, err := genai.Parse(u)
		if err != nil {
			require.ErrorIs(t, err, genai.ErrInvalid)
			require.Equal(t, genai.Record{}, rec)
			return
		}
		checkRecord(t, rec)

		// Deterministic.
		again, err := genai.Parse(u)
		require.NoError(t, err)
		require.Equal(t, rec, again)

		// Thinking never reaches the record: when the marker appears only
		// inside thinking or reasoning objects, it appears nowhere in it.
		if !markerOutsideThoughts(t, u) {
			b, err := json.Marshal(rec)
			require.NoError(t, err)
			require.False(t, containsMarker(t, b), "%s", b)
		}
	})
}

// checkRecord asserts the invariants of every Record Parse returns.
func checkRecord(t *testing.T, rec genai.Record) {
	t.Helper()
	switch rec.API {
	case genai.APIMessages:
		require.Equal(t, genai.ProviderAnthropic, rec.Provider)
	case genai.APIChatCompletions, genai.APIResponses:
		require.Equal(t, genai.ProviderOpenAI, rec.Provider)
	default:
		t.Fatalf("api %q", rec.API)
	}
	for _, n := range []int64{rec.Usage.InputTokens, rec.Usage.OutputTokens, rec.Usage.CacheReadTokens, rec.Usage.CacheCreationTokens, rec.Usage.ReasoningTokens} {
		require.GreaterOrEqual(t, n, int64(0))
	}
	require.NotNil(t, rec.SystemInstructions)
	require.NotNil(t, rec.InputMessages)
	require.NotNil(t, rec.OutputMessages)
	require.LessOrEqual(t, len(rec.InputMessages)+len(rec.OutputMessages), genai.MaxMessages)
	nparts := len(rec.SystemInstructions)
	checkParts(t, rec.SystemInstructions)
	for _, ms := range [][]genai.Message{rec.InputMessages, rec.OutputMessages} {
		for _, m := range ms {
			require.NotEmpty(t, m.Role)
			require.NotNil(t, m.Parts)
			checkParts(t, m.Parts)
			nparts += len(m.Parts)
		}
	}
	require.LessOrEqual(t, nparts, genai.MaxParts)
	if rec.API == genai.APIResponses || rec.API == genai.APIMessages {
		require.Len(t, rec.OutputMessages, 1)
	}

	b, err := json.Marshal(rec)
	require.NoError(t, err)
	require.True(t, utf8.Valid(b))
	var back genai.Record
	require.NoError(t, json.Unmarshal(b, &back))
}

// checkParts asserts the invariants of parts.
func checkParts(t *testing.T, parts []genai.Part) {
	t.Helper()
	for _, p := range parts {
		switch p.Type {
		case genai.PartText:
			require.NotEmpty(t, p.Content)
		case genai.PartToolCall:
			if p.Arguments != nil {
				require.True(t, json.Valid(p.Arguments), "%s", p.Arguments)
			}
		case genai.PartToolCallResponse:
			if p.Response != nil {
				require.True(t, json.Valid(p.Response), "%s", p.Response)
			}
		default:
			t.Fatalf("part type %q", p.Type)
		}
		require.True(t, utf8.ValidString(p.Content+p.ID+p.Name))
	}
}

// thoughtTypes are the types of thinking and reasoning objects.
var thoughtTypes = map[string]bool{"thinking": true, "redacted_thinking": true, "reasoning": true, "reasoning_text": true, "summary_text": true}

// markerOutsideThoughts reports whether the marker appears in the upload
// anywhere but inside a thinking or reasoning object (below the request
// and response themselves). Tool inputs and arguments are copied as they
// are, so there nothing counts as thinking.
func markerOutsideThoughts(t *testing.T, u genai.Upload) bool {
	t.Helper()
	var walk func(v any, exempt, root bool) bool
	walk = func(v any, exempt, root bool) bool {
		switch x := v.(type) {
		case string:
			return strings.Contains(x, marker)
		case []any:
			for _, e := range x {
				if walk(e, exempt, false) {
					return true
				}
			}
		case map[string]any:
			if typ, _ := x["type"].(string); exempt && !root && thoughtTypes[typ] {
				return false
			}
			for k, c := range x {
				if strings.Contains(k, marker) {
					return true
				}
				if walk(c, exempt && (root || (k != "input" && k != "arguments")), false) {
					return true
				}
			}
		}
		return false
	}
	for _, raw := range []json.RawMessage{u.Request, u.Response} {
		if walk(decodeAny(t, raw), true, true) {
			return true
		}
	}
	return false
}

// containsMarker reports whether the marker appears in any key or string of
// a JSON document.
func containsMarker(t *testing.T, b []byte) bool {
	t.Helper()
	var walk func(v any) bool
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return strings.Contains(x, marker)
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for k, c := range x {
				if strings.Contains(k, marker) || walk(c) {
					return true
				}
			}
		}
		return false
	}
	return bytes.Contains(b, []byte(marker)) || walk(decodeAny(t, b))
}

// decodeAny decodes JSON into Go values, numbers as json.Number.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

// requireSameJSON asserts two documents decode to the same value.
func requireSameJSON(t *testing.T, a, b json.RawMessage) {
	t.Helper()
	require.Equal(t, decodeAny(t, a), decodeAny(t, b))
}
