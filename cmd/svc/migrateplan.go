package main

// How svc migrate maps SQLite's tables onto PostgreSQL's: by reading both
// schemas (docs/DECISIONS.md, "svc migrate"). Every table and column must
// exist on both sides with types that map one to one, so a migration added
// on one side only stops the command instead of being skipped.

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// valueKind is how a column's values are copied and checksummed.
type valueKind int

const (
	kindInt   valueKind = iota + 1 // SQLite INTEGER, PostgreSQL bigint
	kindBool                       // SQLite INTEGER 0/1, PostgreSQL boolean
	kindText                       // TEXT on both
	kindBytes                      // SQLite BLOB, PostgreSQL bytea
)

// kindOf is the one mapping of column types: PostgreSQL's type and
// SQLite's declared type must name the same kind.
func kindOf(pgType, sqliteType string) (valueKind, bool) {
	want := map[string]struct {
		k      valueKind
		sqlite string
	}{
		"bigint":  {kindInt, "INTEGER"},
		"boolean": {kindBool, "INTEGER"},
		"text":    {kindText, "TEXT"},
		"bytea":   {kindBytes, "BLOB"},
	}[pgType]
	if want.k == 0 || !strings.EqualFold(sqliteType, want.sqlite) {
		return 0, false
	}
	return want.k, true
}

// counterTable is a PostgreSQL table holding what SQLite keeps in
// sqlite_sequence: the last id an AUTOINCREMENT column handed out, which a
// prune or delete does not take back. These are the only tables on one
// side only.
type counterTable struct {
	store, table, col string
	srcTable, srcCol  string
	value             int64 // set by planning: the source's last id
	seen              bool
}

var counterTables = []counterTable{
	{store: "main", table: "message_seq", col: "seq", srcTable: "messages", srcCol: "seq"},
	{store: "activity", table: "activity_seq", col: "id", srcTable: "activity", srcCol: "id"},
}

// bookkeeping are the migration version tables: each side keeps its own
// numbering, so they are not copied.
var bookkeeping = map[string]string{"main": "schema_migrations", "activity": "activity_schema_migrations"}

// seededRows are the rows a fresh schema's migrations insert, as a SQL
// condition selecting everything else: a target holding only these is
// empty.
var seededRows = map[string]string{"channels": `id <> 'general'`}

// storePlan is what copying one store takes.
type storePlan struct {
	tables    []*tablePlan // parents before children (foreign keys)
	counters  []counterTable
	triggered []string // tables with triggers of their own, off during the copy
}

// tablePlan is one table on both sides.
type tablePlan struct {
	name string
	cols []colPlan // PostgreSQL's column order
	pk   []colPlan
	// rowidCol is the column carrying SQLite's rowid (an INTEGER PRIMARY
	// KEY, or PostgreSQL's rowid column mirroring the implicit one), and
	// lastID what sqlite_sequence holds for the table: identity counters
	// continue after both.
	rowidCol string
	lastID   int64
}

type colPlan struct {
	name     string
	kind     valueKind
	srcExpr  string // the SQLite expression reading it
	identity bool   // PostgreSQL generates it: its sequence is set after the copy
}

// sqliteTable is a table as SQLite describes it.
type sqliteTable struct {
	cols         map[string]sqliteCol
	withoutRowid bool
	strict       bool
}

type sqliteCol struct {
	typ string
	pk  int // position in the primary key, from 1; 0 when not in it
}

// pgTable is a table as PostgreSQL describes it.
type pgTable struct {
	cols      []pgCol
	pk        []string
	triggered bool
}

type pgCol struct {
	name, typ string
	identity  bool
	generated bool
}

// planStores reads both sides' schemas of the main and activity stores.
func planStores(ctx context.Context, stores ...*storeCopy) error {
	src := map[string]map[string]sqliteTable{}
	dst := map[string]map[string]pgTable{}
	fks := map[string][][2]string{}
	lastIDs := map[string]map[string]int64{}
	for _, s := range stores {
		var err error
		if src[s.name], lastIDs[s.name], err = readSQLiteSchema(ctx, s.src); err != nil {
			return fmt.Errorf("%s store: read the SQLite schema: %w", s.name, err)
		}
		if dst[s.name], fks[s.name], err = readPGSchema(ctx, s.tx); err != nil {
			return fmt.Errorf("%s store: read the PostgreSQL schema: %w", s.name, err)
		}
	}
	var problems []string
	for _, s := range stores {
		plan, bad := planStore(s, stores, src, dst[s.name], fks[s.name], lastIDs[s.name])
		problems = append(problems, bad...)
		s.plan = plan
	}
	if len(problems) > 0 {
		return fmt.Errorf("the SQLite and PostgreSQL schemas differ, so the copy would be incomplete; nothing was copied:\n  - %s", strings.Join(problems, "\n  - "))
	}
	for _, s := range stores {
		if err := s.plan.readCounters(ctx, s.src); err != nil {
			return fmt.Errorf("%s store: %w", s.name, err)
		}
	}
	return nil
}

