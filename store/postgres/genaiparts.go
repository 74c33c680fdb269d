package postgres

import (
	"github.com/jackc/pgx/v5"

	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// GenAI records are stored as content-addressed parts, so storage grows
// with what changes between a session's calls, not with what each call
// repeats (docs/DECISIONS.md, "GenAI records stored by parts"). A part is
// one value of a JSON document (the raw upload, or one of the record's
// message arrays): every member value or array element of it that is
// minPart bytes or more is a part of its own, recursively, stored once per
// SHA-256 of its bytes. A part's node is its bytes with its children's
// left out; reading puts them back, byte for byte. So the tool definitions
// and system prompt a session repeats on every call are stored once, and
// the messages of a call that repeats the previous call's messages add
// only their new ones and a list of references.
const (
	// minPart is the smallest value stored as a part of its own: a part
	// costs a row and an index entry (about 90 bytes with its hash)
	// besides the few bytes of its id in its parent, so smaller values
	// stay in their parent. Short messages (a tool call, a short tool
	// result) are parts, or every call would repeat them inline in its
	// message arrays: for the Claude Code-like session of
	// BenchmarkGenAIStorage (server), each call after the first cost
	// 12.6 KB with 256, 5.5 KB with 128 and 5.6 KB with 64.
	minPart = 128
	// maxPartDepth bounds how deep a document is split, and so how many
	// times a byte is hashed (once per level above it); deeper values stay
	// in their parent. What repeats sits higher: a tool definition at
	// depth 3, a message's content blocks at 5, a tool result's text at 6.
	// Uploads nest at most 64 levels (genai).
	maxPartDepth = 8
)

// partWriter stores parts in one transaction.
type partWriter struct {
	ctx context.Context
	tx  dbtx
}

// put stores v and returns its part's id and SHA-256. A value stored
// before (in this transaction or any other) is found by its hash and not
// split again: its children are stored already.
func (w partWriter) put(v []byte, depth int) (int64, [32]byte, error) {
	sum := sha256.Sum256(v)
	var id int64
	err := w.tx.QueryRowContext(w.ctx, `SELECT id FROM genai_part WHERE sha = ?`, sum[:]).Scan(&id)
	if err == nil {
		return id, sum, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, sum, err
	}
	var spans [][2]int
	if depth < maxPartDepth {
		spans = childSpans(v)
	}
	node := make([]byte, 0, 16)
	children := make([]int64, 0, len(spans))
	at := 0
	for _, sp := range spans {
		node = appendLit(node, v[at:sp[0]])
		cid, _, err := w.put(v[sp[0]:sp[1]], depth+1)
		if err != nil {
			return 0, sum, err
		}
		children = append(children, cid)
		at = sp[1]
	}
	node = appendLit(node, v[at:])
	kids, err := json.Marshal(children)
	if err != nil {
		return 0, sum, err
	}
	err = w.tx.QueryRowContext(w.ctx, `INSERT INTO genai_part (sha, node, children) VALUES (?, ?, ?) RETURNING id`,
		sum[:], node, string(kids)).Scan(&id)
	return id, sum, err
}

// appendLit appends one literal run of a node: its length, then its
// bytes. A node is len(children)+1 literals, a child between each two.
func appendLit(node, lit []byte) []byte {
	node = binary.AppendUvarint(node, uint64(len(lit)))
	return append(node, lit...)
}

// childSpans returns where the member values (of an object) or elements
// (of an array) of at least minPart bytes lie in v, in order; nil when v
// is not one JSON object or array, or has none so large.
func childSpans(v []byte) [][2]int {
	i := skipSpace(v, 0)
	if i >= len(v) || (v[i] != '{' && v[i] != '[') {
		return nil
	}
	var spans [][2]int
	end, ok := scanContainer(v, i, func(a, b int) {
		if b-a >= minPart {
			spans = append(spans, [2]int{a, b})
		}
	})
	if !ok || skipSpace(v, end) != len(v) {
		return nil
	}
	return spans
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanContainer reads the object or array at b[i] and calls value with
// the extent of each of its member values or elements; it returns the
// index after it. It checks the structure, not the literals: a document
// it reads wrongly is still stored and read back byte for byte.
func scanContainer(b []byte, i int, value func(a, b int)) (int, bool) {
	open := b[i]
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, true
	}
	for {
		if open == '{' {
			end, ok := scanString(b, i)
			if !ok {
				return 0, false
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			i = skipSpace(b, i+1)
		}
		end, ok := scanValue(b, i)
		if !ok {
			return 0, false
		}
		value(i, end)
		i = skipSpace(b, end)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case closing:
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// scanValue returns the index after the JSON value at b[i].
func scanValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '{', '[':
		return scanNested(b, i)
	case '"':
		return scanString(b, i)
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[j])) {
		j++
	}
	return j, j > i
}

// scanNested returns the index after the object or array at b[i], by its
// brackets alone (its members are split only when it is a part itself).
func scanNested(b []byte, i int) (int, bool) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end, ok := scanString(b, j)
			if !ok {
				return 0, false
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}

// scanString returns the index after the JSON string at b[i].
func scanString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// part is one stored part as read: its node and children, and its bytes
// once assembled.
type part struct {
	node     []byte
	children []int64
	full     []byte
}

// parts reads and assembles parts, each once however many records share it.
type parts map[int64]*part

// load reads the parts under roots that are not read yet, one level of
// the trees at a time.
func (ps parts) load(ctx context.Context, q dbtx, roots []int64) error {
	next := roots
	for len(next) > 0 {
		var want []int64
		seen := map[int64]bool{}
		for _, id := range next {
			if ps[id] == nil && !seen[id] {
				seen[id] = true
				want = append(want, id)
			}
		}
		if len(want) == 0 {
			return nil
		}
		ids, err := json.Marshal(want)
		if err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, `SELECT id, node, children FROM genai_part WHERE id IN (SELECT value::bigint FROM jsonb_array_elements_text(?::jsonb))`, string(ids))
		if err != nil {
			return err
		}
		next = nil
		for rows.Next() {
			var (
				id   int64
				p    part
				kids string
			)
			if err := rows.Scan(&id, &p.node, &kids); err != nil {
				rows.Close()
				return err
			}
			if err := json.Unmarshal([]byte(kids), &p.children); err != nil {
				rows.Close()
				return fmt.Errorf("genai part %d: children: %w", id, err)
			}
			ps[id] = &p
			next = append(next, p.children...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range want {
			if ps[id] == nil {
				return fmt.Errorf("genai part %d is missing", id)
			}
		}
	}
	return nil
}

// bytes assembles a loaded part.
func (ps parts) bytes(id int64) ([]byte, error) {
	p := ps[id]
	if p == nil {
		return nil, fmt.Errorf("genai part %d is not loaded", id)
	}
	if p.full != nil {
		return p.full, nil
	}
	out := []byte{}
	node := p.node
	for i := 0; ; i++ {
		n, w := binary.Uvarint(node)
		if w <= 0 || uint64(len(node)-w) < n {
			return nil, fmt.Errorf("genai part %d: malformed node", id)
		}
		out = append(out, node[w:w+int(n)]...)
		node = node[w+int(n):]
		if i == len(p.children) {
			break
		}
		// Children are stored before their parents, so have lower ids:
		// a damaged table cannot send this round in circles.
		if p.children[i] >= id {
			return nil, fmt.Errorf("genai part %d: child %d is not older", id, p.children[i])
		}
		child, err := ps.bytes(p.children[i])
		if err != nil {
			return nil, err
		}
		out = append(out, child...)
	}
	if len(node) != 0 {
		return nil, fmt.Errorf("genai part %d: malformed node", id)
	}
	// Records that share a part share its bytes: clipped, so appending
	// to one never writes into another.
	p.full = slices.Clip(out)
	return p.full, nil
}
