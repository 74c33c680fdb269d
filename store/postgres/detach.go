package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgx keeps the context of a connection's last statement in the
// connection (pgconn's result reader) until the connection's next
// statement. An idle pooled connection so kept alive the request whose
// statement it ran last, with everything reachable from its context: a
// gRPC stream's context holds the stream's transport and every buffer
// queued on it, so a connection whose last statement came from a stalled
// stream held that stream's hundred megabytes for as long as it sat idle.
// Every statement the store sends on behalf of a caller therefore runs
// under a detached context: it ends when the caller's does, with the same
// error, and holds nothing of it.

// detachedCtx is a context that ends when the one it was detached from
// does. It carries no values, and nothing in it refers to that context.
type detachedCtx struct {
	done        chan struct{}
	deadline    time.Time
	hasDeadline bool

	mu  sync.Mutex
	err error
	// after are the functions AfterFunc registered, run at the end.
	after map[uint64]func()
	next  uint64
}

func (c *detachedCtx) Deadline() (time.Time, bool) { return c.deadline, c.hasDeadline }
func (c *detachedCtx) Done() <-chan struct{}       { return c.done }
func (c *detachedCtx) Value(any) any               { return nil }

func (c *detachedCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc lets context.AfterFunc register f here rather than start a
// goroutine to wait for Done: pgx watches every statement's context so.
func (c *detachedCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.after == nil {
		c.after = make(map[uint64]func())
	}
	id := c.next
	c.next++
	c.after[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.after[id]
		delete(c.after, id)
		return ok
	}
}

func (c *detachedCtx) end(err error) {
	if err == nil {
		err = context.Canceled // a parent that broke the contract
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	for _, f := range c.after {
		go f()
	}
	c.after = nil
}

// detach returns a context for statements run on behalf of ctx (above),
// and the function that unlinks it from ctx once they are done; until
// then ctx's end ends it. Unlinking only spares ctx the link: a context
// never unlinked is released with ctx.
func detach(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil {
		// Never ends: no deadline either.
		return context.Background(), func() {}
	}
	c := &detachedCtx{done: make(chan struct{})}
	c.deadline, c.hasDeadline = ctx.Deadline()
	if err := ctx.Err(); err != nil {
		c.end(err)
		return c, func() {}
	}
	stop := context.AfterFunc(ctx, func() { c.end(ctx.Err()) })
	return c, func() { stop() }
}

// detachedTx is a transaction whose statements all run under the context
// its transaction was begun with, detached (detach): the statements share
// the transaction's connection and end with it, and the context a caller
// passes a statement is not kept by the connection. Statements must not go
// around it through Conn or LargeObjects.
type detachedTx struct {
	pgx.Tx
	ctx context.Context
}

func (t detachedTx) Begin(context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(t.ctx)
	if err != nil {
		return nil, err
	}
	return detachedTx{tx, t.ctx}, nil
}

func (t detachedTx) Commit(context.Context) error { return t.Tx.Commit(t.ctx) }

func (t detachedTx) Rollback(context.Context) error {
	return t.Tx.Rollback(context.WithoutCancel(t.ctx))
}

func (t detachedTx) CopyFrom(_ context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.Tx.CopyFrom(t.ctx, table, columns, src)
}

func (t detachedTx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.Tx.SendBatch(t.ctx, b)
}

func (t detachedTx) Prepare(_ context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.Tx.Prepare(t.ctx, name, sql)
}

func (t detachedTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(t.ctx, sql, args...)
}

func (t detachedTx) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(t.ctx, sql, args...)
}

func (t detachedTx) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(t.ctx, sql, args...)
}
