package cluster

import (
	"testing"
	"time"

	"svc/server/cluster/natstest"
)

// BenchmarkRemoteDelivery: batches of 10 records committed on one broker
// and handed, in order, to the hub of another over an embedded NATS; one
// op is one batch, committed until the other broker has all of them.
func BenchmarkRemoteDelivery(b *testing.B) {
	srv := natstest.Start(b)
	st := &memStore{}
	a := startBroker(b, srv.URL(), st, opts{})
	r := startBroker(b, srv.URL(), st, opts{})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		a.commit(10, 200)
	}
	deadline := time.Now().Add(time.Minute)
	for len(r.delivered()) < 10*b.N && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	if got := len(r.delivered()); got != 10*b.N {
		b.Fatalf("delivered %d of %d", got, 10*b.N)
	}
	b.ReportMetric(float64(10*b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(r.f.Stats().StoreRecords)/float64(10*b.N), "from-store/record")
}
