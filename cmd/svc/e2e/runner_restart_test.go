package e2e

// The delivery contract (docs/RUNNER.md) with the real Claude Code and the
// real Codex under `svc runner`, each scripted by its stub model: every
// restart case answers each message exactly once. A message is "answered"
// when the agent's toolbox `send` of its answer reaches the sender; the
// stub holds the model call of the first message's turn while the runner
// is stopped, and scripts that same call as a reply too, so an agent that
// outlived its runner and got its answer would reply a second time.
//
// Each case logs one line "delivery figures: agent=… case=… sent=N
// answered=N duplicated=N" (go test -v … | grep 'delivery figures').

import (
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
)

// realAgent is one real agent under a runner, with its stub model.
type realAgent struct {
	member string
	// start starts a runner for the member's token, waiting until it holds
	// its stream.
	start func(t *testing.T, p *proc, tok string) *rcRunner
	// answer scripts the turn of the message holding marker: a toolbox
	// send of body to alice, then a closing text. With hold, the call is
	// held until hold closes and has no closing text scripted: it is the
	// call a stopped runner's agent never gets the answer of.
	answer func(marker, body string, hold <-chan struct{})
	// text scripts a text answer to the turn holding marker.
	text func(marker, text string)
	// turns are the latest user texts of the model calls holding marker.
	turns   func(marker string) []string
	pending func() int
}

func claudeAgent(t *testing.T) realAgent {
	bin := agenttest.Claude(t)
	m := agenttest.NewModel(t)
	return realAgent{
		member: "claude1",
		start:  func(t *testing.T, p *proc, tok string) *rcRunner { return startClaudeRunner(t, p, tok, bin, m) },
		answer: func(marker, body string, hold <-chan struct{}) {
			in, err := json.Marshal(obj{"to": "alice", "body": body})
			require.NoError(t, err)
			m.Script(agenttest.Turn{Marker: marker, ToolName: "mcp__svc__send", ToolInput: in, Hold: hold})
			if hold == nil {
				m.Script(agenttest.Turn{Text: "Answered."})
			}
		},
		text: func(marker, text string) { m.Script(agenttest.Turn{Marker: marker, Text: text}) },
		turns: func(marker string) []string {
			var out []string
			for _, q := range m.AgentTurns() {
				if q.HasMarker(marker) && len(q.ToolResults()) == 0 {
					out = append(out, q.LastUserText())
				}
			}
			return out
		},
		pending: m.Pending,
	}
}

func codexAgent(t *testing.T) realAgent {
	bin := agenttest.Codex(t)
	m := agenttest.NewResponses(t)
	return realAgent{
		member: "codex1",
		start: func(t *testing.T, p *proc, tok string) *rcRunner {
			return startCodexRunner(t, p, tok, "codex1", bin, m)
		},
		answer: func(marker, body string, hold <-chan struct{}) {
			args, err := json.Marshal(obj{"to": "alice", "body": body})
			require.NoError(t, err)
			m.Script(agenttest.RTurn{Marker: marker, Call: "send", Namespace: "mcp__svc", Arguments: args, Hold: hold})
			if hold == nil {
				m.Script(agenttest.RTurn{Text: "Answered."})
			}
		},
		text: func(marker, text string) { m.Script(agenttest.RTurn{Marker: marker, Text: text}) },
		turns: func(marker string) []string {
			var out []string
			for _, q := range m.Requests() {
				// A turn's first call ends with the user message; the
				// follow-up after a function call ends with its output.
				items := q.Items()
				if q.IsAgentTurn() && q.HasMarker(marker) && len(items) > 0 && items[len(items)-1].Type == "message" && items[len(items)-1].Role == "user" {
					out = append(out, q.LastUserText())
				}
			}
			return out
		},
		pending: m.Pending,
	}
}

// answers counts, per body, the messages the agent sent alice.
func answers(t *testing.T, p *proc, aliceTok, member string) map[string]int {
	t.Helper()
	h := mustCall(t, restDriver{p}, bearer(aliceTok), "History", obj{"with": member, "limit": 500})
	out := map[string]int{}
	for _, m := range listOf(t, h, "messages") {
		if m["from"] == member {
			out[m["body"].(string)]++
		}
	}
	return out
}

// restartCase is one way a runner stops in the middle of a turn.
type restartCase struct {
	name string
	stop func(t *testing.T, r *rcRunner)
}

