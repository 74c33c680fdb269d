package genai_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/genai"
)

// marker is a string the fixtures put only inside thinking and reasoning
// content: it must never reach a Record.
const marker = "THINKING-MARKER-5e1f0c"

// fixture is one provider upload and the record it maps to.
type fixture struct {
	name      string
	req, resp string
	want      genai.Record
}

// body renders the upload body of a request and a response.
func body(req, resp string) []byte {
	return []byte(`{"ts":1763900000123,"request":` + req + `,"response":` + resp + `}`)
}

// parse decodes and parses an upload body.
func parse(tb testing.TB, req, resp string) (genai.Record, error) {
	tb.Helper()
	u, err := genai.DecodeUpload(body(req, resp))
	require.NoError(tb, err)
	return genai.Parse(u)
}

// runFixtures checks that each fixture maps to its record and marshals.
func runFixtures(t *testing.T, fixtures []fixture) {
	t.Helper()
	for _, tc := range fixtures {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, tc.req, tc.resp)
			require.NoError(t, err)
			if tc.want.ToolDefinitions == nil {
				tc.want.ToolDefinitions = toolsOf(t, tc.req)
			}
			require.Equal(t, tc.want, got)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.NotContains(t, string(b), marker)
		})
	}
}

// toolsOf is the request's tools as sent: what a Record keeps of them.
func toolsOf(tb testing.TB, req string) []json.RawMessage {
	tb.Helper()
	var r struct {
		Tools []json.RawMessage `json:"tools"`
	}
	require.NoError(tb, json.Unmarshal([]byte(req), &r))
	if r.Tools == nil {
		return []json.RawMessage{}
	}
	return r.Tools
}

func text(s string) genai.Part { return genai.Part{Type: genai.PartText, Content: s} }

func call(id, name, args string) genai.Part {
	p := genai.Part{Type: genai.PartToolCall, ID: id, Name: name}
	if args != "" {
		p.Arguments = json.RawMessage(args)
	}
	return p
}

func result(id, resp string) genai.Part {
	p := genai.Part{Type: genai.PartToolCallResponse, ID: id}
	if resp != "" {
		p.Response = json.RawMessage(resp)
	}
	return p
}

func msg(role string, parts ...genai.Part) genai.Message {
	if parts == nil {
		parts = []genai.Part{}
	}
	return genai.Message{Role: role, Parts: parts}
}

func out(finish string, parts ...genai.Part) genai.Message {
	m := msg("assistant", parts...)
	m.FinishReason = finish
	return m
}

func parts(p ...genai.Part) []genai.Part {
	if p == nil {
		return []genai.Part{}
	}
	return p
}

func msgs(m ...genai.Message) []genai.Message {
	if m == nil {
		return []genai.Message{}
	}
	return m
}
