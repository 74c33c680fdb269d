package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	apiv1 "svc/gen/svc/v1"
	"svc/store"
	"svc/store/sqlite"
)

// healthStore is a store whose Health the test sets.
type healthStore struct {
	store.Store
	health func() error
}

func (s healthStore) Health() error { return s.health() }

// healthActivity is an activity store whose Health the test sets.
type healthActivity struct {
	store.ActivityStore
	health func() error
}

func (s healthActivity) Health() error { return s.health() }

// TestHealthReportsFailingStores: /healthz stays an answer while the
// process is up, and says "degraded", naming each failing store, what
// fails, since when and the kind, while a store reports failures; never
// the driver's text or a path (it is public). Before, it said "ok"
// whatever the stores did.
func TestHealthReportsFailingStores(t *testing.T) {
	since := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	full := &store.FailingError{What: "writes", Since: since, Err: fmt.Errorf("commit: %w (database or disk is full at /var/lib/svc/svc.db)", store.ErrStorageFull)}
	damaged := &store.FailingError{What: "data", Since: since, Err: fmt.Errorf("select: %w", store.ErrDamaged)}
	ckpt := &store.FailingError{What: "wal checkpoints", Since: since, Err: errors.New("disk I/O error /var/lib/svc")}
	down := &store.FailingError{What: "writes", Since: since, Err: fmt.Errorf("begin: %w (dial unix /run/postgresql/.s.PGSQL.5432: connect: no such file or directory)", store.ErrUnavailable)}
	lockLost := &store.FailingError{What: "use lock", Since: since, Err: fmt.Errorf("the database is %w by a maintenance command", store.ErrInUse)}
	tests := []struct {
		name     string
		main     error
		activity error
		want     []string
	}{
		{name: "healthy"},
		{name: "main store full", main: full, want: []string{"main store: writes failing since 2026-11-28T12:00:00Z (disk full)"}},
		{name: "activity damaged and checkpoints failing", activity: errors.Join(damaged, ckpt), want: []string{
			"activity store: data damaged since 2026-11-28T12:00:00Z (stop the broker and run svc check)",
			"activity store: wal checkpoints failing since 2026-11-28T12:00:00Z (disk error)",
		}},
		{name: "main database unreachable", main: down, want: []string{"main store: writes failing since 2026-11-28T12:00:00Z (database unreachable)"}},
		{name: "main store's use lock held by another process", main: lockLost, want: []string{
			"main store: use lock lost since 2026-11-28T12:00:00Z (another broker or a maintenance command holds the database: writes are refused; stop one of them)",
		}},
		{name: "both", main: full, activity: full, want: []string{
			"main store: writes failing since 2026-11-28T12:00:00Z (disk full)",
			"activity store: writes failing since 2026-11-28T12:00:00Z (disk full)",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := healthStore{Store: mustMemStore(t), health: func() error { return tc.main }}
			mem, err := sqlite.OpenActivity(context.Background(), "")
			require.NoError(t, err)
			t.Cleanup(func() { _ = mem.Close() })
			act := healthActivity{ActivityStore: mem, health: func() error { return tc.activity }}
			srv := startTestServer(t, st, map[string][]string{"admin": {}}, Deps{Activity: act})
			got, err := apiv1.NewBrokerClient(srv.Local()).Health(context.Background(), &apiv1.HealthRequest{})
			require.NoError(t, err)
			require.Equal(t, "test", got.GetVersion())
			if tc.want == nil {
				require.Equal(t, "ok", got.GetStatus())
				require.Nil(t, got.GetProblems(), "a healthy answer is exactly {status, version}")
				return
			}
			require.Equal(t, "degraded", got.GetStatus())
			want, err := structpb.NewList(toAny(tc.want))
			require.NoError(t, err)
			require.Equal(t, want.AsSlice(), got.GetProblems().AsSlice())
		})
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
