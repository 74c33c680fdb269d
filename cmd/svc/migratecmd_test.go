package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"svc/store"
	"svc/store/postgres"
	"svc/store/postgres/pgtest"
	"svc/store/sqlite"
)

// newPGDatabase is an empty database on the test cluster.
func newPGDatabase(t *testing.T) string {
	t.Helper()
	return pgCluster(t).NewDatabase(t)
}

// at is a fixed instant with a sub-millisecond part plus d.
func at(d time.Duration) time.Time {
	return time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.UTC).Add(d)
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// team is what populate wrote that the tests check after a migration.
type team struct {
	dir, main, activity string
	lastSeq             int64 // the newest message id
	lastActivity        int64 // the last activity id handed out (pruned since)
	fileID              int64 // the newest file entry id
	tokenIDs            []string
}

// populate writes a team through the store API with a row in every table
// of both stores, then closes them.
func populate(t *testing.T) team {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	tm := team{dir: dir, main: filepath.Join(dir, "svc.db"), activity: filepath.Join(dir, "svc.db-activity.db")}
	s, err := sqlite.Open(ctx, tm.main)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	must := require.New(t)
	for i, name := range []string{"alice", "bob", "carol"} {
		must.NoError(s.PutMember(ctx, store.Member{
			Name: name, ID: name + "-id", Role: &store.Role{Title: "Role of " + name, Description: "ü ☃ " + name},
			Instructions: "Do " + name + " things.", Permissions: []string{"publish", "read"},
			CreatedAt: at(time.Duration(i) * time.Second), UpdatedAt: at(time.Minute),
		}))
	}
	// Tokens in an order their ids do not sort in: the list keeps it.
	for i, id := range []string{"tok-z", "tok-a", "tok-m"} {
		tok := store.Token{ID: id, Member: "alice", Hash: sha256.Sum256([]byte(id)), Label: "label " + id, Origin: "enroll",
			CreatedAt: at(time.Duration(i) * time.Minute), CreatedBy: "admin", ExpiresAt: at(time.Hour)}
		must.NoError(s.CreateToken(ctx, tok))
		tm.tokenIDs = append(tm.tokenIDs, id)
	}
	must.NoError(s.CreateSession(ctx, store.Session{ID: "sess-1", Hash: sha256.Sum256([]byte("cookie")), Member: "bob",
		CreatedAt: at(0), LastSeenAt: at(time.Minute)}))
	must.NoError(s.CreateChannel(ctx, store.Channel{ID: "c1", Slug: "eng", CreatedAt: at(time.Minute), CreatedBy: "alice"}))
	must.NoError(s.PutChannelMember(ctx, store.ChannelMember{Channel: "c1", Member: "bob", Role: "member"}))
	_, err = s.PutPushSubscription(ctx, store.PushSubscription{ID: "p1", Member: "bob", Endpoint: "https://push.example/1",
		P256dh: "key", Auth: "auth", CreatedAt: at(time.Minute)})
	must.NoError(err)

	msgs := []store.Message{
		{From: "alice", Thread: "chan:general", Body: "hello all", Level: "info", All: true, CreatedAt: at(time.Minute)},
		{From: "alice", To: "bob", Thread: "dm:alice:bob", Body: "hi bob", Level: "warn", Data: []byte(`{"k":1}`),
			Meta: []byte(`{"m":"x"}`), Attachments: []string{"/alice/notes.txt"}, CreatedAt: at(2 * time.Minute)},
		{From: "bob", Thread: "chan:c1", Title: "t", Body: "in eng", Level: "info", Recipients: []string{"alice", "bob"}, CreatedAt: at(3 * time.Minute)},
	}
	got, err := s.AppendMessages(ctx, msgs)
	must.NoError(err)
	reply := store.Message{From: "bob", To: "alice", Thread: "dm:alice:bob", Body: "a reply", Level: "info",
		ReplyTo: got[1].Seq, Hops: 1, Chain: got[1].Seq, LoopStopped: true, CreatedAt: at(4 * time.Minute)}
	got2, err := s.AppendMessages(ctx, []store.Message{reply})
	must.NoError(err)
	tm.lastSeq = got2[0].Seq
	_, err = s.AddLoopStop(ctx, store.LoopStop{Chain: got[1].Seq, Message: got2[0].Seq, At: at(4 * time.Minute)})
	must.NoError(err)
	_, _, err = s.TakeLease(ctx, "hooks.scheduler", "a-broker", at(4*time.Minute), 15*time.Second)
	must.NoError(err)
	// What several brokers share (docs/DECISIONS.md, "Revocation and login
	// limits across brokers").
	_, err = s.AddRevocation(ctx, store.Revocation{Member: "alice", What: "tokens", At: at(4 * time.Minute)})
	must.NoError(err)
	must.NoError(s.AddLimitHit(ctx, "login:member:alice", at(4*time.Minute)))
	_, err = s.ClaimTOTPStep(ctx, "alice", 1234)
	must.NoError(err)

	must.NoError(s.CreateObjective(ctx, store.Objective{ID: "obj-1", Title: "Ship", Outcome: "Shipped.", Status: store.StatusActive,
		Assignee: "bob", Originator: "alice", AssigneeID: "bob-id", OriginatorID: "alice-id", Watchers: []string{"carol"},
		CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)}))
	_, err = s.AppendObjectiveEvents(ctx, []store.ObjectiveEvent{
		{ObjectiveID: "obj-1", Kind: "created", Actor: "alice", CreatedAt: at(time.Minute)},
		{ObjectiveID: "obj-1", Kind: "assigned", Actor: "alice", CreatedAt: at(2 * time.Minute)},
	})
	must.NoError(err)

	_, err = s.CreateEntry(ctx, store.FsEntry{Path: "/alice/docs", Owner: "alice", Kind: store.FsDir, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)})
	must.NoError(err)
	f, err := s.CreateEntry(ctx, store.FsEntry{Path: "/alice/notes.txt", Owner: "alice", Kind: store.FsFile, Size: 5, MimeType: "text/plain",
		Blob: hexSHA("notes"), CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)})
	must.NoError(err)
	// A replaced file leaves its old blob unreferenced (refs 0), as the
	// sweep finds it.
	_, _, err = s.ReplaceFile(ctx, "/alice/notes.txt", store.FsContent{Blob: hexSHA("notes v2"), Size: 8, MimeType: "text/plain", UpdatedAt: at(time.Hour)})
	must.NoError(err)
	// The new content is small: kept inline, as the broker keeps it.
	must.NoError(s.PutInline(ctx, hexSHA("notes v2"), []byte("notes v2")))
	must.NoError(s.GrantEntries(ctx, []int64{f.ID}, []string{"bob"}))
	tm.fileID = f.ID

	must.NoError(s.CreateSecret(ctx, store.Secret{Slug: "gh", EnvName: "GH_TOKEN", Enabled: true, Value: []byte("sealed:\x00\xffsecret"), CreatedAt: at(0)}))
	must.NoError(s.PutSecretBinding(ctx, "gh", "bob"))
	must.NoError(s.CreateToolSource(ctx, store.ToolSource{Slug: "api", Kind: "custom", DisplayName: "API", Config: []byte(`{"url":"https://example.com"}`),
		Enabled: true, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)}))
	must.NoError(s.SetToolCredential(ctx, "api", store.ToolCredential{Kind: "bearer", Secret: []byte("sealed:tool")}, at(time.Hour)))
	must.NoError(s.PutToolBinding(ctx, "api", "bob"))
	must.NoError(s.PutTool(ctx, "api", store.Tool{Name: "get", Description: "gets", InputSchema: []byte(`{"type":"object"}`),
		Binding: []byte(`{"method":"GET","url":"https://example.com/get"}`)}, at(time.Hour)))
	must.NoError(s.CreateEnrollment(ctx, store.Enrollment{ID: "e1", DeviceHash: sha256.Sum256([]byte("device")), UserCode: "BCDFGHJK",
		Status: store.EnrollmentPending, CreatedAt: at(0), ExpiresAt: at(5 * time.Minute), Interval: 5 * time.Second}))
	must.NoError(s.CreatePairingCode(ctx, store.PairingCode{Hash: sha256.Sum256([]byte("pair")), Issuer: "https://platform", Audience: "aud",
		JWKSURL: "https://platform/jwks", CreatedBy: "alice", CreatedAt: at(0), ExpiresAt: at(5 * time.Minute)}, 10))
	must.NoError(s.CreateHookProfile(ctx, store.HookProfile{Slug: "prof", Auth: store.HookAuth{Kind: "header-secret", HeaderName: "x-key"},
		Secret: []byte("sealed:profile"), CreatedAt: at(0), UpdatedAt: at(0)}))
	must.NoError(s.CreateHookEndpoint(ctx, store.HookEndpoint{Slug: "gh", DisplayName: "GitHub", Targets: []byte(`[{"member":"bob"}]`),
		AuthProfile: "prof", Filters: []byte(`[]`), Policy: []byte(`{"ifOffline":"queue"}`), Enabled: true, Level: "info",
		CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)}))
	must.NoError(s.AddHookDelivery(ctx, store.HookDelivery{ID: "d1", Endpoint: "gh", Status: "queued", ReceivedAt: at(time.Minute),
		Size: 3, Body: []byte{0, 1, 2}}))
	must.NoError(s.AddHookPending(ctx, store.HookPending{Delivery: "d1", Endpoint: "gh", Member: "bob", Kind: store.HookQueue,
		ReceivedAt: at(time.Minute), DueAt: at(time.Hour), Level: "info", Items: []byte(`[{"id":"d1"}]`)}))
	_, err = s.UpdateDelivery(ctx, "bob", store.DeliveryUpdate{Position: got[1].Seq, Turn: store.TurnStarted, TurnSeq: got[1].Seq, At: at(5 * time.Minute)})
	must.NoError(err)
	must.NoError(s.CreateApproval(ctx, store.Approval{ID: "a1", Member: "bob", Tool: "Bash", Input: []byte(`{"command":"ls"}`),
		Objective: "obj-1", Status: store.ApprovalPending, RequestedAt: at(time.Minute), ExpiresAt: at(time.Hour)}))
	must.NoError(s.PutMeta(ctx, "team_id", "team-under-test"))
	must.NoError(s.PutFormerMember(ctx, store.FormerMember{ID: "dave-id", Name: "dave", DeletedAt: at(time.Minute), DeletedBy: "alice"}))

	a, err := sqlite.OpenActivity(ctx, tm.activity)
	must.NoError(err)
	defer func() { require.NoError(t, a.Close()) }()
	_, err = a.CommitActivity(ctx, store.ActivityBatch{
		Events: []store.ActivityEvent{
			{Member: "bob", Kind: "tool_action", TS: at(-time.Hour), Data: []byte(`{"n":0}`)},
			{Member: "bob", Kind: "llm_exchange", TS: at(time.Minute), ObjectiveID: "obj-1", Data: []byte(`{"responseId":"r1"}`), ResponseID: "r1"},
			{Member: "bob", MemberUID: "bob-id", Kind: "tool_action", TS: at(2 * time.Minute), Data: []byte(`{"n":2}`)},
		},
		GenAI: []store.GenAIRecord{{ID: "g1", Member: "bob", TS: at(time.Minute), Provider: "openai", API: "responses", Model: "gpt-test",
			ResponseID: "r1", Usage: store.GenAIUsage{InputTokens: 100, OutputTokens: 10},
			SystemInstructions: []byte(`[{"type":"text","content":"be brief"}]`),
			InputMessages:      []byte(`[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`),
			OutputMessages:     []byte(`[{"role":"assistant","parts":[{"type":"text","content":"hello"}]}]`),
			ToolDefinitions:    []byte(`[{"type":"function","name":"shell"}]`),
			Raw:                []byte(`{"raw":true}`)}},
		States: []store.CorrelationState{{Member: "bob", State: []byte(`{"open":1}`), UpdatedAt: at(time.Minute)}},
	})
	must.NoError(err)
	// The pruned first event keeps its id used: the counter must carry
	// on after it, not after the largest id left.
	_, err = a.AppendActivity(ctx, []store.ActivityEvent{{Member: "carol", Kind: "tool_action", TS: at(-time.Hour), Data: []byte(`{"n":9}`)}})
	must.NoError(err)
	_, err = a.PruneActivity(ctx, at(-time.Minute))
	must.NoError(err)
	tm.lastActivity, err = a.LastActivityID(ctx)
	must.NoError(err)
	return tm
}

