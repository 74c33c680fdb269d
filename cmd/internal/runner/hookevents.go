package runner

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Bounds on a hook payload: it comes from the agent's side of the socket
// and is untrusted.
const (
	// maxHookPayload bounds a hook payload ParseHook reads.
	maxHookPayload = 4 << 20
	// maxHookToolName bounds a tool name taken from a hook payload.
	maxHookToolName = 256
	// maxHookSource bounds SessionStart's source.
	maxHookSource = 32
)

// claudeHook is the part of a Claude Code hook payload the runner reads.
type claudeHook struct {
	Event            string          `json:"hook_event_name"`
	NotificationType string          `json:"notification_type"`
	Message          string          `json:"message"`
	Source           string          `json:"source"`
	ToolName         string          `json:"tool_name"`
	ToolInput        json.RawMessage `json:"tool_input"`
	ToolResponse     json.RawMessage `json:"tool_response"`
	Error            json.RawMessage `json:"error"`
	ToolUseID        string          `json:"tool_use_id"`
}

// ParseHook maps one Claude Code shaped hook payload to the events it means
// (docs/RUNNER.md):
//
//	UserPromptSubmit                           TurnStart
//	Stop                                       TurnEnd
//	Notification permission_prompt,
//	  elicitation_dialog, or (releases before
//	  notification_type) a message saying it
//	  needs permission                         Blocked
//	Notification idle_prompt                   Unblocked
//	PreToolUse                                 ToolStart (tool, input)
//	PostToolUse / PostToolUseFailure           ToolEnd (tool, input, result or error)
//	SessionStart                               SessionStart (source)
//
// Anything else, and anything malformed or oversized, means nothing. The
// Claude Code adapter and the plain adapter both use it; the events that
// fire in headless mode are measured in docs/RUNNER-CLAUDE.md.
func ParseHook(payload json.RawMessage) []Event {
	if len(payload) == 0 || len(payload) > maxHookPayload {
		return nil
	}
	var h claudeHook
	if json.Unmarshal(payload, &h) != nil {
		return nil
	}
	switch h.Event {
	case "UserPromptSubmit":
		return []Event{{Kind: TurnStart}}
	case "Stop":
		return []Event{{Kind: TurnEnd}}
	case "Notification":
		switch h.NotificationType {
		case "permission_prompt", "elicitation_dialog":
			return []Event{{Kind: Blocked}}
		case "idle_prompt":
			return []Event{{Kind: Unblocked}}
		case "":
			// Releases before notification_type: the message says it.
			msg := strings.ToLower(h.Message)
			switch {
			case strings.Contains(msg, "waiting for your input"):
				return []Event{{Kind: Unblocked}}
			case strings.Contains(msg, "needs your permission"), strings.Contains(msg, "needs your input"):
				return []Event{{Kind: Blocked}}
			}
		}
		return nil
	case "PreToolUse", "PostToolUse", "PostToolUseFailure":
		name, ok := toolName(h.ToolName)
		if !ok {
			return nil
		}
		ev := Event{Kind: ToolStart, Tool: name, ToolInput: jsonOrNil(h.ToolInput), ToolUseID: toolUseID(h.ToolUseID)}
		switch h.Event {
		case "PostToolUse":
			ev.Kind, ev.ToolResult = ToolEnd, jsonOrNil(h.ToolResponse)
		case "PostToolUseFailure":
			ev.Kind = ToolEnd
			if e := jsonOrNil(h.Error); e != nil {
				ev.ToolResult, _ = json.Marshal(map[string]json.RawMessage{"error": e})
			}
		}
		return []Event{ev}
	case "SessionStart":
		src := h.Source
		if src == "" || len(src) > maxHookSource || !printableASCII(src) {
			src = "startup"
		}
		return []Event{{Kind: SessionStart, Source: src}}
	}
	return nil
}

// toolName checks a tool name from a payload: non-empty, bounded, no
// control characters.
func toolName(s string) (string, bool) {
	if s == "" || len(s) > maxHookToolName || !utf8.ValidString(s) {
		return "", false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", false
		}
	}
	return s, true
}

// toolUseID checks a tool call's id from a payload: printable ASCII, at
// most 256 bytes; anything else is no id.
func toolUseID(s string) string {
	if len(s) > maxHookToolName || !printableASCII(s) {
		return ""
	}
	return s
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// jsonOrNil drops an absent or null value.
func jsonOrNil(v json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || string(t) == "null" || !json.Valid(t) {
		return nil
	}
	return t
}
