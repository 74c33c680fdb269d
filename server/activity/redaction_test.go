package activity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/store"
)

// The secrets of the redaction tests: bound to alice, one a number.
const (
	redSecret = "hunter2-Sup3r/Secret+x"
	redNumber = "8675309123"
	redToken  = "svc_Zx9Qm4KpR7vT2wY8nB3cD6fG1hJ5kL0aS-_tUe"
	redPrefix = "QQ" // bytes before the secret inside a longer base64 text
)

// redForms is the secret in each encoding redaction promises, as it is put
// inside a JSON string (raw JSON: escapes are escapes), by name.
func redForms() map[string]string {
	var esc strings.Builder
	for _, r := range redSecret {
		fmt.Fprintf(&esc, `\u%04x`, r)
	}
	return map[string]string{
		"plain":          redSecret,
		"json escapes":   esc.String(),
		"base64":         base64.StdEncoding.EncodeToString([]byte(redSecret)),
		"base64url":      base64.RawURLEncoding.EncodeToString([]byte(redSecret)),
		"base64 offset":  base64.StdEncoding.EncodeToString([]byte(redPrefix + redSecret + "tail")),
		"percent":        url.QueryEscape(redSecret),
		"number in text": redNumber,
		"token":          redToken,
	}
}

// redText is every form in one JSON string's raw contents.
func redText() string {
	var parts []string
	for name, f := range redForms() {
		parts = append(parts, name+": "+f)
	}
	return strings.Join(parts, " | ")
}

// redEnv is a running service whose team holds the secrets.
func redEnv(t *testing.T) (*Service, store.ActivityStore) {
	t.Helper()
	act := memActivity(t)
	s, _ := startService(t, act, redSecret, redNumber)
	return s, act
}

// stored is everything the activity store holds of member: every row,
// the correlation states, every GenAI record and its raw upload.
func stored(t *testing.T, act store.ActivityStore, member string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	rows, err := act.ListActivity(ctx, store.ActivityFilter{Member: member})
	require.NoError(t, err)
	for _, r := range rows {
		out = append(out, string(r.Data), r.ObjectiveID)
	}
	states, err := act.CorrelationStates(ctx)
	require.NoError(t, err)
	for _, s := range states {
		out = append(out, string(s.State))
	}
	recs, err := act.ListGenAI(ctx, store.GenAIFilter{Member: member})
	require.NoError(t, err)
	for _, r := range recs {
		out = append(out, string(r.SystemInstructions), string(r.InputMessages), string(r.OutputMessages), r.ResponseID, r.Model)
		raw, err := act.GenAIRaw(ctx, member, r.ID)
		require.NoError(t, err)
		out = append(out, string(raw))
	}
	return out
}

// requireRedacted fails when any stored text holds the secrets in any
// form, also once its JSON is decoded (strings in strings included), and
// when nothing was redacted at all (the test would prove nothing).
func requireRedacted(t *testing.T, texts []string) {
	t.Helper()
	all := strings.Join(texts, "\n")
	require.Contains(t, all, "[REDACTED]")
	for name, f := range redForms() {
		require.NotContains(t, all, f, "the %s form is stored", name)
	}
	for _, s := range texts {
		for _, d := range jsonStrings(s, 3) {
			require.NotContains(t, d, redSecret, "a decoded string holds the secret")
			require.NotContains(t, d, redNumber)
			require.NotContains(t, d, redToken)
		}
	}
}

