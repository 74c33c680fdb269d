package e2e

// End-to-end tests of costs (docs/TELEMETRY.md, Costs): the price table
// prices what carries tokens but no cost, keeps every cost an agent
// reported, leaves an unknown model's cost unknown, and an override beside
// the config changes it, or refuses the start when it does not read.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Prices of the shipped table (server/pricing/prices.json), per million
// tokens, that the expectations below use.
const (
	codexIn, codexOut, codexCacheRead = 1.25, 10.0, 0.125 // gpt-5-codex
)

// costOf is what tokens cost at per-million prices.
func costOf(in, out, cacheRead int, pIn, pOut, pCacheRead float64) float64 {
	return (float64(in)*pIn + float64(out)*pOut + float64(cacheRead)*pCacheRead) / 1e6
}

// codexExchange is llm_exchange data as a Codex-style source gives it:
// tokens and a response id, no cost.
func codexExchange(label, model string, in, out, cacheRead int) obj {
	return obj{"label": label, "model": model, "source": "runner", "responseId": "resp_" + label,
		"usage": obj{"inputTokens": in, "outputTokens": out, "cacheReadTokens": cacheRead, "cacheCreationTokens": 0}}
}

// byLabel indexes rows by their data's label.
func byLabel(rows []obj) map[string]obj {
	out := map[string]obj{}
	for _, r := range rows {
		if l, ok := r["data"].(obj)["label"].(string); ok {
			out[l] = r
		}
	}
	return out
}

// modelsOf indexes a usage answer's models by model id.
func modelsOf(t testing.TB, b obj) map[string]obj {
	t.Helper()
	out := map[string]obj{}
	for _, m := range listOf(t, b, "models") {
		out[m["model"].(string)] = m
	}
	return out
}

func TestUsageCosts(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		tok := bearer(createMember(t, d, admin, "coder"))
		o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Costly", "outcome": "priced", "assignee": "coder"})
		id := o["id"].(string)
		now := actNow()
		mustUpload(t, d, tok, "coder",
			actEvObj("llm_exchange", now, id, codexExchange("codex", "gpt-5-codex", 1000, 200, 4000)),
			actEvObj("llm_exchange", now, id, codexExchange("dated", "gpt-5-codex-2026-01-01", 0, 100, 0)),
			actEvObj("llm_exchange", now, id, actExchange("claude", "claude-sonnet-4-5", "", 10, 10, 20, 0, 0, 0.5)),
			actEvObj("llm_exchange", now, id, codexExchange("stub", "gpt-stub", 10, 10, 0)),
			actEvObj("llm_exchange", now, id, codexExchange("empty", "gpt-stub", 0, 0, 0)),
		)
		rec := mustUploadGenAI(t, p, d, tok, "coder", genaiBodyOf(t, now, responsesFixture.req, responsesFixture.resp))

		codex := costOf(1000, 200, 4000, codexIn, codexOut, codexCacheRead)
		dated := costOf(0, 100, 0, codexIn, codexOut, codexCacheRead)
		record := costOf(400, 60, 100, codexIn, codexOut, codexCacheRead) // the fixture's usage

		// Rows: the computed cost is marked; the reported one kept as it
		// was; an unknown model, and an exchange with no tokens, have none.
		rows := byLabel(mustList(t, p, d, tok, "coder", actQuery{kinds: []string{"llm_exchange"}}))
		require.InDelta(t, codex, rows["codex"]["data"].(obj)["costUsd"], 1e-15)
		require.Equal(t, true, rows["codex"]["data"].(obj)["costComputed"])
		require.InDelta(t, dated, rows["dated"]["data"].(obj)["costUsd"], 1e-15, "a dated snapshot is priced as its model")
		require.Equal(t, 0.5, rows["claude"]["data"].(obj)["costUsd"])
		require.NotContains(t, rows["claude"]["data"].(obj), "costComputed", "what the agent reported is its own")
		require.NotContains(t, rows["stub"]["data"].(obj), "costUsd", "an unknown model's cost is unknown, not $0")
		require.NotContains(t, rows["empty"]["data"].(obj), "costUsd")

		// The record carries no cost of its own: computed.
		require.InDelta(t, record, rec["costUsd"], 1e-15)
		require.Equal(t, true, rec["costComputed"])
		got := mustCall(t, d, tok, "GetGenAi", obj{"name": "coder", "id": rec["id"]})["inference"].(obj)
		require.InDelta(t, record, got["costUsd"], 1e-15)

		// Usage: per member, per model, per objective.
		for _, b := range []obj{
			mustCall(t, d, tok, "GetUsage", obj{"name": "coder"}),
			mustCall(t, d, admin, "GetObjectiveUsage", obj{"id": id}),
		} {
			u := b["usage"].(obj)
			require.InDelta(t, codex+dated+0.5+record, u["costUsd"], 1e-12, "%v", u)
			require.InDelta(t, codex+dated+record, u["costComputedUsd"], 1e-12)
			require.Equal(t, float64(1), u["unpricedExchanges"], "the gpt-stub exchange with tokens")
			require.Equal(t, float64(6), u["exchanges"])

			ms := modelsOf(t, b)
			require.Len(t, ms, 4)
			require.Equal(t, "gpt-5-codex", ms["gpt-5-codex"]["pricedAs"])
			require.InDelta(t, codex+record, ms["gpt-5-codex"]["costUsd"], 1e-12)
			require.Equal(t, float64(2), ms["gpt-5-codex"]["exchanges"], "the exchange and the record no exchange carries")
			require.Equal(t, "gpt-5-codex", ms["gpt-5-codex-2026-01-01"]["pricedAs"])
			require.Equal(t, 0.5, ms["claude-sonnet-4-5"]["costUsd"])
			require.Equal(t, float64(0), ms["claude-sonnet-4-5"]["costComputedUsd"])
			require.NotContains(t, ms["gpt-stub"], "costUsd", "unknown, not $0: %v", ms["gpt-stub"])
			require.NotContains(t, ms["gpt-stub"], "pricedAs")
			require.Equal(t, float64(1), ms["gpt-stub"]["unpricedExchanges"])

			members := listOf(t, b, "members")
			require.Len(t, members, 1)
			require.Equal(t, "coder", members[0]["member"])
			require.Equal(t, false, members[0]["memberDeleted"])
			require.InDelta(t, codex+dated+0.5+record, members[0]["usage"].(obj)["costUsd"], 1e-12)
			require.Len(t, listOf(t, members[0], "models"), 4)
		}
	})
}

