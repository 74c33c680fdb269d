package storetest

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// enrollmentTests are the subtests of EnrollmentStore; RunAll runs them.
var enrollmentTests = []suiteTest{
	{"CreateGetEnrollment", testCreateGetEnrollment},
	{"CreateEnrollmentUnique", testCreateEnrollmentUnique},
	{"UpdateEnrollment", testUpdateEnrollment},
	{"DeleteEnrollment", testDeleteEnrollment},
	{"ListCountEnrollmentsLive", testListCountEnrollmentsLive},
	{"DeleteExpiredEnrollments", testDeleteExpiredEnrollments},
	{"EnrollmentRollsBack", testEnrollmentRollsBack},
}

func deviceHash(s string) store.DeviceCodeHash { return sha256.Sum256([]byte("device:" + s)) }

func enrollment(id, userCode string, created time.Duration) store.Enrollment {
	return store.Enrollment{
		ID: id, DeviceHash: deviceHash(id), UserCode: userCode,
		LabelHint: "laptop of " + id, SourceIP: "192.0.2.7", UserAgent: "curl/8",
		Status: store.EnrollmentPending, CreatedAt: at(created), ExpiresAt: at(created + 5*time.Minute),
		Interval: 5 * time.Second,
	}
}

// enrollmentView is an Enrollment with comparable times.
type enrollmentView struct {
	ID                                               string
	DeviceHash                                       store.DeviceCodeHash
	UserCode, LabelHint, SourceIP, UserAgent, Status string
	Reason, Member, TokenID, SealedToken             string
	CreatedAt, ExpiresAt, LastPollAt, IntervalMS     int64
}

func viewEnrollment(e store.Enrollment) enrollmentView {
	return enrollmentView{
		e.ID, e.DeviceHash, e.UserCode, e.LabelHint, e.SourceIP, e.UserAgent, e.Status,
		e.Reason, e.Member, e.TokenID, e.SealedToken,
		ms(e.CreatedAt), ms(e.ExpiresAt), ms(e.LastPollAt), e.Interval.Milliseconds(),
	}
}

func viewEnrollments(es []store.Enrollment) []enrollmentView {
	out := make([]enrollmentView, 0, len(es))
	for _, e := range es {
		out = append(out, viewEnrollment(e))
	}
	return out
}

func testCreateGetEnrollment(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := enrollment("e1", "BCDFGHJK", 0)
	require.NoError(t, s.CreateEnrollment(ctx, e))

	got, err := s.GetEnrollmentByDeviceHash(ctx, e.DeviceHash)
	require.NoError(t, err)
	require.Equal(t, viewEnrollment(e), viewEnrollment(got))
	got, err = s.GetEnrollmentByUserCode(ctx, "BCDFGHJK")
	require.NoError(t, err)
	require.Equal(t, viewEnrollment(e), viewEnrollment(got))
	require.True(t, got.LastPollAt.IsZero(), "never polled")

	_, err = s.GetEnrollmentByDeviceHash(ctx, deviceHash("other"))
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetEnrollmentByUserCode(ctx, "bcdfghjk")
	require.ErrorIs(t, err, store.ErrNotFound, "user codes are stored normalized and matched exactly")
}

func testCreateEnrollmentUnique(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := enrollment("e1", "BCDFGHJK", 0)
	require.NoError(t, s.CreateEnrollment(ctx, e))
	for _, tc := range []struct {
		name string
		mod  func(e *store.Enrollment)
	}{
		{"same id", func(e *store.Enrollment) { e.DeviceHash, e.UserCode = deviceHash("x"), "LMNPQRST" }},
		{"same device hash", func(e *store.Enrollment) { e.ID, e.UserCode = "e2", "LMNPQRST" }},
		{"same user code", func(e *store.Enrollment) { e.ID, e.DeviceHash = "e2", deviceHash("e2") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dup := e
			tc.mod(&dup)
			require.ErrorIs(t, s.CreateEnrollment(ctx, dup), store.ErrConflict)
		})
	}
	list, err := s.ListEnrollments(ctx, at(0))
	require.NoError(t, err)
	require.Equal(t, []enrollmentView{viewEnrollment(e)}, viewEnrollments(list), "a refused create stores nothing")
}

