package otlp

import (
	"maps"
	"testing"

	"github.com/tidwall/gjson"
)

var topLevelKeys = [][]string{
	{"system", "messages", "tools"},
	{"id", "content", "stop_reason", "usage"},
}

// checkTopLevel requires topLevel to read what gjson.GetMany reads, for
// every body the parsers read (validBody's).
func checkTopLevel(t *testing.T, body string) {
	t.Helper()
	if !validBody(body) {
		return
	}
	for _, keys := range topLevelKeys {
		got, want := topLevel(body, keys...), gjson.GetMany(body, keys...)
		for i := range keys {
			g, w := got[i], want[i]
			if g.Type != w.Type || g.Raw != w.Raw || g.Str != w.Str || g.Num != w.Num || g.Exists() != w.Exists() {
				t.Fatalf("body %q key %q: topLevel %#v, GetMany %#v", body, keys[i], g, w)
			}
		}
	}
}

var topLevelBodies = []string{
	`{}`,
	` {"system":"s","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash"},{"name":7},3]}`,
	`{"messages":[],"messages":[1],"system":null,"system":"second"}`,
	`{"sy\u0073tem":"escaped key","m\u0065ssages":[1]}`,
	`{"tools":{"name":"x"},"messages":{"a":1}}`,
	`{"nested":{"system":"inner","tools":[1]},"id":"outer"}`,
	`{"id":"msg_1","content":[{"type":"thinking","thinking":"x"}],"stop_reason":"end_turn","usage":{"input_tokens":1}}`,
	`{"id":7,"stop_reason":null,"usage":[1]}`,
	`{"id":"a\"b","content":"\u00e9","usage":{"input_tokens":1e3}}`,
	`{"system.x":"dotted","system":"plain","*":"star","id?":"q"}`,
	`{"":1,"id":"after empty key"}`,
	"{\"id\":\"a\xffb\",\"content\":[\"\xff\"]}",
	`{"id" : "spaced" , "usage" : { "output_tokens" : 2 } }`,
	`[{"id":"array"}]`,
	`{"id":"x"`,
}

func TestTopLevelMatchesGetMany(t *testing.T) {
	for _, body := range topLevelBodies {
		checkTopLevel(t, body)
	}
}

func FuzzTopLevel(f *testing.F) {
	for _, body := range topLevelBodies {
		f.Add(body)
	}
	f.Fuzz(checkTopLevel)
}

// TestPublicAttrs pins publicAttrs: the private attributes are gone, the
// rest kept, the record's own map never written, nil read as empty.
func TestPublicAttrs(t *testing.T) {
	for _, tc := range []struct {
		in, want map[string]string
	}{
		{nil, map[string]string{}},
		{map[string]string{}, map[string]string{}},
		{map[string]string{"model": "m"}, map[string]string{"model": "m"}},
		{map[string]string{"model": "m", "user.email": "a@b"}, map[string]string{"model": "m"}},
		{map[string]string{"user.account_id": "1", "user.email": "a@b"}, map[string]string{}},
	} {
		before := maps.Clone(tc.in)
		got := publicAttrs(tc.in)
		if got == nil || !maps.Equal(got, tc.want) {
			t.Fatalf("publicAttrs(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !maps.Equal(tc.in, before) {
			t.Fatalf("publicAttrs wrote to its argument: %v, was %v", tc.in, before)
		}
	}
}
