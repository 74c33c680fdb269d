package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestConnectionsKeepNoCallerContext runs each kind of statement the
// store sends (a read through the pool, a read of one row, a write, a
// transaction of the caller's, an activity commit) under a context
// carrying a value, ends the context as a request's ends, and checks that
// nothing the store keeps (its idle pooled connections above all) still
// holds the value. pgx keeps a connection's last statement's context in
// the connection until its next statement; a gRPC stream's context holds
// its transport and every buffer queued on it, so a stalled stream's
// hundred megabytes stayed alive while its connection sat idle.
func TestConnectionsKeepNoCallerContext(t *testing.T) {
	db := MustOpen(t)
	act := MustOpenActivity(t)
	require.NoError(t, db.PutMember(context.Background(), store.Member{Name: "alice"}))
	now := time.Now()
	n := 0
	tests := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"read rows", func(ctx context.Context) error {
			_, err := db.ListChannels(ctx)
			return err
		}},
		{"read one row", func(ctx context.Context) error {
			_, err := db.GetChannel(ctx, "general")
			return err
		}},
		{"write through the writer", func(ctx context.Context) error {
			return db.PutMember(ctx, store.Member{Name: "alice", Instructions: "write"})
		}},
		{"write in a transaction", func(ctx context.Context) error {
			n++
			return db.CreateChannel(ctx, store.Channel{ID: fmt.Sprintf("c%d", n), Slug: fmt.Sprintf("chan-%d", n), CreatedAt: now, CreatedBy: "alice"})
		}},
		{"transaction", func(ctx context.Context) error {
			return db.WithTx(ctx, func(tx store.Tx) error {
				if _, err := tx.ListChannels(ctx); err != nil {
					return err
				}
				n++
				return tx.CreateChannel(ctx, store.Channel{ID: fmt.Sprintf("t%d", n), Slug: fmt.Sprintf("tx-%d", n), CreatedAt: now, CreatedBy: "alice"})
			})
		}},
		{"transaction rolled back", func(ctx context.Context) error {
			err := db.WithTx(ctx, func(tx store.Tx) error {
				if err := tx.PutMember(ctx, store.Member{Name: "rolled-back"}); err != nil {
					return err
				}
				return errRollBack
			})
			if !errors.Is(err, errRollBack) {
				return fmt.Errorf("want the transaction's error, got %v", err)
			}
			return nil
		}},
		{"savepoint", func(ctx context.Context) error {
			return db.WithTx(ctx, func(tx store.Tx) error {
				return tx.Savepoint(ctx, func() error {
					return tx.PutMember(ctx, store.Member{Name: "alice", Instructions: "savepoint"})
				})
			})
		}},
		{"reader exec", func(ctx context.Context) error {
			_, err := reader{db.c}.ExecContext(ctx, `SELECT 1`)
			return err
		}},
		{"writer query", func(ctx context.Context) error {
			rows, err := writer{db.c}.QueryContext(ctx, `UPDATE members SET instructions = ? WHERE name = ? RETURNING name`, "writer", "alice")
			if err != nil {
				return err
			}
			rows.Close()
			return nil
		}},
		{"activity", func(ctx context.Context) error {
			_, err := act.CommitActivity(ctx, store.ActivityBatch{Events: []store.ActivityEvent{{Member: "alice", Kind: "tool", TS: now, Data: []byte(`{}`)}}})
			if err != nil {
				return err
			}
			_, err = act.ListActivity(ctx, store.ActivityFilter{Member: "alice"})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			held := runUnder(t, tt.run)
			for range 3 {
				runtime.GC()
			}
			require.True(t, held.Value() == nil, "the store still holds the caller's context after the call")
		})
	}
}

var errRollBack = errors.New("roll back")

// runUnder runs fn under a context carrying a value, ends the context and
// returns a weak pointer to the value: nil once nothing holds the context.
func runUnder(t *testing.T, fn func(ctx context.Context) error) weak.Pointer[[64 << 10]byte] {
	t.Helper()
	type key struct{}
	value := new([64 << 10]byte)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, value))
	require.NoError(t, fn(ctx))
	cancel()
	return weak.Make(value)
}

