package runner

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestActivityStateMachine(t *testing.T) {
	ev := func(k EventKind) Event { return Event{Kind: k} }
	tests := []struct {
		name    string
		events  []Event
		want    []ActivityState // state after each event
		changes []bool
	}{
		{"zero value is idle", nil, nil, nil},
		{"turn start works, turn end idles", []Event{ev(TurnStart), ev(TurnEnd)},
			[]ActivityState{StateWorking, StateIdle}, []bool{true, true}},
		{"blocked beats working", []Event{ev(TurnStart), ev(Blocked), ev(ToolStart)},
			[]ActivityState{StateWorking, StateBlocked, StateBlocked}, []bool{true, true, false}},
		{"idle prompt clears blocked", []Event{ev(TurnStart), ev(Blocked), ev(Unblocked)},
			[]ActivityState{StateWorking, StateBlocked, StateWorking}, nil},
		{"turn end clears blocked", []Event{ev(TurnStart), ev(Blocked), ev(TurnEnd)},
			[]ActivityState{StateWorking, StateBlocked, StateIdle}, nil},
		{"blocked outside a turn", []Event{ev(Blocked), ev(Unblocked)},
			[]ActivityState{StateBlocked, StateIdle}, nil},
		{"a turn's end closes a tool whose end never came", []Event{ev(TurnStart), ev(ToolStart), ev(TurnEnd), ev(ToolEnd)},
			[]ActivityState{StateWorking, StateWorking, StateIdle, StateIdle}, []bool{true, false, true, false}},
		{"a denied tool, blocked, then the turn ends", []Event{ev(TurnStart), ev(ToolStart), ev(ToolStart), ev(Blocked), ev(TurnEnd)},
			[]ActivityState{StateWorking, StateWorking, StateWorking, StateBlocked, StateIdle}, nil},
		{"a turn's start closes tools left from before", []Event{ev(ToolStart), ev(TurnStart), ev(TurnEnd)},
			[]ActivityState{StateWorking, StateWorking, StateIdle}, nil},
		{"nested tools", []Event{ev(ToolStart), ev(ToolStart), ev(ToolEnd), ev(ToolEnd)},
			[]ActivityState{StateWorking, StateWorking, StateWorking, StateIdle}, nil},
		{"in-flight never below zero", []Event{ev(ToolEnd), ev(ToolEnd), ev(ToolStart), ev(ToolEnd)},
			[]ActivityState{StateIdle, StateIdle, StateWorking, StateIdle}, []bool{false, false, true, true}},
		{"a tool that ran after its prompt resumes the turn", []Event{ev(TurnStart), ev(ToolStart), ev(Blocked), ev(ToolEnd)},
			[]ActivityState{StateWorking, StateWorking, StateBlocked, StateWorking}, nil},
		{"a new prompt resumes", []Event{ev(Blocked), ev(TurnStart)},
			[]ActivityState{StateBlocked, StateWorking}, nil},
		{"session start changes nothing", []Event{{Kind: SessionStart, Source: "compact"}},
			[]ActivityState{StateIdle}, []bool{false}},
		{"an approval blocks until decided", []Event{ev(TurnStart), ev(ToolStart), ev(ApprovalWait), ev(ApprovalDone)},
			[]ActivityState{StateWorking, StateWorking, StateBlocked, StateWorking}, []bool{true, false, true, true}},
		{"blocked while any approval waits", []Event{ev(TurnStart), ev(ApprovalWait), ev(ApprovalWait), ev(ApprovalDone), ev(ApprovalDone)},
			[]ActivityState{StateWorking, StateBlocked, StateBlocked, StateBlocked, StateWorking}, nil},
		{"a parallel tool's end does not unblock an approval", []Event{ev(TurnStart), ev(ToolStart), ev(ApprovalWait), ev(ToolEnd)},
			[]ActivityState{StateWorking, StateWorking, StateBlocked, StateBlocked}, nil},
		{"turn end forgets the approvals", []Event{ev(TurnStart), ev(ApprovalWait), ev(TurnEnd), ev(ApprovalDone)},
			[]ActivityState{StateWorking, StateBlocked, StateIdle, StateIdle}, []bool{true, true, true, false}},
		{"approvals never below zero", []Event{ev(ApprovalDone), ev(ApprovalWait)},
			[]ActivityState{StateIdle, StateBlocked}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var a Activity
			require.Equal(t, StateIdle, a.State())
			for i, e := range tc.events {
				changed := a.Apply(e)
				require.Equal(t, tc.want[i], a.State(), "after event %d", i)
				require.GreaterOrEqual(t, a.InFlight(), 0)
				require.GreaterOrEqual(t, a.Waiting(), 0)
				if tc.changes != nil {
					require.Equal(t, tc.changes[i], changed, "change reported after event %d", i)
				}
			}
		})
	}
}