// runCmd runs svc with args and returns its output and error.
func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return out.String() + errOut.String(), err
}

// checkLines are the verification table's rows: table -> the line's
// fields (rows sqlite, rows postgres, sha sqlite, sha postgres, verdict).
func checkLines(out string) map[string][]string {
	rows := map[string][]string{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 6 && (f[5] == "ok" || f[5] == "DIFFERS") {
			rows[f[0]] = f[1:]
		}
	}
	return rows
}

// Every table of both stores is copied, the verification table names each
// one as equal, and the broker's view on PostgreSQL is the team's: its
// history, its token order, and ids that continue after the copied ones.
func TestMigrateCopiesEveryTable(t *testing.T) {
	tm := populate(t)
	url := newPGDatabase(t)
	out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url)
	require.NoError(t, err, out)
	require.Contains(t, out, "copies database rows only")
	require.Contains(t, out, "committed:")
	require.NotContains(t, out, "DIFFERS")
	lines := checkLines(out)
	for _, tbl := range []string{
		"members", "tokens", "sessions", "messages", "message_recipients", "channels", "channel_members", "push_subscriptions",
		"objectives", "objective_events", "fs_blobs", "fs_inline", "fs_entries", "fs_usage", "fs_grants", "secrets", "secret_bindings",
		"tool_sources", "tool_bindings", "tools", "enrollments", "pairing_codes", "hook_profiles", "hook_endpoints",
		"hook_deliveries", "hook_pending", "deliveries", "meta", "former_members", "loop_stops", "approvals", "message_seq",
		"leases", "activity", "activity_seq", "genai_raw", "genai", "genai_part", "otlp_state",
		"revocations", "limit_hits", "totp_steps",
	} {
		f, ok := lines[tbl]
		require.True(t, ok, "table %s is not in the verification:\n%s", tbl, out)
		require.Equal(t, f[0], f[1], "rows of %s", tbl)
		require.NotEqual(t, "0", f[0], "populate leaves %s empty: the test would not see it copied", tbl)
		require.Equal(t, f[2], f[3], "checksums of %s", tbl)
	}
	require.Len(t, lines, 42, "a table the test does not know:\n%s", out)

	ctx := t.Context()
	pg, err := postgres.Open(ctx, url)
	require.NoError(t, err)
	defer pg.Close()
	last, err := pg.LastMessageSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, tm.lastSeq, last)
	// Resuming after a pre-migration id reads the rest of the history.
	before, err := sqliteMessagesFor(t, tm, "alice")
	require.NoError(t, err)
	after, err := pg.MessagesFor(ctx, "alice", before[0].Seq, 100)
	require.NoError(t, err)
	require.Equal(t, viewMessages(before[1:]), viewMessages(after))
	all, err := pg.MessagesFor(ctx, "alice", 0, 100)
	require.NoError(t, err)
	require.Equal(t, viewMessages(before), viewMessages(all))
	// A push after the migration gets the next id.
	next, err := pg.AppendMessages(ctx, []store.Message{{From: "alice", Thread: "chan:general", Body: "after", Level: "info", All: true, CreatedAt: at(time.Hour)}})
	require.NoError(t, err)
	require.Equal(t, tm.lastSeq+1, next[0].Seq)
	toks, err := pg.ListTokens(ctx, "alice")
	require.NoError(t, err)
	var ids []string
	for _, tok := range toks {
		ids = append(ids, tok.ID)
	}
	require.Equal(t, tm.tokenIDs, ids, "tokens keep their insertion order")
	e, err := pg.CreateEntry(ctx, store.FsEntry{Path: "/bob/new", Owner: "bob", Kind: store.FsDir, CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)})
	require.NoError(t, err)
	require.Greater(t, e.ID, tm.fileID)
	usage, err := pg.Usage(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, int64(8), usage, "fs_usage copied as it was, not counted again by triggers")
	inline, err := pg.InlineContent(ctx, hexSHA("notes v2"))
	require.NoError(t, err)
	require.Equal(t, []byte("notes v2"), inline, "inline content copied")
	sec, err := pg.GetSecret(ctx, "gh")
	require.NoError(t, err)
	require.Equal(t, []byte("sealed:\x00\xffsecret"), sec.Value, "sealed values are copied as they are")

	act, err := postgres.OpenActivity(ctx, url)
	require.NoError(t, err)
	defer act.Close()
	lastAct, err := act.LastActivityID(ctx)
	require.NoError(t, err)
	require.Equal(t, tm.lastActivity, lastAct)
	added, err := act.AppendActivity(ctx, []store.ActivityEvent{{Member: "bob", Kind: "tool_action", TS: at(time.Hour), Data: []byte(`{}`)}})
	require.NoError(t, err)
	require.Equal(t, tm.lastActivity+1, added[0].ID, "activity ids carry on after the pruned ones")
	raw, err := act.GenAIRaw(ctx, "bob", "g1")
	require.NoError(t, err)
	require.JSONEq(t, `{"raw":true}`, string(raw))
}