func TestDetach(t *testing.T) {
	type key struct{}
	tests := []struct {
		name string
		// parent makes the caller's context and what ends it.
		parent  func() (context.Context, context.CancelFunc)
		ends    bool  // the detached context ends once the caller's has
		wantErr error // its error then
	}{
		{"never ends", func() (context.Context, context.CancelFunc) {
			return context.WithValue(context.Background(), key{}, 1), func() {}
		}, false, nil},
		{"canceled", func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.WithValue(context.Background(), key{}, 1))
		}, true, context.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, 1), 20*time.Millisecond)
			return ctx, func() { <-ctx.Done(); cancel() }
		}, true, context.DeadlineExceeded},
		{"ended before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, 1))
			cancel()
			return ctx, func() {}
		}, true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent, end := tt.parent()
			d, unlink := detach(parent)
			defer unlink()
			require.Nil(t, d.Value(key{}), "a detached context carries none of the caller's values")
			wantDeadline, wantOK := parent.Deadline()
			gotDeadline, gotOK := d.Deadline()
			require.Equal(t, wantOK, gotOK)
			require.True(t, gotDeadline.Equal(wantDeadline))
			if !tt.ends {
				require.Nil(t, d.Done(), "a caller's context that never ends gives one that never ends")
				return
			}
			require.NoError(t, nilIfEnded(parent, d), "not ended before the caller's")
			end()
			select {
			case <-d.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the detached context did not end with the caller's")
			}
			require.ErrorIs(t, d.Err(), tt.wantErr)
			require.Equal(t, parent.Err(), d.Err(), "the caller's error")
		})
	}
	// context.AfterFunc (which pgx calls for every statement) registers
	// with the detached context itself, and what it registers runs at the
	// end unless stopped.
	t.Run("AfterFunc", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		d, unlink := detach(parent)
		defer unlink()
		ran, stoppedRan := make(chan struct{}), make(chan struct{}, 1)
		context.AfterFunc(d, func() { close(ran) })
		stop := context.AfterFunc(d, func() { stoppedRan <- struct{}{} })
		require.Len(t, d.(*detachedCtx).after, 2, "registered with the detached context, no goroutine waiting")
		require.True(t, stop(), "stopped before the end")
		require.False(t, stop(), "stopped once")
		cancel()
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("a function registered with context.AfterFunc did not run at the end")
		}
		late := make(chan struct{})
		lateStop := context.AfterFunc(d, func() { close(late) })
		<-late
		require.False(t, lateStop(), "registered after the end: already run")
		require.Empty(t, stoppedRan, "a stopped function does not run")
	})
	t.Run("unlinked", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		d, unlink := detach(parent)
		unlink()
		cancel()
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, d.Err(), "unlinked, the caller's end no longer reaches it")
	})
}

// nilIfEnded is d's error while parent has not ended: a detached context
// does not end before its caller's.
func nilIfEnded(parent, d context.Context) error {
	if parent.Err() != nil {
		return nil
	}
	return d.Err()
}

// TestStatementsEndWithTheCallersContext: a statement runs under a context
// detached from its caller's, and still stops when the caller's ends, in a
// read and in a write transaction.
func TestStatementsEndWithTheCallersContext(t *testing.T) {
	db := MustOpen(t)
	tests := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"read", func(ctx context.Context) error {
			rows, err := reader{db.c}.QueryContext(ctx, `SELECT pg_sleep(30)`)
			if err == nil {
				rows.Close()
			}
			return err
		}},
		{"write", func(ctx context.Context) error {
			return db.c.withTx(ctx, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `SELECT pg_sleep(30)`)
				return err
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := tt.run(ctx)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.Less(t, time.Since(start), 20*time.Second, "the statement stopped when the caller's context ended")
		})
	}
}
