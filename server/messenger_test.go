package server

import (
	"context"
	"fmt"
	"math"
	"svc/server/apierr"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
	"svc/store"
)

// gatedStore holds the first AppendMessages until release is closed and
// counts the calls, so a test can see how pushes were grouped.
type gatedStore struct {
	store.Store
	release chan struct{}
	calls   atomic.Int32
	sizes   sync.Map // call number -> batch size
}

// WithTx hands fn a transaction whose AppendMessages is gated.
func (g *gatedStore) WithTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return g.Store.WithTx(ctx, func(tx store.Tx) error { return fn(gatedTx{Tx: tx, g: g}) })
}

type gatedTx struct {
	store.Tx
	g *gatedStore
}

func (t gatedTx) AppendMessages(ctx context.Context, msgs []store.Message) ([]store.Message, error) {
	n := t.g.calls.Add(1)
	t.g.sizes.Store(n, len(msgs))
	if n == 1 {
		<-t.g.release
	}
	return t.Tx.AppendMessages(ctx, msgs)
}

// send commits msg and publishes it, as Push does without attachments; it
// returns once the message is durable.
func (m *messenger) send(ctx context.Context, msg store.Message, pm *apiv1.Message) (*apiv1.Message, int, error) {
	r := m.change(ctx, nil, &msg, pm)
	if r.err != nil {
		return nil, 0, r.err
	}
	return r.msgs[0], r.live, nil
}

func mustMessenger(t *testing.T, st store.Store, h *hub.Hub) *messenger {
	t.Helper()
	m := newMessenger(st, h, time.Now, discardLogger(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

func dm(from, to, body string) (store.Message, *apiv1.Message) {
	m := store.Message{From: from, To: to, Thread: dmThread(from, to), Body: body, Level: "info", Recipients: []string{to}}
	return m, &apiv1.Message{From: from, To: &m.To, Body: body, Level: "info"}
}

func TestGroupCommitSharesTransactionsAndPublishesInOrder(t *testing.T) {
	const pushes = 64
	gs := &gatedStore{Store: mustMemStore(t), release: make(chan struct{})}
	h := hub.New(hub.WithBuffer(pushes))
	sub, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	m := mustMessenger(t, gs, h)

	ids := make(chan string, pushes)
	var wg sync.WaitGroup
	push := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, pm := dm("alice", "bob", "m"+string(rune('A'+i%26)))
			out, live, err := m.send(context.Background(), msg, pm)
			require.NoError(t, err)
			require.Equal(t, 1, live)
			ids <- out.GetId()
		}()
	}
	// The first push holds the committer inside its transaction; only then
	// do the others start, so every one of them queues behind it.
	push(0)
	require.Eventually(t, func() bool { return gs.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	for i := 1; i < pushes; i++ {
		push(i)
	}
	require.Eventually(t, func() bool { return m.queue.Len() == pushes-1 }, 5*time.Second, time.Millisecond)
	close(gs.release)
	wg.Wait()
	close(ids)

	require.Equal(t, int32(2), gs.calls.Load(), "every push waiting behind the first batch shares one transaction")
	first, _ := gs.sizes.Load(int32(1))
	require.Equal(t, 1, first)
	second, _ := gs.sizes.Load(int32(2))
	require.Equal(t, pushes-1, second)
	seen := map[string]bool{}
	for id := range ids {
		require.Len(t, id, 16)
		seen[id] = true
	}
	require.Len(t, seen, pushes, "ids are unique")
	var last int64
	for range pushes {
		e := nextEvent(t, sub, 10*time.Second)
		require.Greater(t, e.Seq, last, "the hub sees commit order")
		require.Equal(t, formatMessageID(e.Seq), e.Value.(*apiv1.Message).GetId())
		last = e.Seq
	}
}

// A change whose apply fails is rolled back alone: what it wrote and the
// messages it made are gone, and the changes sharing its batch commit.
func TestChangeFailingApplyRollsBackAlone(t *testing.T) {
	gs := &gatedStore{Store: mustMemStore(t), release: make(chan struct{})}
	require.NoError(t, gs.PutMember(context.Background(), store.Member{Name: "alice"}))
	h := hub.New()
	sub, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	m := mustMessenger(t, gs, h)

	// The first push holds the committer, so the three changes below share
	// the next batch.
	held := make(chan error, 1)
	go func() {
		msg, pm := dm("alice", "bob", "first")
		_, _, err := m.send(context.Background(), msg, pm)
		held <- err
	}()
	require.Eventually(t, func() bool { return gs.calls.Load() == 1 }, 5*time.Second, time.Millisecond)

	channel := func(id string) func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
		return func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
			if err := tx.CreateChannel(ctx, store.Channel{ID: id, Slug: id, CreatedBy: "alice"}); err != nil {
				return nil, err
			}
			msg, _ := dm("alice", "bob", "made "+id)
			return []store.Message{msg}, nil
		}
	}
	refused := apierr.Errorf(apierr.CodeConflict, "refused")
	results := make([]committed, 3)
	var wg sync.WaitGroup
	for i, apply := range []func(ctx context.Context, tx store.Tx) ([]store.Message, error){
		channel("kept"),
		func(ctx context.Context, tx store.Tx) ([]store.Message, error) {
			if _, err := channel("dropped")(ctx, tx); err != nil {
				return nil, err
			}
			return nil, refused
		},
		nil, // a plain message
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, pm := dm("alice", "bob", fmt.Sprintf("plain %d", i))
			if apply != nil {
				results[i] = m.change(context.Background(), apply, nil, nil)
			} else {
				results[i] = m.change(context.Background(), nil, &msg, pm)
			}
		}()
	}
	require.Eventually(t, func() bool { return m.queue.Len() == 3 }, 5*time.Second, time.Millisecond)
	close(gs.release)
	wg.Wait()
	require.NoError(t, <-held)

	require.NoError(t, results[0].err)
	require.Equal(t, "made kept", results[0].msgs[0].GetBody())
	require.ErrorIs(t, results[1].err, refused)
	require.Empty(t, results[1].msgs)
	require.NoError(t, results[2].err)
	require.Equal(t, int32(2), gs.calls.Load(), "the three changes shared one transaction")
	size, _ := gs.sizes.Load(int32(2))
	require.Equal(t, 2, size, "the refused change's message is not appended")

	_, err = gs.GetChannel(context.Background(), "kept")
	require.NoError(t, err)
	_, err = gs.GetChannel(context.Background(), "dropped")
	require.ErrorIs(t, err, store.ErrNotFound, "the refused change's write is rolled back")
	var bodies []string
	for range 3 {
		bodies = append(bodies, nextEvent(t, sub, 10*time.Second).Value.(*apiv1.Message).GetBody())
	}
	require.Equal(t, "first", bodies[0])
	require.ElementsMatch(t, []string{"made kept", "plain 2"}, bodies[1:])
	if e, _ := sub.Next(); e != nil {
		t.Fatalf("unexpected message %q", e.Value.(*apiv1.Message).GetBody())
	}
}

