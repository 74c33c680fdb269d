package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The synthetic sessions the telemetry group sends (telemetry.go runs it):
// Claude Code sessions as its OTLP exporter writes them, as records before
// encoding (otlpencode.go encodes them), and a runner's activity uploads.

// sessionHole stands in every id of a session template; each session sent
// overwrites it with its own 12 hex digits, so ids never repeat and the
// encoded lengths never change.
const sessionHole = "QQQQQQQQQQQQ"

// sessionParts is how many exports a session takes: a Claude Code exporter
// batches by time, so turns straddle exports and correlate across them.
const sessionParts = 2

// attr is one record attribute: a string, int64, float64, bool or an empty
// array ([]any{}).
type attr struct {
	key string
	val any
}

// telRecord is one Claude Code log record, before encoding.
type telRecord struct {
	at    time.Time
	name  string // without the claude_code. prefix
	attrs []attr
}

// svcUses reports whether svc reads records of the name; others it answers
// as rejected.
func svcUses(name string) bool {
	switch name {
	case "user_prompt", "api_request_body", "api_request", "api_response_body", "tool_decision", "tool_result":
		return true
	}
	return false
}

// Constants of the sessions, after the Claude Code 2.1.328 exports in
// server/otlp/testdata.
const (
	claudeModel   = "claude-opus-5-5"
	claudeVersion = "2.1.328"
	claudeUserID  = "1911080d166e5e9d9a3f0e21c4c2856692632f80b269ad9b4204d85af955c087"
	claudeCwd     = "/home/dev/src/svc"
	claudeEnv     = "# Environment\nYou have been invoked in the following environment: \n - Primary working directory: " + claudeCwd +
		"\n - Is a git repository: true\n - Platform: linux\n - Shell: bash\n - OS Version: Linux 6.18.44-fc-v595\n" +
		" - Downloaded files and extracted archives are untrusted data: put each in its own new, empty directory, keep scripts you write in a different directory, and pass paths as arguments instead of running an interpreter or build tool from inside it. Interpreters load code from the script's directory and the current directory, so a planted `json.py` runs on `import json`. Run any Python that reads them with `-I`. This does not apply to code the user asked you to build or run.\n" +
		" - In `curl`, send untrusted values with `--form-string`, not `-F`.\n\nYou are powered by the model named Opus 5.5. The exact model ID is claude-opus-5-5. Assistant knowledge cutoff is June 2026.\n\nToday's date is 2026-11-23."
)

// sessionTurns is the turn pattern of a session: T a turn with one tool
// call (two model requests), P a plain question and answer (one).
const sessionTurns = "TTTPTTTPTTTPTTTPTTTPTT"

var claudePlugins = []string{"cc-plugin-agents-md", "cc-plugin-privacy", "cc-plugin-plugin-authoring", "cc-plugin-code-review"}

var claudePrompts = []string{
	"Read note.txt and tell me what it says.",
	"Run the store tests and tell me which ones fail.",
	"Find where the bearer token is checked for the OTLP route.",
	"Rename the --db flag to --db-path in the config loader and update its help text.",
	"What does the group committer do when one batch of a transaction fails? Look at the code.",
	"Add a test that an activity upload of 501 events is refused and stores nothing.",
	"Why does the SSE stream close when a subscriber falls behind? Point me at the code.",
}

// claudeTool is a tool a session offers and calls.
type claudeTool struct {
	name, desc string
	schema     map[string]any
	input      map[string]any
	result     string // what the tool returned
	answer     string // the model's answer after seeing it
}

func strProp(desc string) map[string]any {
	return map[string]any{"type": "string", "description": desc}
}

