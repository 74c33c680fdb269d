package teamconfig

// Defaults and bounds of the loop guard (docs/RUNNER.md, Loop guard).
const (
	// DefaultMaxHops is how many agent-to-agent hops a reply chain may take
	// after a message sent outside a turn: enough for an agent to ask
	// another, be answered, and pass the result on a few times, short
	// enough that two agents whose models always answer stop within
	// seconds.
	DefaultMaxHops = 8
	// MaxMaxHops bounds the setting: a longer chain is no conversation.
	MaxMaxHops = 1000
	// DefaultAgentPushesPerMinute and DefaultAgentPushBurst are the token
	// bucket of the messages one agent sends in its turns: a burst of 60
	// covers a turn that writes to every teammate at once, and one a
	// second afterwards outpaces any model that reads what it answers.
	// Messages sent outside a turn are never counted.
	DefaultAgentPushesPerMinute = 60
	DefaultAgentPushBurst       = 60
	// MaxAgentPushesPerMinute and MaxAgentPushBurst bound the settings.
	MaxAgentPushesPerMinute = 60_000
	MaxAgentPushBurst       = 10_000
)

// LoopGuard is the loopGuard block: the hop bound of reply chains and the
// push rate limit of agents in a turn. A zero field takes its default.
type LoopGuard struct {
	MaxHops              int `json:"maxHops,omitempty"`
	AgentPushesPerMinute int `json:"agentPushesPerMinute,omitempty"`
	AgentPushBurst       int `json:"agentPushBurst,omitempty"`
}

// LoopGuardSettings returns the loopGuard block with its defaults filled
// in.
func (f *File) LoopGuardSettings() LoopGuard {
	g := LoopGuard{}
	if f.LoopGuard != nil {
		g = *f.LoopGuard
	}
	if g.MaxHops == 0 {
		g.MaxHops = DefaultMaxHops
	}
	if g.AgentPushesPerMinute == 0 {
		g.AgentPushesPerMinute = DefaultAgentPushesPerMinute
	}
	if g.AgentPushBurst == 0 {
		g.AgentPushBurst = DefaultAgentPushBurst
	}
	return g
}

func (g *LoopGuard) validate() error {
	for _, b := range []struct {
		entry string
		v, hi int
	}{
		{"loopGuard.maxHops", g.MaxHops, MaxMaxHops},
		{"loopGuard.agentPushesPerMinute", g.AgentPushesPerMinute, MaxAgentPushesPerMinute},
		{"loopGuard.agentPushBurst", g.AgentPushBurst, MaxAgentPushBurst},
	} {
		if b.v < 0 || b.v > b.hi {
			return entryErr(b.entry, "must be 1 to %d (absent or 0: the default)", b.hi)
		}
	}
	return nil
}