func TestMessengerRefusesAfterStop(t *testing.T) {
	m := newMessenger(mustMemStore(t), hub.New(), time.Now, discardLogger(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.run(ctx)
	msg, pm := dm("alice", "bob", "late")
	_, _, err := m.send(context.Background(), msg, pm)
	require.ErrorIs(t, err, errShuttingDown)
}

func TestParseMessageID(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "0000000000000042", want: 42},
		{in: "42", want: 42},
		{in: "9223372036854775807", want: 9223372036854775807},
		{in: "9223372036854775808", want: math.MaxInt64},
		{in: "9999999999999999999", want: math.MaxInt64},
		{in: "00000000000000000001", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1e3", wantErr: true},
		{in: "abc", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMessageID(tc.in)
			if tc.wantErr {
				require.Error(t, err)
				require.Equal(t, apierr.CodeBadRequest, apierr.Classify(err).Code)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseMessageID(f *testing.F) {
	for _, s := range []string{"", "0", "0000000000000042", "9223372036854775807", "-1", "\x00", "１２"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseMessageID(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		back, err := ParseMessageID(formatMessageID(n))
		require.NoError(t, err)
		require.Equal(t, n, back, "ids round-trip")
		require.LessOrEqual(t, len(s), 19)
	})
}

// TestWritersAnsweredBeforeFanOut: a writer's answer does not wait for
// the fan-out (a broadcast to a thousand streams wakes a thousand
// goroutines, and an answer sent after them waited behind them all); the
// message still reaches every stream, and the live count is Publish's.
func TestWritersAnsweredBeforeFanOut(t *testing.T) {
	h := hub.New()
	sub, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	release := make(chan struct{})
	published := make(chan string, 1)
	m := newMessenger(mustMemStore(t), h, time.Now, discardLogger(), func(s store.Message, _ func(string) bool) {
		published <- s.Body
		<-release // the fan-out of this batch is not over
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	msg, pm := dm("alice", "bob", "hello")
	answered := make(chan int, 1)
	go func() {
		_, live, err := m.send(context.Background(), msg, pm)
		assert.NoError(t, err)
		answered <- live
	}()
	select {
	case live := <-answered:
		require.Equal(t, 1, live, "bob's stream is live")
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the writer was answered only after the fan-out")
	}
	require.Equal(t, "hello", <-published)
	close(release)
	ev := nextEvent(t, sub, 10*time.Second)
	require.Equal(t, "hello", ev.Value.(*apiv1.Message).GetBody())
}

// TestFormatMessageID: ids are 16 zero-padded digits (more when the
// sequence needs them), exactly as fmt's %016d renders them.
func TestFormatMessageID(t *testing.T) {
	for _, seq := range []int64{0, 1, 42, 999_999_999_999_999, 1_000_000_000_000_000, 9_999_999_999_999_999, 10_000_000_000_000_000, math.MaxInt64, -1, math.MinInt64} {
		require.Equal(t, fmt.Sprintf("%016d", seq), formatMessageID(seq), "seq %d", seq)
	}
}
