package otlp

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// stdJSON is encoding/json's encoding without HTML escaping, which
// MarshalData must equal.
func stdJSON(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestMarshalDataMatchesEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		data map[string]any
	}{
		{"empty", map[string]any{}},
		{"exchange", map[string]any{
			"model": "claude", "requestOnly": false, "source": "otlp", "truncated": true,
			"costUsd": 0.0017394, "durationMs": float64(84), "requestId": "req_1",
			"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`), "tools": []string{"Read", "Bash"},
			"usage": map[string]any{"inputTokens": int64(3), "outputTokens": int64(0)},
		}},
		{"attributes", map[string]any{"event": "codex.sse_event", "attributes": map[string]string{"b": "2", "a": "<&>\u2028"}}},
		{"numbers", map[string]any{"a": 1e21, "b": 1e-7, "c": -0.0, "d": 123456789.125, "e": float64(math.MaxInt64), "f": 5e-324, "g": int64(math.MinInt64)}},
		{"strings", map[string]any{"s": "quote\" back\\ nl\n cr\r tab\t bs\b ff\f nul\x00 esc\x1b del\x7f é 😀 bad\xff\xfe end"}},
		{"nil and nested", map[string]any{"n": nil, "m": map[string]any{"x": []string{}}}},
		{"other types fall back", map[string]any{"f32": float32(1.5), "slice": []any{1, "x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Event{Data: tc.data}.MarshalData()
			require.NoError(t, err)
			require.Equal(t, string(stdJSON(t, tc.data)), string(got))
		})
	}
	_, err := Event{Data: map[string]any{"x": math.NaN()}}.MarshalData()
	require.Error(t, err)
}

func FuzzMarshalDataString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\x00\x1f\x7f", "\u2028\u2029", "\xff", "é😀", "<>&"} {
		f.Add(s, 1.5)
	}
	f.Fuzz(func(t *testing.T, s string, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		data := map[string]any{s: s, "x": x, "list": []string{s}}
		got, err := Event{Data: data}.MarshalData()
		require.NoError(t, err)
		require.Equal(t, string(stdJSON(t, data)), string(got))
	})
}
