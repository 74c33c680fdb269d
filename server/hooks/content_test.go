package hooks

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestContentTemplate(t *testing.T) {
	payload := []byte(`{
		"repository": {"full_name": "acme/api"},
		"sender": {"login": "octocat"},
		"commits": [{"id": "a1", "msg": "first"}, {"id": "b2"}],
		"head": {"z": 1, "a": [1, 2], "s": "x y"},
		"n": 1.50, "t": true, "f": false, "nil": null,
		"html": "<b>&</b>",
		"multi": "line1\nline2",
		"esc": "\u00e9\ud83d\ude00",
		"k-ey": "dash", "$v": "dollar"
	}`)
	tests := []struct {
		name, template, want string
	}{
		{"plain text", "hello", "hello"},
		{"string", "{{payload.sender.login}} pushed", "octocat pushed"},
		{"spaces inside", "{{ payload.sender.login }}", "octocat"},
		{"nested", "repo {{payload.repository.full_name}}", "repo acme/api"},
		{"array index", "{{payload.commits.1.id}}", "b2"},
		{"array element object", "{{payload.commits.0}}", `{"id":"a1","msg":"first"}`},
		{"object compact in order", "{{payload.head}}", `{"z":1,"a":[1,2],"s":"x y"}`},
		{"array compact", "{{payload.head.a}}", `[1,2]`},
		{"number as written", "{{payload.n}}", "1.50"},
		{"bools", "{{payload.t}}/{{payload.f}}", "true/false"},
		{"null empty", "[{{payload.nil}}]", "[]"},
		{"missing empty", "[{{payload.nope}}]", "[]"},
		{"missing deep", "[{{payload.sender.login.x}}]", "[]"},
		{"index out of range", "[{{payload.commits.5.id}}]", "[]"},
		{"string raw", "{{payload.html}}", "<b>&</b>"},
		{"newline kept", "{{payload.multi}}", "line1\nline2"},
		{"unicode escapes", "{{payload.esc}}", "é😀"},
		{"dash and dollar keys", "{{payload.k-ey}} {{payload.$v}}", "dash dollar"},
		{"whole payload", "{{payload.repository}}", `{"full_name":"acme/api"}`},
		{"repeated", "{{payload.sender.login}}{{payload.sender.login}}", "octocatoctocat"},
		{"multiline template", "Push to {{payload.repository.full_name}}\nby {{payload.sender.login}}", "Push to acme/api\nby octocat"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, ValidateTemplate(tc.template))
			require.Equal(t, tc.want, Content(tc.template, payload))
		})
	}
}

func TestContentTemplateNotJSON(t *testing.T) {
	require.Equal(t, "alert: []", Content("alert: [{{payload.a}}]", []byte("not json")))
	require.Equal(t, "alert: ", Content("alert: {{payload}}", []byte("not json")))
	require.Equal(t, `{"a":1}`, Content("{{payload}}", []byte(" {\"a\": 1} ")))
	require.Equal(t, `7`, Content("{{payload.0}}", []byte("[7]")))
}

func TestContentPretty(t *testing.T) {
	tests := []struct {
		name, payload, want string
	}{
		{"object", `{"b":1,"a":{"c":[1,2]}}`, "{\n  \"b\": 1,\n  \"a\": {\n    \"c\": [\n      1,\n      2\n    ]\n  }\n}"},
		{"keeps number text and escapes", `{"n":1.50,"s":"\u003c"}`, "{\n  \"n\": 1.50,\n  \"s\": \"\\u003c\"\n}"},
		{"surrounding space", "  [1]\n", "[\n  1\n]"},
		{"scalar", `"str"`, `"str"`},
		{"text", "disk full on db-1", "disk full on db-1"},
		{"empty", "", ""},
		{"two values is text", `{} {}`, `{} {}`},
		{"invalid utf8 replaced", "a\xffb", "a\uFFFDb"},
		{"invalid utf8 in json string", "{\"a\":\"\xff\"}", "{\n  \"a\": \"\uFFFD\"\n}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Content("", []byte(tc.payload)))
		})
	}
}

func TestContentInvalidTemplateFallsBack(t *testing.T) {
	require.Equal(t, "{\n  \"a\": 1\n}", Content("{{args.a}}", []byte(`{"a":1}`)))
}

func TestContentCap(t *testing.T) {
	huge := strings.Repeat("é", MaxContent) // 2 bytes a rune
	payload := []byte(`{"v":"` + huge + `","small":"s"}`)
	tests := []struct {
		name     string
		template string
		payload  []byte
		cut      bool
	}{
		{"template value", "{{payload.v}}", payload, true},
		{"template repeated", strings.Repeat("{{payload.v}}", MaxPlaceholders), payload, true},
		{"template whole", "{{payload}}", payload, true},
		{"pretty", "", payload, true},
		{"text", "", []byte("x" + huge), true},
		{"text invalid utf8", "", []byte(strings.Repeat("\xff", 3*MaxContent)), true},
		{"at cap", "", []byte(strings.Repeat("a", MaxContent)), false},
		{"small", "{{payload.small}}", payload, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Content(tc.template, tc.payload)
			require.LessOrEqual(t, len(got), MaxContent)
			require.True(t, utf8.ValidString(got))
			require.Equal(t, tc.cut, strings.HasSuffix(got, cutMarker))
		})
	}
}

func TestValidateTemplate(t *testing.T) {
	tests := []struct {
		name, template string
		ok             bool
	}{
		{"empty", "", true},
		{"text", "just text", true},
		{"placeholder", "{{payload.a.0.b}}", true},
		{"whole payload", "{{payload}}", true},
		{"tab and newline", "a\tb\n{{payload.a}}\r\n", true},
		{"max placeholders", strings.Repeat("{{payload.a}}", MaxPlaceholders), true},
		{"too many placeholders", strings.Repeat("{{payload.a}}", MaxPlaceholders+1), false},
		{"too long", strings.Repeat("x", MaxTemplate+1), false},
		{"unknown root", "{{args.a}}", false},
		{"bare word", "{{a}}", false},
		{"payloadx", "{{payloadx}}", false},
		{"empty segment", "{{payload..a}}", false},
		{"trailing dot", "{{payload.a.}}", false},
		{"space in path", "{{payload.a b}}", false},
		{"unterminated", "x {{payload.a", false},
		{"stray close", "x }} y", false},
		{"close before open", "}} {{payload.a}}", false},
		{"nested", "{{payload.{{payload.a}}}}", false},
		{"triple brace", "{{{payload.a}}}", false},
		{"NUL", "a\x00b", false},
		{"escape char", "a\x1b[31m", false},
		{"invalid utf8", "a\xff", false},
		{"path too deep", "{{payload." + strings.Repeat("a.", MaxPathSegments) + "a}}", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTemplate(tc.template)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, "template", ie.Field)
		})
	}
}
