package main

// The copy and its verification: rows streamed from SQLite into
// PostgreSQL's COPY, then each table read back on both sides in
// primary-key order and hashed in one canonical encoding.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/jackc/pgx/v5"
)

// copyTable copies one table's rows, in primary-key order, with COPY.
func copyTable(ctx context.Context, src *sql.Tx, tx pgx.Tx, t *tablePlan) error {
	rows, err := src.QueryContext(ctx, t.sqliteSelect())
	if err != nil {
		return fmt.Errorf("read from SQLite: %w", err)
	}
	defer rows.Close()
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = c.name
	}
	in := &sqliteSource{rows: rows, t: t, raw: make([]any, len(t.cols)), out: make([]any, len(t.cols)), ptrs: make([]any, len(t.cols))}
	for i := range in.raw {
		in.ptrs[i] = &in.raw[i]
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{t.name}, names, in); err != nil {
		if in.err != nil {
			return in.err
		}
		return fmt.Errorf("copy into PostgreSQL: %w", err)
	}
	return rows.Err()
}

// sqliteSelect reads the table's columns in primary-key order. Text keys
// compare by bytes, as they do on PostgreSQL's "C" collation.
func (t *tablePlan) sqliteSelect() string {
	cols := make([]string, len(t.cols))
	for i, c := range t.cols {
		cols[i] = c.srcExpr
	}
	order := make([]string, len(t.pk))
	for i, c := range t.pk {
		order[i] = c.srcExpr
		if c.kind == kindText {
			order[i] += ` COLLATE BINARY`
		}
	}
	return `SELECT ` + strings.Join(cols, ", ") + ` FROM ` + sqliteIdent(t.name) + ` ORDER BY ` + strings.Join(order, ", ")
}

// pgSelect is sqliteSelect on PostgreSQL.
func (t *tablePlan) pgSelect() string {
	cols := make([]string, len(t.cols))
	for i, c := range t.cols {
		cols[i] = pgx.Identifier{c.name}.Sanitize()
	}
	order := make([]string, len(t.pk))
	for i, c := range t.pk {
		order[i] = pgx.Identifier{c.name}.Sanitize()
		if c.kind == kindText {
			order[i] += ` COLLATE "C"`
		}
	}
	return `SELECT ` + strings.Join(cols, ", ") + ` FROM ` + pgx.Identifier{t.name}.Sanitize() + ` ORDER BY ` + strings.Join(order, ", ")
}

// sqliteSource is a pgx.CopyFromSource over SQLite rows, converting each
// value to its PostgreSQL type and refusing any value that would not
// convert without loss.
type sqliteSource struct {
	rows           *sql.Rows
	t              *tablePlan
	raw, out, ptrs []any
	err            error
}

func (s *sqliteSource) Next() bool {
	if s.err != nil || !s.rows.Next() {
		return false
	}
	if err := s.rows.Scan(s.ptrs...); err != nil {
		s.err = fmt.Errorf("read from SQLite: %w", err)
		return false
	}
	for i, c := range s.t.cols {
		v, err := toPG(c.kind, s.raw[i])
		if err != nil {
			s.err = fmt.Errorf("column %s: %w", c.name, err)
			return false
		}
		s.out[i] = v
	}
	return true
}

func (s *sqliteSource) Values() ([]any, error) { return s.out, s.err }

func (s *sqliteSource) Err() error { return s.err }

