package sqlite

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

func benchHash(i int) store.TokenHash {
	var h store.TokenHash
	binary.BigEndian.PutUint64(h[:], uint64(i))
	return h
}

func BenchmarkCreateToken(b *testing.B) {
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "svc.db"))
	require.NoError(b, db.PutMember(ctx, store.Member{Name: "alice"}))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		err := db.CreateToken(ctx, store.Token{ID: strconv.Itoa(i), Member: "alice", Hash: benchHash(i), Origin: "enroll"})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetTokenByHash(b *testing.B) {
	const tokens = 1000
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "svc.db"))
	require.NoError(b, db.WithTx(ctx, func(tx store.Tx) error {
		if err := tx.PutMember(ctx, store.Member{Name: "alice"}); err != nil {
			return err
		}
		for i := range tokens {
			if err := tx.CreateToken(ctx, store.Token{ID: strconv.Itoa(i), Member: "alice", Hash: benchHash(i)}); err != nil {
				return err
			}
		}
		return nil
	}))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := db.GetTokenByHash(ctx, benchHash(i%tokens)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendActivity counts one op per event, so ns/op compares one
// transaction per event with one per batch directly.
func BenchmarkAppendActivity(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ctx := context.Background()
			db := MustOpenActivity(b, filepath.Join(b.TempDir(), "activity.db"))
			events := make([]store.ActivityEvent, batch)
			for i := range events {
				events[i] = store.ActivityEvent{
					Member: "alice",
					Kind:   "publish",
					TS:     time.UnixMilli(int64(i)),
					Data:   []byte(`{"topic":"builds","bytes":1234}`),
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i += batch {
				if _, err := db.AppendActivity(ctx, events[:min(batch, b.N-i)]); err != nil {
					b.Fatal(err)
				}
			}
			// The fsync of each commit dominates the wall time and varies
			// with the disk; the CPU per event is what the insert path costs.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSenderTurns reads the turns of a group commit's 16 senders (as
// svcload's throughput run has them: people, no turn) in a writer
// transaction, as the committer does: one ActiveTurn each, as the
// messenger did, against one ActiveTurns. An op is one transaction.
func BenchmarkSenderTurns(b *testing.B) {
	ctx := context.Background()
	db := MustOpen(b, filepath.Join(b.TempDir(), "svc.db"))
	var members []string
	for i := range 16 {
		members = append(members, "tpub"+strconv.Itoa(i))
		require.NoError(b, db.PutMember(ctx, store.Member{Name: members[i]}))
	}
	// Cancellable, as the committer's context is: database/sql watches it.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			require.NoError(b, db.WithTx(ctx, func(tx store.Tx) error {
				for _, m := range members {
					if _, _, err := tx.ActiveTurn(ctx, m); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	})
	b.Run("batch", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			require.NoError(b, db.WithTx(ctx, func(tx store.Tx) error {
				_, err := tx.(queries).ActiveTurns(ctx, members)
				return err
			}))
		}
	})
}

// BenchmarkGroupCommit is the messenger's group commit of a batch of plain
// broadcasts (svcload's throughput load: 16 publishers, 64-byte bodies),
// alone: one writer transaction per batch that reads the senders' turns
// (ActiveTurns) and appends the batch (AppendMessages), then COMMITs. An
// op is one message, so ns/op and cpu-ns/op are per message whatever the
// batch. The steps cut it into its parts: "tx" is BEGIN IMMEDIATE and a
// COMMIT that wrote nothing, "turns" adds the turn read, "append" is the
// whole commit. sync=off turns the writer's fsync off (synchronous=OFF)
// to show what the fsync itself costs in CPU (docs/PERFORMANCE.md,
// "Issue 30: what bounds the push rate").
func BenchmarkGroupCommit(b *testing.B) {
	body := "tp|run|tpub0|1|" + strings.Repeat("x", 64-len("tp|run|tpub0|1|"))
	for _, sync := range []string{"full", "off"} {
		for _, step := range []string{"tx", "turns", "append"} {
			for _, batch := range []int{1, 16, 64} {
				name := "sync=" + sync + "/step=" + step + "/batch=" + strconv.Itoa(batch)
				b.Run(name, func(b *testing.B) {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					db := MustOpen(b, filepath.Join(b.TempDir(), "svc.db"))
					if sync == "off" {
						_, err := db.c.writer.ExecContext(ctx, "PRAGMA synchronous=OFF")
						require.NoError(b, err)
					}
					msgs := make([]store.Message, batch)
					var senders []string
					for i := range msgs {
						from := "tpub" + strconv.Itoa(i%16)
						if i < 16 {
							require.NoError(b, db.PutMember(ctx, store.Member{Name: from}))
							senders = append(senders, from)
						}
						msgs[i] = store.Message{From: from, Thread: "chan:general", Body: body, Level: "info", All: true}
					}
					b.ReportAllocs()
					b.ResetTimer()
					cpu0 := processCPU(b)
					for i := 0; i < b.N; i += batch {
						n := min(batch, b.N-i)
						err := db.WithTx(ctx, func(tx store.Tx) error {
							if step == "tx" {
								return nil
							}
							if _, err := tx.(queries).ActiveTurns(ctx, senders[:min(n, len(senders))]); err != nil {
								return err
							}
							if step == "turns" {
								return nil
							}
							_, err := tx.AppendMessages(ctx, msgs[:n])
							return err
						})
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}
