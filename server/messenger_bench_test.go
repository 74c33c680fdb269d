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
func BenchmarkDurablePush(b *testing.B) {
	for _, senders := range []int{1, 16} {
		b.Run("senders="+strconv.Itoa(senders), func(b *testing.B) {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "svc.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			m := newMessenger(st, hub.New(), time.Now, discardLogger(), nil)
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
		})
	}
}
