package natstest_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"svc/server/cluster/natstest"
)

// TestStartRestart proves the helper serves NATS on loopback and that a
// client reconnects to the same URL after Restart.
func TestStartRestart(t *testing.T) {
	s := natstest.Start(t)
	require.Regexp(t, `^nats://127\.0\.0\.1:\d+$`, s.URL())
	url := s.URL()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	got := make(chan string, 4)
	_, err = nc.Subscribe("t", func(m *nats.Msg) { got <- string(m.Data) })
	require.NoError(t, err)
	require.NoError(t, nc.Publish("t", []byte("one")))
	require.Equal(t, "one", <-got)

	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	s.Restart(t)
	require.Equal(t, url, s.URL())
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("client did not reconnect after restart")
	}
	require.NoError(t, nc.Flush()) // the subscription is back on the new server
	require.NoError(t, nc.Publish("t", []byte("two")))
	require.Equal(t, "two", <-got)
}
