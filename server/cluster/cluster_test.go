package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"svc/server/cluster/natstest"
)

// rec is a committed record of the fake store.
type rec struct {
	ID   int64
	Body string
}

func recID(r rec) int64 { return r.ID }

// body is what the store commits for id: a delivered record carrying
// anything else was corrupted on the way.
func body(id int64, pad int) string { return fmt.Sprintf("r%d", id) + strings.Repeat("x", pad) }

// memStore is the store as the PostgreSQL one behaves for the engine: one
// writer at a time assigns ids in commit order, and a commit is visible
// before the next one starts.
type memStore struct {
	mu   sync.Mutex
	recs []rec
	// fail, when set, fails every read.
	fail atomic.Bool
}

var errStoreDown = errors.New("store down")

// commit appends n records of padded bodies as one transaction.
func (s *memStore) commit(n, pad int) []rec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]rec, n)
	for i := range out {
		id := int64(len(s.recs) + 1)
		out[i] = rec{ID: id, Body: body(id, pad)}
		s.recs = append(s.recs, out[i])
	}
	return out
}

func (s *memStore) Range(_ context.Context, after, upTo int64) ([]rec, error) {
	if s.fail.Load() {
		return nil, errStoreDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []rec
	for _, r := range s.recs {
		if r.ID > after && r.ID <= upTo {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *memStore) Last(context.Context) (int64, error) {
	if s.fail.Load() {
		return 0, errStoreDown
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.recs)), nil
}

// broker is one broker: its own NATS connection, a Fanout, and what its
// hub was handed.
type broker struct {
	t     testing.TB
	f     *Fanout[rec]
	st    *memStore
	nc    *nats.Conn
	cmu   sync.Mutex // the broker's one committer
	mu    sync.Mutex
	got   []int64
	wrong []string
}

type opts struct {
	gapWait, poll time.Duration
	maxPayload    int
	maxPending    int
	// drop loses the broker's publish of the batch [first, last].
	drop func(first, last int64) bool
	// signer signs and checks batches (nil: none).
	signer *Signer
}

const subject = "svc.team1.msg"

// startBroker connects a broker to url and runs its Fanout until the test
// ends.
func startBroker(t testing.TB, url string, st *memStore, o opts) *broker {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
		// A slow consumer (the benchmark outruns the subscriber) drops
		// batches: holes the store fills. Not worth a line each.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	require.NoError(t, err)
	b := &broker{t: t, st: st, nc: nc}
	f, err := New(t.Context(), Config[rec]{
		Conn: nc, Subject: subject, Store: st, ID: recID, Deliver: b.deliver,
		GapWait: o.gapWait, Poll: o.poll, MaxPayload: o.maxPayload, MaxPending: o.maxPending, Signer: o.signer,
	})
	require.NoError(t, err)
	f.dropPublish = o.drop
	b.f = f
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		nc.Close()
	})
	return b
}

func (b *broker) deliver(rs []rec) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range rs {
		b.got = append(b.got, r.ID)
		if !strings.HasPrefix(r.Body, fmt.Sprintf("r%d", r.ID)) || strings.TrimLeft(strings.TrimPrefix(r.Body, fmt.Sprintf("r%d", r.ID)), "x") != "" {
			b.wrong = append(b.wrong, fmt.Sprintf("%d:%q", r.ID, r.Body))
		}
	}
}

// commit commits n records on this broker and hands them to its Fanout,
// as the messenger does after a commit.
func (b *broker) commit(n, pad int) []rec {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	rs := b.st.commit(n, pad)
	b.f.Committed(rs)
	return rs
}

// delivered returns what the hub was handed so far.
func (b *broker) delivered() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int64(nil), b.got...)
}

// waitAll waits until the broker's hub was handed n records, then checks
// they are exactly ids 1..n in order (nothing lost, nothing twice) with
// the bodies the store committed.
func (b *broker) waitAll(n int) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(b.delivered()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	// Nothing more may follow: give a late duplicate the chance to show.
	time.Sleep(20 * time.Millisecond)
	require.Equal(b.t, want, b.delivered())
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(b.t, b.wrong)
}

// TestOrderAcrossBrokers: two brokers commit concurrently on one store;
// each hub is handed every record of both, in commit order, once.
func TestOrderAcrossBrokers(t *testing.T) {
	srv := natstest.Start(t)
	st := &memStore{}
	a := startBroker(t, srv.URL(), st, opts{})
	b := startBroker(t, srv.URL(), st, opts{})
	var wg sync.WaitGroup
	var total atomic.Int64
	for _, br := range []*broker{a, b, a, b} {
		wg.Go(func() {
			for range 50 {
				total.Add(int64(len(br.commit(1+rand.IntN(5), 0))))
			}
		})
	}
	wg.Wait()
	a.waitAll(int(total.Load()))
	b.waitAll(int(total.Load()))
	// Each saw the other's batches on NATS.
	require.NotZero(t, a.f.Stats().Received)
	require.NotZero(t, b.f.Stats().Received)
}

