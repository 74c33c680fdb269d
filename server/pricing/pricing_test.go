package pricing_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/pricing"
)

func TestShippedLookup(t *testing.T) {
	tab := pricing.Shipped()
	require.Greater(t, tab.Len(), 40)
	require.Equal(t, "2026-11-28", tab.Date)
	require.NotEmpty(t, tab.Sources)

	for _, tc := range []struct {
		name, model, key string
	}{
		{"exact", "claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"dated snapshot", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"dated snapshot of a bare family id", "claude-opus-4-20250514", "claude-opus-4"},
		{"longest prefix wins", "claude-opus-4-1-20250805", "claude-opus-4-1"},
		{"context tag", "claude-opus-5-5[1m]", "claude-opus-5-5"},
		{"vertex snapshot", "claude-opus-4-1@20250805", "claude-opus-4-1"},
		{"bedrock version", "claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"},
		{"latest alias", "claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"case and spaces", "  Claude-Haiku-4-5 ", "claude-haiku-4-5"},
		{"openai dated", "gpt-5-2025-08-07", "gpt-5"},
		{"openai dotted version", "gpt-5.6-terra", "gpt-5.6-terra"},
		{"codex model", "gpt-5.1-codex-mini", "gpt-5.1-codex-mini"},
		{"o-series dated", "o3-2025-04-16", "o3"},
		{"another version is unknown", "claude-opus-4-9", ""},
		{"another version with a date is unknown", "claude-opus-4-9-20270101", ""},
		{"a dotted version is not its prefix", "gpt-5.7", ""},
		{"a variant is not its base", "gpt-5-ultra", ""},
		{"a fast tier is not priced as standard", "gpt-5.5-fast", ""},
		{"unknown", "gpt-stub", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, _, ok := tab.Lookup(tc.model)
			require.Equal(t, tc.key != "", ok)
			require.Equal(t, tc.key, key)
		})
	}
}

func TestCost(t *testing.T) {
	tab := pricing.Shipped()
	for _, tc := range []struct {
		name  string
		model string
		tok   pricing.Tokens
		want  float64
	}{
		// 1M input at $3, 1M output at $15, 1M cache read at $0.30 and
		// 1M cache write at $3.75.
		{"every kind", "claude-sonnet-4-6", pricing.Tokens{Input: 1e6, Output: 1e6, CacheRead: 1e6, CacheWrite: 1e6}, 3 + 15 + 0.3 + 3.75},
		{"small", "gpt-5", pricing.Tokens{Input: 1000, Output: 200, CacheRead: 5000}, (1000*1.25 + 200*10 + 5000*0.125) / 1e6},
		// A prompt of 100,000 tokens is not above the threshold.
		{"at the long-context threshold", "claude-haiku-5-5", pricing.Tokens{Input: 100000, Output: 10}, (100000*0.1 + 10*0.5) / 1e6},
		// One token more and the whole request is at the long-context price.
		{"above the long-context threshold", "claude-haiku-5-5", pricing.Tokens{Input: 50000, CacheRead: 50001, Output: 10}, (50000*0.5 + 50001*0.05 + 10*2.5) / 1e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tab.Cost(tc.model, tc.tok)
			require.True(t, ok)
			require.InDelta(t, tc.want, got, 1e-12)
			b := tab.Bucket(tc.tok.Prompt())
			sum, ok := tab.CostSum(tc.model, b, tc.tok)
			require.True(t, ok)
			require.InDelta(t, tc.want, sum, 1e-12, "a sum of one request prices as the request")
		})
	}
	_, ok := tab.Cost("gpt-stub", pricing.Tokens{Input: 1})
	require.False(t, ok, "an unknown model has no cost, not $0")
}

func TestBucketsSeparateThresholds(t *testing.T) {
	tab := pricing.Shipped()
	th := tab.Thresholds()
	require.Equal(t, []int64{100000, 200000, 272000}, th)
	require.Equal(t, 0, tab.Bucket(100000))
	require.Equal(t, 1, tab.Bucket(100001))
	require.Equal(t, 2, tab.Bucket(200001))
	require.Equal(t, 3, tab.Bucket(272001))
	// gpt-6-sol's threshold is 272,000: bucket 2 (up to 272,000) is the
	// standard price, bucket 3 the long-context one.
	tok := pricing.Tokens{Input: 1e6}
	std, _ := tab.CostSum("gpt-6-sol", 2, tok)
	long, _ := tab.CostSum("gpt-6-sol", 3, tok)
	require.InDelta(t, 2.0, std, 1e-12)
	require.InDelta(t, 4.0, long, 1e-12)
}

