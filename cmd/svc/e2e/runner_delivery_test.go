package e2e

// The delivery contract end to end with the scripted plain agent
// (docs/RUNNER.md, Delivery contract): exactly one turn per message across
// every way a runner can stop, a first start's backlog, the re-brief that
// does not double the replay, and the state file of an earlier runner.
// The same cases with the real Claude Code and Codex are in
// runner_claude_test.go and runner_codex_test.go.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/cmd/internal/runner"
)

// agentPID is the agent's pid as the runner logged it at start.
func agentPID(t *testing.T, c *clientChild) int {
	t.Helper()
	m := regexp.MustCompile(`\(agent \w+, pid (\d+)\)`).FindStringSubmatch(c.stderr.String())
	require.NotNil(t, m, "no agent pid in the runner's log:\n%s", c.stderr)
	pid, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return pid
}

// stopModes are the ways a runner stops mid-turn.
var stopModes = []struct {
	name string
	stop func(t *testing.T, c *clientChild)
}{
	{"SIGTERM", func(t *testing.T, c *clientChild) {
		require.NoError(t, c.cmd.Process.Signal(syscall.SIGTERM))
		require.Equal(t, 0, c.wait(t), "stderr:\n%s", c.stderr)
	}},
	{"kill -9 of the tree", func(t *testing.T, c *clientChild) {
		// A host or container crash: the runner and its agent's whole
		// process group at once.
		pgid := agentPID(t, c)
		require.NoError(t, c.cmd.Process.Kill())
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		c.wait(t)
	}},
	{"kill -9 of the runner alone", func(t *testing.T, c *clientChild) {
		pid := agentPID(t, c)
		require.NoError(t, c.cmd.Process.Kill())
		c.wait(t)
		// The agent dies with its runner: it must not go on with a turn
		// no runner will acknowledge.
		require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, runTimeout, 10*time.Millisecond,
			"the agent (pid %d) outlived its runner", pid)
	}},
}

// A message whose turn was in progress when the runner stopped, however it
// stopped, is delivered again by the next runner, once, with a header
// saying so; the message sent while no runner ran follows; nothing else.
func TestRunnerRestartMidTurnDeliversOnce(t *testing.T) {
	for _, mode := range stopModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := mustStartSvc(t, procOpts{})
			d := restDriver{p}
			admin := p.adminToken(t)
			agentTok := createMember(t, d, bearer(admin), "agent")
			aliceTok := createMember(t, d, bearer(admin), "alice")

			r := startRunner(t, p, agentTok, t.TempDir(), nil)
			id0 := push(t, p, aliceTok, obj{"to": "agent", "body": "zero"})
			r.waitTurns(t, 1)
			waitPosition(t, p, agentTok, "agent", id0)
			id1 := push(t, p, aliceTok, obj{"to": "agent", "body": "HOLD one"})
			got := r.waitTurns(t, 2)
			require.Equal(t, id1, got[1].ID)
			st := mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": "agent"})
			require.Equal(t, obj{"position": id0, "turnActive": true, "turnMessageId": id1}, pick(st, "position", "turnActive", "turnMessageId"),
				"the turn is recorded before the agent gets it")

			mode.stop(t, r.clientChild)
			st = mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": "agent"})
			require.Equal(t, obj{"position": id0, "turnActive": true, "turnMessageId": id1}, pick(st, "position", "turnActive", "turnMessageId"),
				"stopped mid-turn: nothing acknowledged")
			id2 := push(t, p, aliceTok, obj{"to": "agent", "body": "two"})

			r2 := startRunner(t, p, agentTok, t.TempDir(), nil, "E2E_NO_HOLD=1")
			got = r2.waitTurns(t, 2)
			waitPosition(t, p, agentTok, "agent", id2)
			time.Sleep(100 * time.Millisecond)
			got = r2.turns(t)
			require.Len(t, got, 2, "nothing more")
			require.Equal(t, id1, got[0].ID)
			require.True(t, strings.HasPrefix(got[0].Text, "[svc] message "+id1+" from alice in DM (level info) (redelivery)\n"), got[0].Text)
			require.Contains(t, got[0].Text, "HOLD one")
			require.Equal(t, id2, got[1].ID)
			require.True(t, strings.HasPrefix(got[1].Text, "[svc] message "+id2+" from alice in DM (level info)\ntwo"), got[1].Text)
			require.Equal(t, 0, r2.term(t))
		})
	}
}

// pick keeps the keys of o that are present.
func pick(o obj, keys ...string) obj {
	out := obj{}
	for _, k := range keys {
		if v, ok := o[k]; ok {
			out[k] = v
		}
	}
	return out
}

