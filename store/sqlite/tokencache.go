package sqlite

import (
	"sync"
	"time"

	"svc/store"
)

// maxCachedTokens bounds the token cache; it starts over when full.
const maxCachedTokens = 4096

// tokenCache keeps the token rows GetTokenByHash read, so a request does
// not read its bearer's row from SQLite every time: that lookup was the
// most expensive read of a push. It is safe because this process is the
// store's only writer (lock.go) and every statement that changes what
// decides a token's validity (creating, revoking, deleting a member,
// replacing the member set) is bracketed by begin and end:
//
//   - begin empties the cache and, until the matching end, no row read is
//     kept (a read may see the row before or after the change);
//   - end, once the change is committed or rolled back, empties it again
//     and moves the generation, so a row read before the change began and
//     returned after it ended is not kept either.
//
// So a revoked token is refused on the first request after the revoke
// answers, as before the cache.
//
// Touching a token (its LastUsedAt, moved at most once a minute per token
// by the authenticator) decides nothing about validity: it updates the
// cached row in place rather than emptying the cache, which with many busy
// tokens would empty it several times a second. A row read before a touch
// and kept after it only makes the next touch come early.
type tokenCache struct {
	mu      sync.Mutex
	gen     uint64
	writing int // begun, not yet ended
	rows    map[store.TokenHash]store.Token
	byID    map[string]store.TokenHash
}

// get returns the cached row of h and the generation to pass to put.
func (c *tokenCache) get(h store.TokenHash) (store.Token, bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.rows[h]
	return t, ok && c.writing == 0, c.gen
}

// put keeps t, read at generation gen, unless a change began since.
func (c *tokenCache) put(gen uint64, h store.TokenHash, t store.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || c.writing > 0 {
		return
	}
	if c.rows == nil || len(c.rows) >= maxCachedTokens {
		c.rows = make(map[store.TokenHash]store.Token)
		c.byID = make(map[string]store.TokenHash)
	}
	c.rows[h] = t
	c.byID[t.ID] = h
}

// touched moves the cached LastUsedAt of token id, if it is cached.
func (c *tokenCache) touched(id string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.byID[id]
	if !ok {
		return
	}
	if t, ok := c.rows[h]; ok && t.ID == id {
		t.LastUsedAt = at
		c.rows[h] = t
	}
}

// begin marks a change of token rows under way.
func (c *tokenCache) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writing++
	c.gen++
	clear(c.rows)
	clear(c.byID)
}

// end marks a change begun with begin committed or rolled back.
func (c *tokenCache) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writing--
	c.gen++
	clear(c.rows)
	clear(c.byID)
}

// tokensChanging brackets a statement of q that may change token rows: it
// returns the func to call once the statement ran. Outside a transaction
// that is the end of the change. Inside one the change ends when the
// transaction does (conns.withTx), so the returned func does nothing.
func (q queries) tokensChanging() (done func()) {
	if q.tx == nil {
		q.c.tokens.begin()
		return q.c.tokens.end
	}
	if q.c.tokenTx.CompareAndSwap(false, true) {
		q.c.tokens.begin()
	}
	return func() {}
}

// endTokenTx ends the token change of the transaction that just committed
// or rolled back, if it made one. The writer has one connection, so one
// transaction runs at a time.
func (c *conns) endTokenTx() {
	if c.tokenTx.CompareAndSwap(true, false) {
		c.tokens.end()
	}
}
