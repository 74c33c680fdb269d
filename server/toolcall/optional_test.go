package toolcall

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOptionalArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema string
		want   []string
	}{
		{`{}`, nil},
		{`{"type":"object"}`, nil},
		{`{"type":"object","properties":{"a":{},"b":{},"c":{}},"required":["b"]}`, []string{"a", "c"}},
		{`{"properties":{"a":{}},"required":["a"]}`, nil},
		{`{"properties":{"a":{}},"required":[1,"x"]}`, []string{"a"}},
		{`{"properties":[]}`, nil},
		{`[]`, nil},
		{`not json`, nil},
	} {
		require.Equal(t, tc.want, OptionalArgs(json.RawMessage(tc.schema)), tc.schema)
	}
}

// TestOptionalArgsSave: a binding may not use an optional argument in the
// URL's path (an empty segment would make another call); anywhere else,
// and for arguments the schema does not declare, it saves as before.
func TestOptionalArgsSave(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"q":{"type":"string"}},"required":["id"]}`)
	for _, tc := range []struct {
		name  string
		b     Binding
		field string // "" when saved
	}{
		{"optional in path", Binding{Method: "DELETE", URL: "https://x.example/items/{{args.q}}"}, "url"},
		{"optional nested in path", Binding{Method: "GET", URL: "https://x.example/items/{{args.q.sub}}/x"}, "url"},
		{"optional inside a path segment", Binding{Method: "GET", URL: "https://x.example/items/v{{args.q}}"}, "url"},
		{"required in path", Binding{Method: "DELETE", URL: "https://x.example/items/{{args.id}}"}, ""},
		{"undeclared in path", Binding{Method: "DELETE", URL: "https://x.example/items/{{args.other}}"}, ""},
		{"optional in query", Binding{Method: "GET", URL: "https://x.example/items?q={{args.q}}"}, ""},
		{"optional in header", Binding{Method: "GET", URL: "https://x.example/items", Headers: map[string]string{"X-Q": "{{args.q}}"}}, ""},
		{"optional in body", Binding{Method: "POST", URL: "https://x.example/items", Body: json.RawMessage(`{"q":"{{args.q}}"}`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.b
			b.Optional = OptionalArgs(schema)
			err := b.Validate("")
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
			require.Contains(t, ie.Message, `"q"`)
			require.Contains(t, ie.Message, "required")
			// The same binding for a schema that does not declare q saves.
			tc.b.Optional = OptionalArgs(json.RawMessage(`{}`))
			require.NoError(t, tc.b.Validate(""))
		})
	}
}

// TestOptionalArgsSubstitute: an optional argument left out renders empty
// in the query, header values and body; one the schema does not declare,
// or requires, is still refused when left out.
func TestOptionalArgsSubstitute(t *testing.T) {
	t.Parallel()
	optional := OptionalArgs(json.RawMessage(`{"properties":{"id":{},"q":{},"o":{}},"required":["id"]}`))
	tests := []struct {
		name    string
		b       Binding
		args    map[string]any
		url     string
		headers map[string]string
		body    string
		field   string
	}{
		{name: "query empty", b: Binding{Method: "GET", URL: "https://x.example/i/{{args.id}}?q={{args.q}}&z=1"}, args: map[string]any{"id": "7"},
			url: "https://x.example/i/7?q=&z=1"},
		{name: "query given", b: Binding{Method: "GET", URL: "https://x.example/i/{{args.id}}?q={{args.q}}"}, args: map[string]any{"id": "7", "q": "a b"},
			url: "https://x.example/i/7?q=a%20b"},
		{name: "nested optional empty", b: Binding{Method: "GET", URL: "https://x.example/i?n={{args.o.name}}"}, args: map[string]any{},
			url: "https://x.example/i?n="},
		{name: "nested key of a given optional still required", b: Binding{Method: "GET", URL: "https://x.example/i?n={{args.o.name}}"}, args: map[string]any{"o": map[string]any{}},
			field: "args.o.name"},
		{name: "header empty", b: Binding{Method: "GET", URL: "https://x.example/i", Headers: map[string]string{"X-Q": "q={{args.q}}"}}, args: nil,
			url: "https://x.example/i", headers: map[string]string{"X-Q": "q="}},
		{name: "body whole and inside strings empty", b: Binding{Method: "POST", URL: "https://x.example/i",
			Body: json.RawMessage(`{"q":"{{args.q}}","s":"q={{args.q}};","a":["{{args.o}}"],"id":"{{args.id}}"}`)}, args: map[string]any{"id": json.Number("3")},
			url: "https://x.example/i", headers: map[string]string{"Content-Type": "application/json"},
			body: `{"a":[""],"id":3,"q":"","s":"q=;"}`},
		{name: "body given keeps its type", b: Binding{Method: "POST", URL: "https://x.example/i", Body: json.RawMessage(`{"q":"{{args.q}}"}`)}, args: map[string]any{"q": json.Number("5")},
			url: "https://x.example/i", headers: map[string]string{"Content-Type": "application/json"}, body: `{"q":5}`},
		{name: "required left out", b: Binding{Method: "GET", URL: "https://x.example/i?id={{args.id}}"}, args: map[string]any{}, field: "args.id"},
		{name: "undeclared left out", b: Binding{Method: "GET", URL: "https://x.example/i?u={{args.u}}"}, args: map[string]any{}, field: "args.u"},
		{name: "undeclared left out of header", b: Binding{Method: "GET", URL: "https://x.example/i", Headers: map[string]string{"X-U": "{{args.u}}"}}, args: map[string]any{}, field: "args.u"},
		{name: "undeclared left out of body", b: Binding{Method: "POST", URL: "https://x.example/i", Body: json.RawMessage(`{"u":"{{args.u}}"}`)}, args: map[string]any{}, field: "args.u"},
		// A binding saved before the path rule: its path still needs the
		// argument at call time, never an empty segment.
		{name: "optional in path left out", b: Binding{Method: "DELETE", URL: "https://x.example/i/{{args.q}}"}, args: map[string]any{}, field: "args.q"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.b.Optional = optional
			c, err := compile(tc.b, "")
			require.NoError(t, err)
			r, err := c.substitute(tc.args)
			if tc.field != "" {
				var ie *InvalidError
				require.ErrorAs(t, err, &ie)
				require.Equal(t, tc.field, ie.Field)
				require.Contains(t, ie.Message, "missing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.url, r.url)
			got := map[string]string{}
			for k := range r.headers {
				got[k] = r.headers.Get(k)
			}
			if tc.headers == nil {
				tc.headers = map[string]string{}
			}
			require.Equal(t, tc.headers, got)
			require.Equal(t, tc.body, string(r.body))
		})
	}
}
