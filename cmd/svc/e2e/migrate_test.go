package e2e

import (
	"fmt"
	neturl "net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// migrateTarget is an empty database on the run's cluster (the one the
// harness's PostgreSQL mode uses, started on first use).
func migrateTarget(t *testing.T) string {
	t.Helper()
	return pgClusterFor(t).NewDatabase(t)
}

// A team served from SQLite moves to PostgreSQL with svc migrate and the
// broker started on --db-url serves it as before: the same history, the
// objective, the file (its bytes stayed on disk), the tokens, a resume
// from an id given out before the move, and the next push's id follows
// the last one.
func TestE2EMigrateSQLiteToPostgres(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "svc.json"), filepath.Join(dir, "svc.db")
	// SQLite in either mode: svc migrate reads a SQLite file.
	p := mustStartSvc(t, procOpts{configPath: cfg, dbPath: db, store: storeSQLite})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	aliceTok := createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	o := mustCall(t, d, admin, "CreateObjective", obj{"title": "Move", "outcome": "moved", "assignee": "bob"})
	if inner, ok := o["objective"].(obj); ok {
		o = inner
	}
	oid := o["id"].(string)
	mustWrite(t, p, aliceTok, "/alice/notes.txt", "text/plain", []byte("the bytes stay on disk"))
	var sent []obj
	for i := range 6 {
		_, m := mustPush(t, d, bearer(aliceTok), obj{"to": "bob", "body": fmt.Sprintf("m%d", i)})
		sent = append(sent, m)
	}
	_, last := mustPush(t, d, bearer(aliceTok), obj{"body": "to everyone"})
	history := listOf(t, mustCall(t, d, bearer(bobTok), "History", obj{"with": "alice"}), "messages")
	general := listOf(t, mustCall(t, d, bearer(bobTok), "History", obj{}), "messages")
	objBefore, eventsBefore := getObjective(t, d, bearer(bobTok), oid)
	p.mustStop(t)

	// The cluster trusts its socket: the password is there to be kept out
	// of what svc prints.
	u, err := neturl.Parse(migrateTarget(t))
	require.NoError(t, err)
	u.User = neturl.UserPassword(u.User.Username(), "pw-not-printed")
	url := u.String()
	code, stdout, stderr := runSvc(t, []string{"migrate", "--from", "sqlite:" + db, "--to", url}, nil, nil)
	require.Zero(t, code, "svc migrate:\n%s\n%s", stdout, stderr)
	require.Contains(t, stdout, "committed:")
	require.NotContains(t, stdout+stderr, "pw-not-printed")

	p2 := mustStartSvc(t, procOpts{configPath: cfg, env: []string{"SVC_DB_URL=" + url}})
	d2 := restDriver{p2}
	require.Equal(t, history, listOf(t, mustCall(t, d2, bearer(bobTok), "History", obj{"with": "alice"}), "messages"))
	require.Equal(t, general, listOf(t, mustCall(t, d2, bearer(bobTok), "History", obj{}), "messages"))
	objAfter, eventsAfter := getObjective(t, d2, bearer(bobTok), oid)
	require.Equal(t, objBefore, objAfter)
	require.Equal(t, eventsBefore, eventsAfter)
	mustRead(t, p2, aliceTok, "/alice/notes.txt", "text/plain", []byte("the bytes stay on disk"))

	// Resumed from an id given out before the move: the rest, in order.
	s := p2.subscribeSSE(t, bobTok, "bob", "", withHeader("Last-Event-ID", sent[2]["id"].(string)))
	for _, m := range sent[3:] {
		require.Equal(t, m, s.nextMessage(t))
	}
	require.Equal(t, last, s.nextMessage(t))
	// The next push continues the ids.
	_, next := mustPush(t, d2, bearer(aliceTok), obj{"to": "bob", "body": "after the move"})
	lastID, err := strconv.ParseInt(last["id"].(string), 10, 64)
	require.NoError(t, err)
	nextID, err := strconv.ParseInt(next["id"].(string), 10, 64)
	require.NoError(t, err)
	require.Equal(t, lastID+1, nextID)
	require.Equal(t, next, s.nextMessage(t))
}