// A member whose runner never ran gets what was addressed to it since it
// was created, in order, once: DMs, broadcasts, channel posts, sent before
// the first start and while a runner that had acknowledged nothing was
// stopped.
func TestRunnerFirstStartDeliversTheBacklog(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	aliceTok := createMember(t, d, bearer(admin), "alice")
	push(t, p, aliceTok, obj{"body": "before the agent existed"})
	agentTok := createMember(t, d, bearer(admin), "agent")
	ch := mustCall(t, d, bearer(aliceTok), "CreateChannel", obj{"slug": "ops"})
	mustCall(t, d, bearer(aliceTok), "AddChannelMember", obj{"channel": "ops", "member": "agent"})
	want := []string{
		// HOLD: the scripted agent holds only a turn whose text says
		// HOLD; this one must not end under the first runner.
		push(t, p, aliceTok, obj{"to": "agent", "body": "dm one HOLD"}),
		push(t, p, aliceTok, obj{"body": "to everyone"}),
		push(t, p, aliceTok, obj{"body": "in ops", "data": obj{"thread": "chan:" + ch["id"].(string)}}),
	}
	st := mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": "agent"})
	require.NotContains(t, st, "position")
	require.Equal(t, 0.0, st["backlogOmitted"])

	// A runner that acknowledges nothing (its first turn holds) and stops.
	r := startRunner(t, p, agentTok, t.TempDir(), nil)
	want = append(want, push(t, p, aliceTok, obj{"to": "agent", "body": "while the first turn holds"}))
	ids := func(turns []agentTurn) []string {
		var out []string
		for _, tr := range turns {
			out = append(out, tr.ID)
		}
		return out
	}
	require.Equal(t, want[:1], ids(r.waitTurns(t, 1)))
	// One turn at a time: while the first is held nothing else goes, and
	// nothing is acknowledged.
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, want[:1], ids(r.turns(t)), "one turn at a time: the first waits")
	st = mustCall(t, d, bearer(agentTok), "GetDelivery", obj{"name": "agent"})
	require.Equal(t, obj{"turnActive": true, "turnMessageId": want[0]}, pick(st, "position", "turnActive", "turnMessageId"))
	require.NoError(t, r.cmd.Process.Kill())
	r.wait(t)
	want = append(want, push(t, p, aliceTok, obj{"to": "agent", "body": "while it was down"}))

	r2 := startRunner(t, p, agentTok, t.TempDir(), nil, "E2E_NO_HOLD=1")
	got := r2.waitTurns(t, len(want))
	waitPosition(t, p, agentTok, "agent", want[len(want)-1])
	time.Sleep(100 * time.Millisecond)
	got = r2.turns(t)
	require.Equal(t, want, ids(got), "the backlog in order, once")
	require.Contains(t, got[0].Text, "(redelivery)", "the first one's turn was open")
	require.Contains(t, got[2].Text, "from alice in #ops")
	for _, tr := range got {
		require.NotContains(t, tr.Text, "before the agent existed")
		require.NotContains(t, tr.Text, "older message", "nothing was left out")
	}
	require.Equal(t, 0, r2.term(t))
}

// An objective assigned while the runner was down is one turn: the
// re-brief at attach states it, and its replayed announcement is
// acknowledged without a turn of its own.
func TestRunnerObjectiveWhileDownIsOneTurn(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "agent")
	create := func(title string) string {
		o := mustCall(t, d, bearer(admin), "CreateObjective", obj{"title": title, "outcome": title + " done", "assignee": "agent"})
		if inner, ok := o["objective"].(obj); ok {
			o = inner
		}
		return o["id"].(string)
	}
	r := startRunner(t, p, agentTok, t.TempDir(), nil)
	before := create("Ship v1")
	got := r.waitTurns(t, 1)
	require.Contains(t, got[0].Text, "from admin in obj:"+before, "assigned while running: its announcement")
	waitPosition(t, p, agentTok, "agent", got[0].ID)
	require.Equal(t, 0, r.term(t))

	during := create("Write docs")
	h := mustCall(t, d, bearer(agentTok), "History", obj{"thread": "obj:" + during})
	announcement := listOf(t, h, "messages")[0]["id"].(string)
	r2 := startRunner(t, p, agentTok, t.TempDir(), nil)
	got = r2.waitTurns(t, 1)
	waitPosition(t, p, agentTok, "agent", announcement)
	time.Sleep(300 * time.Millisecond)
	got = r2.turns(t)
	require.Len(t, got, 1, "%v", got)
	require.Equal(t, "context_refresh", got[0].Meta["kind"])
	require.Contains(t, got[0].Text, "- "+before+" [active] Ship v1")
	require.Contains(t, got[0].Text, "- "+during+" [active] Write docs")
	require.Equal(t, 0, r2.term(t))
}

// A runner of an earlier version kept the position in a local state file:
// the first runner that finds the broker without a position gives it that
// one (no backlog replayed from the start) and removes the file.
func TestRunnerSeedsThePositionFromAnEarlierStateFile(t *testing.T) {
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "agent")
	aliceTok := createMember(t, d, bearer(admin), "alice")
	seen := push(t, p, aliceTok, obj{"to": "agent", "body": "handled by the earlier runner"})
	fresh := push(t, p, aliceTok, obj{"to": "agent", "body": "new"})

	state := t.TempDir()
	file := runner.StatePath(state, p.base, "agent")
	b, err := json.Marshal(obj{"url": p.base, "member": "agent", "lastId": seen})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o600))

	r := startRunner(t, p, agentTok, state, nil)
	got := r.waitTurns(t, 1)
	waitPosition(t, p, agentTok, "agent", fresh)
	time.Sleep(100 * time.Millisecond)
	require.Len(t, r.turns(t), 1)
	require.Equal(t, fresh, got[0].ID)
	_, err = os.Stat(file)
	require.ErrorIs(t, err, os.ErrNotExist, "the broker's position is the authority now")
	ents, err := os.ReadDir(filepath.Dir(file))
	require.NoError(t, err)
	require.Empty(t, ents)
	require.Equal(t, 0, r.term(t))
}
