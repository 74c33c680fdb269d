package hub

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func ev(seq int64) *Event {
	return NewEvent(seq, &apiv1.Message{Id: strconv.FormatInt(seq, 10), Body: "b"})
}

// drain returns the events waiting in s without blocking.
func drain(s *Subscription) []int64 {
	var out []int64
	for {
		e, _ := s.Next()
		if e == nil {
			return out
		}
		out = append(out, e.Seq)
	}
}

// recv waits (bounded) for the next event of s, or its end (open false).
func recv(t *testing.T, s *Subscription) (e *Event, open bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		if e, open = s.Next(); e != nil || !open {
			return e, open
		}
		select {
		case <-s.Ready():
		case <-deadline:
			t.Fatal("nothing from the subscription within 5s")
		}
	}
}

func TestPublishRouting(t *testing.T) {
	tests := []struct {
		name       string
		all        bool
		sender     string
		recipients []string
		wantLive   int
		want       map[string]bool // member -> receives
	}{
		{name: "dm reaches only the recipient", sender: "alice", recipients: []string{"bob"}, wantLive: 1,
			want: map[string]bool{"alice": false, "bob": true, "carol": false}},
		{name: "broadcast skips the sender", all: true, sender: "alice", wantLive: 2,
			want: map[string]bool{"alice": false, "bob": true, "carol": true}},
		{name: "recipient without a stream is not live", sender: "alice", recipients: []string{"dave", "bob"}, wantLive: 1,
			want: map[string]bool{"alice": false, "bob": true, "carol": false}},
		{name: "dm to self", sender: "alice", recipients: []string{"alice"}, wantLive: 1,
			want: map[string]bool{"alice": true, "bob": false, "carol": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := New()
			subs := map[string]*Subscription{}
			for _, m := range []string{"alice", "bob", "carol"} {
				s, err := h.Subscribe(m, "")
				require.NoError(t, err)
				subs[m] = s
			}
			require.Equal(t, tc.wantLive, h.Live(tc.all, tc.sender, tc.recipients), "Live counts as Publish does")
			for m, s := range subs {
				require.Empty(t, drain(s), "Live publishes nothing to %s", m)
			}
			require.Equal(t, tc.wantLive, h.Publish(ev(1), tc.all, tc.sender, tc.recipients))
			for m, want := range tc.want {
				got := drain(subs[m])
				if want {
					require.Equal(t, []int64{1}, got, m)
				} else {
					require.Empty(t, got, m)
				}
			}
		})
	}
}

func TestSlowSubscriberIsCutOffWithoutGaps(t *testing.T) {
	h := New(WithBuffer(4))
	slow, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	fast, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	var fastGot []int64
	for seq := int64(1); seq <= 10; seq++ {
		h.Publish(ev(seq), false, "alice", []string{"bob"})
		fastGot = append(fastGot, drain(fast)...)
		if seq == 6 {
			// The slow reader takes two after the cut: nothing new may
			// have been queued behind the gap.
			recv(t, slow)
			recv(t, slow)
		}
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, fastGot, "a healthy subscriber misses nothing")
	require.True(t, slow.FellBehind())
	require.Equal(t, []int64{3, 4}, drain(slow), "the slow one ends contiguously, then its channel is closed")
	_, open := recv(t, slow)
	require.False(t, open)
	require.Equal(t, 1, h.Connected("bob"))
	require.False(t, fast.FellBehind())
}

func TestCloseEndsEverySubscriptionAndRefusesNew(t *testing.T) {
	var mu sync.Mutex
	changes := map[string]int{}
	h := New(WithOnChange(func(m string) { mu.Lock(); changes[m]++; mu.Unlock() }))
	a, err := h.Subscribe("alice", "")
	require.NoError(t, err)
	b, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	h.Close()
	for _, s := range []*Subscription{a, b} {
		_, open := recv(t, s)
		require.False(t, open)
		require.False(t, s.FellBehind())
	}
	_, err = h.Subscribe("alice", "")
	require.ErrorIs(t, err, ErrClosed)
	a.Close() // again: no panic
	require.Equal(t, map[string]int{"alice": 2, "bob": 2}, changes)
	require.Zero(t, h.Connected("alice"))
}

