package hooks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func rule(path, op, value string) Filter {
	return Filter{Path: path, Op: op, Value: json.RawMessage(value)}
}

func TestMatch(t *testing.T) {
	payload := []byte(`{
		"action": "opened",
		"number": 42,
		"ratio": 0.5,
		"big": 12345678901234567890123,
		"draft": false,
		"closed_at": null,
		"labels": ["bug", "p1", {"name": "x"}],
		"pull_request": {"state": "open", "head": {"ref": "main"}, "title": "Fix the <external_content> bug"},
		"commits": [{"id": "a1"}, {"id": "b2"}],
		"0": "zero-key",
		"dup": 1, "dup": 2,
		"esc": "\u0041BC"
	}`)
	tests := []struct {
		name    string
		filters []Filter
		want    bool
	}{
		{"no rules", nil, true},
		{"eq string", []Filter{rule("action", "eq", `"opened"`)}, true},
		{"eq string differs", []Filter{rule("action", "eq", `"closed"`)}, false},
		{"eq is not substring", []Filter{rule("action", "eq", `"open"`)}, false},
		{"eq number", []Filter{rule("number", "eq", `42`)}, true},
		{"eq number other form", []Filter{rule("number", "eq", `42.0`)}, true},
		{"eq number exponent", []Filter{rule("number", "eq", `4.2e1`)}, true},
		{"eq number vs string", []Filter{rule("number", "eq", `"42"`)}, false},
		{"eq big integer exact", []Filter{rule("big", "eq", `12345678901234567890123`)}, true},
		{"eq big integer off by one", []Filter{rule("big", "eq", `12345678901234567890124`)}, false},
		{"eq fraction", []Filter{rule("ratio", "eq", `5e-1`)}, true},
		{"eq bool", []Filter{rule("draft", "eq", `false`)}, true},
		{"eq bool vs string", []Filter{rule("draft", "eq", `"false"`)}, false},
		{"eq null", []Filter{rule("closed_at", "eq", `null`)}, true},
		{"eq missing vs null", []Filter{rule("merged_at", "eq", `null`)}, false},
		{"eq nested", []Filter{rule("pull_request.head.ref", "eq", `"main"`)}, true},
		{"eq object", []Filter{rule("pull_request.head", "eq", `{"ref":"main"}`)}, true},
		{"eq object extra key", []Filter{rule("pull_request.head", "eq", `{"ref":"main","x":1}`)}, false},
		{"eq array order", []Filter{rule("labels", "eq", `["p1","bug",{"name":"x"}]`)}, false},
		{"eq array", []Filter{rule("labels", "eq", `["bug","p1",{"name":"x"}]`)}, true},
		{"eq array index", []Filter{rule("commits.1.id", "eq", `"b2"`)}, true},
		{"eq array index out of range", []Filter{rule("commits.2.id", "eq", `"b2"`)}, false},
		{"eq array index leading zero", []Filter{rule("commits.01.id", "eq", `"b2"`)}, false},
		{"eq array negative index", []Filter{rule("commits.-1.id", "eq", `"b2"`)}, false},
		{"numeric key on object", []Filter{rule("0", "eq", `"zero-key"`)}, true},
		{"duplicate key last wins", []Filter{rule("dup", "eq", `2`)}, true},
		{"escaped string", []Filter{rule("esc", "eq", `"ABC"`)}, true},
		{"path into scalar", []Filter{rule("action.x", "eq", `"opened"`)}, false},
		{"ne differs", []Filter{rule("action", "ne", `"closed"`)}, true},
		{"ne same", []Filter{rule("action", "ne", `"opened"`)}, false},
		{"ne missing holds", []Filter{rule("nothing", "ne", `"x"`)}, true},
		{"in holds", []Filter{rule("action", "in", `["opened","reopened"]`)}, true},
		{"in not", []Filter{rule("action", "in", `["closed"]`)}, false},
		{"in empty", []Filter{rule("action", "in", `[]`)}, false},
		{"in number", []Filter{rule("number", "in", `[1, 42.0]`)}, true},
		{"in missing", []Filter{rule("nothing", "in", `[null]`)}, false},
		{"exists true", []Filter{rule("pull_request.state", "exists", `true`)}, true},
		{"exists default true", []Filter{rule("pull_request.state", "exists", ``)}, true},
		{"exists null is present", []Filter{rule("closed_at", "exists", `true`)}, true},
		{"exists true missing", []Filter{rule("nothing", "exists", `true`)}, false},
		{"exists false missing", []Filter{rule("nothing", "exists", `false`)}, true},
		{"exists false present", []Filter{rule("action", "exists", `false`)}, false},
		{"contains substring", []Filter{rule("pull_request.title", "contains", `"external_content"`)}, true},
		{"contains substring case", []Filter{rule("pull_request.title", "contains", `"EXTERNAL"`)}, false},
		{"contains empty string", []Filter{rule("action", "contains", `""`)}, true},
		{"contains element", []Filter{rule("labels", "contains", `"p1"`)}, true},
		{"contains object element", []Filter{rule("labels", "contains", `{"name":"x"}`)}, true},
		{"contains not element", []Filter{rule("labels", "contains", `"p"`)}, false},
		{"contains number in string", []Filter{rule("action", "contains", `1`)}, false},
		{"contains on number", []Filter{rule("number", "contains", `4`)}, false},
		{"contains on object", []Filter{rule("pull_request", "contains", `"state"`)}, false},
		{"contains missing", []Filter{rule("nothing", "contains", `"x"`)}, false},
		{"and all hold", []Filter{rule("action", "eq", `"opened"`), rule("draft", "eq", `false`)}, true},
		{"and one fails", []Filter{rule("action", "eq", `"opened"`), rule("draft", "eq", `true`)}, false},
		{"invalid rule fails", []Filter{rule("action", "regex", `"o.*"`)}, false},
		{"invalid value fails", []Filter{rule("action", "eq", `{`)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Match(tc.filters, payload))
		})
	}
}