// killTree is a host or container crash: the runner and its agent's
// whole process group at once.
func killTree(t *testing.T, r *rcRunner) {
	pgid := agentPID(t, r.clientChild)
	require.NoError(t, r.cmd.Process.Kill())
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-r.done
}

var midTurnStops = []restartCase{
	{"kill -9 of the tree", killTree},
	{"SIGTERM mid-turn", func(t *testing.T, r *rcRunner) {
		require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-r.done:
		case <-time.After(rcStopWait):
			t.Fatalf("the runner did not exit within %s of SIGTERM", rcStopWait)
		}
		require.Equal(t, 0, r.cmd.ProcessState.ExitCode(), "a signal exits 0")
	}},
	{"kill -9 of the runner alone", func(t *testing.T, r *rcRunner) {
		pid := agentPID(t, r.clientChild)
		require.NoError(t, r.cmd.Process.Kill())
		<-r.done
		require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, rcWait, rcTick,
			"the agent (pid %d) outlived its runner", pid)
	}},
}

// restartTeam is where a mid-turn restart runs: the broker the first
// runner attaches to, the one the next runner attaches to, which is also
// where alice pushes and where the outcome is read, and the tokens of the
// agent and of alice. One broker is all three (oneBroker); a runner moved
// between brokers has two (cluster_runner_test.go).
type restartTeam struct {
	first, second      *proc
	agentTok, aliceTok string
}

// oneBroker starts one broker with the agent's member and alice.
func oneBroker(t *testing.T, a realAgent) restartTeam {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), a.member)
	aliceTok := createMember(t, d, bearer(admin), "alice")
	return restartTeam{first: p, second: p, agentTok: agentTok, aliceTok: aliceTok}
}

// midTurnRestart: a DM's turn is in progress (its model call held at the
// stub) when the runner stops; a second DM comes while no runner runs; the
// next runner answers each exactly once, the first as a redelivery.
func midTurnRestart(t *testing.T, a realAgent, team restartTeam, stop func(t *testing.T, r *rcRunner)) (sent, answered, duplicated int) {
	p := team.second
	d := restDriver{p}
	agentTok, aliceTok := team.agentTok, team.aliceTok

	m1, m2 := "RS-ONE-"+a.member, "RS-TWO-"+a.member
	hold := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	a.answer(m1, "ANS "+m1, hold) // the first runner's call, held
	a.answer(m1, "ANS "+m1, nil)  // the redelivery's
	a.answer(m2, "ANS "+m2, nil)

	r := a.start(t, team.first, agentTok)
	id1 := push(t, p, aliceTok, obj{"to": a.member, "body": "First question. " + m1})
	rcEventually(t, r, "the first DM's model call", func() bool { return len(a.turns(m1)) == 1 })
	st := mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": a.member})
	require.Equal(t, id1, st["turnMessageId"], "the turn is recorded before the agent gets it: %v", st)
	stop(t, r)
	id2 := push(t, p, aliceTok, obj{"to": a.member, "body": "Second question. " + m2})

	r2 := a.start(t, p, agentTok)
	rcEventually(t, r2, "both answers", func() bool {
		got := answers(t, p, aliceTok, a.member)
		return got["ANS "+m1] >= 1 && got["ANS "+m2] >= 1
	})
	rcEventually(t, r2, "the position past the second DM", func() bool {
		st := mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": a.member})
		return st["position"] == id2 && st["turnActive"] == false
	})
	// Whatever the first call would still do, it may do now: no agent
	// should be left to take it.
	release()
	time.Sleep(time.Second)

	redelivered := a.turns(m1)
	require.Len(t, redelivered, 2, "the first DM reached the model twice: held, then redelivered")
	require.NotContains(t, redelivered[0], "(redelivery)")
	require.Contains(t, redelivered[1], "[svc] message "+id1+" from alice in DM (level info) (redelivery)")
	require.Len(t, a.turns(m2), 1)
	require.NotContains(t, a.turns(m2)[0], "(redelivery)")
	require.Zero(t, a.pending(), "every scripted call was made")
	got := answers(t, p, aliceTok, a.member)
	for _, m := range []string{m1, m2} {
		require.Equal(t, 1, got["ANS "+m], "answered exactly once: %v", got)
	}
	return 2, len(got), dupes(got)
}

