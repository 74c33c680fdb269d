package genai_test

import (
	"testing"

	"svc/server/genai"
)

var responsesFixtures = []fixture{
	{
		name: "codex turn: instructions, developer message, grouped calls, reasoning",
		req: `{
  "model": "gpt-5-codex",
  "instructions": "You are Codex.",
  "input": [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the test."}]},
    {"type": "reasoning", "id": "rs_1",
     "summary": [{"type": "summary_text", "text": "THINKING-MARKER-5e1f0c summary"}],
     "content": [{"type": "reasoning_text", "text": "THINKING-MARKER-5e1f0c"}],
     "encrypted_content": "gAAAAB-THINKING-MARKER-5e1f0c"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"go\",\"test\"]}"},
    {"type": "function_call", "call_id": "call_2", "name": "shell", "arguments": "{\"command\": [\"ls\"]}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
    {"type": "function_call_output", "call_id": "call_2", "output": "a.go"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Tests pass.", "annotations": []}]},
    {"type": "custom_tool_call", "call_id": "call_3", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"},
    {"type": "custom_tool_call_output", "call_id": "call_3", "output": "Done!"},
    {"role": "user", "content": "thanks"}
  ],
  "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}],
  "tool_choice": "auto",
  "parallel_tool_calls": true,
  "reasoning": {"effort": "medium", "summary": "auto"},
  "store": false,
  "stream": true,
  "include": ["reasoning.encrypted_content"],
  "prompt_cache_key": "0199a8f2"
}`,
		resp: `{
  "id": "resp_68af3c1a",
  "object": "response",
  "created_at": 1756310554,
  "status": "completed",
  "model": "gpt-5-codex",
  "output": [
    {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "THINKING-MARKER-5e1f0c"}], "encrypted_content": "THINKING-MARKER-5e1f0c"},
    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Running it.", "annotations": []}]},
    {"type": "function_call", "id": "fc_3", "call_id": "call_4", "name": "shell", "arguments": "{\"command\":[\"go\",\"vet\"]}", "status": "completed"}
  ],
  "usage": {
    "input_tokens": 5000, "input_tokens_details": {"cached_tokens": 4096},
    "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 256},
    "total_tokens": 5300
  }
}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIResponses,
			Model:              "gpt-5-codex",
			ResponseID:         "resp_68af3c1a",
			Usage:              genai.Usage{InputTokens: 904, OutputTokens: 300, CacheReadTokens: 4096, ReasoningTokens: 256},
			SystemInstructions: parts(text("You are Codex."), text("<permissions>")),
			InputMessages: msgs(
				msg("user", text("<environment_context>")),
				msg("user", text("Fix the test.")),
				msg("assistant", call("call_1", "shell", `{"command":["go","test"]}`), call("call_2", "shell", `{"command":["ls"]}`)),
				msg("tool", result("call_1", `"ok"`), result("call_2", `"a.go"`)),
				msg("assistant", text("Tests pass."), call("call_3", "apply_patch", `"*** Begin Patch\n*** End Patch"`)),
				msg("tool", result("call_3", `"Done!"`)),
				msg("user", text("thanks")),
			),
			OutputMessages: msgs(out("tool_calls", text("Running it."), call("call_4", "shell", `{"command":["go","vet"]}`))),
		},
	},
	{
		name: "string input, incomplete at max_output_tokens, model from the request",
		req:  `{"model": "o3", "input": "Say hi", "max_output_tokens": 16}`,
		resp: `{"id": "resp_2", "object": "response", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
  "output": [{"type": "reasoning", "id": "rs_3", "summary": [], "content": [{"type": "reasoning_text", "text": "THINKING-MARKER-5e1f0c"}]}],
  "usage": null}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIResponses,
			Model:              "o3",
			ResponseID:         "resp_2",
			SystemInstructions: parts(),
			InputMessages:      msgs(msg("user", text("Say hi"))),
			OutputMessages:     msgs(out("length")),
		},
	},
	{
		name: "untyped messages, array tool output, skipped items, refusal",
		req: `{
  "model": "gpt-4.1",
  "input": [
    {"role": "assistant", "content": "Let me look."},
    {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
    {"type": "item_reference", "id": "msg_x"},
    {"type": "function_call_output", "call_id": "c1", "output": [
      {"type": "input_text", "text": "line1"},
      {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}
    ]},
    {"role": "developer", "content": "Stay on task."},
    {"type": "function_call_output", "call_id": "c2", "output": null},
    {"role": "user", "content": [{"type": "input_text", "text": "Why?"}, {"type": "input_file", "file_id": "file-1"}]}
  ]
}`,
		resp: `{"id": "resp_3", "object": "response", "status": "completed", "model": "gpt-4.1-2025-04-14",
  "output": [
    {"type": "function_call", "call_id": "c3", "name": "read", "arguments": "{}"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}
  ],
  "usage": {"input_tokens": 30, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIResponses,
			Model:              "gpt-4.1-2025-04-14",
			ResponseID:         "resp_3",
			Usage:              genai.Usage{InputTokens: 30, OutputTokens: 4},
			SystemInstructions: parts(text("Stay on task.")),
			InputMessages: msgs(
				msg("assistant", text("Let me look."), call("c1", "read", `{}`)),
				msg("tool", result("c1", `"line1\n[image]"`)),
				msg("tool", result("c2", "")),
				msg("user", text("Why?"), text("[file]")),
			),
			OutputMessages: msgs(out("stop", call("c3", "read", `{}`), text("No."))),
		},
	},
	{
		name: "failed response with no output",
		req:  `{"model": "gpt-5", "input": []}`,
		resp: `{"id": "resp_4", "object": "response", "status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIResponses,
			Model:              "gpt-5",
			ResponseID:         "resp_4",
			SystemInstructions: parts(),
			InputMessages:      msgs(),
			OutputMessages:     msgs(out("failed")),
		},
	},
}

func TestParseResponses(t *testing.T) { runFixtures(t, responsesFixtures) }