func TestDisconnectEndsMatchingStreams(t *testing.T) {
	h := New()
	tok1, err := h.Subscribe("bob", "token:1")
	require.NoError(t, err)
	tok2, err := h.Subscribe("bob", "token:2")
	require.NoError(t, err)
	sess, err := h.Subscribe("bob", "session:x")
	require.NoError(t, err)
	other, err := h.Subscribe("carol", "token:1")
	require.NoError(t, err)
	closed := func(s *Subscription) bool {
		e, open := s.Next()
		return e == nil && !open
	}
	h.Disconnect("bob", func(c string) bool { return c == "token:1" })
	require.True(t, closed(tok1))
	require.False(t, closed(tok2))
	require.False(t, closed(other), "another member's stream with the same credential name stays")
	h.Disconnect("bob", nil)
	require.True(t, closed(tok2))
	require.True(t, closed(sess))
	require.Zero(t, h.Connected("bob"))
	require.Equal(t, 1, h.Connected("carol"))
}

func TestConcurrentPublishSubscribeClose(t *testing.T) {
	h := New(WithBuffer(8))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				s, err := h.Subscribe("m"+strconv.Itoa(i%3), "")
				require.NoError(t, err)
				drain(s)
				s.Close()
			}
		}()
	}
	for seq := int64(1); seq <= 2000; seq++ {
		h.Publish(ev(seq), seq%2 == 0, "x", []string{"m0", "m1"})
	}
	wg.Wait()
}

func TestEventJSONIsRenderedOnce(t *testing.T) {
	e := ev(7)
	first := e.JSON()
	require.JSONEq(t, `{"id":"7","from":"","title":"","body":"b","level":"","attachments":[],"createdAt":0}`, string(first))
	require.Same(t, &first[0], &e.JSON()[0])
}

func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run("subscribers="+strconv.Itoa(n), func(b *testing.B) {
			h := New(WithBuffer(1 << 16))
			var subs []*Subscription
			for i := range n {
				s, _ := h.Subscribe("m"+strconv.Itoa(i), "")
				subs = append(subs, s)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				h.Publish(ev(int64(i)), true, "sender", nil)
				if i%1024 == 1023 {
					b.StopTimer()
					for _, s := range subs {
						drain(s)
					}
					b.StartTimer()
				}
			}
		})
	}
}

func TestMaxPerMember(t *testing.T) {
	h := New(WithMaxPerMember(2))
	a1, err := h.Subscribe("ann", "t1")
	require.NoError(t, err)
	_, err = h.Subscribe("ann", "t2")
	require.NoError(t, err)
	_, err = h.Subscribe("ann", "t3")
	require.ErrorIs(t, err, ErrTooMany, "a third stream of one member is refused")
	_, err = h.Subscribe("bob", "t4")
	require.NoError(t, err, "other members are not affected")
	require.Equal(t, 2, h.Connected("ann"))

	a1.Close()
	_, err = h.Subscribe("ann", "t5")
	require.NoError(t, err, "a closed stream frees its place")
	_, err = h.Subscribe("ann", "t6")
	require.ErrorIs(t, err, ErrTooMany)

	unbounded := New()
	for i := range 100 {
		_, err := unbounded.Subscribe("ann", strconv.Itoa(i))
		require.NoError(t, err)
	}
}

func TestSubscribeAsBoundsAndDisconnectsByHolder(t *testing.T) {
	h := New(WithMaxPerMember(2))
	// ann watches bob twice: the streams are bob's key but ann's to hold.
	w1, err := h.SubscribeAs("bob", "ann", "token:a")
	require.NoError(t, err)
	w2, err := h.SubscribeAs("bob", "ann", "token:b")
	require.NoError(t, err)
	_, err = h.Subscribe("ann", "token:a")
	require.ErrorIs(t, err, ErrTooMany, "streams on other keys count toward their holder")
	own, err := h.Subscribe("bob", "token:bob")
	require.NoError(t, err, "the key's own member is not bounded by its watchers")
	require.Equal(t, 3, h.Connected("bob"))

	require.Equal(t, 1, h.Publish(NewEvent(1, nil), false, "", []string{"bob"}), "one addressed key, live")
	for _, s := range []*Subscription{w1, w2, own} {
		e, _ := recv(t, s)
		require.NotNil(t, e, "every subscription of the key gets the event")
		require.Equal(t, int64(1), e.Seq)
	}

	h.Disconnect("ann", func(c string) bool { return c == "token:a" })
	_, open := recv(t, w1)
	require.False(t, open, "the holder's revoked credential ends its stream on another key")
	h.Disconnect("bob", nil)
	_, open = recv(t, own)
	require.False(t, open)
	require.Equal(t, 1, h.Connected("bob"), "disconnecting bob leaves streams ann holds on bob")
	_, err = h.SubscribeAs("bob", "ann", "token:c")
	require.NoError(t, err, "a closed stream frees its holder's place")
}