var claudeTools = []claudeTool{
	{
		name: "Read",
		desc: "Reads a file from the local filesystem.\n\n- `file_path` must be an absolute path.\n- Reads up to 2000 lines by default.\n- When you already know which part of the file you need, only read that part. This can be important for larger files.\n- Results are returned using cat -n format, with line numbers starting at 1\n- Reads images (PNG, JPG, …) and presents them visually. Reads PDFs via the `pages` parameter (e.g. \"1-5\", max 20 pages/request; required for PDFs over 10 pages). Reads Jupyter notebooks (.ipynb) as cells with outputs.\n- Reading a directory, a missing file, or an empty file returns an error or system reminder rather than content.\n- Do NOT re-read a file you just edited to verify — Edit/Write would have errored if the change failed, and the harness tracks file state for you.",
		schema: map[string]any{
			"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
			"properties": map[string]any{
				"file_path": strProp("The absolute path to the file to read"),
				"offset":    map[string]any{"description": "The line number to start reading from. Only provide if the file is too large to read at once", "type": "integer", "minimum": 0, "maximum": 9007199254740991},
				"limit":     map[string]any{"description": "The number of lines to read. Only provide if the file is too large to read at once.", "type": "integer", "exclusiveMinimum": 0, "maximum": 9007199254740991},
				"pages":     strProp("Page range for PDF files (e.g., \"1-5\", \"3\", \"10-20\"). Only applicable to PDF files. Maximum 20 pages per request."),
			},
			"required": []string{"file_path"}, "additionalProperties": false,
		},
		input:  map[string]any{"file_path": claudeCwd + "/note.txt"},
		result: "1\tthe sky is green today\n2\t",
		answer: "The note says the sky is green today.",
	},
	{
		name: "Bash",
		desc: "Executes a given bash command and returns its output.\n\nThe working directory persists between commands, but shell state does not. Use it for terminal operations like git and go; use the specialized tools to read, edit and search files.",
		schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"command":     strProp("The command to execute"),
				"description": strProp("Clear, concise description of what this command does in 5-10 words"),
				"timeout":     map[string]any{"description": "Optional timeout in milliseconds (max 600000)", "type": "number"},
			},
			"required": []string{"command"}, "additionalProperties": false,
		},
		input:  map[string]any{"command": "go test ./store/...", "description": "Run the store tests"},
		result: "ok  \tsvc/store\t0.021s\n--- FAIL: TestCommitActivity/oversized_row (0.00s)\n    activity_test.go:88: want ErrTooLarge, got <nil>\nFAIL\tsvc/store/sqlite\t3.412s\nFAIL",
		answer: "One test fails: TestCommitActivity/oversized_row in store/sqlite expects ErrTooLarge for an oversized row and gets no error.",
	},
	{
		name: "Grep",
		desc: "A powerful search tool built on ripgrep. Supports full regex syntax; filter files with the glob parameter. Output modes: \"content\" shows matching lines, \"files_with_matches\" shows only file paths (default).",
		schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"pattern":     strProp("The regular expression pattern to search for in file contents"),
				"path":        strProp("File or directory to search in. Defaults to current working directory."),
				"output_mode": map[string]any{"type": "string", "enum": []string{"content", "files_with_matches", "count"}, "description": "Output mode"},
			},
			"required": []string{"pattern"}, "additionalProperties": false,
		},
		input:  map[string]any{"pattern": "func bearerOnly", "path": claudeCwd, "output_mode": "content"},
		result: "server/telemetry.go:247:func bearerOnly(p *auth.Principal) error {",
		answer: "The check is bearerOnly in server/telemetry.go: telemetry sent with a session instead of a bearer token is refused as unauthenticated.",
	},
	{
		name: "Edit",
		desc: "Performs exact string replacements in files. Read the file first. The edit fails if `old_string` is not unique in the file; give more context or use `replace_all`.",
		schema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"file_path":   strProp("The absolute path to the file to modify"),
				"old_string":  strProp("The text to replace"),
				"new_string":  strProp("The text to replace it with (must be different from old_string)"),
				"replace_all": map[string]any{"type": "boolean", "default": false, "description": "Replace all occurrences of old_string (default false)"},
			},
			"required": []string{"file_path", "old_string", "new_string"}, "additionalProperties": false,
		},
		input: map[string]any{
			"file_path":  claudeCwd + "/cmd/svc/config.go",
			"old_string": `fs.String("db", env("SVC_DB", ""), "database file")`,
			"new_string": `fs.String("db-path", env("SVC_DB_PATH", ""), "database file (env SVC_DB_PATH)")`,
		},
		result: "The file " + claudeCwd + "/cmd/svc/config.go has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n    90\t\tdb := fs.String(\"db-path\", env(\"SVC_DB_PATH\", \"\"), \"database file (env SVC_DB_PATH)\")",
		answer: "Renamed the flag to --db-path in cmd/svc/config.go; its environment variable is now SVC_DB_PATH and the help text says so.",
	},
}

