package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/auth"
	"svc/server/cluster"
	"svc/store"
)

// sharedEnrollment is f made one of several brokers (as JoinCluster
// does, which needs NATS: only clustered's answer matters here), and a
// second broker's Enrollment over the same store, with a limiter of its
// own.
func sharedEnrollment(f *enrollFixture) [2]*Enrollment {
	f.core.revokes = new(cluster.Fanout[store.Revocation])
	return [2]*Enrollment{f.Enrollment, newEnrollment(f.core, "")}
}

// TestEnrollMintLimitSharedAcrossBrokers: mints from one address on two
// brokers count against one limit; refused, they count nothing.
func TestEnrollMintLimitSharedAcrossBrokers(t *testing.T) {
	f := mustEnrollment(t, true)
	brokers := sharedEnrollment(f)
	for i := range auth.EnrollMintLimit {
		_, err := brokers[i%2].StartEnrollment(from("198.51.100.7:4000"), &apiv1.StartEnrollmentRequest{})
		require.NoError(t, err, "mint %d", i+1)
		f.clock.Add(time.Minute)
	}
	for _, e := range brokers {
		_, err := e.StartEnrollment(from("198.51.100.7:4001"), &apiv1.StartEnrollmentRequest{})
		requireCode(t, err, apierr.CodeRateLimited)
		require.Equal(t, 50*time.Minute, apierr.Render(err).RetryAfter)
	}
	hits, err := f.store.LimitHits(context.Background(), mintKeyPrefix+"198.51.100.7", f.clock.Now().Add(-time.Hour), 100)
	require.NoError(t, err)
	require.Len(t, hits, auth.EnrollMintLimit, "refused mints are not counted")
}

// TestEnrollMintFloodBounded: while the live cap refuses mints, a flood
// from distinct addresses makes the shared store keep nothing: a mint is
// counted with the enrollment it creates.
func TestEnrollMintFloodBounded(t *testing.T) {
	f := mustEnrollment(t, true)
	brokers := sharedEnrollment(f)
	ctx := context.Background()
	now := f.clock.Now()
	for i := range maxLiveEnrollments {
		rec := store.Enrollment{
			ID: newID(), DeviceHash: hashCode(newID()), UserCode: userCodeN(i),
			Status: store.EnrollmentPending, CreatedAt: now, ExpiresAt: now.Add(enrollLifetime), Interval: enrollInterval,
		}
		require.NoError(t, f.store.CreateEnrollment(ctx, rec))
	}
	const flood = 200
	addr := func(i int) string { return fmt.Sprintf("[2001:db8:%x::1]:4000", i+1) }
	for i := range flood {
		_, err := brokers[i%2].StartEnrollment(from(addr(i)), &apiv1.StartEnrollmentRequest{})
		requireCode(t, err, apierr.CodeRateLimited, "mint %d: the live cap", i)
	}
	for i := range flood {
		key := mintKey(fmt.Sprintf("2001:db8:%x::1", i+1))
		hits, err := f.store.LimitHits(ctx, mintKeyPrefix+key, now.Add(-time.Hour), 10)
		require.NoError(t, err)
		require.Empty(t, hits, "address %d: refused, not counted", i)
	}
	f.clock.Add(enrollLifetime)
	_, err := brokers[1].StartEnrollment(from(addr(0)), &apiv1.StartEnrollmentRequest{})
	require.NoError(t, err, "expired records are swept and make room")
	hits, err := f.store.LimitHits(ctx, mintKeyPrefix+mintKey("2001:db8:1::1"), now.Add(-time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, hits, 1, "a created enrollment is counted")
}
