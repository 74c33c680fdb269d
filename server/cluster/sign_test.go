package cluster

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"svc/server/cluster/natstest"
)

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, 32)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// TestSignerCheck: a signature holds for the subject and payload it was
// made for, under the key it was made with, and for nothing else.
func TestSignerCheck(t *testing.T) {
	key := newKey(t)
	s := NewSigner(key)
	signed := s.Msg("svc.t1.msg", []byte(`{"v":1}`))
	tamper := func(f func(m *nats.Msg)) *nats.Msg {
		m := nats.NewMsg(signed.Subject)
		m.Data = bytes.Clone(signed.Data)
		m.Header.Set(macHeader, signed.Header.Get(macHeader))
		f(m)
		return m
	}
	for _, tc := range []struct {
		name string
		by   *Signer
		m    *nats.Msg
		want Verdict
	}{
		{"good", s, signed, Signed},
		{"same key, another signer", NewSigner(bytes.Clone(key)), signed, Signed},
		{"another key", NewSigner(newKey(t)), signed, Forged},
		{"no key to check with", nil, signed, Unsigned},
		{"unsigned", s, nats.NewMsg("svc.t1.msg"), Unsigned},
		{"signed by nobody", s, (*Signer)(nil).Msg("svc.t1.msg", []byte(`{"v":1}`)), Unsigned},
		{"payload changed", s, tamper(func(m *nats.Msg) { m.Data[1] = 'w' }), Forged},
		{"payload extended", s, tamper(func(m *nats.Msg) { m.Data = append(m.Data, ' ') }), Forged},
		{"moved to another subject", s, tamper(func(m *nats.Msg) { m.Subject = "svc.t1.act" }), Forged},
		{"moved to another team", s, tamper(func(m *nats.Msg) { m.Subject = "svc.t2.msg" }), Forged},
		{"subject and payload boundary moved", s, tamper(func(m *nats.Msg) { m.Subject = "svc.t1.ms"; m.Data = append([]byte("g"), m.Data...) }), Forged},
		{"signature not base64", s, tamper(func(m *nats.Msg) { m.Header.Set(macHeader, "!!") }), Forged},
		{"signature cut", s, tamper(func(m *nats.Msg) { m.Header.Set(macHeader, m.Header.Get(macHeader)[:20]) }), Forged},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, tc.by.Check(tc.m)) })
	}
	require.Panics(t, func() { NewSigner(make([]byte, 16)) }, "a short key is refused")
}

// TestSignedBatchesNeedNoStoreRead: brokers that share a key deliver one
// another's batches with the records carried, reading nothing from the
// store; brokers without one read every remote record (the batches go as
// their ranges alone).
func TestSignedBatchesNeedNoStoreRead(t *testing.T) {
	key := newKey(t)
	for _, tc := range []struct {
		name      string
		a, b      *Signer
		fromStore uint64
	}{
		{"signed", NewSigner(key), NewSigner(key), 0},
		{"unsigned", nil, nil, 6},
		// The receiver has no key: it cannot trust what it cannot check.
		{"receiver without the key", NewSigner(key), nil, 6},
		// The sender signs nothing (a broker of an older version): its
		// ranges are news, its records are read.
		{"sender without the key", nil, NewSigner(key), 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			st := &memStore{}
			never := time.Hour
			a := startBroker(t, srv.URL(), st, opts{signer: tc.a, poll: never, gapWait: never})
			b := startBroker(t, srv.URL(), st, opts{signer: tc.b, poll: never, gapWait: never})
			n := 0
			for range 3 {
				n += len(a.commit(2, 10))
			}
			b.waitAll(n)
			require.Equal(t, tc.fromStore, b.f.Stats().StoreRecords)
			require.Zero(t, b.f.Stats().Rejected)
		})
	}
}