func TestParseHook(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    []Event
	}{
		{"prompt submitted", `{"hook_event_name":"UserPromptSubmit","prompt":"hi"}`, []Event{{Kind: TurnStart}}},
		{"stop", `{"hook_event_name":"Stop","stop_hook_active":false}`, []Event{{Kind: TurnEnd}}},
		{"permission prompt", `{"hook_event_name":"Notification","notification_type":"permission_prompt","message":"x"}`, []Event{{Kind: Blocked}}},
		{"elicitation", `{"hook_event_name":"Notification","notification_type":"elicitation_dialog"}`, []Event{{Kind: Blocked}}},
		{"idle prompt", `{"hook_event_name":"Notification","notification_type":"idle_prompt","message":"Claude is waiting for your input"}`, []Event{{Kind: Unblocked}}},
		{"auth success means nothing", `{"hook_event_name":"Notification","notification_type":"auth_success"}`, nil},
		{"untyped permission message", `{"hook_event_name":"Notification","message":"Claude needs your permission to use Bash"}`, []Event{{Kind: Blocked}}},
		{"untyped needs input", `{"hook_event_name":"Notification","message":"The agent needs your input"}`, []Event{{Kind: Blocked}}},
		{"untyped idle message", `{"hook_event_name":"Notification","message":"Claude is waiting for your input"}`, []Event{{Kind: Unblocked}}},
		{"untyped other message", `{"hook_event_name":"Notification","message":"hello"}`, nil},
		{"pre tool", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`,
			[]Event{{Kind: ToolStart, Tool: "Bash", ToolInput: json.RawMessage(`{"command":"ls"}`)}}},
		{"pre tool with its call id", `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{},"tool_use_id":"toolu_1"}`,
			[]Event{{Kind: ToolStart, Tool: "Write", ToolInput: json.RawMessage(`{}`), ToolUseID: "toolu_1"}}},
		{"a call id with a control character is none", `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_use_id":"a\u0007b"}`,
			[]Event{{Kind: ToolStart, Tool: "Write"}}},
		{"post tool", `{"hook_event_name":"PostToolUse","tool_name":"mcp__svc__send","tool_input":{"to":"bob"},"tool_response":[{"type":"text","text":"ok"}]}`,
			[]Event{{Kind: ToolEnd, Tool: "mcp__svc__send", ToolInput: json.RawMessage(`{"to":"bob"}`), ToolResult: json.RawMessage(`[{"type":"text","text":"ok"}]`)}}},
		{"post tool null response", `{"hook_event_name":"PostToolUse","tool_name":"Read","tool_response":null}`,
			[]Event{{Kind: ToolEnd, Tool: "Read"}}},
		{"tool without a name", `{"hook_event_name":"PreToolUse","tool_input":{}}`, nil},
		{"tool name with a newline", `{"hook_event_name":"PreToolUse","tool_name":"a\nb"}`, nil},
		{"session start compact", `{"hook_event_name":"SessionStart","source":"compact"}`, []Event{{Kind: SessionStart, Source: "compact"}}},
		{"session start overlong source", `{"hook_event_name":"SessionStart","source":"` + string(make([]byte, 0)) + `startup"}`, []Event{{Kind: SessionStart, Source: "startup"}}},
		{"unknown event", `{"hook_event_name":"SubagentStop"}`, nil},
		{"not an object", `[1,2]`, nil},
		{"not json", `{`, nil},
		{"wrong types", `{"hook_event_name":5}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ParseHook(json.RawMessage(tc.payload)))
			require.Equal(t, tc.want, NewPlain().ParseHook(json.RawMessage(tc.payload)), "plain uses the same mapping")
		})
	}
}

func FuzzParseHook(f *testing.F) {
	f.Add([]byte(`{"hook_event_name":"PostToolUse","tool_name":"x","tool_response":{"a":1}}`))
	f.Add([]byte(""))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range ParseHook(b) {
			if e.ToolResult != nil && !json.Valid(e.ToolResult) {
				t.Fatal("invalid JSON result kept")
			}
		}
	})
}
