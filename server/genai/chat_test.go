package genai_test

import (
	"testing"

	"svc/server/genai"
)

var chatFixtures = []fixture{
	{
		name: "weather tool round trip with cache and reasoning usage",
		req: `{
  "model": "gpt-4.1",
  "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
    {"role": "user", "content": [
      {"type": "text", "text": "What's the weather in Paris?"},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
    ]},
    {"role": "assistant", "content": null, "reasoning_content": "THINKING-MARKER-5e1f0c", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":18}"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "stream": false
}`,
		resp: `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": "It is 18°C.", "refusal": null, "annotations": [], "reasoning_content": "THINKING-MARKER-5e1f0c"},
    "logprobs": null,
    "finish_reason": "stop"
  }],
  "usage": {
    "prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
    "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 16, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_3f58d112f7"
}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIChatCompletions,
			Model:              "gpt-4.1-2025-04-14",
			ResponseID:         "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
			Usage:              genai.Usage{InputTokens: 56, OutputTokens: 40, CacheReadTokens: 64, ReasoningTokens: 16},
			SystemInstructions: parts(text("You are helpful."), text("Be terse.")),
			InputMessages: msgs(
				msg("user", text("What's the weather in Paris?"), text("[image]")),
				msg("assistant", call("call_1", "get_weather", `{"city":"Paris"}`)),
				msg("tool", result("call_1", `"{\"temp\":18}"`)),
			),
			OutputMessages: msgs(out("stop", text("It is 18°C."))),
		},
	},
	{
		name: "parallel and custom tool calls, refusal, two choices, legacy function",
		req: `{
  "model": "gpt-5",
  "messages": [
    {"role": "user", "content": "List and patch."},
    {"role": "assistant", "content": "Earlier answer", "function_call": {"name": "legacy", "arguments": "{\"a\":1}"}},
    {"role": "function", "name": "legacy", "content": [{"type": "text", "text": "r1"}, {"type": "text", "text": "r2"}]}
  ],
  "n": 2
}`,
		resp: `{
  "id": "chatcmpl-2",
  "object": "chat.completion",
  "model": "gpt-5-2025-08-07",
  "choices": [
    {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_a", "type": "function", "function": {"name": "shell", "arguments": "ls -la"}},
      {"id": "call_b", "type": "function", "function": {"name": "noop", "arguments": ""}},
      {"id": "call_c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}},
      {"id": "call_d", "type": "mystery", "mystery": {}}
    ]}},
    {"index": 1, "finish_reason": "stop", "message": {"role": "assistant", "content": [{"type": "text", "text": "Cannot."}], "refusal": "I can't help with that."}}
  ],
  "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIChatCompletions,
			Model:              "gpt-5-2025-08-07",
			ResponseID:         "chatcmpl-2",
			Usage:              genai.Usage{InputTokens: 10, OutputTokens: 5},
			SystemInstructions: parts(),
			InputMessages: msgs(
				msg("user", text("List and patch.")),
				msg("assistant", text("Earlier answer"), call("", "legacy", `{"a":1}`)),
				msg("tool", result("", `"r1\nr2"`)),
			),
			OutputMessages: msgs(
				out("tool_calls",
					call("call_a", "shell", `"ls -la"`),
					call("call_b", "noop", `""`),
					call("call_c", "apply_patch", `"*** Begin Patch"`),
				),
				out("stop", text("Cannot."), text("I can't help with that.")),
			),
		},
	},
	{
		name: "no choices, cached tokens above prompt tokens",
		req:  `{"model": "gpt-4o-mini", "messages": []}`,
		resp: `{"object": "chat.completion", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 5}, "completion_tokens_details": null}}`,
		want: genai.Record{
			Provider:           genai.ProviderOpenAI,
			API:                genai.APIChatCompletions,
			Model:              "gpt-4o-mini",
			Usage:              genai.Usage{CacheReadTokens: 5},
			SystemInstructions: parts(),
			InputMessages:      msgs(),
			OutputMessages:     msgs(),
		},
	},
}

func TestParseChat(t *testing.T) { runFixtures(t, chatFixtures) }
