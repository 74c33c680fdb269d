package runner

// ActivityState is a member's live activity (docs/RUNNER.md: idle, working,
// blocked).
type ActivityState string

// The three activity states.
const (
	StateIdle    ActivityState = "idle"
	StateWorking ActivityState = "working"
	StateBlocked ActivityState = "blocked"
)

// Activity derives the live activity state from agent events: one
// whole-turn flag, a nested in-flight tool counter and a blocked flag, with
// priority blocked, then working (a turn or any tool), else idle. The zero
// value is idle. It is a pure value: the runner owns one and feeds it.
type Activity struct {
	turnActive bool
	inflight   int
	blocked    bool
	// waiting counts the approvals the agent waits on: blocked until each
	// is decided (docs/APPROVALS.md).
	waiting int
}

// Apply feeds one event and reports whether the state changed.
//
// Besides the spec's table (turn start on; turn end off and blocked
// cleared; permission/elicitation blocked; idle prompt unblocked; tools
// ±1, never below 0), a turn start and a tool end also clear blocked: the
// spec keeps the agent blocked "until the turn resumes", and a new prompt
// or a tool that ran after its permission prompt is the turn resuming.
// A turn's start and end also reset the tools in flight: a tool whose end
// was never reported (denied by a permission prompt, refused, lost) would
// otherwise leave the member working for good and the runner deaf.
func (a *Activity) Apply(e Event) bool {
	before := a.State()
	switch e.Kind {
	case TurnStart:
		a.turnActive = true
		a.blocked = false
		a.inflight = 0
	case TurnEnd:
		a.turnActive = false
		a.blocked = false
		a.inflight = 0
		// A turn that ended waits on nothing: a decision that comes later
		// has no one to reach.
		a.waiting = 0
	case Blocked:
		a.blocked = true
	case Unblocked:
		a.blocked = false
	case ToolStart:
		a.inflight++
	case ToolEnd:
		if a.inflight > 0 {
			a.inflight--
		}
		a.blocked = false
	case ApprovalWait:
		a.waiting++
	case ApprovalDone:
		if a.waiting > 0 {
			a.waiting--
		}
	}
	return a.State() != before
}

// State is the derived state.
func (a Activity) State() ActivityState {
	switch {
	case a.blocked || a.waiting > 0:
		return StateBlocked
	case a.turnActive || a.inflight > 0:
		return StateWorking
	}
	return StateIdle
}

// Waiting is the number of approvals the agent waits on.
func (a Activity) Waiting() int { return a.waiting }

// InFlight is the number of tools running now.
func (a Activity) InFlight() int { return a.inflight }
