package teamconfig_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/teamconfig"
)

func withLoopGuard(block string) string {
	return `{"team":{"name":"t"},"store":{"members":[]},"loopGuard":` + block + `}`
}

// The loopGuard block: absent fields and zero take the defaults; a value
// out of bounds or of the wrong type keeps the broker from starting.
func TestLoopGuardBlock(t *testing.T) {
	defaults := teamconfig.LoopGuard{
		MaxHops:              teamconfig.DefaultMaxHops,
		AgentPushesPerMinute: teamconfig.DefaultAgentPushesPerMinute,
		AgentPushBurst:       teamconfig.DefaultAgentPushBurst,
	}
	accepts := []struct {
		name string
		data string
		want teamconfig.LoopGuard
	}{
		{"absent", `{"team":{"name":"t"},"store":{"members":[]}}`, defaults},
		{"empty", withLoopGuard(`{}`), defaults},
		{"zeros", withLoopGuard(`{"maxHops":0,"agentPushesPerMinute":0,"agentPushBurst":0}`), defaults},
		{"maxHops only", withLoopGuard(`{"maxHops":3}`), teamconfig.LoopGuard{MaxHops: 3, AgentPushesPerMinute: 60, AgentPushBurst: 60}},
		{"every field at its bound", withLoopGuard(`{"maxHops":1000,"agentPushesPerMinute":60000,"agentPushBurst":10000}`),
			teamconfig.LoopGuard{MaxHops: 1000, AgentPushesPerMinute: 60000, AgentPushBurst: 10000}},
		{"smallest", withLoopGuard(`{"maxHops":1,"agentPushesPerMinute":1,"agentPushBurst":1}`), teamconfig.LoopGuard{MaxHops: 1, AgentPushesPerMinute: 1, AgentPushBurst: 1}},
	}
	for _, tc := range accepts {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.data)
			require.Equal(t, tc.want, f.LoopGuardSettings())
			// What the broker writes back keeps the block.
			b, err := f.Marshal()
			require.NoError(t, err)
			again := mustParse(t, string(b))
			require.Equal(t, tc.want, again.LoopGuardSettings())
		})
	}

	rejects := []struct {
		name, data, entry string
	}{
		{"negative maxHops", withLoopGuard(`{"maxHops":-1}`), "loopGuard.maxHops"},
		{"maxHops past its bound", withLoopGuard(`{"maxHops":1001}`), "loopGuard.maxHops"},
		{"negative rate", withLoopGuard(`{"agentPushesPerMinute":-5}`), "loopGuard.agentPushesPerMinute"},
		{"rate past its bound", withLoopGuard(`{"agentPushesPerMinute":60001}`), "loopGuard.agentPushesPerMinute"},
		{"burst past its bound", withLoopGuard(`{"agentPushBurst":10001}`), "loopGuard.agentPushBurst"},
	}
	for _, tc := range rejects {
		t.Run(tc.name, func(t *testing.T) {
			_, err := teamconfig.Parse([]byte(tc.data))
			var ee *teamconfig.EntryError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, tc.entry, ee.Entry)
		})
	}
	for _, data := range []string{
		withLoopGuard(`{"maxHops":"8"}`), withLoopGuard(`{"maxHops":2.5}`), withLoopGuard(`[]`), withLoopGuard(`"off"`),
		withLoopGuard(`{"maxHops":1e30}`),
	} {
		_, err := teamconfig.Parse([]byte(data))
		require.Error(t, err, data)
		require.True(t, strings.HasPrefix(err.Error(), "config"), "%s: %v", data, err)
	}
}