// Stats counts each event handed to a subscription and each subscription
// cut off for falling behind, across publishes.
func TestStats(t *testing.T) {
	h := New(WithBuffer(1))
	a1, err := h.Subscribe("a", "c")
	require.NoError(t, err)
	a2, err := h.Subscribe("a", "c")
	require.NoError(t, err)
	_, err = h.Subscribe("b", "c")
	require.NoError(t, err)
	d, c := h.Stats()
	require.Zero(t, d)
	require.Zero(t, c)

	h.Publish(ev(1), false, "", []string{"a"}) // a1, a2
	d, c = h.Stats()
	require.EqualValues(t, 2, d)
	require.Zero(t, c)

	require.Equal(t, []int64{1}, drain(a1))
	h.Publish(ev(2), true, "b", nil) // a1 takes it; a2 is full and cut
	d, c = h.Stats()
	require.EqualValues(t, 3, d)
	require.EqualValues(t, 1, c)
	require.True(t, a2.FellBehind())

	h.Publish(ev(3), true, "", nil) // a1 is full now: cut; b takes it
	d, c = h.Stats()
	require.EqualValues(t, 4, d)
	require.EqualValues(t, 2, c)
}

// TestQueueGrowsAndShrinks: a subscription's queue takes a burst up to
// the buffer, in order, and holds no more than a small queue once
// drained; a reader that keeps a few behind never grows it past twice the
// buffer.
func TestQueueGrowsAndShrinks(t *testing.T) {
	h := New(WithBuffer(100))
	s, err := h.Subscribe("bob", "")
	require.NoError(t, err)
	require.Nil(t, s.q, "an idle subscription holds no queue")
	var want []int64
	for seq := int64(1); seq <= 100; seq++ {
		h.Publish(ev(seq), false, "alice", []string{"bob"})
		want = append(want, seq)
	}
	require.False(t, s.FellBehind(), "a burst of the buffer's size fits")
	require.Equal(t, want, drain(s))
	require.LessOrEqual(t, cap(s.q), keptQueue, "a drained queue is small again")

	// Steady state, always five behind (the queue never drains, so it
	// slides): order holds and the queue stays bounded.
	seq := int64(100)
	next := int64(101)
	for range 5 {
		seq++
		h.Publish(ev(seq), false, "alice", []string{"bob"})
	}
	for range 1000 {
		for range 3 {
			seq++
			h.Publish(ev(seq), false, "alice", []string{"bob"})
		}
		for range 3 {
			e, open := s.Next()
			require.True(t, open)
			require.Equal(t, next, e.Seq)
			next++
		}
		require.LessOrEqual(t, cap(s.q), 200)
	}
	require.Equal(t, []int64{seq - 4, seq - 3, seq - 2, seq - 1, seq}, drain(s))
	h.Publish(ev(seq+1), false, "alice", []string{"bob"})
	h.Close()
	e, open := recv(t, s)
	require.Equal(t, seq+1, e.Seq, "what was queued before the end is still delivered")
	require.True(t, open)
	_, open = recv(t, s)
	require.False(t, open)
}