func writeOverride(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), pricing.OverrideName)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestLoadOverride(t *testing.T) {
	t.Run("absent file is the shipped table", func(t *testing.T) {
		tab, err := pricing.Load(filepath.Join(t.TempDir(), pricing.OverrideName))
		require.NoError(t, err)
		require.Equal(t, pricing.Shipped().Len(), tab.Len())
		require.Empty(t, tab.Override)
	})
	t.Run("merged over the shipped table", func(t *testing.T) {
		p := writeOverride(t, `{"schema": 1, "date": "2027-01-01", "models": {
			"gpt-stub": {"input": 1, "output": 2, "cacheRead": 0.5, "cacheWrite": 1},
			"Claude-Sonnet-4-5": {"input": 1.5, "output": 7.5, "cacheRead": 0.15, "cacheWrite": 1.875},
			"gpt-4o": null}}`)
		tab, err := pricing.Load(p)
		require.NoError(t, err)
		require.Equal(t, p, tab.Override)
		require.Equal(t, 3, tab.OverrideModels)
		require.Equal(t, pricing.Shipped().Len(), tab.Len(), "one added, one removed")

		c, ok := tab.Cost("gpt-stub", pricing.Tokens{Input: 1e6, Output: 1e6})
		require.True(t, ok)
		require.InDelta(t, 3.0, c, 1e-12)
		// The override replaces the whole entry: its long-context price
		// goes with it.
		c, ok = tab.Cost("claude-sonnet-4-5-20250929", pricing.Tokens{Input: 300000})
		require.True(t, ok)
		require.InDelta(t, 0.45, c, 1e-12)
		_, ok = tab.Cost("gpt-4o", pricing.Tokens{Input: 1})
		require.False(t, ok, "null removes a model")
		_, ok = tab.Cost("gpt-4o-mini", pricing.Tokens{Input: 1})
		require.True(t, ok)
	})
	t.Run("a file that cannot be read", func(t *testing.T) {
		_, err := pricing.Load(t.TempDir())
		require.Error(t, err)
	})
}

func TestOverrideRefused(t *testing.T) {
	entry := `{"input": 1, "output": 2, "cacheRead": 0.5, "cacheWrite": 1}`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `{`, "not a price file"},
		{"an array", `[]`, "not a price file"},
		{"trailing data", `{"schema":1,"models":{}} {}`, "data after the object"},
		{"unknown field", `{"schema":1,"models":{},"prices":{}}`, "unknown field"},
		{"no schema", `{"models":{}}`, "schema: must be 1"},
		{"other schema", `{"schema":2,"models":{}}`, "schema: must be 1"},
		{"other currency", `{"schema":1,"currency":"EUR","models":{}}`, "currency"},
		{"no models", `{"schema":1}`, "models: is required"},
		{"models not an object", `{"schema":1,"models":[]}`, "must be an object"},
		{"missing price", `{"schema":1,"models":{"m":{"input":1,"output":2,"cacheRead":0.5}}}`, `models["m"].cacheWrite: is required`},
		{"negative price", `{"schema":1,"models":{"m":{"input":-1,"output":2,"cacheRead":0.5,"cacheWrite":1}}}`, `models["m"].input: must be 0 to`},
		{"absurd price", `{"schema":1,"models":{"m":{"input":1e9,"output":2,"cacheRead":0.5,"cacheWrite":1}}}`, `must be 0 to`},
		{"price as a string", `{"schema":1,"models":{"m":{"input":"1","output":2,"cacheRead":0.5,"cacheWrite":1}}}`, `models["m"]`},
		{"misspelt price", `{"schema":1,"models":{"m":{"input":1,"output":2,"cache_read":0.5,"cacheWrite":1}}}`, "unknown field"},
		{"bad key", `{"schema":1,"models":{"my model":` + entry + `}}`, "is not a model id"},
		{"empty key", `{"schema":1,"models":{"":` + entry + `}}`, "is not a model id"},
		{"long key", `{"schema":1,"models":{"` + strings.Repeat("a", 129) + `":` + entry + `}}`, "is not a model id"},
		{"key twice", `{"schema":1,"models":{"m":` + entry + `,"M":` + entry + `}}`, "named twice"},
		{"long context without above", `{"schema":1,"models":{"m":{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":1,"longContext":{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":1}}}}`, "longContext.above: is required"},
		{"long context missing price", `{"schema":1,"models":{"m":{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":1,"longContext":{"above":10,"input":1,"output":2,"cacheRead":0.5}}}}`, "longContext.cacheWrite: is required"},
		{"long note", `{"schema":1,"notes":["` + strings.Repeat("x", 5000) + `"],"models":{}}`, "at most"},
		{"too large", `{"schema":1,"notes":["` + strings.Repeat("x", 1<<20) + `"],"models":{}}`, "over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pricing.ParseOverride([]byte(tc.body))
			require.ErrorContains(t, err, tc.want)
			_, err = pricing.Load(writeOverride(t, tc.body))
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, pricing.OverrideName, "the refusal names the file")
		})
	}
}

// TestShippedCoversAgents: every model id the agents svc runs are seen
// using is priced, so their exchanges never show $0 or unknown.
func TestShippedCoversAgents(t *testing.T) {
	tab := pricing.Shipped()
	for _, m := range []string{
		"claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-fable-5-1",
		"claude-opus-4-8", "claude-sonnet-4-6", "claude-haiku-4-5-20251001", "claude-sonnet-4-5-20250929",
		"gpt-6-sol", "gpt-6.1-sol", "gpt-6.1-terra", "gpt-6-astra", "gpt-5.6-sol", "gpt-5.5", "gpt-5.4-mini",
		"gpt-5.3-codex", "gpt-5-codex", "codex-mini-latest", "o4-mini", "o3",
	} {
		_, _, ok := tab.Lookup(m)
		require.True(t, ok, m)
	}
}