func dupes(got map[string]int) int {
	n := 0
	for _, c := range got {
		n += c - 1
	}
	return n
}

// backlogFirstStart: DMs and a broadcast sent before the member's runner
// ever ran are each answered once by its first start.
func backlogFirstStart(t *testing.T, a realAgent) (sent, answered, duplicated int) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), a.member)
	aliceTok := createMember(t, d, bearer(admin), "alice")
	var markers []string
	for i := range 3 {
		mk := fmt.Sprintf("RS-BACKLOG-%d-%s", i, a.member)
		markers = append(markers, mk)
		a.answer(mk, "ANS "+mk, nil)
		body := obj{"to": a.member, "body": "Before you started. " + mk}
		if i == 1 {
			body = obj{"body": "To everyone, before you started. " + mk}
		}
		push(t, p, aliceTok, body)
	}
	r := a.start(t, p, agentTok)
	rcEventually(t, r, "every backlog message answered", func() bool {
		got := answers(t, p, aliceTok, a.member)
		for _, mk := range markers {
			if got["ANS "+mk] == 0 {
				return false
			}
		}
		return true
	})
	rcEventually(t, r, "idle", func() bool {
		_, busy := presenceOf(t, p, bearer(admin), a.member)["activity"]
		return !busy && a.pending() == 0
	})
	time.Sleep(time.Second)
	got := answers(t, p, aliceTok, a.member)
	for _, mk := range markers {
		require.Equal(t, 1, got["ANS "+mk], "answered exactly once: %v", got)
		require.Len(t, a.turns(mk), 1, "one turn for %s", mk)
	}
	return len(markers), len(got), dupes(got)
}

// objectiveWhileDown: an objective assigned while the runner was down is
// one turn, the re-brief.
func objectiveWhileDown(t *testing.T, a realAgent) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), a.member)
	r := a.start(t, p, agentTok)
	require.NoError(t, r.cmd.Process.Signal(syscall.SIGTERM))
	<-r.done

	o := mustCall(t, d, bearer(admin), "CreateObjective", obj{"title": "Ship while down", "outcome": "shipped", "assignee": a.member})
	if inner, ok := o["objective"].(obj); ok {
		o = inner
	}
	id := o["id"].(string)
	a.text("[svc] context refresh", "Noted.")
	r2 := a.start(t, p, agentTok)
	rcEventually(t, r2, "the re-brief at the model", func() bool { return a.pending() == 0 })
	h := mustCall(t, d, bearer(agentTok), "History", obj{"thread": "obj:" + id})
	announcement := listOf(t, h, "messages")[0]["id"].(string)
	rcEventually(t, r2, "the announcement acknowledged", func() bool {
		st := mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": a.member})
		return st["position"] == announcement && st["turnActive"] == false
	})
	time.Sleep(time.Second)
	turns := a.turns(id)
	require.Len(t, turns, 1, "one turn names the objective: %q", turns)
	require.Contains(t, turns[0], "[svc] context refresh: your open objectives\n- "+id+" [active] Ship while down")
}

func runRestartCases(t *testing.T, newAgent func(t *testing.T) realAgent, stops []restartCase) {
	for _, c := range stops {
		t.Run(c.name, func(t *testing.T) {
			a := newAgent(t)
			sent, answered, dup := midTurnRestart(t, a, oneBroker(t, a), c.stop)
			t.Logf("delivery figures: agent=%s case=%q sent=%d answered=%d duplicated=%d", a.member, c.name, sent, answered, dup)
		})
	}
	t.Run("first start with a backlog", func(t *testing.T) {
		a := newAgent(t)
		sent, answered, dup := backlogFirstStart(t, a)
		t.Logf("delivery figures: agent=%s case=%q sent=%d answered=%d duplicated=%d", a.member, "first start with a backlog", sent, answered, dup)
	})
	t.Run("objective assigned while down", func(t *testing.T) {
		objectiveWhileDown(t, newAgent(t))
	})
}

func TestRunnerClaudeRestarts(t *testing.T) {
	agenttest.Claude(t) // installed (once) before any broker starts
	runRestartCases(t, claudeAgent, midTurnStops)
}

func TestRunnerCodexRestarts(t *testing.T) {
	agenttest.Codex(t)
	runRestartCases(t, codexAgent, midTurnStops)
}
