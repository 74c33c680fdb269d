package gateway

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/hub"
)

// captureOut records each batch a stream sends.
type captureOut struct{ sends []string }

func (o *captureOut) SetWriteDeadline(time.Time) error { return nil }

func (o *captureOut) Send(b []byte) error {
	o.sends = append(o.sends, string(b))
	return nil
}

// framedFeed is a fakeFeed sharing its frames as server.Feed does.
type framedFeed struct {
	*fakeFeed
	ids *hub.IDs
}

func (f framedFeed) Frame(ev *hub.Event, name string) []byte { return ev.Frame(f.ids, name) }

// fakeIDs are fakeFeed's ids as a hub.IDs.
var fakeIDs = &hub.IDs{Format: func(seq int64) string { return strconv.FormatInt(seq, 10) }}

// sends serves evs (all ready at once) and a ping through a stream over f
// and returns each write.
func sends(t *testing.T, f feed, in chan *hub.Event, evs []*hub.Event) []string {
	t.Helper()
	out := &captureOut{}
	s := &stream{g: &Gateway{log: slog.New(slog.DiscardHandler)}, out: out, f: f, event: "message", holder: "bob"}
	s.fr, _ = f.(framer)
	for _, ev := range evs {
		in <- ev
	}
	for {
		ev := f.Buffered()
		if ev == nil {
			break
		}
		require.NoError(t, s.deliver(ev))
	}
	require.NoError(t, s.deliver(nil))
	return out.sends
}

// TestSharedFramesOnTheWire: a stream over a feed that shares its frames
// writes the same bytes in the same writes as one rendering each frame
// itself (the path before sharing), and both match the SSE frame written
// out by hand: one event (written straight from the shared frame), small
// batches, a batch past maxCoalesce, and large events crossing batchFlush.
func TestSharedFramesOnTheWire(t *testing.T) {
	cases := []struct {
		name string
		n    int
		body int
	}{
		{"one event", 1, 10},
		{"two events", 2, 10},
		{"a batch", 7, 100},
		{"past maxCoalesce", maxCoalesce*2 + 3, 20},
		{"past batchFlush", 9, 9 << 10},
		{"one large event", 1, 70 << 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs := make([]*hub.Event, c.n)
			var want strings.Builder
			for i := range evs {
				body := strings.Repeat(string(rune('a'+i%26)), c.body) + "\n\"é\""
				evs[i] = hub.NewEvent(int64(100+i), &apiv1.Message{Id: strconv.Itoa(100 + i), Body: body})
				want.WriteString("id: " + strconv.Itoa(100+i) + "\nevent: message\ndata: " + string(evs[i].JSON()) + "\n\n")
			}
			want.WriteString(": ping\n\n")
			plain := &fakeFeed{evs: make(chan *hub.Event, len(evs))}
			old := sends(t, plain, plain.evs, evs)
			shared := &fakeFeed{evs: make(chan *hub.Event, len(evs))}
			got := sends(t, framedFeed{shared, fakeIDs}, shared.evs, evs)
			require.Equal(t, old, got, "the same writes with shared frames")
			require.Equal(t, want.String(), strings.Join(got, ""))
			again := &fakeFeed{evs: make(chan *hub.Event, len(evs))}
			require.Equal(t, old, sends(t, framedFeed{again, fakeIDs}, again.evs, evs), "a second stream reading the shared frames")
		})
	}
}

// discardOut takes every batch and keeps nothing.
type discardOut struct{}

func (discardOut) SetWriteDeadline(time.Time) error { return nil }
func (discardOut) Send([]byte) error                { return nil }

// oneFeed hands out one event at a time, as a stream's feed does for a
// broadcast, with the real wire id format (16 digits).
type oneFeed struct{ ev *hub.Event }

func (f *oneFeed) Next(context.Context, <-chan time.Time) (*hub.Event, error) { return f.ev, nil }
func (f *oneFeed) Buffered() *hub.Event                                       { return nil }
func (f *oneFeed) ID(ev *hub.Event) string                                    { return benchIDs.Format(ev.Seq) }
func (f *oneFeed) WriteTimedOut()                                             {}
func (f *oneFeed) Wrote()                                                     {}
func (f *oneFeed) Close()                                                     {}

type framedOne struct{ *oneFeed }

func (f framedOne) Frame(ev *hub.Event, name string) []byte { return ev.Frame(benchIDs, name) }

// benchIDs format as server's message ids do (16 zero-padded digits, one
// allocation).
var benchIDs = &hub.IDs{Format: func(seq int64) string {
	var d [20]byte
	n := strconv.AppendInt(d[:0], seq, 10)
	var out [16]byte
	copy(out[16-len(n):], n)
	for i := range 16 - len(n) {
		out[i] = '0'
	}
	return string(out[:])
}}

// BenchmarkBroadcastFrames: one message delivered to 1000 streams, each
// rendering its frame (per-stream) or writing the shared one (shared);
// the write itself is left out, so what is measured is the encoding.
func BenchmarkBroadcastFrames(b *testing.B) {
	for _, mode := range []string{"per-stream", "shared"} {
		b.Run(mode, func(b *testing.B) {
			streams := make([]*stream, 1000)
			feeds := make([]*oneFeed, len(streams))
			for i := range streams {
				feeds[i] = &oneFeed{}
				var f feed = feeds[i]
				if mode == "shared" {
					f = framedOne{feeds[i]}
				}
				streams[i] = &stream{g: &Gateway{}, out: discardOut{}, f: f, event: "message"}
				streams[i].fr, _ = f.(framer)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ev := hub.NewEvent(int64(1000+i), &apiv1.Message{Id: strconv.Itoa(i), From: "alice", Body: strings.Repeat("x", 64)})
				for _, s := range streams {
					if err := s.deliver(ev); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestStreamCountsEventWrites: a stream counts each write that carries
// events (svc_sse_writes_total), whether the events were shared frames or
// rendered by the stream, and nothing for the ready event and pings: one
// write per wake-up's events, more when a batch passes maxCoalesce or
// batchFlush.
func TestStreamCountsEventWrites(t *testing.T) {
	cases := []struct {
		name       string
		n, body    int
		wantWrites int64
	}{
		{"one event", 1, 10, 1},
		{"a batch", 7, 100, 1},
		{"past maxCoalesce", maxCoalesce*2 + 3, 20, 3},
		{"past batchFlush", 9, 9 << 10, 3},
		{"one large event", 1, 70 << 10, 1},
	}
	for _, c := range cases {
		for _, shared := range []bool{false, true} {
			t.Run(c.name+" shared="+strconv.FormatBool(shared), func(t *testing.T) {
				evs := make([]*hub.Event, c.n)
				for i := range evs {
					evs[i] = hub.NewEvent(int64(100+i), &apiv1.Message{Id: strconv.Itoa(100 + i), Body: strings.Repeat("x", c.body)})
				}
				ff := &fakeFeed{evs: make(chan *hub.Event, len(evs))}
				var f feed = ff
				if shared {
					f = framedFeed{ff, fakeIDs}
				}
				out := &captureOut{}
				s := &stream{g: &Gateway{log: slog.New(slog.DiscardHandler)}, out: out, f: f, event: "message", holder: "bob"}
				require.NoError(t, s.start(context.Background(), nil, "bob"))
				s.tick.Stop()
				require.Zero(t, ff.wrote.Load(), "the ready event is not an event write")
				got := sends(t, f, ff.evs, evs)
				require.Equal(t, c.wantWrites, ff.wrote.Load())
				require.Len(t, got, int(c.wantWrites)+1, "every write but the ping's is counted")
			})
		}
	}
}
