package e2e

// The loop guard with the real agents (issue 23's target): the real Claude
// Code and the real Codex, each under `svc runner`, against stub models
// that answer every message they are shown by sending one to the other
// agent. A person's DM starts them; the broker must stop the exchange
// within 20 messages and tell the admin.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
)

const (
	// lgStopWait bounds the whole exchange up to the notice: nine turns of
	// two real agents, each through the toolbox, on a loaded machine.
	lgStopWait = 5 * time.Minute
	// lgQuiet is how long nothing may happen after the stop for the
	// exchange to count as over: the agents idle, no model call, no
	// message. A resumed loop calls the model within a second.
	lgQuiet = 5 * time.Second
	// lgTarget is issue 23's bound on the messages two always-replying
	// agents exchange after a person's DM.
	lgTarget = 20
)

// lgMarker is in every message the agents send each other, so the stubs
// answer exactly the turns a message starts.
const lgMarker = "[svc] message "

// alwaysClaude answers every turn a message starts with a send to peer and
// ends the turn once the send's result is back.
func alwaysClaude(peer string) func(agenttest.Request) (agenttest.Turn, bool) {
	in, _ := json.Marshal(obj{"to": peer, "body": "Interesting. What do you think, " + peer + "?"})
	return func(q agenttest.Request) (agenttest.Turn, bool) {
		switch {
		case len(q.ToolResults()) > 0:
			return agenttest.Turn{Text: "Sent."}, true
		case q.HasMarker(lgMarker):
			return agenttest.Turn{ToolName: "mcp__svc__send", ToolInput: in}, true
		}
		return agenttest.Turn{}, false
	}
}

// alwaysCodex is alwaysClaude for the Responses API.
func alwaysCodex(peer string) func(agenttest.RRequest) (agenttest.RTurn, bool) {
	in, _ := json.Marshal(obj{"to": peer, "body": "Interesting. What do you think, " + peer + "?"})
	return func(q agenttest.RRequest) (agenttest.RTurn, bool) {
		items := q.Items()
		switch {
		case len(items) > 0 && items[len(items)-1].Type == "function_call_output":
			return agenttest.RTurn{Text: "Sent."}, true
		case q.HasMarker(lgMarker):
			return agenttest.RTurn{Call: "send", Namespace: "mcp__svc", Arguments: in}, true
		}
		return agenttest.RTurn{}, false
	}
}

func TestLoopGuardRealAgents(t *testing.T) {
	claude, codex := agenttest.Claude(t), agenttest.Codex(t) // installed before any broker starts
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	claudeTok := createMember(t, d, bearer(admin), "claude1")
	codexTok := createMember(t, d, bearer(admin), "codex1")
	aliceTok := createMember(t, d, bearer(admin), "alice")

	mc := agenttest.NewModel(t).AnswerWith(alwaysClaude("codex1"))
	mx := agenttest.NewResponses(t).AnswerWith(alwaysCodex("claude1"))
	adminStream := p.subscribeSSE(t, admin, "admin", "")
	aliceStream := p.subscribeSSE(t, aliceTok, "alice", "")
	rc := startClaudeRunner(t, p, claudeTok, claude, mc)
	rx := startCodexRunner(t, p, codexTok, "codex1", codex, mx)

	start := push(t, p, aliceTok, obj{"to": "claude1", "body": "Please talk the release over with codex1."})
	began := time.Now()

	// The notice reaches the admin.
	var notice obj
	deadline := time.After(lgStopWait)
	for notice == nil {
		select {
		case ev, ok := <-adminStream.events:
			require.True(t, ok, "the admin's stream ended: %v", adminStream.endErr())
			if ev.event == "message" {
				if m := requireMessageEvent(t, ev); m["from"] == "svc:loop-guard" {
					notice = m
				}
			}
		case <-rc.done:
			t.Fatalf("claude1's runner exited (code %d)", rc.cmd.ProcessState.ExitCode())
		case <-rx.done:
			t.Fatalf("codex1's runner exited (code %d)", rx.cmd.ProcessState.ExitCode())
		case <-deadline:
			t.Fatalf("no agent_loop_stopped notice within %s; %d model calls so far", lgStopWait, len(mc.Requests())+len(mx.Requests()))
		}
	}
	stoppedAfter := time.Since(began)
	data, _ := notice["data"].(obj)
	require.Equal(t, "agent_loop_stopped", data["kind"], "%v", notice)
	require.Equal(t, []any{"claude1", "codex1"}, data["agents"], "%v", notice)
	require.Equal(t, "dm:claude1:codex1", data["conversation"], "%v", notice)
	require.Equal(t, "loop:"+start, data["thread"], "the chain is named by alice's DM: %v", notice)
	// alice started the chain: she is told too.
	for {
		ev := aliceStream.next(t)
		if ev.event == "message" && requireMessageEvent(t, ev)["id"] == notice["id"] {
			break
		}
	}

	// Then nothing: both agents idle, no model call and no message for
	// lgQuiet.
	calls := func() int { return len(mc.Requests()) + len(mx.Requests()) }
	exchanged := func() []obj {
		h := listOf(t, mustCall(t, d, bearer(claudeTok), "History", obj{"with": "codex1", "limit": 500}), "messages")
		var out []obj
		for _, m := range h {
			if m["id"].(string) > start {
				out = append(out, m)
			}
		}
		return out
	}
	quietSince, lastCalls, lastMsgs := time.Now(), calls(), len(exchanged())
	for time.Since(quietSince) < lgQuiet {
		require.Less(t, time.Since(began), lgStopWait+time.Minute, "the agents never went quiet: %d messages, %d model calls", lastMsgs, lastCalls)
		time.Sleep(200 * time.Millisecond)
		busy := false
		for _, m := range []string{"claude1", "codex1"} {
			if _, ok := presenceOf(t, p, bearer(admin), m)["activity"]; ok {
				busy = true
			}
		}
		if n, k := calls(), len(exchanged()); busy || n != lastCalls || k != lastMsgs {
			quietSince, lastCalls, lastMsgs = time.Now(), n, k
		}
	}

	msgs := exchanged()
	t.Logf("loop guard: %d messages exchanged between claude1 and codex1 after alice's DM, %d model calls, notice %.1f s after the DM",
		len(msgs), lastCalls, stoppedAfter.Seconds())
	require.LessOrEqual(t, len(msgs), lgTarget, "issue 23's target")
	// Oldest first: hop 1 to 8 woke the other agent, hop 9 was stopped.
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	require.Len(t, msgs, 9, "one send per turn, eight hops, the ninth stopped")
	prev := start
	for i, m := range msgs {
		hop := i + 1
		requireChain(t, m, hop, prev, hop > 8)
		prev = m["id"].(string)
	}
	require.Equal(t, msgs[8]["id"], data["message"], "%v", notice)

	// The stopped message reached codex1's runner and was skipped, not
	// given to Codex.
	require.Contains(t, rx.stderr.String(), "message "+msgs[8]["id"].(string)+" from claude1 skipped: the loop guard stopped its reply chain")
	for _, q := range mx.Requests() {
		require.NotContains(t, q.LastUserText(), msgs[8]["id"].(string), "the stopped message is no turn")
	}
	for _, log := range []string{rc.stderr.String(), rx.stderr.String()} {
		require.NotContains(t, log, "WARNING: DATA RACE")
		require.False(t, strings.Contains(log, claudeTok) || strings.Contains(log, codexTok), "no token is logged")
	}
}
