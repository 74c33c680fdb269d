package genai_test

import (
	"testing"

	"svc/server/genai"
)

var anthropicFixtures = []fixture{
	{
		name: "claude code turn with tools, cache and thinking",
		req: `{
  "model": "claude-sonnet-4-5-20250929",
  "max_tokens": 32000,
  "thinking": {"type": "enabled", "budget_tokens": 10000},
  "system": [
    {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
    {"type": "text", "text": "Env: linux"}
  ],
  "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
  "messages": [
    {"role": "user", "content": "List the files."},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "THINKING-MARKER-5e1f0c the user wants ls", "signature": "EqQBCkgIARABGAIiQ"},
      {"type": "text", "text": "Listing."},
      {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls -la", "timeout": 5000}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.go\nb.go"},
      {"type": "text", "text": "Now read a.go", "cache_control": {"type": "ephemeral"}}
    ]},
    {"role": "assistant", "content": [
      {"type": "redacted_thinking", "data": "THINKING-MARKER-5e1f0c"},
      {"type": "tool_use", "id": "toolu_02", "name": "Read", "input": {"path": "a.go"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": false, "content": [
        {"type": "text", "text": "package a"},
        {"type": "thinking", "thinking": "THINKING-MARKER-5e1f0c"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
      ]},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    ]}
  ]
}`,
		resp: `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "THINKING-MARKER-5e1f0c done", "signature": "EqQBCkgIARABGAIiQ"},
    {"type": "text", "text": "a.go declares package a."}
  ],
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "usage": {"input_tokens": 12, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000, "output_tokens": 85, "service_tier": "standard"}
}`,
		want: genai.Record{
			Provider:           genai.ProviderAnthropic,
			API:                genai.APIMessages,
			Model:              "claude-sonnet-4-5-20250929",
			ResponseID:         "msg_01XFDUDYJgAACzvnptvVoYEL",
			Usage:              genai.Usage{InputTokens: 12, OutputTokens: 85, CacheReadTokens: 4000, CacheCreationTokens: 300},
			SystemInstructions: parts(text("You are Claude Code."), text("Env: linux")),
			InputMessages: msgs(
				msg("user", text("List the files.")),
				msg("assistant", text("Listing."), call("toolu_01", "Bash", `{"command":"ls -la","timeout":5000}`)),
				msg("user", result("toolu_01", `"a.go\nb.go"`), text("Now read a.go")),
				msg("assistant", call("toolu_02", "Read", `{"path":"a.go"}`)),
				msg("user", result("toolu_02", `"package a\n[image]"`), text("[image]")),
			),
			OutputMessages: msgs(out("end_turn", text("a.go declares package a."))),
		},
	},
	{
		name: "tool use response, string system, document, server tools",
		req: `{
  "model": "claude-opus-4-1",
  "system": "Be careful.",
  "messages": [
    {"role": "user", "content": [
      {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "the doc"}},
      {"type": "text", "text": "Summarize, then run it."}
    ]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "THINKING-MARKER-5e1f0c", "signature": "s"}]},
    {"role": "user", "content": "go on"}
  ]
}`,
		resp: `{
  "id": "msg_02",
  "type": "message",
  "role": "assistant",
  "model": "claude-opus-4-1-20250805",
  "content": [
    {"type": "text", "text": ""},
    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
    {"type": "tool_use", "id": "toolu_03", "name": "Bash", "input": {}}
  ],
  "stop_reason": "tool_use",
  "usage": {"input_tokens": 50, "output_tokens": 20, "cache_read_input_tokens": null, "cache_creation_input_tokens": 0}
}`,
		want: genai.Record{
			Provider:           genai.ProviderAnthropic,
			API:                genai.APIMessages,
			Model:              "claude-opus-4-1-20250805",
			ResponseID:         "msg_02",
			Usage:              genai.Usage{InputTokens: 50, OutputTokens: 20},
			SystemInstructions: parts(text("Be careful.")),
			InputMessages: msgs(
				msg("user", text("[document]"), text("Summarize, then run it.")),
				msg("assistant"),
				msg("user", text("go on")),
			),
			OutputMessages: msgs(out("tool_use", call("toolu_03", "Bash", `{}`))),
		},
	},
	{
		// As Claude Code 2.1.328 sends it: a system entry with the
		// environment among the messages, after the first user turn.
		name: "system entry inside messages",
		req: `{
  "model": "claude-sonnet-4-5",
  "system": [{"type": "text", "text": "You are Claude Code."}],
  "messages": [
    {"role": "user", "content": [{"type": "text", "text": "<system-reminder>attribution</system-reminder>"}, {"type": "text", "text": "fix the test"}]},
    {"role": "system", "content": "Working directory: /work\nPlatform: linux\nToday's date: 2026-11-28"},
    {"role": "assistant", "content": [{"type": "text", "text": "On it."}]},
    {"role": "system", "content": [{"type": "text", "text": "reminder"}]},
    {"role": "user", "content": "go"}
  ]
}`,
		resp: `{"id": "msg_sys", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn"}`,
		want: genai.Record{
			Provider:           genai.ProviderAnthropic,
			API:                genai.APIMessages,
			Model:              "claude-sonnet-4-5",
			ResponseID:         "msg_sys",
			SystemInstructions: parts(text("You are Claude Code.")),
			InputMessages: msgs(
				msg("user", text("<system-reminder>attribution</system-reminder>"), text("fix the test")),
				msg("system", text("Working directory: /work\nPlatform: linux\nToday's date: 2026-11-28")),
				msg("assistant", text("On it.")),
				msg("system", text("reminder")),
				msg("user", text("go")),
			),
			OutputMessages: msgs(out("end_turn", text("Done."))),
		},
	},
	{
		name: "minimal: model from the request, no usage",
		req:  `{"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]}`,
		resp: `{"type": "message", "content": [{"type": "text", "text": "Hello!"}], "stop_reason": null}`,
		want: genai.Record{
			Provider:           genai.ProviderAnthropic,
			API:                genai.APIMessages,
			Model:              "claude-haiku-4-5",
			SystemInstructions: parts(),
			InputMessages:      msgs(msg("user", text("hi"))),
			OutputMessages:     msgs(out("", text("Hello!"))),
		},
	},
	{
		name: "tool_use input given as a string",
		req:  `{"model": "m", "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": "{\"x\": [1, 2]}"}, {"type": "tool_use", "id": "t2", "name": "b", "input": "not json"}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}]}`,
		resp: `{"type": "message", "content": [], "stop_reason": "end_turn"}`,
		want: genai.Record{
			Provider:           genai.ProviderAnthropic,
			API:                genai.APIMessages,
			Model:              "m",
			SystemInstructions: parts(),
			InputMessages: msgs(
				msg("assistant", call("t1", "a", `{"x":[1,2]}`), call("t2", "b", `"not json"`)),
				msg("user", result("t1", "")),
			),
			OutputMessages: msgs(out("end_turn")),
		},
	},
}

func TestParseAnthropic(t *testing.T) { runFixtures(t, anthropicFixtures) }