// jsonStrings is every string of a JSON text, decoded, down depth levels
// of JSON quoted in strings; nothing when it is not JSON.
func jsonStrings(s string, depth int) []string {
	var v any
	if depth == 0 || json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
			out = append(out, jsonStrings(x, depth-1)...)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				out = append(out, k)
				walk(e)
			}
		case json.Number:
			out = append(out, x.String())
		case float64:
			out = append(out, fmt.Sprint(int64(x)))
		}
	}
	walk(v)
	return out
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// redExport is a Claude Code export (body, accounting, response, a tool
// result, a prompt) and a Codex one, carrying the secrets everywhere a
// producer puts text, and the numeric secret as an int attribute.
func redExport() *collogspb.ExportLogsServiceRequest {
	text := redText()
	body := `{"model":"claude-test","system":"sys ` + text + `","messages":[{"role":"user","content":"` + text + `"}],"tools":[{"name":"Bash"}]}`
	resp := `{"id":"msg_red","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"` + text + `"}],"stop_reason":"end_turn","usage":{"input_tokens":` + redNumber + `}}`
	rec := func(pairs ...*commonpb.KeyValue) *logspb.LogRecord { return &logspb.LogRecord{Attributes: pairs} }
	claude := []*logspb.LogRecord{
		rec(strAttr("event.name", "api_request_body"), strAttr("model", "claude-test"), strAttr("event.sequence", "1"), strAttr("body", body)),
		rec(strAttr("event.name", "api_request"), strAttr("model", "claude-test"), strAttr("request_id", "req_red"), strAttr("input_tokens", "3")),
		rec(strAttr("event.name", "api_response_body"), strAttr("request_id", "req_red"), strAttr("body", resp)),
		rec(strAttr("event.name", "tool_result"), strAttr("tool_name", "Bash"), strAttr("success", "true"),
			strAttr("tool_input", `{"command":"echo `+text+`"}`), strAttr("error", text)),
		rec(strAttr("event.name", "user_prompt"), strAttr("prompt", text)),
	}
	codex := []*logspb.LogRecord{
		rec(strAttr("event.name", "codex.api_request"), strAttr("http.url", "https://x/?k="+url.QueryEscape(redSecret)),
			strAttr(redSecret, "a key"), &commonpb.KeyValue{Key: "n", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 8675309123}}},
			&commonpb.KeyValue{Key: "bytes", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte(redSecret)}}}),
		rec(strAttr("event.name", "codex.tool_result"), strAttr("tool_name", "shell"), strAttr("arguments", `{"cmd":"`+text+`"}`), strAttr("output", text)),
	}
	return &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{
		{ScopeLogs: []*logspb.ScopeLogs{{LogRecords: claude}}},
		{
			Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strAttr("service.name", "codex_exec"), strAttr("env", redToken)}},
			ScopeLogs: []*logspb.ScopeLogs{{LogRecords: codex}},
		},
	}}
}

func TestRedactionOTLPEveryEncoding(t *testing.T) {
	for _, enc := range []string{"json", "protobuf", "grpc"} {
		t.Run(enc, func(t *testing.T) {
			s, act := redEnv(t)
			req := redExport()
			ctx := bearerCtx("alice")
			var err error
			switch enc {
			case "json":
				var b []byte
				b, err = protojson.Marshal(req)
				require.NoError(t, err)
				_, err = s.ExportLogs(ctx, principal(ctx), OTLPJSON, b)
			case "protobuf":
				var b []byte
				b, err = proto.Marshal(req)
				require.NoError(t, err)
				_, err = s.ExportLogs(ctx, principal(ctx), OTLPProtobuf, b)
			case "grpc":
				_, err = s.OTLPLogs().Export(ctx, req)
			}
			require.NoError(t, err)
			texts := stored(t, act, "alice")
			kinds := map[string]bool{}
			rows, err := act.ListActivity(context.Background(), store.ActivityFilter{Member: "alice"})
			require.NoError(t, err)
			for _, r := range rows {
				kinds[r.Kind] = true
			}
			require.Equal(t, map[string]bool{store.KindLLMExchange: true, store.KindToolAction: true, store.KindUserPrompt: true, store.KindOpaqueHTTP: true}, kinds,
				"every kind of row was stored, so every one was checked")
			requireRedacted(t, texts)
		})
	}
}

// TestRedactionOTLPState checks the correlation state: a request body
// waiting for its accounting is stored redacted too.
func TestRedactionOTLPState(t *testing.T) {
	s, act := redEnv(t)
	req := redExport()
	req.ResourceLogs = req.ResourceLogs[:1]
	req.ResourceLogs[0].ScopeLogs[0].LogRecords = req.ResourceLogs[0].ScopeLogs[0].LogRecords[:1] // the body alone
	_, err := s.OTLPLogs().Export(bearerCtx("alice"), req)
	require.NoError(t, err)
	states, err := act.CorrelationStates(context.Background())
	require.NoError(t, err)
	require.Len(t, states, 1, "the body waits in the state")
	requireRedacted(t, []string{string(states[0].State)})
}

