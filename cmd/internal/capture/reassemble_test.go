package capture

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/genai"
)

// sse writes events as a server does: "event: <type>" and one data line
// with the JSON, the type taken from the JSON's "type".
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var t struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal([]byte(e), &t)
		if t.Type != "" {
			b.WriteString("event: " + t.Type + "\n")
		}
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// Requests the reassembled responses are paired with to check that the
// broker's parser takes them.
const (
	responsesReq = `{"model":"gpt-stub","stream":true,"instructions":"be brief","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`
	chatReq      = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`
	messagesReq  = `{"model":"claude-x","stream":true,"max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`
)

// The Responses stream of the Codex spike's stub (/tmp/spike/stub.py):
// the terminal response carries only id and usage, the output comes from
// the item events.
var codexStubStream = sse(
	`{"type":"response.created","response":{"id":"resp_1"}}`,
	`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","role":"assistant","id":"msg_1","content":[]}}`,
	`{"type":"response.output_text.delta","output_index":0,"delta":"hello from stub"}`,
	`{"type":"response.output_item.done","output_index":0,"item":{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"hello from stub"}]}}`,
	`{"type":"response.completed","response":{"id":"resp_1","usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":0}}}}`,
)

// An OpenAI Responses stream as api.openai.com sends it: full response
// objects, a reasoning item, a function call whose arguments come in
// fragments, sequence numbers.
var openAIToolStream = sse(
	`{"type":"response.created","sequence_number":0,"response":{"id":"resp_67c","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-5-codex","output":[],"usage":null}}`,
	`{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_67c","object":"response","created_at":1741290958,"status":"in_progress","model":"gpt-5-codex","output":[],"usage":null}}`,
	`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
	`{"type":"response.reasoning_summary_text.delta","sequence_number":3,"output_index":0,"summary_index":0,"delta":"thinking hard"}`,
	`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"thinking hard"}],"encrypted_content":"gAAAA"}}`,
	`{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_abc","name":"mcp__svc__send"}}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"{\"to\":\"al"}`,
	`{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":1,"delta":"ice\",\"body\":\"done\"}"}`,
	`{"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_1","output_index":1,"arguments":"{\"to\":\"alice\",\"body\":\"done\"}"}`,
	`{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"to\":\"alice\",\"body\":\"done\"}","call_id":"call_abc","name":"mcp__svc__send"}}`,
	`{"type":"response.completed","sequence_number":10,"response":{"id":"resp_67c","object":"response","created_at":1741290958,"status":"completed","model":"gpt-5-codex","output":[{"id":"rs_1","type":"reasoning","summary":[]},{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"to\":\"alice\",\"body\":\"done\"}","call_id":"call_abc","name":"mcp__svc__send"}],"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1000},"output_tokens":80,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":1280}}}`,
)

func TestReassemble(t *testing.T) {
	tests := []struct {
		name string
		api  API
		req  string
		body string
		// want holds top-level members of the reassembled response.
		want map[string]any
		// rec is what the broker's parser makes of it.
		rec     genai.Record
		wantErr bool
	}{
		{
			name: "responses: codex stub, output from the item events",
			api:  APIResponses, req: responsesReq, body: codexStubStream,
			want: map[string]any{"id": "resp_1", "object": "response", "status": "completed",
				"output": []any{map[string]any{"type": "message", "role": "assistant", "id": "msg_1",
					"content": []any{map[string]any{"type": "output_text", "text": "hello from stub"}}}}},
			rec: genai.Record{Provider: "openai", API: "responses", Model: "gpt-stub", ResponseID: "resp_1",
				Usage:          genai.Usage{InputTokens: 10, OutputTokens: 5},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "stop", Parts: []genai.Part{{Type: "text", Content: "hello from stub"}}}}},
		},
		{
			name: "responses: openai function call, the terminal output kept",
			api:  APIResponses, req: responsesReq, body: openAIToolStream,
			want: map[string]any{"id": "resp_67c", "model": "gpt-5-codex", "status": "completed"},
			rec: genai.Record{Provider: "openai", API: "responses", Model: "gpt-5-codex", ResponseID: "resp_67c",
				Usage: genai.Usage{InputTokens: 200, CacheReadTokens: 1000, OutputTokens: 80, ReasoningTokens: 64},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "tool_calls", Parts: []genai.Part{
					{Type: "tool_call", ID: "call_abc", Name: "mcp__svc__send", Arguments: json.RawMessage(`{"to":"alice","body":"done"}`)}}}}},
		},
		{
			name: "responses: terminal output empty, rebuilt from done items",
			api:  APIResponses, req: responsesReq,
			body: strings.Replace(openAIToolStream, `"status":"completed","model":"gpt-5-codex","output":[{"id":"rs_1","type":"reasoning","summary":[]},{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"to\":\"alice\",\"body\":\"done\"}","call_id":"call_abc","name":"mcp__svc__send"}]`, `"status":"completed","model":"gpt-5-codex","output":[]`, 1),
			rec: genai.Record{Provider: "openai", API: "responses", Model: "gpt-5-codex", ResponseID: "resp_67c",
				Usage: genai.Usage{InputTokens: 200, CacheReadTokens: 1000, OutputTokens: 80, ReasoningTokens: 64},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "tool_calls", Parts: []genai.Part{
					{Type: "tool_call", ID: "call_abc", Name: "mcp__svc__send", Arguments: json.RawMessage(`{"to":"alice","body":"done"}`)}}}}},
		},
		{
			name: "responses: cut before the end, what arrived is kept",
			api:  APIResponses, req: responsesReq,
			body: sse(
				`{"type":"response.created","response":{"id":"resp_cut","object":"response","status":"in_progress","model":"gpt-5","output":[]}}`,
				`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","role":"assistant","id":"msg_1","status":"in_progress","content":[]}}`,
				`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"hello "}`,
				`{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"wor"}`,
			) + "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"ld\"", // cut mid-event
			want: map[string]any{"status": "incomplete", "incomplete_details": map[string]any{"reason": "interrupted"}},
			rec: genai.Record{Provider: "openai", API: "responses", Model: "gpt-5", ResponseID: "resp_cut",
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "interrupted", Parts: []genai.Part{{Type: "text", Content: "hello wor"}}}}},
		},
		{
			name: "responses: incomplete for max tokens",
			api:  APIResponses, req: responsesReq,
			body: sse(
				`{"type":"response.created","response":{"id":"resp_2","object":"response","status":"in_progress","model":"gpt-5","output":[]}}`,
				`{"type":"response.incomplete","response":{"id":"resp_2","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"gpt-5","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"long"}]}],"usage":{"input_tokens":3,"output_tokens":100}}}`,
			),
			want: map[string]any{"status": "incomplete"},
			rec: genai.Record{Provider: "openai", API: "responses", Model: "gpt-5", ResponseID: "resp_2", Usage: genai.Usage{InputTokens: 3, OutputTokens: 100},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "length", Parts: []genai.Part{{Type: "text", Content: "long"}}}}},
		},
		{
			name: "responses: failed keeps its status",
			api:  APIResponses, req: responsesReq,
			body: sse(`{"type":"response.failed","response":{"id":"resp_3","error":{"code":"server_error","message":"boom"}}}`),
			want: map[string]any{"status": "failed", "error": map[string]any{"code": "server_error", "message": "boom"}},
			rec: genai.Record{Provider: "openai", API: "responses", Model: "gpt-stub", ResponseID: "resp_3",
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "failed", Parts: []genai.Part{}}}},
		},
		{
			name: "responses: no response event", api: APIResponses,
			body: sse(`{"type":"error","code":"rate_limit","message":"slow down"}`), wantErr: true,
		},
		{
			name: "chat: text, usage in the final chunk, [DONE]",
			api:  APIChatCompletions, req: chatReq,
			body: sse(
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"lo!"},"logprobs":null,"finish_reason":null}],"usage":null}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
				`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":0}}}`,
			) + "data: [DONE]\n\n",
			want: map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": float64(1700000000), "system_fingerprint": "fp_1",
				"choices": []any{map[string]any{"index": float64(0), "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "Hello!"}}}},
			rec: genai.Record{Provider: "openai", API: "chat.completions", Model: "gpt-4o-2024-08-06", ResponseID: "chatcmpl-1",
				Usage:          genai.Usage{InputTokens: 16, CacheReadTokens: 4, OutputTokens: 3},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "stop", Parts: []genai.Part{{Type: "text", Content: "Hello!"}}}}},
		},
		{
			name: "chat: two tool calls by index, arguments in fragments",
			api:  APIChatCompletions, req: chatReq,
			body: sse(
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":null}]}`,
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`,
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":30,"total_tokens":80}}`,
			) + "data: [DONE]\n\n",
			rec: genai.Record{Provider: "openai", API: "chat.completions", Model: "gpt-4o", ResponseID: "chatcmpl-2",
				Usage: genai.Usage{InputTokens: 50, OutputTokens: 30},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "tool_calls", Parts: []genai.Part{
					{Type: "tool_call", ID: "call_a", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
					{Type: "tool_call", ID: "call_b", Name: "get_time", Arguments: json.RawMessage(`{}`)},
				}}}},
		},
		{
			name: "chat: two choices, CRLF line ends, a comment",
			api:  APIChatCompletions, req: chatReq,
			body: strings.ReplaceAll(": keepalive\n\n"+sse(
				`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":1,"delta":{"role":"assistant","content":"B"},"finish_reason":null},{"index":0,"delta":{"role":"assistant","content":"A"},"finish_reason":null}]}`,
				`{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}]}`,
			), "\n", "\r\n"),
			rec: genai.Record{Provider: "openai", API: "chat.completions", Model: "gpt-4o", ResponseID: "chatcmpl-3",
				OutputMessages: []genai.Message{
					{Role: "assistant", FinishReason: "stop", Parts: []genai.Part{{Type: "text", Content: "A"}}},
					{Role: "assistant", FinishReason: "length", Parts: []genai.Part{{Type: "text", Content: "B"}}},
				}},
		},
		{name: "chat: only [DONE]", api: APIChatCompletions, body: "data: [DONE]\n\n", wantErr: true},
		{
			name: "messages: thinking dropped, text, tool_use input from fragments, usage merged",
			api:  APIMessages, req: messagesReq,
			body: sse(
				`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":10,"cache_read_input_tokens":100,"output_tokens":2}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"secret thoughts"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"ping"}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me "}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"check."}}`,
				`{"type":"content_block_stop","index":1}`,
				`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`,
				`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ncisco\"}"}}`,
				`{"type":"content_block_stop","index":2}`,
				`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`,
				`{"type":"message_stop"}`,
			),
			want: map[string]any{"id": "msg_01", "type": "message", "stop_reason": "tool_use",
				"content": []any{
					map[string]any{"type": "text", "text": "Let me check."},
					map[string]any{"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": map[string]any{"location": "San Francisco"}},
				}},
			rec: genai.Record{Provider: "anthropic", API: "messages", Model: "claude-x", ResponseID: "msg_01",
				Usage: genai.Usage{InputTokens: 472, CacheCreationTokens: 10, CacheReadTokens: 100, OutputTokens: 89},
				OutputMessages: []genai.Message{{Role: "assistant", FinishReason: "tool_use", Parts: []genai.Part{
					{Type: "text", Content: "Let me check."},
					{Type: "tool_call", ID: "toolu_01", Name: "get_weather", Arguments: json.RawMessage(`{"location":"San Francisco"}`)},
				}}}},
		},
		{
			name: "messages: cut inside a tool input, kept as text",
			api:  APIMessages, req: messagesReq,
			body: sse(
				`{"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_02","name":"bash","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": \"ls"}}`,
			),
			want: map[string]any{"stop_reason": nil, "content": []any{map[string]any{"type": "tool_use", "id": "toolu_02", "name": "bash", "input": `{"cmd": "ls`}}},
			rec: genai.Record{Provider: "anthropic", API: "messages", Model: "claude-x", ResponseID: "msg_02", Usage: genai.Usage{InputTokens: 5, OutputTokens: 1},
				OutputMessages: []genai.Message{{Role: "assistant", Parts: []genai.Part{{Type: "tool_call", ID: "toolu_02", Name: "bash", Arguments: json.RawMessage(`"{\"cmd\": \"ls"`)}}}}},
		},
		{name: "messages: no message_start", api: APIMessages, body: sse(`{"type":"ping"}`, `{"type":"message_stop"}`), wantErr: true},
		{name: "empty body", api: APIResponses, body: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Reassemble(tc.api, []byte(tc.body))
			if tc.wantErr {
				require.ErrorIs(t, err, errNoResponse)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.api, shapeOf(got), "the broker detects the api: %s", got)
			var m map[string]any
			require.NoError(t, json.Unmarshal(got, &m))
			for k, v := range tc.want {
				require.Equal(t, v, m[k], "member %q of %s", k, got)
			}

			rec, err := genai.Parse(genai.Upload{Request: json.RawMessage(tc.req), Response: got})
			require.NoError(t, err, "%s", got)
			// The request side is not the reassembly's: only the response is compared.
			rec.SystemInstructions, rec.InputMessages, rec.ToolDefinitions = nil, nil, nil
			require.Equal(t, tc.rec, rec)
		})
	}
}

func TestParseSSE(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []sseEvent
	}{
		{name: "named event", body: "event: a\ndata: 1\n\n", want: []sseEvent{{name: "a", data: []byte("1")}}},
		{name: "multi-line data, no space", body: "data:1\ndata: 2\n\n", want: []sseEvent{{data: []byte("1\n2")}}},
		{name: "CR and CRLF", body: "data: 1\r\rdata: 2\r\n\r\n", want: []sseEvent{{data: []byte("1")}, {data: []byte("2")}}},
		{name: "comments, id, retry ignored", body: ": hi\nid: 7\nretry: 10\ndata: x\n\n", want: []sseEvent{{data: []byte("x")}}},
		{name: "no data is no event", body: "event: a\n\n", want: nil},
		{name: "unfinished event dropped", body: "data: 1\n\ndata: 2\n", want: []sseEvent{{data: []byte("1")}}},
		{name: "name does not leak", body: "event: a\ndata: 1\n\ndata: 2\n\n", want: []sseEvent{{name: "a", data: []byte("1")}, {data: []byte("2")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseSSE([]byte(tc.body)))
		})
	}
}