// TestForgedSignatureDropped: a batch signed with another key, or a
// signed batch replayed on another subject, is dropped whole: its
// records are not delivered and its range is no news; what committed is
// delivered from the store, with the store's bodies.
func TestForgedSignatureDropped(t *testing.T) {
	key := newKey(t)
	srv := natstest.Start(t)
	st := &memStore{}
	b := startBroker(t, srv.URL(), st, opts{signer: NewSigner(key), gapWait: 10 * time.Millisecond, poll: 20 * time.Millisecond})
	st.commit(3, 0) // committed by a broker whose news was lost
	raw, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	defer raw.Close()
	forged := []byte(`{"v":1,"o":"x","f":1,"l":3,"i":[{"ID":1,"Body":"forged"},{"ID":2,"Body":"forged"},{"ID":3,"Body":"forged"}]}`)
	require.NoError(t, raw.PublishMsg(NewSigner(newKey(t)).Msg(subject, forged)))
	replayed := NewSigner(key).Msg("svc.team1.act", forged)
	replayed.Subject = subject
	require.NoError(t, raw.PublishMsg(replayed))
	require.NoError(t, raw.Flush())
	waitUntil(t, func() bool { return b.f.Stats().Rejected == 2 })
	b.waitAll(3) // every id once, each with the store's body (b.wrong empty)
	require.Equal(t, uint64(3), b.f.Stats().StoreRecords)
	require.Zero(t, b.f.Stats().Received, "a dropped batch is not news")
}

// TestReplays: a sender's message is taken once, in its order, and only
// within the window of the receiver's clock.
func TestReplays(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	type msg struct {
		sender string
		n      int64
		at     time.Duration // from t0
		now    time.Duration // from t0
		want   error
	}
	for _, tc := range []struct {
		name string
		msgs []msg
	}{
		{"ascending", []msg{{"a", 1, 0, 0, nil}, {"a", 2, 0, 0, nil}, {"a", 9, 0, 0, nil}}},
		{"again", []msg{{"a", 1, 0, 0, nil}, {"a", 1, 0, 0, ErrReplay}}},
		{"older", []msg{{"a", 5, 0, 0, nil}, {"a", 4, 0, 0, ErrReplay}}},
		{"per sender", []msg{{"a", 5, 0, 0, nil}, {"b", 1, 0, 0, nil}, {"b", 1, 0, 0, ErrReplay}}},
		{"at the edge of the window", []msg{{"a", 1, -time.Minute, 0, nil}, {"b", 1, time.Minute, 0, nil}}},
		{"past the window", []msg{{"a", 1, -time.Minute - time.Millisecond, 0, ErrStale}}},
		{"ahead of the window", []msg{{"a", 1, time.Minute + time.Millisecond, 0, ErrStale}}},
		{"a stale message leaves no mark", []msg{{"a", 9, -2 * time.Minute, 0, ErrStale}, {"a", 1, 0, 0, nil}}},
		// Remembered past the window: an old message is refused for its
		// time whatever its count.
		{"an old one replayed later", []msg{{"a", 2, 0, 0, nil}, {"a", 1, 0, 3 * time.Minute, ErrStale}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReplays(time.Minute)
			for i, m := range tc.msgs {
				require.ErrorIs(t, r.Take(m.sender, m.n, t0.Add(m.at), t0.Add(m.now)), m.want, "message %d", i)
				if m.want == nil {
					require.ErrorIs(t, r.Take(m.sender, m.n, t0.Add(m.at), t0.Add(m.now)), ErrReplay, "message %d again", i)
				}
			}
		})
	}
}

// TestReplaysBounded: past maxSenders remembered, senders quiet for a
// window are forgotten to make room; while every one is recent, a new
// sender is refused rather than the map growing.
func TestReplaysBounded(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	r := NewReplays(time.Minute)
	for i := range maxSenders {
		require.NoError(t, r.Take(fmt.Sprint("s", i), 1, t0, t0))
	}
	require.ErrorIs(t, r.Take("new", 1, t0, t0), ErrReplay)
	later := t0.Add(time.Minute + time.Second)
	require.NoError(t, r.Take("new", 1, later, later))
	require.Len(t, r.last, 1)
}
