package activity

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
	"svc/store"
	"svc/store/sqlite"
)

// gatedActivity holds the first CommitActivity until release is closed,
// records each call's size, and fails any batch holding a row of kind
// "poison".
type gatedActivity struct {
	store.ActivityStore
	release chan struct{}
	calls   atomic.Int32
	mu      sync.Mutex
	sizes   []int
}

func (g *gatedActivity) CommitActivity(ctx context.Context, b store.ActivityBatch) ([]store.ActivityEvent, error) {
	if g.calls.Add(1) == 1 {
		<-g.release
	}
	g.mu.Lock()
	g.sizes = append(g.sizes, len(b.Events))
	g.mu.Unlock()
	for _, ev := range b.Events {
		if ev.Kind == "poison" {
			return nil, errors.New("refused")
		}
	}
	return g.ActivityStore.CommitActivity(ctx, b)
}

func startWriter(t *testing.T) (*writer, *gatedActivity, *hub.Hub, func()) {
	t.Helper()
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	g := &gatedActivity{ActivityStore: act, release: make(chan struct{})}
	h := hub.New()
	w := newWriter(g, h, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.run(ctx); close(stopped) }()
	return w, g, h, func() { cancel(); <-stopped }
}

func row(member, kind string, i int) store.ActivityEvent {
	return store.ActivityEvent{Member: member, Kind: kind, TS: time.UnixMilli(int64(i + 1)), ObjectiveID: "o", Data: []byte(`{"i":1}`)}
}

func TestActivityWriterSharesWrites(t *testing.T) {
	w, g, _, stop := startWriter(t)
	first := make(chan error, 1)
	go func() {
		_, err := w.write(context.Background(), store.ActivityBatch{Events: []store.ActivityEvent{row("bob", store.KindObjectiveOpen, 0)}})
		first <- err
	}()
	require.Eventually(t, func() bool { return g.calls.Load() == 1 }, 5*time.Second, time.Millisecond)

	const waiting = 10
	var wg sync.WaitGroup
	ids := make([][]int64, waiting)
	for i := range waiting {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, err := w.write(context.Background(), store.ActivityBatch{Events: []store.ActivityEvent{row("bob", store.KindObjectiveOpen, i+1), row("bob", store.KindObjectiveClose, i+1)}})
			require.NoError(t, err)
			require.Len(t, rows, 2, "each writer gets its own rows back")
			require.Equal(t, store.KindObjectiveOpen, rows[0].Kind)
			require.Equal(t, store.KindObjectiveClose, rows[1].Kind)
			ids[i] = []int64{rows[0].ID, rows[1].ID}
		}()
	}
	require.Eventually(t, func() bool { return w.queue.Len() == waiting }, 5*time.Second, time.Millisecond)
	close(g.release)
	require.NoError(t, <-first)
	wg.Wait()
	require.Equal(t, []int{1, 2 * waiting}, g.sizes, "the batches that waited share one write")
	for _, p := range ids {
		require.Equal(t, p[0]+1, p[1], "a batch's rows are stored together")
	}
	rows, err := g.ListActivity(context.Background(), store.ActivityFilter{Member: "bob"})
	require.NoError(t, err)
	require.Len(t, rows, 2*waiting+1)

	stop()
	_, err = w.write(context.Background(), store.ActivityBatch{Events: []store.ActivityEvent{row("bob", store.KindObjectiveOpen, 99)}})
	require.ErrorIs(t, err, ErrShuttingDown)
}

func TestActivityWriterIsolatesARefusedBatch(t *testing.T) {
	w, g, _, stop := startWriter(t)
	defer stop()
	go func() {
		_, _ = w.write(context.Background(), store.ActivityBatch{Events: []store.ActivityEvent{row("bob", store.KindObjectiveOpen, 0)}})
	}()
	require.Eventually(t, func() bool { return g.calls.Load() == 1 }, 5*time.Second, time.Millisecond)

	kinds := []string{store.KindObjectiveOpen, "poison", store.KindObjectiveClose}
	errs := make([]error, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.write(context.Background(), store.ActivityBatch{Events: []store.ActivityEvent{row("ann", k, i)}})
		}()
	}
	require.Eventually(t, func() bool { return w.queue.Len() == len(kinds) }, 5*time.Second, time.Millisecond)
	close(g.release)
	wg.Wait()
	require.NoError(t, errs[0])
	require.Error(t, errs[1], "the refused batch fails")
	require.NoError(t, errs[2], "the batches beside it are written alone")
	rows, err := g.ListActivity(context.Background(), store.ActivityFilter{Member: "ann", OldestFirst: true})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, []string{store.KindObjectiveOpen, store.KindObjectiveClose}, []string{rows[0].Kind, rows[1].Kind})
}

func TestActivityWriterPublishesToTheMembersStreams(t *testing.T) {
	w, g, h, stop := startWriter(t)
	defer stop()
	close(g.release)
	bob, err := h.SubscribeAs("bob", "ann", "token:ann")
	require.NoError(t, err)
	defer bob.Close()

	rows, err := w.write(context.Background(), store.ActivityBatch{Events: []store.ActivityEvent{row("carl", store.KindObjectiveOpen, 0), row("bob", store.KindObjectiveClose, 1)}})
	require.NoError(t, err)
	if ev := nextEvent(t, bob, 5*time.Second); ev != nil {
		require.Equal(t, rows[1].ID, ev.Seq)
		r := ev.Value.(*apiv1.ActivityRow)
		require.Equal(t, "bob", r.GetMember())
		require.Equal(t, store.KindObjectiveClose, r.GetKind())
		require.Equal(t, "o", r.GetObjectiveId())
		require.InDelta(t, 1, r.GetData().AsMap()["i"], 0)
		require.Equal(t, float64(rows[1].ID), r.GetId())
	}
	if ev, _ := bob.Next(); ev != nil {
		t.Fatalf("carl's row reached bob's stream: %v", ev.Value)
	}
}