// TestCatchUp: whatever NATS does not bring is read from the store, at
// the right moment, and delivered in its place.
func TestCatchUp(t *testing.T) {
	const never = time.Hour
	dropFirst := func() func(first, last int64) bool {
		var dropped atomic.Bool
		return func(int64, int64) bool { return dropped.CompareAndSwap(false, true) }
	}
	tests := []struct {
		name   string
		a, b   opts
		run    func(a, b *broker) int
		check  func(t *testing.T, a, b *broker)
		checks []*broker
	}{
		{
			// B sees batch 2 with batch 1 missing: the hole is read from
			// the store once GapWait passes (no poll could do it).
			name: "a lost batch shows as a hole before the next",
			a:    opts{drop: dropFirst(), poll: never},
			b:    opts{gapWait: 10 * time.Millisecond, poll: never},
			run: func(a, _ *broker) int {
				a.commit(3, 0)
				a.commit(2, 0)
				return 5
			},
			check: func(t *testing.T, _, b *broker) {
				// The hole at least (the next batch's records are read
				// too, with it or after it).
				require.GreaterOrEqual(t, b.f.Stats().StoreRecords, uint64(3))
			},
		},
		{
			// Nothing follows the lost batch: the poll finds it.
			name: "a lost last batch is found by the poll",
			a:    opts{drop: dropFirst(), poll: never},
			b:    opts{gapWait: never, poll: 10 * time.Millisecond},
			run:  func(a, _ *broker) int { return len(a.commit(4, 0)) },
			check: func(t *testing.T, _, b *broker) {
				require.Equal(t, uint64(4), b.f.Stats().StoreRecords)
			},
		},
		{
			// Too large to carry: announced as a range, read at once.
			name: "a batch too large to carry goes as its range",
			a:    opts{maxPayload: 512, poll: never},
			b:    opts{gapWait: never, poll: never},
			run: func(a, _ *broker) int {
				a.commit(1, 0)
				a.commit(8, 200)
				a.commit(1, 0)
				return 10
			},
			check: func(t *testing.T, _, b *broker) {
				// Every remote record is read from the store (a carried
				// one could be forged): 10, the 8 of the range included.
				require.Equal(t, uint64(10), b.f.Stats().StoreRecords)
			},
		},
		{
			// A's own batch 2 must wait for B's batch 1, which NATS lost:
			// A's hub never sees 2 before 1.
			name: "a local batch waits for an earlier remote one",
			a:    opts{gapWait: 10 * time.Millisecond, poll: never},
			b:    opts{drop: dropFirst(), poll: never},
			run: func(a, b *broker) int {
				b.commit(2, 0)
				a.commit(3, 0)
				return 5
			},
			check: func(t *testing.T, a, _ *broker) {
				require.Equal(t, uint64(2), a.f.Stats().StoreRecords)
			},
		},
		{
			// Past MaxPending records waiting, ranges wait without theirs
			// and are read from the store in their turn. The hole is
			// announced only once all six batches wait (no timer runs).
			name: "ranges past the pending bound are read from the store",
			a:    opts{drop: dropFirst(), poll: never},
			b:    opts{gapWait: never, poll: never, maxPending: 4},
			run: func(a, b *broker) int {
				a.commit(1, 0) // lost: B holds what follows
				for range 6 {
					a.commit(2, 0)
				}
				waitUntil(b.t, func() bool { return b.f.Stats().Received == 6 })
				announce(b.t, a.nc, `{"v":1,"o":"x","f":1,"l":1}`)
				return 13
			},
			check: func(t *testing.T, _, b *broker) {
				// Every remote record is read from the store, the hole's
				// and the waiting ranges' alike.
				require.Equal(t, uint64(13), b.f.Stats().StoreRecords)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			st := &memStore{}
			a := startBroker(t, srv.URL(), st, tc.a)
			b := startBroker(t, srv.URL(), st, tc.b)
			n := tc.run(a, b)
			a.waitAll(n)
			b.waitAll(n)
			tc.check(t, a, b)
		})
	}
}

// TestNATSRestart: while NATS is down brokers still commit and still
// hand their hubs everything, from the store; once it is back, NATS
// carries batches again, and what nats.go buffered and sent late is not
// delivered twice.
func TestNATSRestart(t *testing.T) {
	srv := natstest.Start(t)
	st := &memStore{}
	o := opts{gapWait: 20 * time.Millisecond, poll: 20 * time.Millisecond}
	a := startBroker(t, srv.URL(), st, o)
	b := startBroker(t, srv.URL(), st, o)
	n := 0
	for range 5 {
		n += len(a.commit(2, 0)) + len(b.commit(1, 0))
	}
	a.waitAll(n)
	b.waitAll(n)

	srv.Stop()
	for range 5 {
		n += len(a.commit(1, 0)) + len(b.commit(2, 0))
	}
	a.waitAll(n)
	b.waitAll(n)
	received := b.f.Stats().Received

	srv.Resume(t)
	deadline := time.Now().Add(30 * time.Second)
	for !(a.nc.IsConnected() && b.nc.IsConnected()) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.True(t, a.nc.IsConnected() && b.nc.IsConnected(), "brokers reconnect")
	// Connected is reported before the subscriptions are back on the
	// server; a round trip on each connection waits for them.
	require.NoError(t, a.nc.Flush())
	require.NoError(t, b.nc.Flush())
	for range 5 {
		n += len(a.commit(3, 0))
	}
	a.waitAll(n)
	b.waitAll(n)
	for b.f.Stats().Received == received && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.Greater(t, b.f.Stats().Received, received, "NATS carries batches again after the restart")
}

