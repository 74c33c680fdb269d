// Package genaitest builds GenAI uploads shaped like a real agent's, for
// the tests and benchmarks of their storage: the calls of one Claude Code
// session. It imports nothing of svc's.
package genaitest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// The shape of a Claude Code 2.1.328 session under `svc runner` with the
// svc toolbox, as measured (docs/DECISIONS.md, "GenAI records stored by
// parts"): 42 tool definitions of these sizes in bytes of compact JSON,
// 68 KB in all; a system of three blocks (a billing header, the identity
// line and a 7.6 KB prompt); a first user turn and the environment as a
// role "system" entry of 9 KB in messages[]; then each call adds the
// model's tool call and its result, and now and then a system reminder.
var toolSizes = []int{187, 198, 217, 224, 235, 235, 238, 256, 277, 288, 294, 302, 323, 352, 427, 441,
	441, 448, 491, 561, 584, 598, 639, 644, 789, 866, 969, 1085, 1633, 1823, 1929, 1988, 2428, 2918,
	3929, 4048, 4573, 4981, 5309, 5758, 6259, 7665}

const (
	// Model is the model every call of the session names.
	Model       = "claude-opus-5-5"
	promptBytes = 7596
	envBytes    = 9000
	// Every reminderEvery-th tool result is followed by a system reminder.
	reminderEvery = 5
	// Every bigEvery-th tool result is a long output (a file, a listing).
	bigEvery = 4
)

// block is one content block of the Messages API, in the field order
// Claude Code writes.
type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      string          `json:"content,omitempty"`
	IsError      *bool           `json:"is_error,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"`
}

type message struct {
	Role    string `json:"role"`
	Content any    `json:"content"` // a string or []block
}

type tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

