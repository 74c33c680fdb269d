package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
	"svc/server/notify"
	"svc/store"
)

func TestMetricsPushKinds(t *testing.T) {
	m := newMetrics(hub.New(), hub.New(), nil)
	for _, tc := range []struct {
		msg  store.Message
		push bool
	}{
		{store.Message{All: true, Thread: generalThread}, true},
		{store.Message{To: "bob", Thread: dmThread("ann", "bob")}, true},
		{store.Message{Thread: "chan:c1", Recipients: []string{"bob"}}, true},
		{store.Message{Thread: "chan:c1", Recipients: []string{"bob"}}, true},
		{store.Message{Thread: "obj:o1", Recipients: []string{"bob"}}, true},
		{store.Message{To: "bob", Thread: "hook:x"}, false},
	} {
		m.pushed(&tc.msg, tc.push)
	}
	require.EqualValues(t, 1, testutil.ToFloat64(m.pushBroadcast))
	require.EqualValues(t, 1, testutil.ToFloat64(m.pushDM))
	require.EqualValues(t, 2, testutil.ToFloat64(m.pushChannel))
	require.EqualValues(t, 2, testutil.ToFloat64(m.pushOther))
}

// A messenger counts every committed message and observes each commit;
// deliveries are read from the hub.
func TestMetricsMessengerCommits(t *testing.T) {
	h := hub.New()
	sub, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	m := newMessenger(mustMemStore(t), h, time.Now, discardLogger(), nil)
	m.met = newMetrics(h, hub.New(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, body := range []string{"one", "two"} {
		msg, pm := dm("ann", "bob", body)
		_, _, err := m.send(ctx, msg, pm)
		require.NoError(t, err)
	}
	require.EqualValues(t, 2, testutil.ToFloat64(m.met.pushDM))
	// Writers are answered before the fan-out: wait for it.
	for range 2 {
		nextEvent(t, sub, 10*time.Second)
	}
	require.Eventually(t, func() bool { d, _ := h.Stats(); return d == 2 }, 10*time.Second, time.Millisecond)
	requireSamples(t, m.met, "svc_commit_seconds", "messages", 2)
	requireSamples(t, m.met, "svc_commit_batch_size", "messages", 2)
	requireSamples(t, m.met, "svc_commit_seconds", "activity", 0)
}

// requireSamples asserts how many observations the histogram name of
// writer holds.
func requireSamples(t *testing.T, m *metrics, name, writer string, n uint64) {
	t.Helper()
	fams, err := m.reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "writer" && l.GetValue() == writer {
					require.Equal(t, n, mt.GetHistogram().GetSampleCount())
					return
				}
			}
		}
	}
	t.Fatalf("no %s{writer=%q}", name, writer)
}

// A counted feed is a live stream of its kind until its first Close.
func TestMetricsLiveStreams(t *testing.T) {
	c := &core{store: mustMemStore(t), hub: hub.New()}
	c.metrics = newMetrics(c.hub, hub.New(), nil)
	f1, err := c.attach(context.Background(), bobPrincipal, 0, false)
	f1, err = c.counted(f1, err, streamSSE)
	require.NoError(t, err)
	f2, err := c.attach(context.Background(), bobPrincipal, 0, false)
	f2, err = c.counted(f2, err, streamGRPC)
	require.NoError(t, err)
	_, err = c.counted(nil, errors.New("refused"), streamGRPC)
	require.Error(t, err)
	require.EqualValues(t, 1, c.metrics.streamsSSE.Load())
	require.EqualValues(t, 1, c.metrics.streamsGRPC.Load())
	f1.Close()
	f1.Close()
	require.Zero(t, c.metrics.streamsSSE.Load(), "a second Close counts nothing")
	f2.Close()
	require.Zero(t, c.metrics.streamsGRPC.Load())
}

