package runner

import (
	"encoding/json"
	"strings"
	"unicode"
)

// Bounds on the fields of a hook payload the runner keeps: a payload comes
// from the agent's side of the socket and is untrusted.
const (
	maxHookName   = 256
	maxHookSource = 64
)

// hookPayload is the part of a Claude Code hook input the runner reads.
type hookPayload struct {
	HookEventName    string          `json:"hook_event_name"`
	NotificationType string          `json:"notification_type"`
	Message          string          `json:"message"`
	ToolName         string          `json:"tool_name"`
	ToolInput        json.RawMessage `json:"tool_input"`
	ToolResponse     json.RawMessage `json:"tool_response"`
	Source           string          `json:"source"`
}

// ParseHook maps one Claude Code shaped hook payload to the events it means
// (spec: Live activity state):
//
//	UserPromptSubmit                           TurnStart
//	Stop                                       TurnEnd
//	Notification permission_prompt,
//	  elicitation_dialog, or a message saying
//	  it needs permission or input             Blocked
//	Notification idle_prompt                   Unblocked
//	PreToolUse / PostToolUse                   ToolStart / ToolEnd (tool, input, result)
//	SessionStart                               SessionStart (source)
//
// Anything else, and anything malformed, means nothing. The Claude Code
// adapter and the plain adapter both use it.
func ParseHook(payload json.RawMessage) []Event {
	var p hookPayload
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	switch p.HookEventName {
	case "UserPromptSubmit":
		return []Event{{Kind: TurnStart}}
	case "Stop":
		return []Event{{Kind: TurnEnd}}
	case "Notification":
		switch p.NotificationType {
		case "permission_prompt", "elicitation_dialog":
			return []Event{{Kind: Blocked}}
		case "idle_prompt":
			return []Event{{Kind: Unblocked}}
		case "":
			msg := strings.ToLower(p.Message)
			switch {
			case strings.Contains(msg, "waiting for your input"):
				// Claude Code's idle prompt when the type is absent.
				return []Event{{Kind: Unblocked}}
			case strings.Contains(msg, "permission"), strings.Contains(msg, "needs your input"),
				strings.Contains(msg, "needs input"):
				return []Event{{Kind: Blocked}}
			}
		}
		return nil
	case "PreToolUse", "PostToolUse":
		name, ok := cleanField(p.ToolName, maxHookName)
		if !ok {
			return nil
		}
		e := Event{Kind: ToolStart, Tool: name, ToolInput: jsonOrNil(p.ToolInput)}
		if p.HookEventName == "PostToolUse" {
			e.Kind = ToolEnd
			e.ToolResult = jsonOrNil(p.ToolResponse)
		}
		return []Event{e}
	case "SessionStart":
		src, _ := cleanField(p.Source, maxHookSource)
		return []Event{{Kind: SessionStart, Source: src}}
	}
	return nil
}

// cleanField accepts a short single-line name.
func cleanField(s string, max int) (string, bool) {
	if s == "" || len(s) > max || strings.ContainsFunc(s, unicode.IsControl) {
		return "", false
	}
	return s, true
}

// jsonOrNil keeps a JSON value that is present and not null.
func jsonOrNil(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(v) == "null" || !json.Valid(v) {
		return nil
	}
	return v
}
