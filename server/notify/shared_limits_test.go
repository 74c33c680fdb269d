package notify

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/server/apierr"
	"svc/store"
)

// sharedBrokers makes e's service broker A and a second service over the
// same store broker B, both counting the ingress limits in the store as
// several brokers do (the count is the server's windowWait: a row per hit,
// the limit-th newest telling the wait).
func (e *hookEnv) sharedBrokers(t *testing.T) [2]*Service {
	t.Helper()
	count := func(ctx context.Context, tx store.Tx, key string, limit int, window time.Duration) (time.Duration, error) {
		now := e.clock.Now()
		hits, err := tx.LimitHits(ctx, key, now.Add(-window), limit)
		if err != nil {
			return 0, err
		}
		if len(hits) >= limit {
			return max(hits[limit-1].Add(window).Sub(now), time.Millisecond), nil
		}
		return 0, tx.AddLimitHit(ctx, key, now)
	}
	b := e.service(e.s.d.KEK)
	for _, s := range []*Service{e.s, b} {
		s.d.Shared = SharedLimits{On: func() bool { return true }, Count: count}
	}
	return [2]*Service{e.s, b}
}

// hits counts the store's limit rows of key in the last minute.
func (e *hookEnv) hits(t *testing.T, key string) int {
	t.Helper()
	h, err := e.st.LimitHits(context.Background(), key, e.clock.Now().Add(-time.Minute), 10_000)
	require.NoError(t, err)
	return len(h)
}

// TestHookRateLimitSharedAcrossBrokers: verified requests posted
// alternately to two brokers are refused at the endpoint's limit in
// total, not at twice it; the refused one stores nothing.
func TestHookRateLimitSharedAcrossBrokers(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "rl", nil)
	brokers := e.sharedBrokers(t)
	ctx := context.Background()
	for i := range RateLimit {
		_, err := brokers[i%2].Ingress(ctx, "192.0.2.1", "rl", nil, signed(), []byte("x"))
		require.NoError(t, err, i)
	}
	for _, s := range brokers {
		_, err := s.Ingress(ctx, "192.0.2.1", "rl", nil, signed(), []byte("x"))
		requireCode(t, err, apierr.CodeRateLimited)
		require.Positive(t, apierr.Render(err).RetryAfter)
	}
	require.Len(t, e.receipts(t, "rl"), RateLimit, "refused requests are not receipted")
	require.Equal(t, RateLimit, e.hits(t, rateKey+"rl"))
	e.clock.Add(time.Minute)
	_, err := brokers[1].Ingress(ctx, "192.0.2.1", "rl", nil, signed(), []byte("x"))
	require.NoError(t, err, "the window moved on")
}

// TestHookRejectBudgetsSharedAcrossBrokers: failed verifications posted
// alternately to two brokers spend one budget per address and one per
// endpoint in total; a flood from distinct addresses makes the store keep
// a row only for the failures that were receipted.
func TestHookRejectBudgetsSharedAcrossBrokers(t *testing.T) {
	e := newHookEnv(t, false)
	e.create(t, "one", nil)
	e.create(t, "many", nil)
	brokers := e.sharedBrokers(t)
	ctx := context.Background()
	unsigned := func(s *Service, addr, slug string) error {
		_, err := s.Ingress(ctx, addr, slug, nil, http.Header{"X-Hook-Secret": {"wrong"}}, []byte("x"))
		return err
	}
	for i := range RejectAddrLimit {
		require.ErrorIs(t, unsigned(brokers[i%2], "198.51.100.1", "one"), ErrRejected, "request %d", i)
	}
	for _, s := range brokers {
		requireCode(t, unsigned(s, "198.51.100.1", "one"), apierr.CodeRateLimited, "the address's budget, on either broker")
	}
	require.Len(t, e.receipts(t, "one"), RejectAddrLimit)

	// Distinct addresses, each under its own budget: the endpoint's
	// budget ends them, once for both brokers.
	const flood = 2 * RejectLimit
	rejected := 0
	for i := range flood {
		err := unsigned(brokers[i%2], fmt.Sprintf("203.0.113.%d/%d", i%250, i), "many")
		if err == ErrRejected {
			rejected++
			continue
		}
		requireCode(t, err, apierr.CodeRateLimited, "request %d", i)
	}
	require.Equal(t, RejectLimit, rejected, "the endpoint's failure budget, for both brokers together")
	require.Len(t, e.receipts(t, "many"), RejectLimit)
	require.Equal(t, RejectLimit, e.hits(t, rejectKey+"many"))
	rows := 0
	for i := range flood {
		rows += e.hits(t, rejectAddrKey+fmt.Sprintf("203.0.113.%d/%d", i%250, i))
	}
	require.Equal(t, RejectLimit, rows, "an address costs a row only for a receipted failure")

	_, err := brokers[1].Ingress(ctx, "198.51.100.1", "many", nil, signed(), []byte(`{"ok":1}`))
	require.NoError(t, err, "a signed request goes through the storm")
}