// planStore maps one store's tables, returning what does not map.
func planStore(s *storeCopy, stores []*storeCopy, src map[string]map[string]sqliteTable,
	dst map[string]pgTable, fks [][2]string, lastIDs map[string]int64) (*storePlan, []string) {
	mine := src[s.name]
	// Which of the database's tables are this store's: the activity store
	// may share the main store's database (its own bookkeeping table says
	// so), and then the other store's tables are not this one's.
	theirs := map[string]bool{bookkeeping[s.name]: true}
	for _, o := range stores {
		if o == s {
			continue
		}
		if _, here := dst[bookkeeping[o.name]]; !here {
			continue
		}
		theirs[bookkeeping[o.name]] = true
		for t := range src[o.name] {
			theirs[t] = true
		}
		for _, c := range counterTables {
			if c.store == o.name {
				theirs[c.table] = true
			}
		}
	}
	plan := &storePlan{}
	var bad []string
	counters := map[string]counterTable{}
	for _, c := range counterTables {
		if c.store == s.name {
			counters[c.table] = c
		}
	}
	for _, name := range slices.Sorted(maps.Keys(dst)) {
		if theirs[name] {
			continue
		}
		if c, ok := counters[name]; ok {
			if _, ok := mine[c.srcTable]; !ok {
				bad = append(bad, fmt.Sprintf("counter table %s counts %s, which SQLite lacks", name, c.srcTable))
			}
			c.seen = true
			counters[name] = c
			continue
		}
		st, ok := mine[name]
		if !ok {
			bad = append(bad, fmt.Sprintf("table %s is on PostgreSQL only", name))
			continue
		}
		t, tbad := planTable(name, st, dst[name])
		bad = append(bad, tbad...)
		t.lastID = lastIDs[name]
		plan.tables = append(plan.tables, t)
		if dst[name].triggered {
			plan.triggered = append(plan.triggered, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(mine)) {
		if _, ok := dst[name]; !ok {
			bad = append(bad, fmt.Sprintf("table %s is in SQLite only", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(counters)) {
		c := counters[name]
		if !c.seen {
			bad = append(bad, fmt.Sprintf("counter table %s is missing on PostgreSQL", name))
			continue
		}
		plan.counters = append(plan.counters, c)
	}
	ordered, err := parentsFirst(plan.tables, fks)
	if err != nil {
		bad = append(bad, err.Error())
	}
	plan.tables = ordered
	return plan, bad
}

// planTable maps one table's columns and primary key.
func planTable(name string, st sqliteTable, pt pgTable) (*tablePlan, []string) {
	t := &tablePlan{name: name}
	var bad []string
	if !st.strict {
		bad = append(bad, fmt.Sprintf("table %s is not STRICT in SQLite: its values' types are not guaranteed", name))
	}
	seen := map[string]bool{}
	for _, c := range pt.cols {
		seen[c.name] = true
		if c.generated {
			bad = append(bad, fmt.Sprintf("column %s.%s is generated on PostgreSQL: no mapping", name, c.name))
			continue
		}
		sc, ok := st.cols[c.name]
		expr := sqliteIdent(c.name)
		switch {
		case !ok && c.name == "rowid" && c.identity && !st.withoutRowid:
			// PostgreSQL's rowid mirrors SQLite's implicit one (the order
			// of insertion some lists keep).
			sc, expr = sqliteCol{typ: "INTEGER"}, "rowid"
			t.rowidCol = c.name
		case !ok:
			bad = append(bad, fmt.Sprintf("column %s.%s is on PostgreSQL only", name, c.name))
			continue
		}
		k, ok := kindOf(c.typ, sc.typ)
		if !ok {
			bad = append(bad, fmt.Sprintf("column %s.%s is %s on PostgreSQL and %s in SQLite: no mapping", name, c.name, c.typ, sc.typ))
			continue
		}
		t.cols = append(t.cols, colPlan{name: c.name, kind: k, srcExpr: expr, identity: c.identity})
	}
	var srcPK []string
	for _, cn := range slices.Sorted(maps.Keys(st.cols)) {
		sc := st.cols[cn]
		if !seen[cn] {
			bad = append(bad, fmt.Sprintf("column %s.%s is in SQLite only", name, cn))
		}
		if sc.pk > 0 {
			srcPK = append(srcPK, cn)
		}
	}
	slices.SortFunc(srcPK, func(a, b string) int { return cmp.Compare(st.cols[a].pk, st.cols[b].pk) })
	if !slices.Equal(srcPK, pt.pk) {
		bad = append(bad, fmt.Sprintf("table %s: primary key (%s) in SQLite, (%s) on PostgreSQL", name, strings.Join(srcPK, ", "), strings.Join(pt.pk, ", ")))
	}
	if len(pt.pk) == 0 {
		bad = append(bad, fmt.Sprintf("table %s has no primary key to copy and compare it in order", name))
	}
	for _, k := range pt.pk {
		for _, c := range t.cols {
			if c.name == k {
				t.pk = append(t.pk, c)
			}
		}
	}
	// An INTEGER PRIMARY KEY of a rowid table is SQLite's rowid.
	if len(srcPK) == 1 && !st.withoutRowid && strings.EqualFold(st.cols[srcPK[0]].typ, "INTEGER") {
		t.rowidCol = srcPK[0]
	}
	return t, bad
}

// parentsFirst orders tables so that each comes after the tables its
// foreign keys reference (by name among equals, for a stable order).
func parentsFirst(tables []*tablePlan, fks [][2]string) ([]*tablePlan, error) {
	byName := map[string]*tablePlan{}
	for _, t := range tables {
		byName[t.name] = t
	}
	parents := map[string]map[string]bool{}
	for _, fk := range fks {
		child, parent := fk[0], fk[1]
		if byName[child] == nil || byName[parent] == nil || child == parent {
			continue
		}
		if parents[child] == nil {
			parents[child] = map[string]bool{}
		}
		parents[child][parent] = true
	}
	var out []*tablePlan
	done := map[string]bool{}
	for len(out) < len(tables) {
		progressed := false
		for _, t := range tables {
			if done[t.name] {
				continue
			}
			ready := true
			for p := range parents[t.name] {
				ready = ready && done[p]
			}
			if ready {
				out = append(out, t)
				done[t.name] = true
				progressed = true
			}
		}
		if !progressed {
			return tables, fmt.Errorf("the foreign keys between the tables form a cycle: no order to copy them in")
		}
	}
	return out, nil
}

// readSQLiteSchema lists the tables of a store's file (without SQLite's
// own and the migration bookkeeping) and sqlite_sequence.
func readSQLiteSchema(ctx context.Context, tx *sql.Tx) (map[string]sqliteTable, map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name, wr, strict FROM pragma_table_list
WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> 'schema_migrations'`)
	if err != nil {
		return nil, nil, err
	}
	tables := map[string]sqliteTable{}
	for rows.Next() {
		var name string
		var t sqliteTable
		if err := rows.Scan(&name, &t.withoutRowid, &t.strict); err != nil {
			rows.Close()
			return nil, nil, err
		}
		tables[name] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for name, t := range tables {
		t.cols = map[string]sqliteCol{}
		cr, err := tx.QueryContext(ctx, `SELECT name, type, pk FROM pragma_table_info(?)`, name)
		if err != nil {
			return nil, nil, err
		}
		for cr.Next() {
			var cn string
			var c sqliteCol
			if err := cr.Scan(&cn, &c.typ, &c.pk); err != nil {
				cr.Close()
				return nil, nil, err
			}
			t.cols[cn] = c
		}
		cr.Close()
		if err := cr.Err(); err != nil {
			return nil, nil, err
		}
		tables[name] = t
	}
	lastIDs := map[string]int64{}
	var hasSeq bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'sqlite_sequence')`).Scan(&hasSeq); err != nil {
		return nil, nil, err
	}
	if hasSeq {
		sr, err := tx.QueryContext(ctx, `SELECT name, seq FROM sqlite_sequence`)
		if err != nil {
			return nil, nil, err
		}
		defer sr.Close()
		for sr.Next() {
			var name string
			var seq int64
			if err := sr.Scan(&name, &seq); err != nil {
				return nil, nil, err
			}
			lastIDs[name] = seq
		}
		if err := sr.Err(); err != nil {
			return nil, nil, err
		}
	}
	return tables, lastIDs, nil
}

// readPGSchema lists the tables of the target's schema with their
// columns, primary keys and triggers, and the foreign keys between them.
func readPGSchema(ctx context.Context, tx pgx.Tx) (map[string]pgTable, [][2]string, error) {
	rows, err := tx.Query(ctx, `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attidentity <> '', a.attgenerated <> ''
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
ORDER BY c.relname, a.attnum`)
	if err != nil {
		return nil, nil, err
	}
	tables := map[string]pgTable{}
	for rows.Next() {
		var tn string
		var c pgCol
		if err := rows.Scan(&tn, &c.name, &c.typ, &c.identity, &c.generated); err != nil {
			rows.Close()
			return nil, nil, err
		}
		t := tables[tn]
		t.cols = append(t.cols, c)
		tables[tn] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT c.relname, a.attname
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indisprimary AND n.nspname = current_schema()
ORDER BY c.relname, k.ord`)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var tn, cn string
		if err := rows.Scan(&tn, &cn); err != nil {
			rows.Close()
			return nil, nil, err
		}
		t := tables[tn]
		t.pk = append(t.pk, cn)
		tables[tn] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT DISTINCT c.relname FROM pg_trigger g
JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT g.tgisinternal AND n.nspname = current_schema()`)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var tn string
		if err := rows.Scan(&tn); err != nil {
			rows.Close()
			return nil, nil, err
		}
		t := tables[tn]
		t.triggered = true
		tables[tn] = t
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	rows, err = tx.Query(ctx, `SELECT child.relname, parent.relname FROM pg_constraint k
JOIN pg_class child ON child.oid = k.conrelid JOIN pg_class parent ON parent.oid = k.confrelid
JOIN pg_namespace n ON n.oid = child.relnamespace
WHERE k.contype = 'f' AND n.nspname = current_schema()`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var fks [][2]string
	for rows.Next() {
		var fk [2]string
		if err := rows.Scan(&fk[0], &fk[1]); err != nil {
			return nil, nil, err
		}
		fks = append(fks, fk)
	}
	return tables, fks, rows.Err()
}

// readCounters reads, for each counter table, the last id the source
// handed out: sqlite_sequence's, or the largest id when that is larger.
func (p *storePlan) readCounters(ctx context.Context, src *sql.Tx) error {
	for i, c := range p.counters {
		var maxID sql.NullInt64
		if err := src.QueryRowContext(ctx, `SELECT MAX(`+sqliteIdent(c.srcCol)+`) FROM `+sqliteIdent(c.srcTable)).Scan(&maxID); err != nil {
			return fmt.Errorf("read the last id of %s: %w", c.srcTable, err)
		}
		p.counters[i].value = maxID.Int64
		for _, t := range p.tables {
			if t.name == c.srcTable {
				p.counters[i].value = max(p.counters[i].value, t.lastID)
			}
		}
	}
	return nil
}

// checkEmpty refuses a target that holds anything beyond what its
// migrations seed: svc migrate never merges two teams.
func checkEmpty(ctx context.Context, tx pgx.Tx, p *storePlan) error {
	var held []string
	for _, t := range p.tables {
		q := `SELECT count(*) FROM ` + pgx.Identifier{t.name}.Sanitize()
		if cond, ok := seededRows[t.name]; ok {
			q += ` WHERE ` + cond
		}
		var n int64
		if err := tx.QueryRow(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("table %s: %w", t.name, lockHint(err))
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%s (%d rows)", t.name, n))
		}
	}
	for _, c := range p.counters {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(`+pgx.Identifier{c.col}.Sanitize()+`), 0) FROM `+pgx.Identifier{c.table}.Sanitize()).Scan(&n); err != nil {
			return fmt.Errorf("table %s: %w", c.table, err)
		}
		if n != 0 {
			held = append(held, fmt.Sprintf("%s (at %d)", c.table, n))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return &exitError{code: 1, err: fmt.Errorf("the target already holds data: %s. svc migrate copies into a new, empty database only and never merges two teams; point --to at an empty database, or pass --replace-target to delete what it holds first. Nothing was copied", strings.Join(held, ", "))}
}

// setCounters continues PostgreSQL's ids after the copied ones: the
// counter tables get the source's last ids, and each identity column's
// sequence its largest copied value (or sqlite_sequence's, where larger:
// an AUTOINCREMENT id is never reused).
func setCounters(ctx context.Context, tx pgx.Tx, p *storePlan) error {
	for _, c := range p.counters {
		if _, err := tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{c.table}.Sanitize()+` (`+pgx.Identifier{c.col}.Sanitize()+`) VALUES ($1)`, c.value); err != nil {
			return fmt.Errorf("set %s: %w", c.table, err)
		}
	}
	for _, t := range p.tables {
		for _, c := range t.cols {
			if !c.identity {
				continue
			}
			var last int64
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(`+pgx.Identifier{c.name}.Sanitize()+`), 0) FROM `+pgx.Identifier{t.name}.Sanitize()).Scan(&last); err != nil {
				return fmt.Errorf("table %s: %w", t.name, err)
			}
			if c.name == t.rowidCol {
				last = max(last, t.lastID)
			}
			// setval(seq, 1, false): the next value is 1, as in a new table.
			if _, err := tx.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, $2), GREATEST($3::bigint, 1), $3::bigint > 0)`,
				pgx.Identifier{t.name}.Sanitize(), c.name, last); err != nil {
				return fmt.Errorf("table %s: continue the ids of %s: %w", t.name, c.name, err)
			}
		}
	}
	return nil
}

// sqliteIdent quotes an SQLite identifier.
func sqliteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