// sqliteMessagesFor reads member's messages from the team's SQLite
// store (the broker stopped again).
func sqliteMessagesFor(t *testing.T, tm team, member string) ([]store.Message, error) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), tm.main)
	require.NoError(t, err)
	defer s.Close()
	return s.MessagesFor(t.Context(), member, 0, 100)
}

// viewMessages makes messages comparable across stores: times in ms.
func viewMessages(ms []store.Message) []store.Message {
	out := make([]store.Message, len(ms))
	for i, m := range ms {
		m.CreatedAt = time.UnixMilli(m.CreatedAt.UnixMilli()).UTC()
		out[i] = m
	}
	return out
}

// fileSums are the SHA-256 of files' contents.
func fileSums(t *testing.T, paths ...string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out = append(out, hexSHA(string(b)))
	}
	return out
}

// The activity store may go to a database of its own, as svc serve
// --activity-db-url puts it: each database then holds one store's tables.
func TestMigrateActivityElsewhere(t *testing.T) {
	tm := populate(t)
	mainURL, actURL := newPGDatabase(t), newPGDatabase(t)
	out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", mainURL, "--to-activity", actURL)
	require.NoError(t, err, out)
	require.Equal(t, tm.lastSeq, pgCount(t, mainURL, "messages"))
	require.Equal(t, int64(2), pgCount(t, actURL, "activity"))
	tables := func(url string) []string {
		conn, err := pgx.Connect(t.Context(), url)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(t.Context()))
		rows, err := conn.Query(t.Context(), `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	require.NotContains(t, tables(mainURL), "activity")
	require.NotContains(t, tables(actURL), "messages")
}

// pgCount is the number of rows of a table on PostgreSQL.
func pgCount(t *testing.T, url, table string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int64
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n))
	return n
}

// A difference between the sides after the copy, in any table, fails the
// command and commits nothing, in either store.
func TestMigrateVerificationFailsOnADifference(t *testing.T) {
	tm := populate(t)
	tests := []struct {
		name  string
		store string
		sql   string
		table string
	}{
		{"a changed value", "main", `UPDATE messages SET body = 'forged' WHERE seq = 2`, "messages"},
		{"a changed byte", "main", `UPDATE secrets SET value = '\x00'::bytea`, "secrets"},
		{"a null for an empty string", "main", `UPDATE messages SET recipient = NULL WHERE recipient IS NOT NULL`, "messages"},
		{"a missing row", "main", `DELETE FROM message_recipients WHERE member = 'alice'`, "message_recipients"},
		{"an extra row", "main", `INSERT INTO meta (key, value) VALUES ('extra', 'x')`, "meta"},
		{"a flipped flag", "main", `UPDATE messages SET all_members = NOT all_members WHERE seq = 1`, "messages"},
		{"a counter behind", "main", `UPDATE message_seq SET seq = seq - 1`, "message_seq"},
		{"an activity row", "activity", `UPDATE activity SET data = '{}' WHERE id = (SELECT max(id) FROM activity)`, "activity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := newPGDatabase(t)
			o, err := migrateConfig("sqlite:"+tm.main, "", url, "")
			require.NoError(t, err)
			o.afterCopy = func(ctx context.Context, name string, tx pgx.Tx) error {
				if name == tt.store {
					_, err := tx.Exec(ctx, tt.sql)
					return err
				}
				return nil
			}
			var out bytes.Buffer
			err = runMigrate(t.Context(), o, &out)
			var ee *exitError
			require.ErrorAs(t, err, &ee, out.String())
			require.Equal(t, 1, ee.code)
			require.Contains(t, err.Error(), "nothing was committed")
			lines := checkLines(out.String())
			require.Equal(t, "DIFFERS", lines[tt.table][4], out.String())
			differ := 0
			for _, f := range lines {
				if f[4] == "DIFFERS" {
					differ++
				}
			}
			require.Equal(t, 1, differ, "only the changed table differs:\n%s", out.String())
			require.NotContains(t, out.String(), "committed:")
			// Neither store committed: the target is as its migrations left it.
			require.Zero(t, pgCount(t, url, "members"))
			require.Zero(t, pgCount(t, url, "activity"))
		})
	}
}

// The command refuses what would lose or mix data, and changes nothing
// when it does.
func TestMigrateRefuses(t *testing.T) {
	tm := populate(t)
	t.Run("a broker holds the file", func(t *testing.T) {
		st, err := sqlite.Open(t.Context(), tm.main)
		require.NoError(t, err)
		defer st.Close()
		url := newPGDatabase(t)
		out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url)
		require.Error(t, err, out)
		require.Contains(t, err.Error(), "in use by another process")
		require.Contains(t, err.Error(), "stop the broker first")
	})
	t.Run("a broker runs on the target", func(t *testing.T) {
		url := newPGDatabase(t)
		broker, err := postgres.Open(t.Context(), url, postgres.WithUseLock(false))
		require.NoError(t, err)
		defer broker.Close()
		out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url)
		require.ErrorIs(t, err, postgres.ErrInUse, out)
		require.Zero(t, pgCount(t, url, "members"))
	})
	t.Run("the target holds a team", func(t *testing.T) {
		url := newPGDatabase(t)
		out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url)
		require.NoError(t, err, out)
		ctx := t.Context()
		pg, err := postgres.Open(ctx, url)
		require.NoError(t, err)
		_, err = pg.AppendMessages(ctx, []store.Message{{From: "alice", Thread: "chan:general", Body: "on postgres", Level: "info", All: true, CreatedAt: at(time.Hour)}})
		require.NoError(t, err)
		require.NoError(t, pg.Close())

		out, err = runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url)
		var ee *exitError
		require.ErrorAs(t, err, &ee, out)
		require.Equal(t, 1, ee.code)
		require.Contains(t, err.Error(), "already holds data")
		require.Contains(t, err.Error(), "members (3 rows)")
		require.Contains(t, err.Error(), "--replace-target")
		require.Equal(t, tm.lastSeq+1, pgCount(t, url, "messages"), "the refused target is unchanged")

		// --replace-target replaces the target's team with the source's.
		out, err = runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url, "--replace-target")
		require.NoError(t, err, out)
		require.Equal(t, tm.lastSeq, pgCount(t, url, "messages"))
		pg, err = postgres.Open(ctx, url)
		require.NoError(t, err)
		defer pg.Close()
		next, err := pg.AppendMessages(ctx, []store.Message{{From: "alice", Thread: "chan:general", Body: "again", Level: "info", All: true, CreatedAt: at(time.Hour)}})
		require.NoError(t, err)
		require.Equal(t, tm.lastSeq+1, next[0].Seq)
	})
	t.Run("a missing source", func(t *testing.T) {
		url := newPGDatabase(t)
		out, err := runCmd(t, "migrate", "--from", "sqlite:"+filepath.Join(tm.dir, "nope.db"), "--to", url)
		require.Error(t, err, out)
		require.ErrorIs(t, err, os.ErrNotExist)
		_, statErr := os.Stat(filepath.Join(tm.dir, "nope.db"))
		require.ErrorIs(t, statErr, os.ErrNotExist, "no file is created")
	})
	t.Run("files that are not the stores", func(t *testing.T) {
		url := newPGDatabase(t)
		empty := filepath.Join(t.TempDir(), "empty.db")
		require.NoError(t, os.WriteFile(empty, nil, 0o600))
		for _, args := range [][]string{
			{"--from", "sqlite:" + tm.activity, "--from-activity", "sqlite:" + tm.main},
			{"--from", "sqlite:" + empty, "--from-activity", "sqlite:" + tm.activity},
			{"--from", "sqlite:" + tm.main, "--from-activity", "sqlite:" + empty},
		} {
			before := fileSums(t, tm.main, tm.activity, empty)
			out, err := runCmd(t, append([]string{"migrate", "--to", url}, args...)...)
			var ee *exitError
			require.ErrorAs(t, err, &ee, out)
			require.Equal(t, 1, ee.code)
			require.Contains(t, err.Error(), "does not hold svc's")
			require.Equal(t, before, fileSums(t, tm.main, tm.activity, empty), "no source file changed")
		}
	})
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no source", []string{"--to", "postgres://x/y"}},
		{"a source without its scheme", []string{"--from", "/tmp/svc.db", "--to", "postgres://x/y"}},
		{"an in-memory source", []string{"--from", "sqlite::memory:", "--to", "postgres://x/y"}},
		{"no target", []string{"--from", "sqlite:/tmp/svc.db"}},
		{"a target that is not postgres", []string{"--from", "sqlite:/tmp/svc.db", "--to", "mysql://x/y"}},
		{"an activity target that is not postgres", []string{"--from", "sqlite:/tmp/svc.db", "--to", "postgres://x/y", "--to-activity", "x"}},
		{"both sources one file", []string{"--from", "sqlite:/tmp/svc.db", "--from-activity", "sqlite:/tmp/svc.db", "--to", "postgres://x/y"}},
		{"an argument", []string{"--from", "sqlite:/tmp/svc.db", "--to", "postgres://x/y", "extra"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("SVC_DB_URL", "")
			t.Setenv("SVC_ACTIVITY_DB_URL", "")
			out, err := runCmd(t, append([]string{"migrate"}, tt.args...)...)
			var ee *exitError
			require.ErrorAs(t, err, &ee, out)
			require.Equal(t, 2, ee.code)
		})
	}
}

// A table or column on one side only stops the command before it copies
// anything: a migration added to one store only is never skipped.
func TestMigrateSchemasMustMatch(t *testing.T) {
	tests := []struct {
		name      string
		sqliteSQL string // run on the source's main file
		pgSQL     string // run on the target after its migrations
		want      string
	}{
		{"a table in SQLite only", `CREATE TABLE extra (id INTEGER PRIMARY KEY) STRICT`, "", "table extra is in SQLite only"},
		{"a table on PostgreSQL only", "", `CREATE TABLE extra (id BIGINT PRIMARY KEY)`, "table extra is on PostgreSQL only"},
		{"a column in SQLite only", `ALTER TABLE members ADD COLUMN nickname TEXT`, "", "column members.nickname is in SQLite only"},
		{"a column on PostgreSQL only", "", `ALTER TABLE members ADD COLUMN nickname TEXT`, "column members.nickname is on PostgreSQL only"},
		{"a type with no mapping", `ALTER TABLE meta ADD COLUMN n REAL`, `ALTER TABLE meta ADD COLUMN n DOUBLE PRECISION`, "column meta.n is double precision on PostgreSQL and REAL in SQLite: no mapping"},
		{"types that differ", `ALTER TABLE meta ADD COLUMN n TEXT`, `ALTER TABLE meta ADD COLUMN n BIGINT`, "column meta.n is bigint on PostgreSQL and TEXT in SQLite"},
		{"a counter missing", "", `DROP TABLE message_seq`, "counter table message_seq is missing on PostgreSQL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := populate(t)
			if tt.sqliteSQL != "" {
				db, err := sql.Open("sqlite3", tm.main)
				require.NoError(t, err)
				_, err = db.Exec(tt.sqliteSQL)
				require.NoError(t, err)
				require.NoError(t, db.Close())
			}
			url := newPGDatabase(t)
			if tt.pgSQL != "" {
				pg, err := postgres.Open(t.Context(), url)
				require.NoError(t, err)
				require.NoError(t, pg.Close())
				conn, err := pgx.Connect(t.Context(), url)
				require.NoError(t, err)
				_, err = conn.Exec(t.Context(), tt.pgSQL)
				require.NoError(t, err)
				require.NoError(t, conn.Close(t.Context()))
			}
			out, err := runCmd(t, "migrate", "--from", "sqlite:"+tm.main, "--to", url)
			require.Error(t, err, out)
			require.Contains(t, err.Error(), "schemas differ")
			require.Contains(t, err.Error(), tt.want)
			require.Zero(t, pgCount(t, url, "members"), "nothing was copied")
		})
	}
}

// The canonical encoding tells apart every pair of row sequences that
// differ, and reads the two sides' forms of one value alike.
func TestRowHasher(t *testing.T) {
	text := &tablePlan{cols: []colPlan{{name: "a", kind: kindText}, {name: "b", kind: kindText}}}
	mixed := &tablePlan{cols: []colPlan{{name: "n", kind: kindInt}, {name: "f", kind: kindBool}, {name: "x", kind: kindBytes}}}
	sum := func(t *testing.T, p *tablePlan, rows ...[]any) sideSum {
		t.Helper()
		i := -1
		s, err := hashRows(p, func() bool { i++; return i < len(rows) }, func() ([]any, error) { return rows[i], nil })
		require.NoError(t, err)
		return s
	}
	tests := []struct {
		name  string
		p     *tablePlan
		a, b  [][]any
		equal bool
	}{
		{"text moved across a column boundary", text, [][]any{{"ab", "c"}}, [][]any{{"a", "bc"}}, false},
		{"text moved across a row boundary", text, [][]any{{"a", "b"}, {"c", "d"}}, [][]any{{"a", "bc"}, {"", "d"}}, false},
		{"null is not empty text", text, [][]any{{nil, "x"}}, [][]any{{"", "x"}}, false},
		{"rows in another order", text, [][]any{{"a", "1"}, {"b", "2"}}, [][]any{{"b", "2"}, {"a", "1"}}, false},
		{"a row fewer", text, [][]any{{"a", "1"}, {"b", "2"}}, [][]any{{"a", "1"}}, false},
		{"text read as bytes by the driver", text, [][]any{{[]byte("é"), "x"}}, [][]any{{"é", "x"}}, true},
		{"SQLite's 0/1 is PostgreSQL's boolean", mixed, [][]any{{int64(7), int64(1), []byte{0}}}, [][]any{{int64(7), true, []byte{0}}}, true},
		{"false is not true", mixed, [][]any{{int64(7), int64(0), []byte{0}}}, [][]any{{int64(7), true, []byte{0}}}, false},
		{"zero is not null", mixed, [][]any{{int64(0), int64(0), nil}}, [][]any{{nil, int64(0), nil}}, false},
		{"empty bytes are not null", mixed, [][]any{{int64(0), int64(0), []byte{}}}, [][]any{{int64(0), int64(0), nil}}, false},
		{"a negative integer", mixed, [][]any{{int64(-1), int64(0), nil}}, [][]any{{int64(1), int64(0), nil}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := sum(t, tt.p, tt.a...), sum(t, tt.p, tt.b...)
			if tt.equal {
				require.Equal(t, a, b)
			} else {
				require.NotEqual(t, a.sum, b.sum)
			}
		})
	}
	_, err := hashRows(mixed, func() bool { return true }, func() ([]any, error) { return []any{"text", int64(0), nil}, nil })
	require.Error(t, err, "text in an integer column")
}

// BenchmarkMigrate copies a store of 100k messages (each with two
// recipient rows) and reports the rate of the whole command, schema
// creation and verification included:
//
//	go test -tags sqlite_omit_load_extension -run '^$' -bench BenchmarkMigrate -benchtime 1x ./cmd/svc
func BenchmarkMigrate(b *testing.B) {
	const messages, batch = 100_000, 1000
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "svc.db")
	s, err := sqlite.Open(ctx, path)
	require.NoError(b, err)
	for _, n := range []string{"alice", "bob"} {
		require.NoError(b, s.PutMember(ctx, store.Member{Name: n, CreatedAt: at(0), UpdatedAt: at(0)}))
	}
	require.NoError(b, s.CreateChannel(ctx, store.Channel{ID: "c1", Slug: "eng", CreatedAt: at(0), CreatedBy: "alice"}))
	for i := 0; i < messages; i += batch {
		msgs := make([]store.Message, batch)
		for j := range msgs {
			msgs[j] = store.Message{From: "alice", Thread: "chan:c1", Body: fmt.Sprintf("message %d: a line of chat of a typical length, with some words in it", i+j),
				Level: "info", Recipients: []string{"alice", "bob"}, CreatedAt: at(time.Duration(i+j) * time.Millisecond)}
		}
		_, err := s.AppendMessages(ctx, msgs)
		require.NoError(b, err)
	}
	require.NoError(b, s.Close())
	a, err := sqlite.OpenActivity(ctx, path+"-activity.db")
	require.NoError(b, err)
	require.NoError(b, a.Close())
	c, err := pgtest.Start(ctx)
	require.NoError(b, err)
	defer c.Stop()

	b.ResetTimer()
	for range b.N {
		url := c.NewDatabase(b)
		o, err := migrateConfig("sqlite:"+path, "", url, "")
		require.NoError(b, err)
		var out bytes.Buffer
		start := time.Now()
		require.NoError(b, runMigrate(ctx, o, &out))
		b.ReportMetric(float64(3*messages)/time.Since(start).Seconds(), "rows/s")
		b.Log(out.String()[strings.LastIndex(out.String(), "committed:"):])
	}
}
