package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// claudeBody is a request body shaped as Claude Code's: tool definitions,
// a system prompt, and turns of text, code and tool output with newlines,
// quotes, terminal escapes and non-ASCII text, about size bytes of JSON.
func claudeBody(size int) string {
	tools := []map[string]any{}
	for i := range 20 {
		tools = append(tools, map[string]any{
			"name":         fmt.Sprintf("mcp__svc__tool_%d", i),
			"description":  strings.Repeat("Sends a message to a member or a channel; see the docs. ", 8),
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}}},
		})
	}
	var msgs []map[string]any
	req := map[string]any{"model": "claude-sonnet-4-5", "system": strings.Repeat("You are Claude Code.\n", 40), "tools": tools}
	for i := 0; ; i++ {
		b, _ := json.Marshal(req)
		if len(b) >= size {
			return string(b)
		}
		msgs = append(msgs,
			map[string]any{"role": "user", "content": fmt.Sprintf("Run the tests in pkg %d and fix what fails — “quoted” 100%% done?\n", i)},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": "Bash", "input": map[string]any{"command": "go test ./... 2>&1 | tail -20"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", i),
				"content": "\x1b[32mok\x1b[0m  \tsvc/server\t0.4s\n--- FAIL: TestX (0.00s)\n    x_test.go:12: got \"a\", want \"b\"\nFAIL\n"}}},
		)
		req["messages"] = msgs
	}
}

func BenchmarkRedactBody(b *testing.B) {
	body := claudeBody(60 << 10)
	for _, n := range []int{0, 1, 5} {
		var secrets []string
		for i := range n {
			secrets = append(secrets, fmt.Sprintf("sk-secret-value-%d-Zq9", i))
		}
		r := New(secrets...)
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if out := r.String(body); len(out) != len(body) {
					b.Fatal("redacted what holds no secret")
				}
			}
		})
	}
}

// BenchmarkJSONValid is a yardstick for BenchmarkRedactBody on a busy
// machine: one validating pass of encoding/json over the same body.
func BenchmarkJSONValid(b *testing.B) {
	body := []byte(claudeBody(60 << 10))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkRedactEchoes is BenchmarkRedactBody's body with one secret
// and Options.Echoes, the tool-call path (a 4 MiB answer is the most a
// tool call reads).
func BenchmarkRedactEchoes(b *testing.B) {
	one := claudeBody(60 << 10)
	for _, n := range []int{1, 64} { // 60 KiB, about 4 MiB
		body := "[" + strings.Repeat(one+",", n-1) + one + "]"
		r := NewWith(Options{Echoes: true}, "sk-secret-value-0-Zq9")
		b.Run(fmt.Sprintf("bytes=%d", len(body)), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if out := r.String(body); len(out) != len(body) {
					b.Fatal("redacted what holds no secret")
				}
			}
		})
	}
}