func TestMatchNotJSON(t *testing.T) {
	for _, body := range []string{"", "plain text", `{"a":1} {"b":2}`, `{"a":1`, "\xff\xfe", `{"a":1}x`} {
		require.True(t, Match(nil, []byte(body)), "%q with no rules", body)
		require.True(t, Match([]Filter{}, []byte(body)), "%q with empty rules", body)
		require.False(t, Match([]Filter{rule("a", "exists", "false")}, []byte(body)), "%q with a rule", body)
		require.False(t, Match([]Filter{rule("a", "ne", `"x"`)}, []byte(body)), "%q with a rule", body)
	}
	// Scalars and arrays are JSON.
	require.True(t, Match([]Filter{rule("0", "eq", `1`)}, []byte(`[1,2]`)))
	require.True(t, Match([]Filter{rule("a", "exists", "false")}, []byte(`"str"`)))
}

func TestMatchDeep(t *testing.T) {
	deep := []byte(strings.Repeat(`{"a":`, maxDepth) + `1` + strings.Repeat(`}`, maxDepth))
	require.True(t, Match([]Filter{rule("a", "exists", "true")}, deep))
	tooDeep := []byte(strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000))
	require.False(t, Match([]Filter{rule("a", "exists", "false")}, tooDeep))
	require.True(t, Match(nil, tooDeep))
}

func TestFilterValidate(t *testing.T) {
	tests := []struct {
		name  string
		f     Filter
		field string // "" = valid
	}{
		{"eq", rule("a.b", "eq", `"x"`), ""},
		{"eq object", rule("a", "eq", `{"x":[1]}`), ""},
		{"ne", rule("a", "ne", `1`), ""},
		{"in", rule("a", "in", `["x", 1]`), ""},
		{"exists absent value", rule("a", "exists", ``), ""},
		{"exists false", rule("a", "exists", `false`), ""},
		{"contains", rule("a", "contains", `"x"`), ""},
		{"unicode path", rule("données.état", "eq", `1`), ""},
		{"index path", rule("items.0.id", "eq", `1`), ""},
		{"no path", rule("", "eq", `1`), "path"},
		{"empty segment", rule("a..b", "eq", `1`), "path"},
		{"leading dot", rule(".a", "eq", `1`), "path"},
		{"trailing dot", rule("a.", "eq", `1`), "path"},
		{"control in path", rule("a\x00b", "eq", `1`), "path"},
		{"invalid utf8 path", rule("a\xffb", "eq", `1`), "path"},
		{"path too long", rule(strings.Repeat("a", MaxPath+1), "eq", `1`), "path"},
		{"path too deep", rule(strings.Repeat("a.", MaxPathSegments)+"a", "eq", `1`), "path"},
		{"no op", rule("a", "", `1`), "op"},
		{"unknown op", rule("a", "gt", `1`), "op"},
		{"op case", rule("a", "EQ", `1`), "op"},
		{"eq no value", rule("a", "eq", ``), "value"},
		{"ne no value", rule("a", "ne", ``), "value"},
		{"contains no value", rule("a", "contains", ``), "value"},
		{"in not array", rule("a", "in", `"x"`), "value"},
		{"in no value", rule("a", "in", ``), "value"},
		{"exists string", rule("a", "exists", `"yes"`), "value"},
		{"bad json", rule("a", "eq", `{`), "value"},
		{"two values", rule("a", "eq", `1 2`), "value"},
		{"value too big", rule("a", "eq", `"`+strings.Repeat("x", MaxFilterValue)+`"`), "value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
		})
	}
}

func TestValidateFilters(t *testing.T) {
	require.NoError(t, ValidateFilters(nil))
	require.NoError(t, ValidateFilters([]Filter{rule("a", "eq", `1`)}))
	err := ValidateFilters([]Filter{rule("a", "eq", `1`), rule("b", "in", `1`)})
	var ie *InvalidError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "filters[1].value", ie.Field)
	many := make([]Filter, MaxFilters+1)
	for i := range many {
		many[i] = rule("a", "exists", "")
	}
	require.ErrorAs(t, ValidateFilters(many), &ie)
	require.Equal(t, "filters", ie.Field)
	require.NoError(t, ValidateFilters(many[:MaxFilters]))
}

func TestFilterJSON(t *testing.T) {
	var fs []Filter
	require.NoError(t, json.Unmarshal([]byte(`[{"path":"a","op":"in","value":["x"]},{"path":"b","op":"exists"}]`), &fs))
	require.NoError(t, ValidateFilters(fs))
	require.True(t, Match(fs, []byte(`{"a":"x","b":0}`)))
	out, err := json.Marshal(fs[1])
	require.NoError(t, err)
	require.JSONEq(t, `{"path":"b","op":"exists"}`, string(out))
}
