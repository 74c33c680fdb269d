package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
	"svc/store/sqlite"
)

// gatedActivity holds the first AppendActivity until release is closed and
// records each call's size.
type gatedActivity struct {
	store.ActivityStore
	release chan struct{}
	calls   atomic.Int32
	mu      sync.Mutex
	sizes   []int
}

func (g *gatedActivity) AppendActivity(ctx context.Context, evs []store.ActivityEvent) ([]store.ActivityEvent, error) {
	if g.calls.Add(1) == 1 {
		<-g.release
	}
	g.mu.Lock()
	g.sizes = append(g.sizes, len(evs))
	g.mu.Unlock()
	return g.ActivityStore.AppendActivity(ctx, evs)
}

func TestMarkersShareWrites(t *testing.T) {
	act, err := sqlite.OpenActivity(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = act.Close() })
	g := &gatedActivity{ActivityStore: act, release: make(chan struct{})}
	m := newMarkers(g, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { m.run(ctx); close(stopped) }()

	ev := func(i int) store.ActivityEvent {
		return store.ActivityEvent{Member: "bob", Kind: activityOpen, TS: time.UnixMilli(int64(i + 1)), ObjectiveID: "o", Data: []byte(`{}`)}
	}
	first := make(chan error, 1)
	go func() { first <- m.write(context.Background(), ev(0)) }()
	require.Eventually(t, func() bool { return g.calls.Load() == 1 }, 5*time.Second, time.Millisecond)

	const waiting = 10
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Add(1)
		go func() { defer wg.Done(); require.NoError(t, m.write(context.Background(), ev(i+1))) }()
	}
	require.Eventually(t, func() bool { return m.queue.Len() == waiting }, 5*time.Second, time.Millisecond)
	close(g.release)
	require.NoError(t, <-first)
	wg.Wait()
	require.Equal(t, []int{1, waiting}, g.sizes, "the markers that waited share one write")
	rows, err := act.ListActivity(context.Background(), store.ActivityFilter{Member: "bob"})
	require.NoError(t, err)
	require.Len(t, rows, waiting+1)

	cancel()
	<-stopped
	require.ErrorIs(t, m.write(context.Background(), ev(99)), errShuttingDown)
}
