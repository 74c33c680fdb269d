package e2e

// The real Codex under a real `svc runner` exports its OTLP records to the
// broker; what it sends for each model call (the API request, every SSE
// event of the streamed response, the token counts) is folded into one
// opaque_http row per call (docs/TELEMETRY.md, "Codex records").

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/cmd/svc/internal/agenttest"
)

// TestRunnerCodexTelemetryRows drives a DM turn of 24 shell calls and a
// reply through the real Codex and counts the opaque_http rows its
// telemetry left per model call.
func TestRunnerCodexTelemetryRows(t *testing.T) {
	bin := agenttest.Codex(t)
	p := mustStartSvc(t, procOpts{})
	d := restDriver{p}
	admin := p.adminToken(t)
	agentTok := createMember(t, d, bearer(admin), "codexrows")
	aliceTok := createMember(t, d, bearer(admin), "alice")

	const (
		marker = "RX-ROWS-51d0"
		steps  = 24
	)
	m := agenttest.NewResponses(t)
	var script []agenttest.RTurn
	for i := range steps {
		turn := agenttest.RTurn{Call: "exec_command", Arguments: json.RawMessage(fmt.Sprintf(`{"cmd":"echo step-%d"}`, i))}
		if i == 0 {
			turn.Marker = marker
		}
		script = append(script, turn)
	}
	m.Script(append(script, agenttest.RTurn{Text: "All steps done."})...)
	r := startCodexRunner(t, p, agentTok, "codexrows", bin, m)

	push(t, p, aliceTok, obj{"to": "codexrows", "body": "Run the steps. " + marker})
	rcEventually(t, r, "the DM turn done and codexrows idle", func() bool {
		_, busy := presenceOf(t, p, bearer(admin), "codexrows")["activity"]
		return !busy && m.Pending() == 0
	})
	calls := 0
	for _, q := range m.Requests() {
		if q.IsAgentTurn() {
			calls++
		}
	}
	require.GreaterOrEqual(t, calls, steps+1, "the steps and the reply")

	// Codex exports on its own schedule: every call's token counts are in
	// once a row per call carries them.
	var rows []obj
	withTokens := func() (n int) {
		for _, row := range rows {
			attrs, _ := row["data"].(obj)["attributes"].(obj)
			if attrs["input_token_count"] != nil {
				n++
			}
		}
		return n
	}
	rcEventually(t, r, "the token counts of every model call", func() bool {
		rows = activityRows(t, p, agentTok, "codexrows", "opaque_http")
		return withTokens() >= calls
	})
	events := map[string]int{}
	for _, row := range rows {
		data := row["data"].(obj)
		attrs, _ := data["attributes"].(obj)
		events[fmt.Sprintf("%s %v", data["event"], attrs["event.kind"])]++
	}
	t.Logf("%d model calls, %d opaque_http rows: %.2f per model call; by event: %v", calls, len(rows), float64(len(rows))/float64(calls), events)

	require.Equal(t, calls, withTokens(), "one row per call carries its token counts")
	for _, row := range rows {
		data := row["data"].(obj)
		attrs, _ := data["attributes"].(obj)
		require.NotEqual(t, "codex.sse_event", data["event"], "SSE events are folded or dropped: %v", row)
		if attrs["input_token_count"] != nil {
			require.Equal(t, "codex.api_request", data["event"], "the token counts are folded into their API request: %v", row)
			require.Equal(t, "200", attrs["http.response.status_code"], "%v", row)
		}
	}
	// Besides one row per call: the session's start (conversation_starts,
	// startup phases) and each turn's time to first token.
	require.LessOrEqual(t, len(rows), calls+6, "%v", events)
}
