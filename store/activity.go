package store

import (
	"context"
	"time"
)

// ActivityEvent is one row of a member's append-only activity stream.
type ActivityEvent struct {
	ID          int64 // assigned by the store
	Member      string
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
	From   time.Time // inclusive; zero means unbounded
	To     time.Time // inclusive; zero means unbounded
	Kinds  []string  // empty means every kind
	Limit  int       // at most this many rows; <= 0 means 1000
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
	// with an id above after: a stream's replay.
	ActivityAfter(ctx context.Context, member string, after int64, limit int) ([]ActivityEvent, error)
	// LastActivityID returns the newest row id, 0 when there is none.
	LastActivityID(ctx context.Context) (int64, error)
	// ObjectiveMarkers returns the objective_open and objective_close rows
	// of an objective, of every member, oldest first.
	ObjectiveMarkers(ctx context.Context, objectiveID string) ([]ActivityEvent, error)
	// ActivityUsage sums the usage of member's llm_exchange rows and of its
	// inference records with a TS in [from, to] (zero: unbounded), leaving
	// out each record an exchange in the same range carries: by responseId,
	// or by window (JoinSlack).
	ActivityUsage(ctx context.Context, member string, from, to time.Time) (Usage, error)
	// CorrelationStates returns every stored correlation state.
	CorrelationStates(ctx context.Context) ([]CorrelationState, error)
	GenAIStore
	// PruneActivity deletes what is older than cutoff: activity rows and
	// inference records by event time, raw uploads no record references,
	// correlation states by update time.
	PruneActivity(ctx context.Context, cutoff time.Time) (PruneResult, error)
	Close() error
}