// pricesOverride writes prices.json beside the config at cfgPath.
func pricesOverride(t testing.TB, cfgPath, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(cfgPath), "prices.json"), []byte(body), 0o600))
}

func TestPricesOverride(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "svc.json")
	pricesOverride(t, cfg, `{"schema": 1, "date": "2027-01-01", "notes": ["our negotiated rates"], "models": {
		"gpt-5-codex": {"input": 2, "output": 20, "cacheRead": 0.2, "cacheWrite": 2},
		"gpt-stub": {"input": 1, "output": 1, "cacheRead": 1, "cacheWrite": 1},
		"claude-sonnet-4-5": null}}`)
	p := mustStartSvc(t, procOpts{configPath: cfg})
	// Logged before the broker listens: the start names what it merged.
	require.Contains(t, p.stderr.String(), "override_models=3")
	d := restDriver{p}
	admin := bearer(p.adminToken(t))
	tok := bearer(createMember(t, d, admin, "coder"))
	mustUpload(t, d, tok, "coder",
		actEv("llm_exchange", 0, codexExchange("codex", "gpt-5-codex", 1000, 200, 4000)),
		actEv("llm_exchange", 0, codexExchange("stub", "gpt-stub", 10, 10, 0)),
		actEv("llm_exchange", 0, codexExchange("removed", "claude-sonnet-4-5", 10, 10, 0)),
	)
	rows := byLabel(mustList(t, p, d, tok, "coder", actQuery{}))
	require.InDelta(t, costOf(1000, 200, 4000, 2, 20, 0.2), rows["codex"]["data"].(obj)["costUsd"], 1e-15, "the override's price")
	require.InDelta(t, costOf(10, 10, 0, 1, 1, 1), rows["stub"]["data"].(obj)["costUsd"], 1e-15, "a model the override adds")
	require.NotContains(t, rows["removed"]["data"].(obj), "costUsd", "a model the override removes is unknown")
	u := mustCall(t, d, tok, "GetUsage", obj{"name": "coder"})["usage"].(obj)
	require.Equal(t, float64(1), u["unpricedExchanges"])
}

func TestMalformedPricesRefuseToStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `{"schema": 1, "models": {`, "not a price file"},
		{"a price missing", `{"schema": 1, "models": {"gpt-5": {"input": 1, "output": 2, "cacheRead": 0.1}}}`, `models["gpt-5"].cacheWrite: is required`},
		{"a misspelt field", `{"schema": 1, "models": {"gpt-5": {"input": 1, "output": 2, "cache_read": 0.1, "cacheWrite": 1}}}`, "unknown field"},
		{"a negative price", `{"schema": 1, "models": {"gpt-5": {"input": -1, "output": 2, "cacheRead": 0.1, "cacheWrite": 1}}}`, "must be 0 to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := filepath.Join(t.TempDir(), "svc.json")
			pricesOverride(t, cfg, tc.body)
			code, stdout, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfg}, nil, nil)
			require.NotZero(t, code, "stderr:\n%s", stderr)
			require.Empty(t, stdout, "no first boot happened: no admin token")
			require.Contains(t, stderr, "refusing to start: model prices")
			require.Contains(t, stderr, filepath.Join(filepath.Dir(cfg), "prices.json"))
			require.Contains(t, stderr, tc.want)
			_, err := os.Stat(cfg)
			require.ErrorIs(t, err, os.ErrNotExist, "nothing was written")
		})
	}
}
