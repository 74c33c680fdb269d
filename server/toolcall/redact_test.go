package toolcall

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string // JSON
		secrets []string
		want    string // JSON
	}{
		{name: "string", in: `"token abc123 and abc123"`, secrets: []string{"abc123"}, want: `"token [REDACTED] and [REDACTED]"`},
		{name: "nested", in: `{"a":[{"b":"xabc123y"},"abc123",1,true,null],"c":{"d":"none"}}`, secrets: []string{"abc123"},
			want: `{"a":[{"b":"x[REDACTED]y"},"[REDACTED]",1,true,null],"c":{"d":"none"}}`},
		{name: "map key", in: `{"abc123":"v"}`, secrets: []string{"abc123"}, want: `{"[REDACTED]":"v"}`},
		{name: "several secrets", in: `["one two three"]`, secrets: []string{"one", "three"}, want: `["[REDACTED] two [REDACTED]"]`},
		{name: "secret inside another", in: `"xsecretlongx secret"`, secrets: []string{"secret", "secretlong"}, want: `"x[REDACTED]x [REDACTED]"`},
		{name: "secret that is part of the marker", in: `"RED abcd"`, secrets: []string{"abcd", "RED"}, want: `"[REDACTED] [REDACTED]"`},
		{name: "empty secret ignored", in: `"abc"`, secrets: []string{""}, want: `"abc"`},
		{name: "no secrets", in: `{"a":"abc"}`, want: `{"a":"abc"}`},
		{name: "numbers untouched", in: `[123,1.5]`, secrets: []string{"123"}, want: `[123,1.5]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var v any
			require.NoError(t, json.Unmarshal([]byte(tc.in), &v))
			got := Redact(v, tc.secrets...)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
			// The input is untouched: a deep copy.
			b, err = json.Marshal(v)
			require.NoError(t, err)
			require.JSONEq(t, tc.in, string(b))
		})
	}
}

func TestRedactCopies(t *testing.T) {
	t.Parallel()
	in := map[string]any{"a": []any{"x"}, "m": map[string]any{"k": "v"}}
	out := Redact(in, "zzz").(map[string]any)
	out["a"].([]any)[0] = "changed"
	out["m"].(map[string]any)["k"] = "changed"
	require.Equal(t, "x", in["a"].([]any)[0])
	require.Equal(t, "v", in["m"].(map[string]any)["k"])
	require.Equal(t, json.Number("5"), Redact(json.Number("5"), "5"))
	require.Nil(t, Redact(nil, "x"))
}
