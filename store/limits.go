package store

import (
	"context"
	"time"
)

// LimitStore counts the limits that guard secrets where several brokers
// share one store, so N brokers do not give N times the tries
// (docs/DECISIONS.md, "Revocation and login limits across brokers").
type LimitStore interface {
	// AddLimitHit records one attempt counted under key at at.
	AddLimitHit(ctx context.Context, key string, at time.Time) error
	// LimitHits returns the times of key's attempts after since, newest
	// first, at most limit of them.
	LimitHits(ctx context.Context, key string, since time.Time, limit int) ([]time.Time, error)
	// PruneLimitHits deletes the attempts from before before and returns
	// how many went.
	PruneLimitHits(ctx context.Context, before time.Time) (int, error)
	// ClaimTOTPStep records step as member's last accepted TOTP time step
	// and reports true, unless a step at or after it was recorded: then
	// it changes nothing and reports false (the code was used).
	ClaimTOTPStep(ctx context.Context, member string, step int64) (bool, error)
	// ForgetTOTPStep drops member's recorded step (a new authenticator).
	ForgetTOTPStep(ctx context.Context, member string) error
}
