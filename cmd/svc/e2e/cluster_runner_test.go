package e2e

// A runner moved from one broker to another loses no turn (issue 29), with
// the real Claude Code and the real Codex under `svc runner`: the same
// mid-turn restart as runner_restart_test.go (midTurnRestart), on two
// `svc serve` processes of one team (one PostgreSQL database, one NATS
// embedded in the test process), the way docs/OPERATIONS.md's "Several
// brokers" runs them. The agent's runner works on A; alice pushes on B
// and reads her history there. A crashes in the middle of a turn (kill -9
// of broker A and of the runner's whole tree); a second DM comes while no
// runner runs; a runner started on B finds on B the position and the turn
// left on A, and answers each DM exactly once, the first as a redelivery.
//
// Each agent logs one line "delivery figures: agent=… case=\"moved A→B\"
// sent=N answered=N duplicated=N" (go test -v … | grep 'delivery figures').

import (
	"testing"

	"svc/cmd/svc/internal/agenttest"
)

// twoBrokerTeam starts broker A, creates the agent's member and alice on
// it, then starts broker B on the same database and NATS (members live in
// the database: B reads them there). The first runner attaches to A; the
// next one, alice's pushes and every read of the outcome go to B.
func twoBrokerTeam(t *testing.T, a realAgent) restartTeam {
	_, opts := clusterOpts(t)
	brokerA := mustStartSvc(t, opts)
	d := restDriver{brokerA}
	admin := bearer(brokerA.adminToken(t))
	agentTok := createMember(t, d, admin, a.member)
	aliceTok := createMember(t, d, admin, "alice")
	brokerB := mustStartSvc(t, opts)
	return restartTeam{first: brokerA, second: brokerB, agentTok: agentTok, aliceTok: aliceTok}
}

// runnerMoves is the move for one agent: A's host crashes mid-turn, taking
// the broker and the runner's tree with it, and the runner comes back on B.
func runnerMoves(t *testing.T, a realAgent) {
	team := twoBrokerTeam(t, a)
	crash := func(t *testing.T, r *rcRunner) {
		team.first.kill(t)
		killTree(t, r)
	}
	const name = "moved A→B"
	sent, answered, dup := midTurnRestart(t, a, team, crash)
	t.Logf("delivery figures: agent=%s case=%q sent=%d answered=%d duplicated=%d", a.member, name, sent, answered, dup)
}

func TestE2EClusterRunnerMovesClaude(t *testing.T) {
	agenttest.Claude(t) // installed (once) before any broker starts
	runnerMoves(t, claudeAgent(t))
}

func TestE2EClusterRunnerMovesCodex(t *testing.T) {
	agenttest.Codex(t)
	runnerMoves(t, codexAgent(t))
}
