package store

import (
	"context"
	"time"
)

// GenAIRecord is one full-context inference record: a model request and
// its response, parsed into the OpenTelemetry GenAI message shapes, with
// the raw upload kept once per SHA-256.
type GenAIRecord struct {
	ID     string // assigned by the caller
	Member string
	// MemberUID is the id of the member of that name the record belongs
	// to, as for ActivityEvent.
	MemberUID  string
	TS         time.Time // capture time
	Provider   string    // anthropic, openai
	API        string    // messages, chat.completions, responses
	Model      string
	ResponseID string // the provider's response id; "" when none
	Usage      GenAIUsage
	// SystemInstructions, InputMessages and OutputMessages are JSON arrays;
	// nil in a summary.
	SystemInstructions []byte
	InputMessages      []byte
	OutputMessages     []byte
	// ToolDefinitions is the JSON array of the tools the request offered;
	// nil in a summary, and in a record stored before it was kept.
	ToolDefinitions []byte
	// RawSHA is the hex SHA-256 of the raw upload; it never leaves the
	// broker.
	RawSHA string
	// Raw is the raw upload, set only when writing.
	Raw []byte
}

// GenAIUsage is an inference's token counts.
type GenAIUsage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
	ReasoningTokens     int64
}

// GenAIFilter selects inference records of one member, oldest first.
type GenAIFilter struct {
	Member string
	// MemberUID, when set, keeps only that member's records.
	MemberUID string
	From      time.Time // inclusive; zero means unbounded
	To        time.Time // inclusive; zero means unbounded
	Limit     int       // at most this many; <= 0 means 1000
	Summary   bool      // leave out the three message arrays
	// MaxBytes, when > 0, ends the list after the record whose message
	// arrays bring the total to MaxBytes or more.
	MaxBytes int
}

// GenAIStore keeps inference records.
type GenAIStore interface {
	// ListGenAI returns matching records oldest first (by TS, then the
	// order they were stored in).
	ListGenAI(ctx context.Context, f GenAIFilter) ([]GenAIRecord, error)
	// GetGenAI returns member's record id; ErrNotFound when there is none,
	// also when the id is another member's.
	GetGenAI(ctx context.Context, member, id string) (GenAIRecord, error)
	// GenAIByResponse returns member's records (of its member memberUID
	// only, when set) of the given response ids.
	GenAIByResponse(ctx context.Context, member, memberUID string, responseIDs []string) ([]GenAIRecord, error)
	// GenAIRaw returns the raw upload of member's record id, as it was
	// stored; ErrNotFound as GetGenAI. No route answers it: it is for
	// the operator's tools and the tests that check what is kept.
	GenAIRaw(ctx context.Context, member, id string) ([]byte, error)
}
