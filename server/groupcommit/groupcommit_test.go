package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// item is what the tests submit: a value and where its answer goes.
type item struct {
	v    int
	done chan error
}

// loop runs a queue whose commit records each batch and, for the first
// batch, waits for release; it stops when the test ends.
type loop struct {
	q       *Queue[*item]
	mu      sync.Mutex
	batches [][]int
	release chan struct{}
	entered chan struct{} // closed when the first batch reaches commit
	cancel  context.CancelFunc
	stopped chan struct{}
}

func startLoop(t *testing.T, size, maxBatch int) *loop {
	t.Helper()
	l := &loop{q: New[*item](size, maxBatch), release: make(chan struct{}), entered: make(chan struct{}), stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	first := true
	go func() {
		defer close(l.stopped)
		l.q.Run(ctx, func(_ context.Context, batch []*item) {
			if first {
				first = false
				close(l.entered)
				<-l.release
			}
			vs := make([]int, len(batch))
			for i, it := range batch {
				vs[i] = it.v
			}
			l.mu.Lock()
			l.batches = append(l.batches, vs)
			l.mu.Unlock()
			for _, it := range batch {
				it.done <- nil
			}
		}, func(it *item) { it.done <- errRefused })
	}()
	t.Cleanup(func() { l.stop() })
	return l
}

var errRefused = errors.New("refused")

func (l *loop) stop() {
	l.cancel()
	<-l.stopped
}

func (l *loop) submit(ctx context.Context, v int) error {
	it := &item{v: v, done: make(chan error, 1)}
	return Submit(ctx, l.q, it, it.done, func(err error) error { return err })
}

func (l *loop) sizes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, len(l.batches))
	for i, b := range l.batches {
		out[i] = len(b)
	}
	return out
}

// Everything that waits while a batch commits goes into the next batch, up
// to maxBatch, in the order it was queued.
func TestBatches(t *testing.T) {
	tests := []struct {
		name     string
		waiting  int
		maxBatch int
		want     []int
	}{
		{name: "one waiting", waiting: 1, maxBatch: 8, want: []int{1, 1}},
		{name: "all waiting share one batch", waiting: 7, maxBatch: 8, want: []int{1, 7}},
		{name: "exactly max", waiting: 8, maxBatch: 8, want: []int{1, 8}},
		{name: "over max splits", waiting: 11, maxBatch: 4, want: []int{1, 4, 4, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := startLoop(t, 64, tc.maxBatch)
			firstDone := make(chan error, 1)
			go func() { firstDone <- l.submit(context.Background(), 0) }()
			// The first item holds the loop inside commit; the others queue,
			// one at a time so their order is known.
			<-l.entered
			var wg sync.WaitGroup
			for i := 1; i <= tc.waiting; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); require.NoError(t, l.submit(context.Background(), i)) }()
				require.Eventually(t, func() bool { return l.q.Len() == i }, 5*time.Second, time.Millisecond)
			}
			close(l.release)
			require.NoError(t, <-firstDone)
			wg.Wait()
			require.Equal(t, tc.want, l.sizes())
			var order []int
			l.mu.Lock()
			for _, b := range l.batches {
				order = append(order, b...)
			}
			l.mu.Unlock()
			for i, v := range order {
				require.Equal(t, i, v, "items commit in the order they were queued")
			}
		})
	}
}

// When the loop stops, what it never took is refused, and later submits
// fail with ErrStopped without blocking.
func TestStop(t *testing.T) {
	l := startLoop(t, 64, 1)
	firstDone := make(chan error, 1)
	go func() { firstDone <- l.submit(context.Background(), 0) }()
	<-l.entered
	waiting := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		go func() { waiting <- l.submit(context.Background(), i) }()
	}
	require.Eventually(t, func() bool { return l.q.Len() == 3 }, 5*time.Second, time.Millisecond)

	l.cancel()
	close(l.release)
	<-l.stopped
	require.NoError(t, <-firstDone, "a batch the loop took is finished")
	for range 3 {
		require.ErrorIs(t, <-waiting, errRefused, "queued items are refused")
	}
	require.ErrorIs(t, l.submit(context.Background(), 9), ErrStopped)
}

// A caller whose context ends before its item is queued gets the context's
// error; once queued, the item is answered by the loop.
func TestSubmitContext(t *testing.T) {
	l := startLoop(t, 1, 1)
	held := make(chan error, 1)
	go func() { held <- l.submit(context.Background(), 0) }()
	<-l.entered
	queued := make(chan error, 1)
	go func() { queued <- l.submit(context.Background(), 1) }() // fills the queue
	require.Eventually(t, func() bool { return l.q.Len() == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.submit(ctx, 2), context.Canceled, "a full queue and an ended context: not queued")

	close(l.release)
	require.NoError(t, <-held)
	require.NoError(t, <-queued)
}

// TestCommittedItemsAreReleased: once a batch is committed and answered,
// nothing the loop keeps holds its items (the next batch reuses the
// array; a message body is up to 64 KiB and a batch up to 512 of them).
func TestCommittedItemsAreReleased(t *testing.T) {
	type big struct {
		body [64 << 10]byte
		done chan error
	}
	const n = 4
	q := New[*big](16, 8)
	held := make(chan weak.Pointer[big], n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := &big{done: make(chan error, 1)}
			held <- weak.Make(x)
			require.NoError(t, Submit(context.Background(), q, x, x.done, func(err error) error { return err }))
		}()
	}
	// All queued before the loop starts, so they commit as one batch.
	require.Eventually(t, func() bool { return q.Len() == n }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var sizes []int
	go func() {
		defer close(stopped)
		q.Run(ctx, func(_ context.Context, batch []*big) {
			sizes = append(sizes, len(batch))
			for _, x := range batch {
				x.done <- nil
			}
		}, func(x *big) { x.done <- errRefused })
	}()
	defer func() { cancel(); <-stopped }()
	wg.Wait()
	close(held)
	for range 3 {
		runtime.GC()
	}
	for w := range held {
		require.True(t, w.Value() == nil, "a committed item is still held")
	}
	cancel()
	<-stopped
	require.Equal(t, []int{n}, sizes)
}
