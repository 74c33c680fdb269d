package server

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
)

// guardWait bounds every wait of these tests.
const guardWait = 10 * time.Second

// blockedSend is a Send that blocks, as one on a full flow-control window
// does, until the stream is aborted.
type blockedSend struct {
	aborts  atomic.Int32
	aborted chan struct{}
	started chan struct{}
}

func newBlockedSend() *blockedSend {
	return &blockedSend{aborted: make(chan struct{}), started: make(chan struct{}, 16)}
}

func (b *blockedSend) abort() {
	if b.aborts.Add(1) == 1 {
		close(b.aborted)
	}
}

func (b *blockedSend) send() error {
	b.started <- struct{}{}
	select {
	case <-b.aborted:
		return context.Canceled // what the transport reports
	case <-time.After(guardWait):
		return nil
	}
}

// guardedFeed opens a counted gRPC feed of bob's messages over a hub with
// a buffer of one, and a guard whose aborts b counts.
func guardedFeed(t *testing.T, b *blockedSend, timeout time.Duration) (*core, *Feed, *sendGuard) {
	t.Helper()
	c := &core{store: mustMemStore(t), hub: hub.New(hub.WithBuffer(1))}
	c.metrics = newMetrics(c.hub, hub.New(), nil)
	f, err := c.attach(context.Background(), bobPrincipal, 0, false)
	f, err = c.counted(f, err, streamGRPC)
	require.NoError(t, err)
	t.Cleanup(f.Close)
	g := newSendGuard(WithStreamAbort(context.Background(), b.abort), f, timeout)
	t.Cleanup(g.stop)
	return c, f, g
}

// A Send that does not complete within the timeout aborts the stream and
// ends it as a write timeout.
func TestSendGuardTimesOut(t *testing.T) {
	b := newBlockedSend()
	c, f, g := guardedFeed(t, b, 50*time.Millisecond)
	err := g.send(b.send)
	require.ErrorIs(t, err, errWriteTimeout)
	require.EqualValues(t, 1, b.aborts.Load())
	f.Close()
	require.Equal(t, 1.0, cutValue(t, c.metrics, "chat", cutWriteTimeout))
	require.Zero(t, c.metrics.streamsGRPC.Load())
}

// A stream cut off while a Send is blocked ends at once, not at the
// Send's deadline.
func TestSendGuardCutWhileSending(t *testing.T) {
	b := newBlockedSend()
	c, f, g := guardedFeed(t, b, time.Hour)
	done := make(chan error, 1)
	go func() { done <- g.send(b.send) }()
	<-b.started
	overflow(c.hub)
	select {
	case err := <-done:
		require.ErrorIs(t, err, errFellBehind)
	case <-time.After(guardWait):
		t.Fatal("the cut did not end the blocked Send")
	}
	require.EqualValues(t, 1, b.aborts.Load())
	f.Close()
	require.Equal(t, 1.0, cutValue(t, c.metrics, "chat", cutSlowReader))
	require.Zero(t, cutValue(t, c.metrics, "chat", cutWriteTimeout))
}

// Cut off between Sends, the stream ends through Feed.Next, and a Send
// started after the cut is refused: the connection is left alone.
func TestSendGuardCutBetweenSends(t *testing.T) {
	b := newBlockedSend()
	c, f, g := guardedFeed(t, b, time.Hour)
	overflow(c.hub)
	_, err := f.Next(context.Background(), nil)
	require.ErrorIs(t, err, errFellBehind)
	require.ErrorIs(t, g.send(b.send), errFellBehind)
	require.Zero(t, b.aborts.Load())
	require.Empty(t, b.started, "nothing is sent after the cut")
}

// Sends that complete leave the stream alone, however long it lives.
func TestSendGuardQuickSendsNeverAbort(t *testing.T) {
	b := newBlockedSend()
	_, _, g := guardedFeed(t, b, 20*time.Millisecond)
	for range 20 {
		require.NoError(t, g.send(func() error { return nil }))
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // any timer left armed has fired
	require.Zero(t, b.aborts.Load())
}

// serveFeed runs a whole stream: the ready event, then each event, until
// the feed is cut off.
func TestServeFeed(t *testing.T) {
	c := &core{store: mustMemStore(t), hub: hub.New(hub.WithBuffer(4))}
	f, err := c.attach(context.Background(), bobPrincipal, 0, false)
	require.NoError(t, err)
	defer f.Close()
	got := make(chan int64, 16)
	done := make(chan error, 1)
	go func() {
		done <- serveFeed(context.Background(), f, func() error { got <- 0; return nil },
			func(ev *hub.Event) error { got <- ev.Seq; return nil })
	}()
	require.Equal(t, int64(0), <-got, "the ready event first")
	c.hub.Publish(hub.NewEvent(1, &apiv1.Message{}), false, "alice", []string{"bob"})
	require.Equal(t, int64(1), <-got)
	c.hub.Close()
	select {
	case err := <-done:
		require.ErrorIs(t, err, errShuttingDown)
	case <-time.After(guardWait):
		t.Fatal("serveFeed did not end with its feed")
	}
}

// streamAbort finds the abort a ServeHTTP handler gave, else the native
// connection to close, else nothing.
func TestStreamAbort(t *testing.T) {
	require.Nil(t, streamAbort(context.Background()))

	called := false
	streamAbort(WithStreamAbort(context.Background(), func() { called = true }))()
	require.True(t, called)

	server, client := net.Pipe()
	defer client.Close()
	conn, info, err := newConnCreds().ServerHandshake(server)
	require.NoError(t, err)
	require.Equal(t, credentials.NoSecurity, info.(connInfo).SecurityLevel)
	ctx := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
	streamAbort(ctx)()
	_, err = conn.Write([]byte("x"))
	require.ErrorIs(t, err, io.ErrClosedPipe, "the abort closed the connection")
}