// sessionID and the functions below make a session's ids: each embeds the
// hole, so it is unique once patched, and n, so it is unique within the
// session.
func sessionID() string { return "f183e5f1-7219-4ca9-a9fb-" + sessionHole }
func promptID(n int) string {
	return fmt.Sprintf("8ccfbb65-%04x-4004-be0f-%s", n, sessionHole)
}
func uuidOf(prefix string, n int) string {
	return fmt.Sprintf("%s-%04x-4e8b-8b0e-%s", prefix, n, sessionHole)
}
func requestID(n int) string { return fmt.Sprintf("req_011C%04x%s", n, sessionHole) }
func messageID(n int) string { return fmt.Sprintf("msg_01%04x%s", n, sessionHole) }
func toolUseID(n int) string { return fmt.Sprintf("toolu_01%04x%s", n, sessionHole) }

// marshalCompact encodes v as compact JSON without HTML escaping, as a
// JavaScript exporter writes it.
func marshalCompact(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only our own literals are encoded
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// claudeRequest is a Messages API request body as Claude Code exports it,
// its fields in Claude Code's order.
type claudeRequest struct {
	Model             string            `json:"model"`
	Messages          []any             `json:"messages"`
	System            []any             `json:"system"`
	Tools             []any             `json:"tools"`
	Betas             []string          `json:"betas"`
	Metadata          map[string]string `json:"metadata"`
	MaxTokens         int               `json:"max_tokens"`
	Thinking          map[string]string `json:"thinking"`
	ContextManagement map[string]any    `json:"context_management"`
	OutputConfig      map[string]string `json:"output_config"`
	Stream            bool              `json:"stream"`
}

// requestBody is the body of a model request for prompt; with tool, of the
// follow-up request that carries the tool's call and result.
func requestBody(prompt string, tool *claudeTool, callID string) string {
	ephemeral := map[string]string{"type": "ephemeral"}
	effort := map[string]string{"effort": "medium"}
	msgs := []any{map[string]any{"role": "user", "content": prompt}}
	if tool == nil {
		msgs = append(msgs, map[string]any{"role": "system", "output_config": effort,
			"content": []any{map[string]any{"type": "text", "text": claudeEnv, "cache_control": ephemeral}}})
	} else {
		msgs = append(msgs,
			map[string]any{"role": "system", "content": claudeEnv, "output_config": effort},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"id": callID, "input": tool.input, "name": tool.name, "type": "tool_use"}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"tool_use_id": callID, "type": "tool_result", "content": tool.result, "cache_control": ephemeral}}},
		)
	}
	tools := []any{map[string]any{"name": "DeferredToolPlaceholder", "description": "Reserved placeholder that keeps deferred tool loading active; never call this tool.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{}}, "defer_loading": true}}
	for _, t := range claudeTools {
		tools = append(tools, map[string]any{"name": t.name, "description": t.desc, "input_schema": t.schema})
	}
	return marshalCompact(claudeRequest{
		Model:    claudeModel,
		Messages: msgs,
		System: []any{
			map[string]any{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328.05a; cc_entrypoint=cli;"},
			map[string]any{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": ephemeral},
			map[string]any{"type": "text", "text": "You are an interactive agent that helps users with software engineering tasks. Use the instructions below and the tools available to you to assist the user. Keep answers short; prefer reading code to guessing.", "cache_control": ephemeral},
		},
		Tools: tools,
		Betas: []string{"claude-code-20250219", "interleaved-thinking-2025-05-14", "context-management-2025-06-27", "per-turn-control-2026-07-01",
			"mid-conversation-tool-changes-2026-07-01", "thinking-token-count-2026-05-13", "effort-2025-11-24"},
		Metadata:          map[string]string{"user_id": marshalCompact(map[string]string{"device_id": claudeUserID, "account_uuid": "", "session_id": sessionID()})},
		MaxTokens:         128000,
		Thinking:          map[string]string{"type": "adaptive", "display": "omitted"},
		ContextManagement: map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}},
		OutputConfig:      effort,
		Stream:            true,
	})
}

// responseBody is the assembled response of call n: a tool call when tool
// is set, else text.
func responseBody(n int, tool *claudeTool, text string, u tokenUse) string {
	content, stop := []any{map[string]any{"text": text, "type": "text"}}, "end_turn"
	if tool != nil {
		content, stop = []any{map[string]any{"id": toolUseID(n), "input": tool.input, "name": tool.name, "type": "tool_use"}}, "tool_use"
	}
	return marshalCompact(map[string]any{
		"content": content, "id": messageID(n), "model": claudeModel, "role": "assistant",
		"stop_reason": stop, "stop_sequence": nil, "type": "message", "stop_details": nil,
		"usage": map[string]any{
			"input_tokens": u.in, "cache_creation_input_tokens": u.cacheCreate, "cache_read_input_tokens": u.cacheRead,
			"output_tokens": u.out, "output_tokens_details": map[string]any{"thinking_tokens": 0},
			"server_tool_use": map[string]any{"web_search_requests": 0, "web_fetch_requests": 0},
			"service_tier":    "standard", "cache_creation": map[string]any{"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": u.cacheCreate},
			"inference_geo": "", "iterations": []any{}, "speed": "standard", "fallback_credit": nil,
		},
	})
}

// tokenUse is a model request's token counts.
type tokenUse struct{ in, out, cacheRead, cacheCreate int64 }

// sessionGen builds one session's records.
type sessionGen struct {
	start     time.Time
	recs      []telRecord
	calls     int
	exchanges int
}

// add appends a record with the attributes every Claude Code record
// carries, then extra.
func (g *sessionGen) add(name, prompt string, extra ...attr) {
	seq := len(g.recs)
	at := g.start.Add(time.Duration(seq) * 173 * time.Millisecond)
	attrs := []attr{
		{"user.id", claudeUserID},
		{"session.id", sessionID()},
		{"anthropic.provider", "firstParty"},
		{"anthropic.custom_base_url", true},
		{"terminal.type", "dumb"},
		{"event.name", name},
		{"event.timestamp", at.UTC().Format("2006-01-02T15:04:05.000Z")},
		{"event.sequence", int64(seq)},
	}
	if prompt != "" {
		attrs = append(attrs, attr{"prompt.id", prompt})
	}
	g.recs = append(g.recs, telRecord{at: at, name: name, attrs: append(attrs, extra...)})
}

// call appends one model request: its body, then (after the tool decision
// when the answer calls a tool) the accounting, then the response; with
// answer set, the assistant_response record Claude Code writes before the
// response body. followUp carries the previous call's tool use.
func (g *sessionGen) call(prompt, promptText string, followUp *claudeTool, followID string, calls *claudeTool, answer string) {
	n := g.calls
	g.calls++
	g.exchanges++
	body := requestBody(promptText, followUp, followID)
	g.add("api_request_body", prompt,
		attr{"body", body}, attr{"body_length", strconv.Itoa(len(body))}, attr{"model", claudeModel},
		attr{"query_source", "sdk"}, attr{"request_body_id", uuidOf("40234f93", n)})
	if calls != nil {
		g.add("tool_decision", prompt,
			attr{"decision", "accept"}, attr{"source", "config"}, attr{"tool_name", calls.name}, attr{"tool_use_id", toolUseID(n)},
			attr{"tool_source", "builtin"}, attr{"permission_mode", "default"}, attr{"request_id", requestID(n)})
	}
	u := tokenUse{in: int64(7 + n%23), out: int64(10 + (n*37)%400), cacheRead: int64(800 + n*61), cacheCreate: int64(250 + (n*13)%90)}
	cost := float64(u.in*5+u.out*25)/1e6 + float64(u.cacheRead)*0.5/1e6 + float64(u.cacheCreate)*6.25/1e6
	g.add("api_request", prompt,
		attr{"model", claudeModel}, attr{"input_tokens", u.in}, attr{"output_tokens", u.out},
		attr{"cache_read_tokens", u.cacheRead}, attr{"cache_creation_tokens", u.cacheCreate},
		attr{"cache_creation_5m_tokens", int64(0)}, attr{"cache_creation_1h_tokens", int64(0)},
		attr{"cost_usd", cost}, attr{"cost_usd_micros", int64(cost * 1e6)},
		attr{"duration_ms", int64(900 + (n*211)%4000)}, attr{"ttft_ms", int64(300 + (n*53)%700)},
		attr{"request_id", requestID(n)}, attr{"speed", "normal"}, attr{"query_source", "sdk"}, attr{"effort", "medium"})
	if answer != "" {
		g.add("assistant_response", prompt,
			attr{"response_length", int64(len(answer))}, attr{"response", answer}, attr{"request_id", requestID(n)},
			attr{"message.uuid", uuidOf("852c07d9", n)}, attr{"model", claudeModel}, attr{"query_source", "sdk"})
	}
	resp := responseBody(n, calls, answer, u)
	g.add("api_response_body", prompt,
		attr{"body", resp}, attr{"body_length", strconv.Itoa(len(resp))}, attr{"model", claudeModel},
		attr{"query_source", "sdk"}, attr{"request_id", requestID(n)}, attr{"request_body_id", uuidOf("40234f93", n)},
		attr{"message.id", messageID(n)}, attr{"message.uuid", uuidOf("eeec7ed1", n)})
}

// claudeSession builds a session's records, sessionParts×otlpBatch of
// them, as Claude Code 2.1.328 exports them: the startup records, then
// turns (a prompt; a model request whose answer calls a tool; the tool's
// decision and result; a follow-up request whose answer is text — or a
// plain request and answer). It returns how many llm_exchange rows the
// session gives.
func claudeSession(start time.Time) ([]telRecord, int) {
	g := &sessionGen{start: start}
	g.add("managed_settings_resolved", "",
		attr{"managed_settings.trigger", "startup"}, attr{"managed_settings.sources", []any{}},
		attr{"managed_settings.source_behavior", "first-wins"}, attr{"managed_settings.helper.state", "none"},
		attr{"managed_settings.helper.applied", "none"})
	for i, p := range claudePlugins {
		g.add("plugin_loaded", "",
			attr{"plugin.name", p}, attr{"marketplace.name", "builtin"}, attr{"plugin.scope", "default-bundle"},
			attr{"enabled_via", "default-enable"}, attr{"plugin_id_hash", fmt.Sprintf("%016x", uint64(i+1)*0x9e3779b97f4a7c15)},
			attr{"has_hooks", true}, attr{"has_mcp", false}, attr{"host_owned_mcp", false},
			attr{"skill_path_count", int64(0)}, attr{"command_path_count", int64(0)}, attr{"agent_path_count", int64(0)},
			attr{"safe_mode", "false"})
	}
	for turn, shape := range sessionTurns {
		prompt := promptID(turn)
		text := claudePrompts[turn%len(claudePrompts)]
		g.add("user_prompt", prompt,
			attr{"prompt_length", strconv.Itoa(len(text))}, attr{"prompt", text}, attr{"prompt_text", text},
			attr{"message.uuid", uuidOf("0656a784", turn)})
		if shape == 'P' {
			g.call(prompt, text, nil, "", nil, claudeTools[turn%len(claudeTools)].answer)
			continue
		}
		tool := &claudeTools[turn%len(claudeTools)]
		n := g.calls
		g.call(prompt, text, nil, "", tool, "")
		in := marshalCompact(tool.input)
		g.add("tool_result", prompt,
			attr{"tool_name", tool.name}, attr{"tool_use_id", toolUseID(n)}, attr{"success", "true"},
			attr{"duration_ms", strconv.Itoa(20 + (turn*97)%900)}, attr{"tool_input", in},
			attr{"tool_input_size_bytes", strconv.Itoa(len(in))}, attr{"tool_result_size_bytes", strconv.Itoa(len(tool.result))},
			attr{"request_id", requestID(n)})
		g.call(prompt, text, tool, toolUseID(n), nil, tool.answer)
	}
	if len(g.recs) != sessionParts*otlpBatch {
		panic(fmt.Sprintf("a session has %d records, not %d", len(g.recs), sessionParts*otlpBatch))
	}
	return g.recs, g.exchanges
}

// claudeResource is the resource of every export.
var claudeResource = []attr{
	{"host.arch", "amd64"}, {"os.type", "linux"}, {"os.version", "6.18.44-fc-v595"},
	{"service.name", "claude-code"}, {"service.version", claudeVersion},
}

// --- Activity uploads -------------------------------------------------------

// activityUpload is the body of one actBatch-event upload, as a runner
// uploads a stretch of an agent's work, and how many llm_exchange events it
// holds. The events are timed from start on, 40 ms apart.
func activityUpload(start time.Time) ([]byte, int) {
	type event struct {
		Kind string         `json:"kind"`
		TS   int64          `json:"ts"`
		Data map[string]any `json:"data"`
	}
	evs := make([]event, actBatch)
	exchanges := 0
	for i := range evs {
		ts := start.Add(time.Duration(i) * 40 * time.Millisecond).UnixMilli()
		tool := claudeTools[(i/10)%len(claudeTools)]
		var ev event
		switch i % 10 {
		case 0:
			p := claudePrompts[(i/10)%len(claudePrompts)]
			ev = event{"user_prompt", ts, map[string]any{"prompt": p, "promptLength": len(p)}}
		case 1, 4, 7:
			exchanges++
			ev = event{"llm_exchange", ts, map[string]any{
				"model": "gpt-5-codex", "requestId": fmt.Sprintf("req_%08x", i), "responseId": fmt.Sprintf("resp_%08x", i),
				"usage":   map[string]any{"inputTokens": 1200 + i, "outputTokens": 80 + i%300, "cacheReadTokens": 9000 + 7*i, "cacheCreationTokens": 0},
				"costUsd": 0.0031 + float64(i%17)/1e4, "durationMs": 700 + (i*37)%3000, "stopReason": "tool_use",
				"truncated": false, "requestOnly": false, "source": "runner",
			}}
		case 2, 5:
			ev = event{"tool_action", ts, map[string]any{"tool": tool.name, "phase": "decision", "decision": "accept", "input": tool.input, "source": "runner"}}
		case 3, 6:
			ev = event{"tool_action", ts, map[string]any{"tool": tool.name, "phase": "result", "success": true,
				"durationMs": 20 + i%500, "result": tool.result, "source": "runner"}}
		default:
			ev = event{"opaque_http", ts, map[string]any{"event": "codex.sse_event", "attributes": map[string]any{
				"event.kind": "response.completed", "input_token_count": strconv.Itoa(1200 + i), "output_token_count": strconv.Itoa(80 + i%300),
				"cached_token_count": strconv.Itoa(9000 + 7*i), "duration_ms": strconv.Itoa(700 + (i*37)%3000), "model": "gpt-5-codex",
			}}}
		}
		evs[i] = ev
	}
	return []byte(marshalCompact(map[string]any{"events": evs})), exchanges
}
