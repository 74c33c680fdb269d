package store

import (
	"context"
	"time"
)

// Activity kinds, the Kind of a row (docs/TELEMETRY.md): what the
// activity capability ingests and what the core records of objectives.
const (
	KindLLMExchange    = "llm_exchange"
	KindToolAction     = "tool_action"
	KindUserPrompt     = "user_prompt"
	KindOpaqueHTTP     = "opaque_http"
	KindObjectiveOpen  = "objective_open"
	KindObjectiveClose = "objective_close"
)

// ActivityEvent is one row of a member's append-only activity stream.
type ActivityEvent struct {
	ID     int64 // assigned by the store
	Member string
	// MemberUID is the id of the member of that name the row belongs to
	// (a name deleted and created again is another member); "" for a row
	// from before member ids that no start has adopted yet.
	MemberUID   string
	Kind        string
	TS          time.Time
	ObjectiveID string // empty when none
	Data        []byte // kind-specific JSON object
	// ResponseID is an llm_exchange's data.responseId, which the writer
	// sets beside Data so the store indexes it without parsing Data; ""
	// when none. It is not read back.
	ResponseID string
}

// ActivityFilter selects activity rows of one member.
type ActivityFilter struct {
	Member string
	// MemberUID, when set, keeps only the rows of that member of the
	// name; "" keeps every member's.
	MemberUID string
	From      time.Time // inclusive; zero means unbounded
	To        time.Time // inclusive; zero means unbounded
	Kinds     []string  // empty means every kind
	Limit     int       // at most this many rows; <= 0 means 1000
	// OldestFirst orders by TS then id ascending; the default is newest
	// first.
	OldestFirst bool
	// MaxBytes, when > 0, ends the list after the row whose data brings
	// the total to MaxBytes or more: a list of large rows stays bounded.
	MaxBytes int
}

// CorrelationState is the pending telemetry correlation state of one
// member, kept so that records acknowledged but not yet turned into rows
// survive a crash.
type CorrelationState struct {
	Member    string
	State     []byte // nil deletes the member's state
	UpdatedAt time.Time
}

// ActivityBatch is what one commit of the activity store writes, all or
// nothing: rows, correlation states, inference records.
type ActivityBatch struct {
	Events []ActivityEvent
	States []CorrelationState // applied in order: a later state of a member wins
	GenAI  []GenAIRecord      // each with its Raw bytes
}

// UsageFilter selects what ActivityUsage sums: one member's (or every
// member of the name's, with MemberUID "") exchanges and inference records
// with a TS in [From, To] (zero: unbounded).
type UsageFilter struct {
	Member    string
	MemberUID string
	From, To  time.Time
	// Thresholds are prompt sizes (input, cache read and cache creation
	// tokens together), ascending: each group sums requests whose prompts
	// are above the same number of them (its Bucket), so a long-context
	// price applies to a group as a whole.
	Thresholds []int64
}

// UsageGroup sums the usage of one member, model and bucket.
type UsageGroup struct {
	MemberUID string // "" for rows from before member ids
	Model     string // "" when the rows name none
	// Bucket is how many of the filter's thresholds the prompts of the
	// group's requests are above.
	Bucket int
	// Usage sums every token and exchange of the group; its CostUSD sums
	// the costs the records carried.
	Usage
	// NoCost sums the tokens of the exchanges that carried no cost (every
	// inference record), NoCostExchanges counts those with a token: their
	// cost is the price table's to compute.
	NoCost          UsageTokens
	NoCostExchanges int64
}

// UsageTokens are token counts.
type UsageTokens struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
}

// Usage is a sum of model usage.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	CostUSD             float64
	Exchanges           int64
}

// Add sums u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheCreationTokens: u.CacheCreationTokens + v.CacheCreationTokens,
		CostUSD: u.CostUSD + v.CostUSD, Exchanges: u.Exchanges + v.Exchanges,
	}
}

// How an exchange carries an inference record that has no response id in
// common with it (either has none): the record's capture time lies within
// the exchange's window, [ts - durationMs - JoinSlack, ts + JoinSlack],
// durationMs counted up to MaxJoinDuration, and their models agree (or
// either has none). Traces and usage both join this way.
const (
	JoinSlack       = 2 * time.Second
	MaxJoinDuration = time.Hour
)

// PruneResult counts what a prune deleted.
type PruneResult struct {
	Activity int64 // activity rows
	GenAI    int64 // inference records
	Raw      int64 // raw uploads no record references any more
	States   int64 // correlation states
	// Parts counts the content-addressed pieces inference records are
	// stored as (docs/DECISIONS.md, "GenAI records stored by parts") that
	// no record reaches any more: storage, not uploads.
	Parts int64
}

// ActivityStore is the separate store of activity streams, inference
// records and telemetry correlation state.
type ActivityStore interface {
	// AppendActivity stores events in one transaction and returns them with
	// their row ids set, in the order given.
	AppendActivity(ctx context.Context, events []ActivityEvent) ([]ActivityEvent, error)
	// CommitActivity writes a batch in one transaction and returns its
	// events with their row ids set, in the order given. Inference records
	// need their ID set; their raw bytes are stored once per SHA-256.
	CommitActivity(ctx context.Context, b ActivityBatch) ([]ActivityEvent, error)
	// ListActivity returns matching rows, newest first unless the filter
	// asks otherwise (by TS, then id).
	ListActivity(ctx context.Context, f ActivityFilter) ([]ActivityEvent, error)
	// ActivityAfter returns, oldest first by id, up to limit rows of member
	// (of its member memberUID only, when set) with an id above after: a
	// stream's replay.
	ActivityAfter(ctx context.Context, member, memberUID string, after int64, limit int) ([]ActivityEvent, error)
	// LastActivityID returns the newest row id, 0 when there is none.
	LastActivityID(ctx context.Context) (int64, error)
	// ObjectiveMarkers returns the objective_open and objective_close rows
	// of an objective, of every member, oldest first.
	ObjectiveMarkers(ctx context.Context, objectiveID string) ([]ActivityEvent, error)
	// ActivityUsage sums the usage of the llm_exchange rows and the
	// inference records f selects, leaving out each record an exchange of
	// the same member in the same range carries: by responseId, or by
	// window (JoinSlack). It returns one group per member id, model and
	// bucket.
	ActivityUsage(ctx context.Context, f UsageFilter) ([]UsageGroup, error)
	// AdoptMemberRows gives the rows and records that have no member id
	// one: owners' id for a name it lists, orphan for any other name (a
	// member deleted before ids). It returns how many it changed.
	AdoptMemberRows(ctx context.Context, owners map[string]string, orphan string) (int64, error)
	// CorrelationStates returns every stored correlation state.
	CorrelationStates(ctx context.Context) ([]CorrelationState, error)
	GenAIStore
	// PruneActivity deletes what is older than cutoff: activity rows and
	// inference records by event time, raw uploads no record references,
	// correlation states by update time.
	PruneActivity(ctx context.Context, cutoff time.Time) (PruneResult, error)
	Close() error
}