// svc_streams_cut_total counts a stream once, when it has really ended
// (its feed's first Close), by why the broker cut it: a stream the hub
// cut off but that is still stuck (in a write) is live and not yet
// counted; a stream that ended any other way is not a cut.
func TestMetricsStreamCuts(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind string
		// end ends the stream as its handler would, before Close.
		end        func(t *testing.T, c *core, h *hub.Hub, f *Feed)
		wantStream string
		wantReason string // "" counts nothing
	}{
		{name: "slow reader, parked", kind: streamSSE, end: func(t *testing.T, _ *core, h *hub.Hub, f *Feed) {
			overflow(h)
			_, err := f.Next(context.Background(), nil)
			require.ErrorIs(t, err, errFellBehind)
		}, wantStream: "chat", wantReason: cutSlowReader},
		{name: "slow reader, stuck in a write", kind: streamGRPC, end: func(t *testing.T, _ *core, h *hub.Hub, f *Feed) {
			// The reader never calls Next again: the write it was stuck in
			// fails once its connection is closed.
			overflow(h)
		}, wantStream: "chat", wantReason: cutSlowReader},
		{name: "write timeout", kind: streamSSE, end: func(t *testing.T, _ *core, _ *hub.Hub, f *Feed) {
			f.WriteTimedOut()
		}, wantStream: "chat", wantReason: cutWriteTimeout},
		{name: "write timeout, then cut off", kind: streamGRPC, end: func(t *testing.T, _ *core, h *hub.Hub, f *Feed) {
			f.WriteTimedOut()
			overflow(h)
		}, wantStream: "chat", wantReason: cutWriteTimeout},
		{name: "activity stream", kind: streamActivity, end: func(t *testing.T, _ *core, _ *hub.Hub, f *Feed) {
			f.WriteTimedOut()
		}, wantStream: "activity", wantReason: cutWriteTimeout},
		{name: "client left", kind: streamGRPC, end: func(*testing.T, *core, *hub.Hub, *Feed) {}},
		{name: "shutdown", kind: streamSSE, end: func(t *testing.T, _ *core, h *hub.Hub, f *Feed) {
			h.Close()
			_, err := f.Next(context.Background(), nil)
			require.ErrorIs(t, err, errShuttingDown)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hub.New(hub.WithBuffer(1))
			c := &core{store: mustMemStore(t), hub: h}
			c.metrics = newMetrics(h, hub.New(), nil)
			f, err := c.attach(context.Background(), bobPrincipal, 0, false)
			f, err = c.counted(f, err, tc.kind)
			require.NoError(t, err)
			gauge := c.metrics.streamGauge(tc.kind)
			tc.end(t, c, h, f)
			require.EqualValues(t, 1, gauge.Load(), "live until it has ended")
			require.Zero(t, cutTotal(t, c.metrics), "not counted before it has ended")
			f.Close()
			f.Close()
			require.Zero(t, gauge.Load())
			for _, stream := range []string{"chat", "activity"} {
				for _, reason := range []string{cutSlowReader, cutWriteTimeout} {
					want := 0.0
					if stream == tc.wantStream && reason == tc.wantReason {
						want = 1
					}
					require.Equal(t, want, cutValue(t, c.metrics, stream, reason), "%s/%s", stream, reason)
				}
			}
		})
	}
}

// overflow publishes to bob past a buffer of one: his streams are cut off.
func overflow(h *hub.Hub) {
	for seq := int64(1); seq <= 2; seq++ {
		h.Publish(hub.NewEvent(seq, &apiv1.Message{}), false, "alice", []string{"bob"})
	}
}

// cutValue is svc_streams_cut_total{stream, reason}; it fails when the
// series is not shown.
func cutValue(t *testing.T, m *metrics, stream, reason string) float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "svc_streams_cut_total" {
			continue
		}
	next:
		for _, mt := range f.GetMetric() {
			want := map[string]string{"stream": stream, "reason": reason}
			for _, l := range mt.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return mt.GetCounter().GetValue()
		}
	}
	t.Fatalf("no svc_streams_cut_total{stream=%q,reason=%q}", stream, reason)
	return 0
}

// cutTotal is svc_streams_cut_total summed over every series.
func cutTotal(t *testing.T, m *metrics) float64 {
	t.Helper()
	var n float64
	for _, stream := range []string{"chat", "activity"} {
		for _, reason := range []string{cutSlowReader, cutWriteTimeout} {
			n += cutValue(t, m, stream, reason)
		}
	}
	return n
}

// Hook statuses are a fixed set; anything else is "other". Web push
// results count by kind.
func TestMetricsHooksAndWebPush(t *testing.T) {
	m := newMetrics(hub.New(), hub.New(), nil)
	m.hookStatuses(notify.Statuses)
	m.hooked(notify.StatusDelivered)
	m.hooked(notify.StatusRejected)
	m.hooked(notify.StatusRejected)
	m.hooked("no such status")
	require.EqualValues(t, 1, testutil.ToFloat64(m.hooks[notify.StatusDelivered]))
	require.EqualValues(t, 2, testutil.ToFloat64(m.hooks[notify.StatusRejected]))
	require.EqualValues(t, 1, testutil.ToFloat64(m.hooks["other"]))
	n := &pushNotifier{met: m}
	n.count(false, nil)
	n.count(false, errors.New("refused"))
	n.count(true, errors.New("410"))
	require.EqualValues(t, 1, testutil.ToFloat64(m.pushSent))
	require.EqualValues(t, 1, testutil.ToFloat64(m.pushFailed))
	require.EqualValues(t, 1, testutil.ToFloat64(m.pushGone))
}

// A counted feed counts its event writes as svc_sse_writes_total of its
// stream (chat for SSE chat streams, activity, team); a gRPC chat feed,
// whose writes its transport makes, counts none.
func TestMetricsSSEWrites(t *testing.T) {
	c := &core{store: mustMemStore(t), hub: hub.New()}
	c.metrics = newMetrics(c.hub, hub.New(), nil)
	for _, tc := range []struct {
		kind   string
		writes int
	}{{streamSSE, 3}, {streamGRPC, 5}, {streamActivity, 2}, {streamTeam, 1}} {
		f, err := c.attach(context.Background(), bobPrincipal, 0, false)
		f, err = c.counted(f, err, tc.kind)
		require.NoError(t, err)
		for range tc.writes {
			f.Wrote()
		}
		f.Close()
	}
	require.EqualValues(t, 3, testutil.ToFloat64(c.metrics.writesChat))
	require.EqualValues(t, 2, testutil.ToFloat64(c.metrics.writesActivity))
	require.EqualValues(t, 1, testutil.ToFloat64(c.metrics.writesTeam))
	fams, err := c.metrics.reg.Gather()
	require.NoError(t, err)
	var series int
	for _, fam := range fams {
		if fam.GetName() == "svc_sse_writes_total" {
			series = len(fam.GetMetric())
		}
	}
	require.Equal(t, 3, series, "chat, activity and team, from the start")
}