func TestRedactionActivityUpload(t *testing.T) {
	s, act := redEnv(t)
	text := redText()
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"tool":"Bash","phase":"result","input":{"command":"`+text+`"},"result":"`+text+`","pin":`+redNumber+`,"`+redSecret+`":"as a key"}`), &data))
	d, err := structpb.NewStruct(data)
	require.NoError(t, err)
	exch, err := structpb.NewStruct(map[string]any{"model": "m", "responseId": "resp_" + redSecret, "messages": []any{text}})
	require.NoError(t, err)
	oid := "obj-" + redSecret
	_, err = s.UploadActivity(bearerCtx("alice"), &apiv1.UploadActivityRequest{Name: "alice", Events: []*apiv1.ActivityEventInput{
		{Kind: store.KindToolAction, Data: d, ObjectiveId: &oid},
		{Kind: store.KindLLMExchange, Data: exch},
	}})
	require.NoError(t, err)
	texts := stored(t, act, "alice")
	requireRedacted(t, texts)
	for _, r := range mustRows(t, act, "alice") {
		var d map[string]any
		require.NoError(t, json.Unmarshal(r.Data, &d), "the data stays a JSON object")
		if r.Kind == store.KindToolAction {
			require.Equal(t, "[REDACTED]", d["pin"], "the number became the marker")
			require.Equal(t, "obj-[REDACTED]", r.ObjectiveID)
		}
	}
}

func mustRows(t *testing.T, act store.ActivityStore, member string) []store.ActivityEvent {
	t.Helper()
	rows, err := act.ListActivity(context.Background(), store.ActivityFilter{Member: member})
	require.NoError(t, err)
	return rows
}

// redUpload is a GenAI upload of each provider with the secrets in its
// request and response.
func redUpload(api string) string {
	text := redText()
	switch api {
	case "messages":
		return `{"ts":1,"request":{"model":"claude-test","system":"` + text + `","tools":[{"name":"t","description":"` + text + `","input_schema":{}}],` +
			`"messages":[{"role":"user","content":"` + text + `"},{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"Bash","input":{"command":"` + text + `","n":` + redNumber + `}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"` + text + `"}]}]},` +
			`"response":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"` + text + `"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}}`
	case "responses":
		return `{"request":{"model":"gpt-test","instructions":"` + text + `","input":[{"role":"user","content":"` + text + `"}]},` +
			`"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-test","output":[{"type":"function_call","call_id":"c1","name":"shell","arguments":"{\"cmd\":\"` + text + `\"}"}],"usage":{"input_tokens":1,"output_tokens":2}}}`
	default:
		return `{"request":{"model":"gpt-test","messages":[{"role":"system","content":"` + text + `"},{"role":"user","content":"` + text + `"}]},` +
			`"response":{"id":"chat_1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},"finish_reason":"stop"}]}}`
	}
}

func TestRedactionGenAIUpload(t *testing.T) {
	for _, api := range []string{"messages", "responses", "chat.completions"} {
		t.Run(api, func(t *testing.T) {
			s, act := redEnv(t)
			body := redUpload(api)
			require.True(t, json.Valid([]byte(body)), "%s", body)
			res, err := s.UploadGenAi(bearerCtx("alice"), &apiv1.UploadGenAiRequest{Name: "alice", Body: []byte(body)})
			require.NoError(t, err)
			answered, err := protojson.Marshal(res)
			require.NoError(t, err)
			texts := append(stored(t, act, "alice"), string(answered))
			requireRedacted(t, texts)
			recs, err := act.ListGenAI(context.Background(), store.GenAIFilter{Member: "alice"})
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Contains(t, string(recs[0].InputMessages), "[REDACTED]", "the record is parsed from the redacted bytes")
		})
	}
}

// TestRedactionFollowsSecretChanges: the redactor is built once and kept
// until SecretsChanged: a value set since is redacted from the next upload
// on once it is called, and a value gone since is kept; until then the
// values are not read again. (The broker calls it when a change to a
// secret commits: the root's TestRedactionFollowsTheSecretsAPI.)
func TestRedactionFollowsSecretChanges(t *testing.T) {
	act := memActivity(t)
	s, sec := startService(t, act, redSecret)
	upload := func(member, text string) string {
		t.Helper()
		d, err := structpb.NewStruct(map[string]any{"text": text})
		require.NoError(t, err)
		_, err = s.UploadActivity(bearerCtx(member), &apiv1.UploadActivityRequest{Name: member, Events: []*apiv1.ActivityEventInput{{Kind: store.KindToolAction, Data: d}}})
		require.NoError(t, err)
		rows := mustRows(t, act, member)
		return string(rows[0].Data) // newest first
	}
	require.Contains(t, upload("alice", "old "+redSecret), "old [REDACTED]", "the redactor is built")
	require.Contains(t, upload("bob", "b "+redSecret), "b [REDACTED]", "the team's secrets in every member's telemetry")
	require.Equal(t, int32(1), sec.reads.Load(), "the values are read once per generation")

	const newValue = "rotated-Value-42"
	sec.set(newValue)
	require.Contains(t, upload("alice", "early "+newValue), "early "+newValue, "not committed yet: the redactor stands")
	s.SecretsChanged()
	require.Contains(t, upload("alice", "new "+newValue), "new [REDACTED]", "a value set since is redacted")
	require.Contains(t, upload("alice", "gone "+redSecret), "gone "+redSecret, "a value gone since is no secret any more")
	require.Equal(t, int32(2), sec.reads.Load())
}
