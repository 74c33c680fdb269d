package store

import "context"

// ActivityRanger reads activity rows by id range: what a broker missed of
// another broker's commits (docs/DECISIONS.md, "Presence and the team
// stream on several brokers"). Both stores have it.
type ActivityRanger interface {
	// ActivityBetween returns every row with after < id <= upTo, of every
	// member, oldest first. The caller bounds the span.
	ActivityBetween(ctx context.Context, after, upTo int64) ([]ActivityEvent, error)
}
