package server

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"svc/server/hub"
	"svc/store/sqlite"
)

// BenchmarkDurablePush measures the commit path alone (group commit into a
// synchronous=FULL file store, then the hub) with concurrent senders, so
// its ratio to the end-to-end figures of cmd/svcload shows what the
// transport costs.
//
// With metrics=true the messenger and the store count as in a served
// broker (GET /metrics), to show what that costs.
func BenchmarkDurablePush(b *testing.B) {
	for _, senders := range []int{1, 16} {
		for _, withMetrics := range []bool{false, true} {
			b.Run("senders="+strconv.Itoa(senders)+"/metrics="+strconv.FormatBool(withMetrics), func(b *testing.B) {
				benchDurablePush(b, senders, withMetrics)
			})
		}
	}
}

func benchDurablePush(b *testing.B, senders int, withMetrics bool) {
	var opts []sqlite.Option
	sc := NewStoreCommits()
	if withMetrics {
		opts = append(opts, sqlite.WithCommitObserver(sc.Main))
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "svc.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	h := hub.New()
	m := newMessenger(st, h, time.Now, discardLogger(), nil)
	if withMetrics {
		m.met = newMetrics(h, hub.New(), sc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	b.SetParallelism(senders)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			msg, pm := dm("alice", "bob", "hello")
			if _, _, err := m.send(context.Background(), msg, pm); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
