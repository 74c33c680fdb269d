package hooks

import (
	"bytes"
	"encoding/json"
	"runtime"
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

// prettyIndent is pretty as it was before the capped indenter: all of
// json.Indent, then the cut. The indenter must write what it wrote for
// every payload within the depth bound.
func prettyIndent(payload []byte) string {
	if json.Valid(payload) {
		var b bytes.Buffer
		if err := json.Indent(&b, bytes.TrimSpace(payload), "", "  "); err == nil {
			var c capped
			c.WriteString(b.String())
			return c.String()
		}
	}
	var c capped
	c.WriteString(string(payload[:min(len(payload), MaxContent+utf8.UTFMax)]))
	if len(payload) > MaxContent+utf8.UTFMax {
		c.over = true
	}
	return c.String()
}

func TestContentPrettyAsIndent(t *testing.T) {
	long := `[` + strings.Repeat(`{"k":"v","n":[1,2,{}],"e":[]},`, 2000) + `0]`
	tests := []struct{ name, payload string }{
		{"object", `{"b":1,"a":{"c":[1,2]}}`},
		{"empty containers", `{"a":{},"b":[],"c":[{},[]],"d":[[[]]]}`},
		{"brackets and quotes in strings", `{"a\"[":"]},{\\","b":"\\\"","c":"[[[{{{"}`},
		{"white space everywhere", " \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\" : { } }\n "},
		{"literals and numbers", `[true,false,null,-1.5e+10,0]`},
		{"unicode and invalid utf8", "{\"é\":\"\u00e9 \xff\xfe x\"}"},
		{"over the cap", long},
		{"cut inside an indent", `[` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `]`},
		{"at the depth bound", strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)},
		{"scalar", `"x"`},
		{"not JSON", `{"a":`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, prettyIndent([]byte(tc.payload)), Content("", []byte(tc.payload)))
		})
	}
}

// TestContentPrettyDeepIsCheap: a payload whose indentation grows with
// the square of its depth costs the cap, not the square. Measured with
// json.Indent: the issue's 20 KB payload of 9999 nested arrays allocated
// 1.6 GB a rendering; 250 siblings nested to the depth bound (256 KiB,
// the hook body cap) 0.97 GB.
func TestContentPrettyDeepIsCheap(t *testing.T) {
	sibling := strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1)
	issue := strings.Repeat("[", 9999) + strings.Repeat("]", 9999)
	tests := []struct {
		name    string
		payload []byte
		want    string // a prefix of the content
	}{
		{"the issue's payload", []byte(issue), issue[:MaxContent-len(cutMarker)] + cutMarker},
		{"deep siblings within the bound", []byte("[" + strings.Repeat(sibling+",", 250) + "0]"), "[\n  [\n    [\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			const runs = 3
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range runs {
				got = Content("", tc.payload)
			}
			runtime.ReadMemStats(&after)
			perRun := (after.TotalAlloc - before.TotalAlloc) / runs
			require.Less(t, perRun, uint64(4<<20), "allocated %d bytes a rendering", perRun)
			require.True(t, strings.HasPrefix(got, tc.want), "%q", clip(got, 80))
			require.True(t, strings.HasSuffix(got, cutMarker))
			require.LessOrEqual(t, len(got), MaxContent)
		})
	}
}

func TestContentPrettyTooDeepIsText(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, maxDepth/2) + `1` + strings.Repeat(`]}`, maxDepth/2) // maxDepth levels
	require.Equal(t, prettyIndent([]byte(deep)), Content("", []byte(deep)), "at the bound: indented")
	deeper := `[` + deep + `]`
	require.Equal(t, deeper, Content("", []byte(deeper)), "past the bound: the body as sent")
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
