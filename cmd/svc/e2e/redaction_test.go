package e2e

// Redaction at ingest (docs/TELEMETRY.md, "Redaction at ingest"), end to
// end: a member's bound secret values and every svc_ token, in each
// encoding telemetry carries them in, sent over each ingest path of a
// real broker, and read back by an activity.read holder: no stored row or
// record holds them, each holds [REDACTED] instead.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
)

const (
	// rdSecret holds '/', '+' and a space, so its URL encodings differ
	// from it; rdNumber is a secret that is a number.
	rdSecret = "hunter2-Sup3r/Secret+x y"
	rdNumber = "8675309123"
)

// rdForm is one encoding a secret or token travels in: the text a
// producer writes, or (number) the numeric secret as a number.
type rdForm struct {
	name   string
	text   func(tok string) string
	number bool
}

var rdForms = []rdForm{
	{name: "string", text: func(string) string { return rdSecret }},
	{name: "json-escapes", text: func(string) string { return rdEscaped(rdSecret) }},
	{name: "number", number: true},
	{name: "number-in-text", text: func(string) string { return "pin " + rdNumber }},
	{name: "base64", text: func(string) string { return base64.StdEncoding.EncodeToString([]byte(rdSecret)) }},
	{name: "base64url", text: func(string) string { return base64.RawURLEncoding.EncodeToString([]byte(rdSecret)) }},
	{name: "base64-inside", text: func(string) string { return base64.StdEncoding.EncodeToString([]byte("k=" + rdSecret + ";")) }},
	{name: "url-encoded", text: func(string) string { return "https://x.test/?k=" + url.QueryEscape(rdSecret) }},
	{name: "url-encoded-path", text: func(string) string { return "https://x.test/" + url.PathEscape(rdSecret) }},
	{name: "own-token", text: func(tok string) string { return "Bearer " + tok }},
	{name: "other-token", text: func(string) string { return "svc_Zx9Qm4KpR7vT2wY8nB3cD6fG1hJ5kL0aS-_tUe" }},
}