// TestHostileMessages: what arrives on the subject that is not a
// well-formed batch is dropped, and delivery goes on in order.
func TestHostileMessages(t *testing.T) {
	srv := natstest.Start(t)
	st := &memStore{}
	a := startBroker(t, srv.URL(), st, opts{})
	b := startBroker(t, srv.URL(), st, opts{gapWait: 10 * time.Millisecond})
	a.commit(2, 0)
	b.waitAll(2)

	raw, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	defer raw.Close()
	for _, m := range []string{
		``, `not json`, `{"v":2,"o":"x","f":3,"l":3}`, `{"v":1,"o":"x","f":0,"l":1}`,
		`{"v":1,"o":"x","f":5,"l":4}`, `{"v":1,"o":"x","f":1,"l":9999999999}`,
		`{"v":1,"o":"x","f":3,"l":4,"i":[{"ID":4},{"ID":3}]}`, `{"v":1,"o":"x","f":3,"l":4,"i":[{"ID":7}]}`,
	} {
		require.NoError(t, raw.Publish(subject, []byte(m)))
	}
	// A well-formed range no one committed: dropped once the store shows
	// it is past the newest id, never delivered, never blocking.
	require.NoError(t, raw.Publish(subject, []byte(`{"v":1,"o":"x","f":1000,"l":1000,"i":[{"ID":1000,"Body":"forged"}]}`)))
	require.NoError(t, raw.Flush())
	n := 2
	for range 3 {
		n += len(a.commit(2, 0))
	}
	b.waitAll(n)
	a.waitAll(n)
	// Eight malformed, and the forged range once the store showed it is
	// no committed one.
	waitUntil(t, func() bool { return b.f.Stats().Rejected >= 9 })
	require.Equal(t, uint64(9), b.f.Stats().Rejected)
}

// TestForgedRecordsNotDelivered: a batch published on the subject by
// anyone but a broker hands no stream its records: what is delivered is
// what the store holds for those ids (the review found forged bodies
// delivered, and the real ones then dropped as already seen).
func TestForgedRecordsNotDelivered(t *testing.T) {
	srv := natstest.Start(t)
	st := &memStore{}
	b := startBroker(t, srv.URL(), st, opts{gapWait: 10 * time.Millisecond, poll: time.Hour})
	st.commit(3, 0) // committed by a broker whose news was lost
	raw, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.Publish(subject, []byte(`{"v":1,"o":"x","f":1,"l":3,"i":[{"ID":1,"Body":"forged"},{"ID":2,"Body":"forged"},{"ID":3,"Body":"forged"}]}`)))
	require.NoError(t, raw.Flush())
	b.waitAll(3) // every id once, each with the store's body (b.wrong empty)
}

// waitUntil waits for cond, failing the test after a generous bound.
func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// announce publishes a raw envelope on the subject, as another broker
// would.
func announce(t testing.TB, nc *nats.Conn, env string) {
	t.Helper()
	require.NoError(t, nc.Publish(subject, []byte(env)))
	require.NoError(t, nc.Flush())
}

// TestStoreDown: a store read that fails is retried, not skipped.
func TestStoreDown(t *testing.T) {
	srv := natstest.Start(t)
	st := &memStore{}
	a := startBroker(t, srv.URL(), st, opts{drop: func(first, _ int64) bool { return first == 2 }})
	b := startBroker(t, srv.URL(), st, opts{gapWait: 10 * time.Millisecond, poll: 10 * time.Millisecond})
	a.commit(1, 0)
	b.waitAll(1)
	st.fail.Store(true)
	a.commit(2, 0) // lost on NATS, and the store cannot be read yet
	a.commit(1, 0)
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, []int64{1}, b.delivered(), "nothing past the hole before it is read")
	st.fail.Store(false)
	b.waitAll(4)
}

// TestValidSubject: the subject the Fanout publishes on is literal.
func TestValidSubject(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"svc.team.msg", true}, {"svc", true}, {"", false}, {"svc..msg", false}, {"svc.*.msg", false},
		{"svc.>", false}, {"svc.a b", false}, {".svc", false}, {"svc.", false}, {strings.Repeat("a", 257), false},
	} {
		t.Run(tc.s, func(t *testing.T) { require.Equal(t, tc.ok, validSubject(tc.s)) })
	}
}