type request struct {
	Model             string         `json:"model"`
	Messages          []message      `json:"messages"`
	System            []block        `json:"system"`
	Tools             []tool         `json:"tools"`
	Metadata          map[string]any `json:"metadata"`
	MaxTokens         int            `json:"max_tokens"`
	Thinking          map[string]any `json:"thinking"`
	ContextManagement map[string]any `json:"context_management"`
	OutputConfig      map[string]any `json:"output_config"`
	Stream            bool           `json:"stream"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type response struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []block `json:"content"`
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

// words is text of about n bytes from a fixed vocabulary, the same for
// the same seed.
func words(seed uint64, n int) string {
	vocab := strings.Fields(`the agent tool call file path read write message objective member team
		broker runner result output input command shell directory permission request response model
		session context system prompt user assistant text value secret token schema property string
		number boolean array object required optional default when never always each every one two
		first last next before after returns lists sends posts reads writes checks waits stops starts
		keeps drops adds removes names holds carries shows finds uses must may should can will not`)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			if r.IntN(12) == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(vocab[r.IntN(len(vocab))])
	}
	return b.String()
}

// tools are the session's tool definitions, about toolSizes long each.
func tools() []tool {
	out := make([]tool, len(toolSizes))
	for i, size := range toolSizes {
		props := map[string]any{}
		var required []string
		nprops := 1 + size/1500
		for p := range nprops {
			name := fmt.Sprintf("arg_%d", p)
			props[name] = map[string]any{"type": "string", "description": words(uint64(1000*i+p), 60)}
			required = append(required, name)
		}
		schema := map[string]any{
			"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
			"properties": props, "required": required, "additionalProperties": false,
		}
		fixed, _ := json.Marshal(tool{Name: fmt.Sprintf("tool_%02d", i), InputSchema: schema})
		out[i] = tool{Name: fmt.Sprintf("tool_%02d", i), Description: words(uint64(i), max(16, size-len(fixed))), InputSchema: schema}
		if i >= 23 {
			out[i].Name = fmt.Sprintf("mcp__svc__tool_%02d", i)
		}
	}
	return out
}

// toolResult is the output of the session's step-th tool call.
func toolResult(step int) string {
	if step%bigEvery == 0 {
		return words(uint64(50_000+step), 2000+100*step)
	}
	return words(uint64(50_000+step), 80+17*(step%9))
}

// ClaudeSession returns the uploads {ts, request, response} of the first
// n model calls of one Claude Code session: each request repeats the
// tools, the system and every message so far, as Claude Code does, and
// moves its cache breakpoint to its last block; each response is the
// model's next tool call (the last one's, a closing text).
func ClaudeSession(n int) [][]byte {
	ts := tools()
	system := []block{
		{Type: "text", Text: "x-anthropic-billing-header: cc_version=2.1.328.ce6; cc_entrypoint=sdk-cli;"},
		{Type: "text", Text: "You are Claude Code, Anthropic's official CLI for Claude, running within the Claude Agent SDK.",
			CacheControl: &cacheControl{"ephemeral"}},
		{Type: "text", Text: words(7, promptBytes), CacheControl: &cacheControl{"ephemeral"}},
	}
	msgs := []message{
		{Role: "user", Content: []block{
			{Type: "text", Text: "<system-reminder>\n" + words(8, 440) + "\n</system-reminder>\n"},
			{Type: "text", Text: "[svc] message 0000000000000001 from alice in DM (level info)\nTitle: Inspect\n" + words(9, 60)},
		}},
		{Role: "system", Content: "# Environment\n" + words(10, envBytes)},
	}
	f := false
	call := func(step int) block {
		in, _ := json.Marshal(map[string]string{"command": words(uint64(20_000+step), 30), "description": "inspect"})
		return block{Type: "tool_use", ID: fmt.Sprintf("toolu_session_%d", step), Name: "Bash", Input: in}
	}
	var out [][]byte
	for k := range n {
		// The cache breakpoint is on the last block of this call only.
		sent := make([]message, len(msgs))
		copy(sent, msgs)
		last := &sent[len(sent)-1]
		if blocks, ok := last.Content.([]block); ok {
			blocks = append([]block(nil), blocks...)
			blocks[len(blocks)-1].CacheControl = &cacheControl{"ephemeral"}
			last.Content = blocks
		}
		req := request{
			Model: Model, Messages: sent, System: system, Tools: ts,
			Metadata: map[string]any{"user_id": `{"device_id":"` + strings.Repeat("4d5b8fa2", 8) +
				`","account_uuid":"","session_id":"4f870bf3-2b3a-44f8-a944-6912a3925d9b"}`},
			MaxTokens: 32000, Thinking: map[string]any{"type": "adaptive", "display": "updates"},
			ContextManagement: map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}},
			OutputConfig:      map[string]any{"effort": "medium"}, Stream: true,
		}
		resp := response{
			ID: fmt.Sprintf("msg_session_%03d", k), Type: "message", Role: "assistant", Model: Model,
			Content: []block{call(k + 1)}, StopReason: "tool_use",
			Usage: usage{InputTokens: 3, CacheCreationInputTokens: 400 + 10*k, CacheReadInputTokens: 22_000 + 500*k, OutputTokens: 40},
		}
		if k == n-1 {
			resp.Content, resp.StopReason = []block{{Type: "text", Text: "Done."}}, "end_turn"
		}
		reqJSON, err := json.Marshal(req)
		if err != nil {
			panic(err)
		}
		respJSON, err := json.Marshal(resp)
		if err != nil {
			panic(err)
		}
		out = append(out, fmt.Appendf(nil, `{"ts":%d,"request":%s,"response":%s}`, 1_795_879_000_000+int64(k)*1000, reqJSON, respJSON))

		step := k + 1
		msgs = append(msgs,
			message{Role: "assistant", Content: []block{call(step)}},
			message{Role: "user", Content: []block{{Type: "tool_result", ToolUseID: call(step).ID, Content: toolResult(step), IsError: &f}}})
		if step%reminderEvery == 0 {
			msgs = append(msgs, message{Role: "system", Content: "The user hasn't heard from you in a while. " + words(uint64(step), 80)})
		}
	}
	return out
}