// rdEscaped is s with every character a JSON \u escape: inside a JSON
// string it decodes to s.
func rdEscaped(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// rdJSONString is the form as the contents of a JSON string (without
// quotes): the JSON escapes as they are, anything else escaped for JSON.
func rdJSONString(f rdForm, tok string) string {
	if f.name == "json-escapes" {
		return f.text(tok)
	}
	b, _ := json.Marshal(f.text(tok))
	return string(b[1 : len(b)-1])
}

// rdRequireRedacted fails when stored (one row or record, as the API
// answers it) holds the form, the secrets or a token, as they are or in a
// decoded string, or holds no [REDACTED].
func rdRequireRedacted(t *testing.T, f rdForm, tok string, stored obj) {
	t.Helper()
	raw, err := json.Marshal(stored)
	require.NoError(t, err)
	s := string(raw)
	require.Contains(t, s, "[REDACTED]", "%s", s)
	if !f.number {
		require.NotContains(t, s, rdJSONString(f, tok), "the %s form is stored", f.name)
	}
	banned := []string{rdSecret, rdNumber, tok, "svc_Zx9Qm4KpR7vT2wY8nB3cD6fG1hJ5kL0aS-_tUe"}
	texts := append([]string{s}, rdStrings(stored, 3)...)
	for _, text := range texts {
		for _, b := range banned {
			require.NotContains(t, text, b, "a secret or token is stored (%s form): %s", f.name, s)
		}
	}
}

// rdStrings is every string of v, decoded, and those of JSON documents
// quoted in them, depth levels down.
func rdStrings(v any, depth int) []string {
	var out []string
	switch x := v.(type) {
	case string:
		out = append(out, x)
		var inner any
		if depth > 0 && json.Unmarshal([]byte(x), &inner) == nil {
			out = append(out, rdStrings(inner, depth-1)...)
		}
	case []any:
		for _, e := range x {
			out = append(out, rdStrings(e, depth)...)
		}
	case map[string]any:
		for k, e := range x {
			out = append(out, k)
			out = append(out, rdStrings(e, depth)...)
		}
	case float64:
		out = append(out, fmt.Sprintf("%.0f", x))
	}
	return out
}

// rdFind is the one row or record of list whose JSON holds marker.
func rdFind(t *testing.T, list []obj, marker string) obj {
	t.Helper()
	var found []obj
	for _, o := range list {
		b, err := json.Marshal(o)
		require.NoError(t, err)
		if strings.Contains(string(b), marker) {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "the row of %s", marker)
	return found[0]
}

// TestRedactionAtIngestEveryPath is the matrix: every ingest path (OTLP
// logs as JSON, protobuf, either gzipped, and gRPC; activity uploads and
// GenAI uploads over REST and gRPC) × every form (the secret as a string,
// behind JSON escapes, as a number and in text, base64, base64url, inside
// a longer base64 text, URL-encoded in a query and a path, the member's
// own token and another svc_ token).
func TestRedactionAtIngestEveryPath(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	const member = "redacted1"
	tok := createMember(t, d, admin, member)
	for slug, v := range map[string]string{"deploy-key": rdSecret, "pin": rdNumber} {
		mustCall(t, d, admin, "CreateSecret", obj{"slug": slug, "envName": strings.ToUpper(strings.ReplaceAll(slug, "-", "_"))})
		mustCall(t, d, admin, "SetSecretValue", obj{"slug": slug, "value": v})
		mustCall(t, d, admin, "AddSecretBinding", obj{"slug": slug, "member": member})
	}
	marker := func(path string, f rdForm) string { return "cell-" + path + "-" + f.name }

	// What the activity.read holder reads of the member.
	activity := func(t *testing.T) []obj {
		r := p.do(t, http.MethodGet, "/members/"+member+"/activity", nil, withBearer(adminTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		return listOf(t, r.body, "activity")
	}
	genai := func(t *testing.T) []obj {
		r := p.do(t, http.MethodGet, "/members/"+member+"/genai", nil, withBearer(adminTok))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		return listOf(t, r.body, "inferences")
	}

	for _, tr := range otTransports {
		path := "otlp-" + tr.name
		for _, f := range rdForms {
			t.Run(path+"/"+f.name, func(t *testing.T) {
				// A Codex record svc keeps as it came: its attributes are the
				// row's.
				value := otStr("value", "")
				if f.number {
					value = otInt("value", 8675309123)
				} else {
					value.Value = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: f.text(tok)}}
				}
				rec := otRec{agent: otAgentCodex, name: "rate_limits", at: time.Now(),
					attrs: []*commonpb.KeyValue{otStr("label", marker(path, f)), value}}
				require.Zero(t, tr.export(t, p, tok, otLogsReq(otNamings[0], rec)))
				rdRequireRedacted(t, f, tok, rdFind(t, activity(t), marker(path, f)))
			})
		}
	}

	for _, trp := range transports {
		dr := trp.connect(t, p)
		path := "activity-" + trp.name
		for _, f := range rdForms {
			t.Run(path+"/"+f.name, func(t *testing.T) {
				value := json.RawMessage(rdNumber)
				if !f.number {
					value = json.RawMessage(`"` + rdJSONString(f, tok) + `"`)
				}
				mustUpload(t, dr, bearer(tok), member, actEv("tool_action", 0, obj{"label": marker(path, f), "tool": "Bash", "input": obj{"command": value}}))
				rdRequireRedacted(t, f, tok, rdFind(t, activity(t), marker(path, f)))
			})
		}

		path = "genai-" + trp.name
		for _, f := range rdForms {
			t.Run(path+"/"+f.name, func(t *testing.T) {
				m := marker(path, f)
				content := `[{"type":"text","text":"` + m + `"},{"type":"tool_result","tool_use_id":"tu1","content":"ok"}]`
				input := `{"pin":` + rdNumber + `}`
				if !f.number {
					content = `"` + m + ` ` + rdJSONString(f, tok) + `"`
					input = `{"command":"echo"}`
				}
				body := []byte(`{"request":{"model":"claude-test","messages":[` +
					`{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"Bash","input":` + input + `}]},` +
					`{"role":"user","content":` + content + `}]},` +
					`"response":{"id":"msg_` + strings.ReplaceAll(m, "-", "_") + `","type":"message","role":"assistant","model":"claude-test",` +
					`"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}}`)
				require.True(t, json.Valid(body), "%s", body)
				mustUploadGenAI(t, p, dr, bearer(tok), member, body)
				rdRequireRedacted(t, f, tok, rdFind(t, genai(t), m))
			})
		}
	}
}
