package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/store"
)

// BenchmarkAppendExchanges appends rows shaped as OTLP ingest writes them
// (telemetry's batch: a member id, llm_exchange rows with a response id
// and a 1.5 KB data object, tool rows without), 100 a transaction, into a
// table that already holds 20,000 rows of 32 members, so each index
// insert walks a real B-tree. An op is one row; cpu-ns/op is the process
// CPU per row, which the fsync of each commit does not swamp.
func BenchmarkAppendExchanges(b *testing.B) {
	const (
		members = 32
		batch   = 100
		prefill = 20000
	)
	ctx := context.Background()
	db := MustOpenActivity(b, filepath.Join(b.TempDir(), "activity.db"))
	pad := strings.Repeat("x", 1400)
	seq := 0
	rows := func(n int) []store.ActivityEvent {
		out := make([]store.ActivityEvent, n)
		for i := range out {
			seq++
			m := fmt.Sprintf("tel%d", seq%members)
			e := store.ActivityEvent{Member: m, MemberUID: "uid-" + m, Kind: "tool_result",
				TS: time.UnixMilli(int64(1_700_000_000_000 + seq)), Data: []byte(`{"tool":"Bash","ok":true}`)}
			if seq%2 == 0 {
				e.Kind = store.KindLLMExchange
				e.ResponseID = fmt.Sprintf("msg_%08d", seq)
				e.Data = []byte(`{"responseId":"` + e.ResponseID + `","model":"claude","pad":"` + pad + `"}`)
			}
			out[i] = e
		}
		return out
	}
	for range prefill / batch {
		if _, err := db.AppendActivity(ctx, rows(batch)); err != nil {
			b.Fatal(err)
		}
	}
	all := rows(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i += batch {
		if _, err := db.AppendActivity(ctx, all[i:min(i+batch, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}
