package server

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"svc/server/cluster/natstest"
)

// The hook loop doubts presence for one presence lifetime after the
// broker joined, all the while NATS is cut off, and for one lifetime
// after it is back: other brokers' tables lapsed meanwhile and arrive
// again within a heartbeat.
func TestHookPresenceDoubtFollowsNATS(t *testing.T) {
	ns := natstest.Start(t)
	nc, err := nats.Connect(ns.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	now := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	const life = 15 * time.Second
	d := newPresenceDoubt(nc, life, clock)

	require.Equal(t, life, d.doubt(), "just joined: no table heard yet")
	advance(10 * time.Second)
	require.Equal(t, 5*time.Second, d.doubt())
	advance(5 * time.Second)
	require.Zero(t, d.doubt(), "a lifetime after joining")

	ns.Stop()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 10*time.Second, 5*time.Millisecond)
	advance(time.Minute)
	require.Equal(t, life, d.doubt(), "cut off")
	ns.Resume(t)
	require.Eventually(t, nc.IsConnected, 10*time.Second, 5*time.Millisecond)
	advance(time.Minute) // the reconnect is seen at the next look
	require.Equal(t, life, d.doubt(), "back, tables not heard yet")
	advance(life)
	require.Zero(t, d.doubt(), "a lifetime after it is back")

	// A short outage nobody looked at during is still seen, by the count
	// of reconnects.
	ns.Restart(t)
	require.Eventually(t, func() bool { return nc.Stats().Reconnects == 2 && nc.IsConnected() }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, life, d.doubt())
}