// toPG converts one SQLite value to what pgx writes to the column kind.
func toPG(k valueKind, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch k {
	case kindInt:
		if n, ok := v.(int64); ok {
			return n, nil
		}
	case kindBool:
		if n, ok := v.(int64); ok && (n == 0 || n == 1) {
			return n == 1, nil
		}
	case kindText:
		switch s := v.(type) {
		case string:
			return s, nil
		case []byte:
			return string(s), nil
		}
	case kindBytes:
		if b, ok := v.([]byte); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("value %T does not convert to the column's type without loss", v)
}

// sideSum is what one side holds of a table: rows, payload bytes and the
// SHA-256 of its rows' canonical encoding in primary-key order.
type sideSum struct {
	rows  int64
	bytes int64
	sum   [sha256.Size]byte
}

func (s sideSum) short() string { return hex.EncodeToString(s.sum[:8]) }

// tableCheck is a table seen from both sides.
type tableCheck struct {
	table    string
	src, dst sideSum
}

func (c tableCheck) equal() bool { return c.src == c.dst }

// rowHasher hashes rows in the canonical encoding both sides share: per
// value a tag (null, integer, text, bytes), then an integer as 8 bytes
// big-endian or text and bytes as their length (8 bytes) and content. A
// boolean is the integer SQLite stores (0 or 1). Every value delimits
// itself, so no two different row sequences encode alike.
type rowHasher struct {
	h     hash.Hash
	buf   []byte
	rows  int64
	bytes int64
}

func newRowHasher() *rowHasher { return &rowHasher{h: sha256.New()} }

const (
	tagNull  = 0
	tagInt   = 1
	tagText  = 2
	tagBytes = 3
)

// add hashes one value of a column of kind k, as read from either side.
func (r *rowHasher) add(k valueKind, v any) error {
	r.buf = r.buf[:0]
	switch x := v.(type) {
	case nil:
		r.buf = append(r.buf, tagNull)
	case int64:
		if k != kindInt && k != kindBool {
			return fmt.Errorf("an integer in a column that holds none")
		}
		r.buf = binary.BigEndian.AppendUint64(append(r.buf, tagInt), uint64(x)) //nolint:gosec // the bits, not the value
		r.bytes += 8
	case bool:
		if k != kindBool {
			return fmt.Errorf("a boolean in a column that holds none")
		}
		n := uint64(0)
		if x {
			n = 1
		}
		r.buf = binary.BigEndian.AppendUint64(append(r.buf, tagInt), n)
		r.bytes += 8
	case string:
		if k != kindText {
			return fmt.Errorf("text in a column that holds none")
		}
		r.buf = binary.BigEndian.AppendUint64(append(r.buf, tagText), uint64(len(x)))
		r.buf = append(r.buf, x...)
		r.bytes += int64(len(x))
	case []byte:
		tag := byte(tagBytes)
		switch k {
		case kindText:
			tag = tagText // the SQLite driver may hand text as bytes
		case kindBytes:
		default:
			return fmt.Errorf("bytes in a column that holds none")
		}
		r.buf = binary.BigEndian.AppendUint64(append(r.buf, tag), uint64(len(x)))
		r.buf = append(r.buf, x...)
		r.bytes += int64(len(x))
	default:
		return fmt.Errorf("a %T value: no canonical encoding", v)
	}
	_, _ = r.h.Write(r.buf)
	return nil
}

func (r *rowHasher) sum() sideSum {
	s := sideSum{rows: r.rows, bytes: r.bytes}
	r.h.Sum(s.sum[:0])
	return s
}

// hashRows reads every row of next/scan and hashes it.
func hashRows(t *tablePlan, next func() bool, values func() ([]any, error)) (sideSum, error) {
	h := newRowHasher()
	for next() {
		vals, err := values()
		if err != nil {
			return sideSum{}, err
		}
		if len(vals) != len(t.cols) {
			return sideSum{}, fmt.Errorf("%d values for %d columns", len(vals), len(t.cols))
		}
		for i, c := range t.cols {
			if err := h.add(c.kind, vals[i]); err != nil {
				return sideSum{}, fmt.Errorf("column %s: %w", c.name, err)
			}
		}
		h.rows++
	}
	return h.sum(), nil
}

// sumSQLite reads a table from SQLite and hashes it.
func sumSQLite(ctx context.Context, src *sql.Tx, t *tablePlan) (sideSum, error) {
	rows, err := src.QueryContext(ctx, t.sqliteSelect())
	if err != nil {
		return sideSum{}, err
	}
	defer rows.Close()
	raw := make([]any, len(t.cols))
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	s, err := hashRows(t, rows.Next, func() ([]any, error) { return raw, rows.Scan(ptrs...) })
	if err != nil {
		return s, err
	}
	return s, rows.Err()
}

// sumPG reads a table from PostgreSQL (inside the copy's transaction)
// and hashes it.
func sumPG(ctx context.Context, tx pgx.Tx, t *tablePlan) (sideSum, error) {
	rows, err := tx.Query(ctx, t.pgSelect())
	if err != nil {
		return sideSum{}, err
	}
	defer rows.Close()
	s, err := hashRows(t, rows.Next, rows.Values)
	if err != nil {
		return s, err
	}
	return s, rows.Err()
}

// verifyStore computes every table's count and checksum on both sides,
// each read on its own (SQLite's snapshot, PostgreSQL's transaction), and
// the counters.
func verifyStore(ctx context.Context, src *sql.Tx, tx pgx.Tx, p *storePlan) ([]tableCheck, error) {
	var out []tableCheck
	for _, t := range p.tables {
		c := tableCheck{table: t.name}
		var err error
		if c.src, err = sumSQLite(ctx, src, t); err != nil {
			return nil, fmt.Errorf("table %s in SQLite: %w", t.name, err)
		}
		if c.dst, err = sumPG(ctx, tx, t); err != nil {
			return nil, fmt.Errorf("table %s on PostgreSQL: %w", t.name, err)
		}
		out = append(out, c)
	}
	for _, ct := range p.counters {
		c := tableCheck{table: ct.table}
		one := &tablePlan{cols: []colPlan{{name: ct.col, kind: kindInt}}}
		// SQLite's side: what planning read from sqlite_sequence.
		h := newRowHasher()
		_ = h.add(kindInt, ct.value)
		h.rows = 1
		c.src = h.sum()
		rows, err := tx.Query(ctx, `SELECT `+pgx.Identifier{ct.col}.Sanitize()+` FROM `+pgx.Identifier{ct.table}.Sanitize())
		if err != nil {
			return nil, fmt.Errorf("table %s on PostgreSQL: %w", ct.table, err)
		}
		c.dst, err = hashRows(one, rows.Next, rows.Values)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("table %s on PostgreSQL: %w", ct.table, err)
		}
		out = append(out, c)
	}
	return out, nil
}