// TestPublishBatchRoutes: a batch reaches each addressed subscription in
// order, routes each item as Publish would, and cuts a subscription the
// batch overflows without a gap.
func TestPublishBatchRoutes(t *testing.T) {
	h := New(WithBuffer(3))
	ann, err := h.Subscribe("ann", "c")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := h.Subscribe("bob", "c")
	if err != nil {
		t.Fatal(err)
	}
	h.PublishBatch([]Item{
		{Ev: ev(1), All: true, Sender: "zed"},
		{Ev: ev(2), Recipients: []string{"bob"}},
		{Ev: ev(3), All: true, Sender: "ann"},
		{Ev: ev(4), Recipients: []string{"ann", "bob"}},
		{Ev: ev(5), All: true, Sender: "bob"},
	})
	if got := drain(ann); !slices.Equal(got, []int64{1, 4, 5}) {
		t.Errorf("ann got %v, want [1 4 5]", got)
	}
	// bob's buffer of 3 took 1, 2 and 3, and 4 overflowed it: cut, with
	// nothing delivered after the gap.
	if got := drain(bob); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("bob got %v, want [1 2 3]", got)
	}
	if !bob.FellBehind() {
		t.Error("bob was not cut off")
	}
	if _, cut := h.Stats(); cut != 1 {
		t.Errorf("cut = %d, want 1", cut)
	}
}

// TestPublishBatchReaderSeesWholeBatch: a reader already waiting is woken
// only once the whole batch is queued, so its first read takes all of it
// (with a wake per item it would mostly wake to the first alone).
func TestPublishBatchReaderSeesWholeBatch(t *testing.T) {
	h := New()
	s, err := h.Subscribe("ann", "c")
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan int)
	go func() {
		<-s.Ready()
		first <- len(drain(s))
	}()
	items := make([]Item, 50)
	for i := range items {
		items[i] = Item{Ev: ev(int64(i + 1)), Recipients: []string{"ann"}}
	}
	h.PublishBatch(items)
	select {
	case n := <-first:
		if n != len(items) {
			t.Errorf("first read after the wake took %d events, want all %d", n, len(items))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reader was never woken")
	}
}

// A subscription cut off for falling behind gets nothing more, but keeps
// its holder's place until its reader closes it: a member whose streams
// are cut faster than they end cannot hold more than its bound meanwhile.
func TestCutSubscriptionHoldsItsPlaceUntilClosed(t *testing.T) {
	h := New(WithBuffer(1), WithMaxPerMember(2))
	slow, err := h.Subscribe("ann", "c")
	require.NoError(t, err)
	_, err = h.Subscribe("ann", "c")
	require.NoError(t, err)
	h.Publish(ev(1), false, "", []string{"ann"})
	h.Publish(ev(2), false, "", []string{"ann"}) // both full: cut
	require.True(t, slow.FellBehind())
	require.Zero(t, h.Connected("ann"), "a cut subscription gets nothing more")
	_, err = h.Subscribe("ann", "c")
	require.ErrorIs(t, err, ErrTooMany, "cut but not yet closed, it still counts")
	slow.Close()
	_, err = h.Subscribe("ann", "c")
	require.NoError(t, err, "closed, its place is free")
}

// AfterEnd runs once the subscription ends, however it ends, outside the
// hub's locks (the callback may call the hub), and at once when it has
// already ended.
func TestAfterEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(h *Hub, s *Subscription)
	}{
		{"close", func(_ *Hub, s *Subscription) { s.Close() }},
		{"cut off", func(h *Hub, _ *Subscription) {
			h.Publish(ev(1), false, "", []string{"ann"})
			h.Publish(ev(2), false, "", []string{"ann"})
		}},
		{"disconnect", func(h *Hub, _ *Subscription) { h.Disconnect("ann", nil) }},
		{"hub closed", func(h *Hub, _ *Subscription) { h.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(WithBuffer(1))
			s, err := h.Subscribe("ann", "c")
			require.NoError(t, err)
			ran := 0
			s.AfterEnd(func() {
				ran++
				_ = h.Connected("ann") // takes the hub's lock: must not deadlock
			})
			require.Zero(t, ran, "not before the end")
			tc.end(h, s)
			require.Equal(t, 1, ran)
			s.Close()
			require.Equal(t, 1, ran, "once")
			late := false
			s.AfterEnd(func() { late = true })
			require.True(t, late, "registered after the end, it runs at once")
		})
	}
}