func testUpdateEnrollment(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := enrollment("e1", "BCDFGHJK", 0)
	require.NoError(t, s.CreateEnrollment(ctx, e))
	e.Status, e.Reason = store.EnrollmentApproved, "r"
	e.ExpiresAt, e.Interval, e.LastPollAt = at(10*time.Minute), 15*time.Second, at(time.Minute)
	e.Member, e.TokenID, e.SealedToken = "alice", "tok-1", `{"v":1}`
	require.NoError(t, s.UpdateEnrollment(ctx, e))
	got, err := s.GetEnrollmentByUserCode(ctx, e.UserCode)
	require.NoError(t, err)
	require.Equal(t, viewEnrollment(e), viewEnrollment(got))

	missing := enrollment("nope", "LMNPQRST", 0)
	require.ErrorIs(t, s.UpdateEnrollment(ctx, missing), store.ErrNotFound)
}

func testDeleteEnrollment(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := enrollment("e1", "BCDFGHJK", 0)
	require.NoError(t, s.CreateEnrollment(ctx, e))
	require.NoError(t, s.DeleteEnrollment(ctx, "e1"))
	_, err := s.GetEnrollmentByDeviceHash(ctx, e.DeviceHash)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.ErrorIs(t, s.DeleteEnrollment(ctx, "e1"), store.ErrNotFound)
	// The user code is free again.
	require.NoError(t, s.CreateEnrollment(ctx, enrollment("e2", "BCDFGHJK", 0)))
}

func testListCountEnrollmentsLive(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := enrollment("a", "BCDFGHJK", 0)
	b := enrollment("b", "LMNPQRST", time.Minute)
	c := enrollment("c", "VWXZBCDF", 2*time.Minute)
	for _, e := range []store.Enrollment{c, a, b} {
		require.NoError(t, s.CreateEnrollment(ctx, e))
	}
	for _, tc := range []struct {
		name string
		now  time.Duration
		want []store.Enrollment
	}{
		{"all live", time.Minute, []store.Enrollment{a, b, c}},
		{"expiry is exclusive", 5 * time.Minute, []store.Enrollment{b, c}},
		{"one left", 6*time.Minute + time.Second, []store.Enrollment{c}},
		{"none", time.Hour, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := s.ListEnrollments(ctx, at(tc.now))
			require.NoError(t, err)
			require.NotNil(t, list)
			require.Equal(t, viewEnrollments(tc.want), viewEnrollments(list))
			n, err := s.CountEnrollments(ctx, at(tc.now))
			require.NoError(t, err)
			require.Equal(t, len(tc.want), n)
		})
	}
}

func testDeleteExpiredEnrollments(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := enrollment("a", "BCDFGHJK", 0)
	b := enrollment("b", "LMNPQRST", time.Minute)
	for _, e := range []store.Enrollment{a, b} {
		require.NoError(t, s.CreateEnrollment(ctx, e))
	}
	gone, err := s.DeleteExpiredEnrollments(ctx, at(4*time.Minute))
	require.NoError(t, err)
	require.Empty(t, gone)

	gone, err = s.DeleteExpiredEnrollments(ctx, a.ExpiresAt)
	require.NoError(t, err)
	require.Equal(t, []enrollmentView{viewEnrollment(a)}, viewEnrollments(gone))
	_, err = s.GetEnrollmentByUserCode(ctx, a.UserCode)
	require.ErrorIs(t, err, store.ErrNotFound)
	got, err := s.GetEnrollmentByUserCode(ctx, b.UserCode)
	require.NoError(t, err)
	require.Equal(t, viewEnrollment(b), viewEnrollment(got))
}

func testEnrollmentRollsBack(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := enrollment("e1", "BCDFGHJK", 0)
	err := s.WithTx(ctx, func(tx store.Tx) error {
		require.NoError(t, tx.CreateEnrollment(ctx, e))
		got, err := tx.GetEnrollmentByDeviceHash(ctx, e.DeviceHash)
		require.NoError(t, err)
		require.Equal(t, "e1", got.ID, "a transaction reads its own write")
		return store.ErrPrecondition
	})
	require.ErrorIs(t, err, store.ErrPrecondition)
	_, err = s.GetEnrollmentByDeviceHash(ctx, e.DeviceHash)
	require.ErrorIs(t, err, store.ErrNotFound)
}
