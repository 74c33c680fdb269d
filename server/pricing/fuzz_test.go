package pricing_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/pricing"
)

// FuzzParseOverride: no input panics, and an accepted file prices every
// model it names (or removes it) without surprises.
func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{
		"", "\x00", "null", "{}", "[]", `{"schema":1,"models":{}}`,
		`{"schema":1,"models":{"m":{"input":1,"output":2,"cacheRead":0.5,"cacheWrite":1}}}`,
		`{"schema":1,"models":{"m":null,"n":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"longContext":{"above":1,"input":1,"output":1,"cacheRead":1,"cacheWrite":1}}}}`,
		`{"schema":1,"models":{"m":{"input":1e308,"output":2,"cacheRead":0.5,"cacheWrite":1}}}`,
		`{"schema":1,"models":{"\u00e9":{}}}`,
		`{"schema":1,"models":{"a":{"input":1,"output":1,"cacheRead":1,"cacheWrite":1},"a":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := pricing.ParseOverride(data)
		if err != nil {
			require.Nil(t, o)
			return
		}
		require.GreaterOrEqual(t, o.Models(), 0)
	})
}

// FuzzLookup: any model id looks up without panicking, and a match is a
// key the id starts with.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"", "claude-sonnet-4-5-20250929", "gpt-5.7", "o3-2025-04-16", "claude-opus-5-5[1m]", "\xff", "-"} {
		f.Add(s)
	}
	tab := pricing.Shipped()
	f.Fuzz(func(t *testing.T, model string) {
		key, r, ok := tab.Lookup(model)
		if !ok {
			require.Empty(t, key)
			return
		}
		require.NotEmpty(t, key)
		require.GreaterOrEqual(t, r.Input, 0.0)
		c, ok := tab.Cost(model, pricing.Tokens{Input: 1, Output: 1})
		require.True(t, ok)
		require.GreaterOrEqual(t, c, 0.0)
	})
}
