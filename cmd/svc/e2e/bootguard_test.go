package e2e

// End-to-end tests of what a boot refuses (docs/DECISIONS.md, "What a boot
// may assume" and "The KEK a store was sealed under"): the real binary on
// prepared directories, the files on disk checked after every refusal.

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/kek"
)

// teamDir is a stopped broker's state: a first boot on a database file,
// with members, files, a secret bound to alice, a signed hook endpoint and
// the admin's TOTP.
type teamDir struct {
	dir, cfg, db, root string
	store              string // procOpts.store of its brokers
	adminTok, aliceTok string
	admin              *totpUser
	hookSecret         string
	vapid              string
	files              map[string][]byte // virtual path -> content
	tokens             map[string]string // virtual path -> its owner's token
}

// mustTeamDir makes a teamDir. With files false it writes none, so its
// files root stays empty.
func mustTeamDir(t *testing.T, files bool) *teamDir {
	t.Helper()
	dir := t.TempDir()
	// SQLite: these tests pair a config with database files (mistyped,
	// empty, another team's, edited with sql.Open).
	td := &teamDir{dir: dir, cfg: filepath.Join(dir, "svc.json"), db: filepath.Join(dir, "svc.db"), root: filepath.Join(dir, "svc-files"), store: storeSQLite}
	p := mustStartSvc(t, procOpts{configPath: td.cfg, dbPath: td.db, store: td.store})
	td.adminTok = p.adminToken(t)
	d := restDriver{p}
	admin := bearer(td.adminTok)
	td.aliceTok = createMember(t, d, admin, "alice")
	bobTok := createMember(t, d, admin, "bob")
	if files {
		// Over 64 KiB each, so their content is on disk (smaller files are
		// kept in the database): the guards below are about blob files.
		td.files = map[string][]byte{"/admin/a.txt": bytes.Repeat([]byte("admin's "), 9000), "/alice/b.txt": bytes.Repeat([]byte("alice's "), 9000), "/bob/c.bin": randomBytes(t, 68<<10)}
		td.tokens = map[string]string{"/admin/a.txt": td.adminTok, "/alice/b.txt": td.aliceTok, "/bob/c.bin": bobTok}
		for vp, content := range td.files {
			mustWrite(t, p, td.tokens[vp], vp, "application/octet-stream", content)
		}
	}
	mustCall(t, d, admin, "CreateSecret", obj{"slug": "gh", "envName": "GH_TOKEN"})
	mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": "ghp-bootguard"})
	mustCall(t, d, admin, "AddSecretBinding", obj{"slug": "gh", "member": "alice"})
	mustCall(t, d, admin, "CreateNotificationEndpoint", obj{"slug": "in", "targets": []any{obj{"member": "bob"}}, "auth": obj{"kind": "hmac-sha256"}})
	td.hookSecret = hookSecret(t)
	mustCall(t, d, admin, "SetNotificationEndpointSecret", obj{"slug": "in", "secret": td.hookSecret})
	td.admin = enroll(t, d, admin, "admin")
	td.vapid = mustCall(t, d, anonymous, "GetVapidPublicKey", nil)["publicKey"].(string)
	p.mustStop(t)
	return td
}

// serveArgs are `svc serve` on cfg and db ("" leaves --db-path out).
func serveArgs(cfg, db string) []string {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfg}
	if db != "" {
		args = append(args, "--db-path", db)
	}
	return args
}

// requireRefused runs svc serve and requires a refusal naming want.
func requireRefused(t *testing.T, args, env []string, want ...string) string {
	t.Helper()
	code, stdout, stderr := runSvc(t, args, env, nil)
	require.Equal(t, 1, code, "stderr:\n%s", stderr)
	require.Empty(t, stdout, "no admin token is printed")
	require.Contains(t, stderr, "refusing to start")
	require.NotContains(t, stderr, "first boot: wrote")
	for _, w := range want {
		require.Contains(t, stderr, w)
	}
	return stderr
}

// snapshot is the bytes of every regular file under dir, by path.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range regularFiles(t, dir) {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = string(b)
	}
	return out
}

// requireServes starts the team and checks that what it held is there:
// every file for its owner, alice's secret.
func (td *teamDir) requireServes(t *testing.T, env ...string) *proc {
	t.Helper()
	p := mustStartSvc(t, procOpts{configPath: td.cfg, dbPath: td.db, env: env, store: td.store})
	for vp, content := range td.files {
		mustRead(t, p, td.tokens[vp], vp, "application/octet-stream", content)
	}
	d := restDriver{p}
	require.Equal(t, obj{"GH_TOKEN": "ghp-bootguard"}, mustCall(t, d, bearer(td.aliceTok), "ResolveSecrets", nil)["env"])
	return p
}

// TestBootRefusesWhatDoesNotBelongTogether: a moved or mistyped config, a
// mistyped, empty or missing database, and a config and database of two
// teams each refuse to start, naming the paths, and leave every file as it
// was (issue 22, finding 1); the team then starts as before.
func TestBootRefusesWhatDoesNotBelongTogether(t *testing.T) {
	t.Parallel()
	a := mustTeamDir(t, true)
	b := mustTeamDir(t, false)
	aCfg := readJSON(t, a.cfg)
	aID := aCfg["team"].(obj)["id"].(string)
	bID := readJSON(t, b.cfg)["team"].(obj)["id"].(string)
	require.Regexp(t, `^[0-9a-f]{32}$`, aID, "a first boot on a database names the team")
	require.NotEqual(t, aID, bID)
	noID := filepath.Join(a.dir, "noid.json")
	delete(aCfg["team"].(obj), "id")
	writeConfig(t, noID, aCfg)
	older := filepath.Join(a.dir, "older.json")
	olderCfg := readJSON(t, a.cfg)
	olderCfg["store"].(obj)["members"] = []any{configMembers(t, olderCfg)["admin"]}
	writeConfig(t, older, olderCfg)
	// Outside a's directory: opening an existing empty file gives it the
	// schema, which the snapshot would count as a change.
	emptyDB := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(emptyDB, nil, 0o600))

	tests := []struct {
		name     string
		setup    func(t *testing.T) (undo func())
		args     []string
		want     []string
		notAfter []string // paths a refusal must not create
	}{
		{
			name: "config moved away",
			setup: func(t *testing.T) func() {
				require.NoError(t, os.Rename(a.cfg, a.cfg+".away"))
				return func() { require.NoError(t, os.Rename(a.cfg+".away", a.cfg)) }
			},
			args:     serveArgs(a.cfg, a.db),
			want:     []string{a.cfg + " does not exist", a.db, "3 members", "3 file entries", "--config-path"},
			notAfter: []string{a.cfg},
		},
		{
			name:     "mistyped --config-path",
			args:     serveArgs(filepath.Join(a.dir, "svc.jsno"), a.db),
			want:     []string{filepath.Join(a.dir, "svc.jsno") + " does not exist", a.db, "--config-path"},
			notAfter: []string{filepath.Join(a.dir, "svc.jsno"), filepath.Join(a.dir, "svc.jsno.kek")},
		},
		{
			name:     "mistyped --db-path",
			args:     serveArgs(a.cfg, filepath.Join(a.dir, "svc.bd")),
			want:     []string{"the database " + filepath.Join(a.dir, "svc.bd") + " does not exist", a.root + " holds 3 files", "--db-path"},
			notAfter: []string{filepath.Join(a.dir, "svc.bd"), filepath.Join(a.dir, "svc.bd-wal"), filepath.Join(a.dir, "svc.bd.lock")},
		},
		{
			name: "empty database file",
			args: serveArgs(a.cfg, emptyDB),
			want: []string{"the database " + emptyDB + " is empty", a.root + " holds 3 files", "--db-path"},
		},
		{
			name: "no --db-path",
			args: serveArgs(a.cfg, ""),
			want: []string{"no --db-path was given", "in-memory", a.root + " holds 3 files"},
		},
		{
			name: "config moved away, no --db-path",
			setup: func(t *testing.T) func() {
				require.NoError(t, os.Rename(a.cfg, a.cfg+".away"))
				return func() { require.NoError(t, os.Rename(a.cfg+".away", a.cfg)) }
			},
			args:     serveArgs(a.cfg, ""),
			want:     []string{a.cfg + " does not exist", "no --db-path was given", a.root + " holds 3 files"},
			notAfter: []string{a.cfg},
		},
		{
			name: "config of another team",
			args: serveArgs(b.cfg, a.db),
			want: []string{b.cfg + " belongs to team " + bID, a.db + " to team " + aID, "--db-path", "--config-path"},
		},
		{
			name: "database of another team",
			args: serveArgs(a.cfg, b.db),
			want: []string{a.cfg + " belongs to team " + aID, b.db + " to team " + bID},
		},
		{
			name: "config without its id",
			args: serveArgs(noID, a.db),
			want: []string{a.db + " belongs to team " + aID, noID + " names no team", fmt.Sprintf(`"id": %q`, aID)},
		},
		{
			name: "older copy of the config",
			args: serveArgs(older, a.db),
			want: []string{older + " lacks 2 members of the database " + a.db + " (alice, bob)", "--config-path", "DELETE /members/<name>"},
		},
		{
			name: "config of a team without files, new database",
			args: serveArgs(b.cfg, filepath.Join(b.dir, "other.db")),
			want: []string{b.cfg + " belongs to team " + bID, filepath.Join(b.dir, "other.db") + " does not exist", `delete "id"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]map[string]string{"a": snapshot(t, a.dir), "b": snapshot(t, b.dir)}
			undo := func() {}
			if tc.setup != nil {
				undo = sync.OnceFunc(tc.setup(t))
				defer undo() // also when the case fails, so the next starts clean
			}
			requireRefused(t, tc.args, nil, tc.want...)
			for _, p := range tc.notAfter {
				require.NoFileExists(t, p, "a refusal creates nothing")
			}
			undo()
			require.Equal(t, before["a"], snapshot(t, a.dir), "nothing of team a changed")
			require.Equal(t, before["b"], snapshot(t, b.dir), "nothing of team b changed")
		})
	}
	require.Len(t, regularFiles(t, filepath.Join(a.root, "blobs")), 3, "every blob is still there")
	p := a.requireServes(t)
	p.mustStop(t)
	require.Empty(t, p.stdout.String())
}

// TestBootStartsOverOnPurpose: a config whose team has a database
// elsewhere refuses an empty one; deleting the id from the config is the
// documented way to start the team over, and it gets a new id.
func TestBootStartsOverOnPurpose(t *testing.T) {
	t.Parallel()
	td := mustTeamDir(t, false)
	fresh := filepath.Join(td.dir, "fresh.db")
	requireRefused(t, serveArgs(td.cfg, fresh), nil, `delete "id"`)
	cfg := readJSON(t, td.cfg)
	oldID := cfg["team"].(obj)["id"]
	delete(cfg["team"].(obj), "id")
	writeConfig(t, td.cfg, cfg)

	p := mustStartSvc(t, procOpts{configPath: td.cfg, dbPath: fresh, store: td.store})
	requireWorks(t, restDriver{p}, bearer(td.adminTok), "admin")
	p.mustStop(t)
	newID := readJSON(t, td.cfg)["team"].(obj)["id"]
	require.NotEmpty(t, newID)
	require.NotEqual(t, oldID, newID)
	requireRefused(t, serveArgs(td.cfg, td.db), nil, "belongs to team")
}

// TestBootGivesOldPairsAnID: a config and database from before team ids
// (and KEK fingerprints) keep starting; the start records the id in both
// and the fingerprint, after proving the key on what the database holds.
func TestBootGivesOldPairsAnID(t *testing.T) {
	t.Parallel()
	td := mustTeamDir(t, true)
	cfg := readJSON(t, td.cfg)
	delete(cfg["team"].(obj), "id")
	writeConfig(t, td.cfg, cfg)
	db, err := sql.Open("sqlite3", td.db)
	require.NoError(t, err)
	_, err = db.Exec(`DELETE FROM meta`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	p := td.requireServes(t)
	p.mustStop(t)
	id, _ := readJSON(t, td.cfg)["team"].(obj)["id"].(string)
	require.Regexp(t, `^[0-9a-f]{32}$`, id)
	db, err = sql.Open("sqlite3", td.db)
	require.NoError(t, err)
	defer db.Close()
	meta := map[string]string{}
	rows, err := db.Query(`SELECT key, value FROM meta`)
	require.NoError(t, err)
	for rows.Next() {
		var k, v string
		require.NoError(t, rows.Scan(&k, &v))
		meta[k] = v
	}
	require.NoError(t, rows.Err())
	require.Equal(t, id, meta["team_id"])
	kk, err := kek.Load(td.cfg + ".kek")
	require.NoError(t, err)
	require.Equal(t, kk.Fingerprint(), meta["kek_fingerprint"])
}

// plantBlobs puts n blob-shaped files no entry references under root.
func plantBlobs(t *testing.T, root string, n int) {
	t.Helper()
	for i := range n {
		content := randomBytes(t, 64)
		sha := fmt.Sprintf("%x", sha256.Sum256(content))
		dir := filepath.Join(root, "blobs", sha[:2])
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, sha), content, 0o600), "blob %d", i)
	}
}

// TestBootSweepBound: past 16 unreferenced blobs a boot refuses and
// deletes nothing; svc files sweep deletes them on purpose; a few are
// swept at boot as before.
func TestBootSweepBound(t *testing.T) {
	t.Parallel()
	td := mustTeamDir(t, true)
	plantBlobs(t, td.root, 17)
	blobs := filepath.Join(td.root, "blobs")
	require.Len(t, regularFiles(t, blobs), 20)
	requireRefused(t, serveArgs(td.cfg, td.db), nil, td.root+" holds 17 files", "at most 16", "svc files sweep --config-path "+td.cfg+" --db-path "+td.db)
	require.Len(t, regularFiles(t, blobs), 20, "a refused sweep deletes nothing")

	sweep := []string{"files", "sweep", "--config-path", td.cfg, "--db-path", td.db}
	yes := append(slices.Clone(sweep), "--yes")
	code, stdout, stderr := runSvc(t, sweep, nil, nil)
	require.Equal(t, 2, code, "no terminal, no --yes: stdout %s stderr %s", stdout, stderr)
	require.Contains(t, stdout, "17 files")
	require.Contains(t, stderr, "--yes")
	require.Len(t, regularFiles(t, blobs), 20)

	code, _, stderr = runSvc(t, []string{"files", "sweep", "--config-path", td.cfg, "--yes"}, nil, nil)
	require.Equal(t, 2, code, "the database must be named: %s", stderr)
	require.Contains(t, stderr, "--db-path (SVC_DB_PATH) or --db-url (SVC_DB_URL) is required")

	code, stdout, stderr = runSvc(t, yes, nil, nil)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Contains(t, stdout, "deleted 17 files")
	require.Len(t, regularFiles(t, blobs), 3)

	plantBlobs(t, td.root, 2)
	p := td.requireServes(t)
	require.Contains(t, p.stderr.String(), "swept=2", "a few strays go at boot as before")
	code, _, stderr = runSvc(t, yes, nil, nil)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "in use by another process", "never beside a running broker")
	p.mustStop(t)
	require.Len(t, regularFiles(t, blobs), 3)
}

// TestBootRefusesAnotherKEK: with sealed values in the database and the
// config, a missing, replaced or other key refuses to start, naming the
// fingerprint the database expects (issue 22, finding 3); no key file is
// made; the right key starts it and everything opens.
func TestBootRefusesAnotherKEK(t *testing.T) {
	t.Parallel()
	td := mustTeamDir(t, false)
	kekPath := td.cfg + ".kek"
	right, err := os.ReadFile(kekPath)
	require.NoError(t, err)
	rightKEK, err := kek.Parse(string(right))
	require.NoError(t, err)
	otherKey, err := kek.Generate()
	require.NoError(t, err)
	other, err := kek.New(otherKey)
	require.NoError(t, err)

	tests := []struct {
		name  string
		setup func(t *testing.T)
		env   []string
		want  []string
	}{
		{
			name:  "KEK file missing",
			setup: func(t *testing.T) { require.NoError(t, os.Remove(kekPath)) },
			want:  []string{kekPath + " does not exist and SVC_KEK is not set", "KEK fingerprint " + rightKEK.Fingerprint(), "webPush.vapidPrivateKey", "svc kek reset"},
		},
		{
			name:  "KEK file of another key",
			setup: func(t *testing.T) { require.NoError(t, os.WriteFile(kekPath, kek.Encode(otherKey), 0o600)) },
			want:  []string{"the KEK from " + kekPath + " (fingerprint " + other.Fingerprint() + ")", "sealed under (fingerprint " + rightKEK.Fingerprint() + ")", "svc kek rotate"},
		},
		{
			name: "SVC_KEK of another key",
			env:  []string{"SVC_KEK=" + strings.TrimSpace(string(kek.Encode(otherKey)))},
			want: []string{"the KEK from SVC_KEK (fingerprint " + other.Fingerprint() + ")", rightKEK.Fingerprint()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.setup != nil {
				tc.setup(t)
			}
			cfgBefore, err := os.ReadFile(td.cfg)
			require.NoError(t, err)
			requireRefused(t, serveArgs(td.cfg, td.db), tc.env, tc.want...)
			after, err := os.ReadFile(td.cfg)
			require.NoError(t, err)
			require.Equal(t, string(cfgBefore), string(after))
			if tc.name == "KEK file missing" {
				require.NoFileExists(t, kekPath, "no new key is made while anything is sealed")
			}
			require.NoError(t, os.WriteFile(kekPath, right, 0o600))
		})
	}
	p := td.requireServes(t)
	d := restDriver{p}
	s := mustCall(t, d, anonymous, "CreateSession", obj{"code": td.admin.next(t), "member": "admin"})
	require.Equal(t, "admin", s["member"])
	body := []byte(`{"n":1}`)
	r := p.do(t, http.MethodPost, "/hooks/in", body, withHeader("X-Hub-Signature-256", sign(td.hookSecret, body)))
	require.Equal(t, http.StatusAccepted, r.status, "the hook secret opens: %s", r.raw)
}

// TestBootRefusesAnotherKEKForTheDatabase: with nothing sealed in the
// config, the database's fingerprint alone refuses another key; with
// nothing sealed anywhere a new key is made and recorded.
func TestBootRefusesAnotherKEKForTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, dbPath := filepath.Join(dir, "svc.json"), filepath.Join(dir, "svc.db")
	adminTok := randomToken(t)
	writeConfig(t, cfgPath, obj{
		"team":  obj{"name": "crew"},
		"store": obj{"members": []obj{{"name": "admin", "permissions": []string{"admin"}, "token": adminTok}}},
	})
	keyA, err := kek.Generate()
	require.NoError(t, err)
	ka, err := kek.New(keyA)
	require.NoError(t, err)
	envA := []string{"SVC_KEK=" + strings.TrimSpace(string(kek.Encode(keyA)))}
	// SQLite: the refusals name the database file.
	p := mustStartSvc(t, procOpts{configPath: cfgPath, dbPath: dbPath, env: envA, store: storeSQLite})
	d := restDriver{p}
	admin := bearer(adminTok)
	mustCall(t, d, admin, "CreateSecret", obj{"slug": "gh", "envName": "GH_TOKEN", "allMembers": true})
	mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": "v1"})
	p.mustStop(t)
	require.NoFileExists(t, cfgPath+".kek")

	requireRefused(t, serveArgs(cfgPath, dbPath), nil, "does not exist and SVC_KEK is not set", "holds 1 sealed values", ka.Fingerprint())
	require.NoFileExists(t, cfgPath+".kek")
	keyB, err := kek.Generate()
	require.NoError(t, err)
	envB := []string{"SVC_KEK=" + strings.TrimSpace(string(kek.Encode(keyB)))}
	requireRefused(t, serveArgs(cfgPath, dbPath), envB, "not the key the database "+dbPath+" was sealed under (fingerprint "+ka.Fingerprint()+")")

	p = mustStartSvc(t, procOpts{configPath: cfgPath, dbPath: dbPath, env: envA, store: storeSQLite})
	d = restDriver{p}
	require.Equal(t, obj{"GH_TOKEN": "v1"}, mustCall(t, d, admin, "ResolveSecrets", nil)["env"])
	mustCall(t, d, admin, "DeleteSecretValue", obj{"slug": "gh"})
	p.mustStop(t)

	// Nothing sealed anywhere: a missing key is made, and recorded.
	p = mustStartSvc(t, procOpts{configPath: cfgPath, dbPath: dbPath, store: storeSQLite})
	require.Contains(t, p.stderr.String(), "created a new KEK file")
	mustCall(t, restDriver{p}, admin, "SetSecretValue", obj{"slug": "gh", "value": "v2"})
	p.mustStop(t)
	requireRefused(t, serveArgs(cfgPath, dbPath), envA, "was sealed under")
}

// TestKEKRotate: svc kek rotate re-seals every value under a new key in a
// stopped broker and installs the key; the broker then opens everything,
// and refuses the old key. A rotation interrupted after the database is
// finished by running it again.
func TestKEKRotate(t *testing.T) {
	t.Parallel()
	td := mustTeamDir(t, true)
	kekPath, newPath := td.cfg+".kek", filepath.Join(td.dir, "new.kek")
	rotate := []string{"kek", "rotate", "--config-path", td.cfg, "--db-path", td.db, "--new-kek-file", newPath}

	p := mustStartSvc(t, procOpts{configPath: td.cfg, dbPath: td.db, store: td.store})
	code, _, stderr := runSvc(t, append(slices.Clone(rotate), "--generate"), nil, nil)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "stop the broker first")
	require.NoFileExists(t, newPath, "nothing is made beside a running broker")
	p.mustStop(t)

	oldKey, err := os.ReadFile(kekPath)
	require.NoError(t, err)
	oldCfg, err := os.ReadFile(td.cfg)
	require.NoError(t, err)
	code, stdout, stderr := runSvc(t, append(slices.Clone(rotate), "--generate"), nil, nil)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Contains(t, stdout, "re-sealed 2 values in "+td.db+" and 2 in "+td.cfg)
	requireMode(t, newPath, 0o600)
	newKey, err := os.ReadFile(newPath)
	require.NoError(t, err)
	installed, err := os.ReadFile(kekPath)
	require.NoError(t, err)
	require.Equal(t, string(newKey), string(installed), "the new key is the broker's")
	requireMode(t, kekPath, 0o600)
	nk, err := kek.Parse(string(newKey))
	require.NoError(t, err)
	code, stdout, _ = runSvc(t, []string{"kek", "fingerprint", "--config-path", td.cfg}, nil, nil)
	require.Equal(t, 0, code)
	require.Equal(t, nk.Fingerprint()+"  "+kekPath+"\n", stdout)

	p = td.requireServes(t)
	d := restDriver{p}
	s := mustCall(t, d, anonymous, "CreateSession", obj{"code": td.admin.next(t), "member": "admin"})
	require.Equal(t, "admin", s["member"], "the TOTP secret opens")
	body := []byte(`{"n":1}`)
	r := p.do(t, http.MethodPost, "/hooks/in", body, withHeader("X-Hub-Signature-256", sign(td.hookSecret, body)))
	require.Equal(t, http.StatusAccepted, r.status, "the hook secret opens: %s", r.raw)
	require.Equal(t, td.vapid, mustCall(t, d, anonymous, "GetVapidPublicKey", nil)["publicKey"], "the same web push keypair")
	p.mustStop(t)
	requireRefused(t, serveArgs(td.cfg, td.db), []string{"SVC_KEK=" + strings.TrimSpace(string(oldKey))}, "was sealed under (fingerprint "+nk.Fingerprint()+")")

	// Interrupted after the database committed: the old config and key
	// file are back, the database is under the new key. The broker refuses;
	// the same command, without --generate, finishes.
	require.NoError(t, os.WriteFile(td.cfg, oldCfg, 0o600))
	require.NoError(t, os.WriteFile(kekPath, oldKey, 0o600))
	requireRefused(t, serveArgs(td.cfg, td.db), nil, "svc kek rotate")
	code, stdout, stderr = runSvc(t, rotate, nil, nil)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Contains(t, stdout, "re-sealed 0 values in "+td.db+" and 2 in "+td.cfg)
	code, stdout, _ = runSvc(t, rotate, nil, nil)
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "nothing to do")
	p = td.requireServes(t)
	s = mustCall(t, restDriver{p}, anonymous, "CreateSession", obj{"code": td.admin.next(t), "member": "admin"})
	require.Equal(t, "admin", s["member"])
}

// TestKEKReset: when the key is lost, svc kek reset drops what it sealed
// and installs a new key: the broker starts, secrets are valueless, TOTP
// enrolls again, and the web push keypair is new.
func TestKEKReset(t *testing.T) {
	t.Parallel()
	td := mustTeamDir(t, false)
	kekPath, newPath := td.cfg+".kek", filepath.Join(td.dir, "new.kek")
	reset := []string{"kek", "reset", "--config-path", td.cfg, "--db-path", td.db, "--new-kek-file", newPath, "--generate"}

	code, _, stderr := runSvc(t, append(slices.Clone(reset), "--yes"), nil, nil)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "it is not lost; use svc kek rotate")

	require.NoError(t, os.Remove(kekPath))
	requireRefused(t, serveArgs(td.cfg, td.db), nil, "svc kek reset")
	cfgBefore, err := os.ReadFile(td.cfg)
	require.NoError(t, err)
	code, stdout, stderr := runSvc(t, reset, nil, nil)
	require.Equal(t, 2, code, "no terminal, no --yes; stderr:\n%s", stderr)
	for _, w := range []string{"secret_value gh", "hook_endpoint_secret in", "the TOTP secret of admin", "web push keypair"} {
		require.Contains(t, stdout, w)
	}
	require.NoFileExists(t, newPath)
	after, err := os.ReadFile(td.cfg)
	require.NoError(t, err)
	require.Equal(t, string(cfgBefore), string(after))

	code, stdout, stderr = runSvc(t, append(slices.Clone(reset), "--yes"), nil, nil)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Contains(t, stdout, "dropped 2 sealed values and 1 TOTP secrets")
	newKey, err := os.ReadFile(newPath)
	require.NoError(t, err)
	installed, err := os.ReadFile(kekPath)
	require.NoError(t, err)
	require.Equal(t, string(newKey), string(installed))

	p := mustStartSvc(t, procOpts{configPath: td.cfg, dbPath: td.db, store: td.store})
	d := restDriver{p}
	admin := bearer(td.adminTok)
	require.Equal(t, false, mustCall(t, d, admin, "GetSecret", obj{"slug": "gh"})["hasValue"])
	require.Empty(t, mustCall(t, d, bearer(td.aliceTok), "ResolveSecrets", nil)["env"])
	mustFail(t, d, anonymous, "CreateSession", obj{"code": td.admin.next(t), "member": "admin"}, "unauthenticated")
	u := enroll(t, d, admin, "admin")
	require.Equal(t, "admin", mustCall(t, d, anonymous, "CreateSession", obj{"code": u.next(t), "member": "admin"})["member"])
	require.NotEqual(t, td.vapid, mustCall(t, d, anonymous, "GetVapidPublicKey", nil)["publicKey"])
	mustCall(t, d, admin, "SetSecretValue", obj{"slug": "gh", "value": "again"})
	require.Equal(t, obj{"GH_TOKEN": "again"}, mustCall(t, d, bearer(td.aliceTok), "ResolveSecrets", nil)["env"])
}

// TestMaintenanceCommandsHelp: the new commands answer --help with exit 0
// and a bad call with exit 2.
func TestMaintenanceCommandsHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"kek", "--help"}, {"kek", "rotate", "--help"}, {"kek", "reset", "--help"},
		{"kek", "fingerprint", "--help"}, {"files", "--help"}, {"files", "sweep", "--help"},
		{"admin", "--help"}, {"admin", "token", "--help"},
	} {
		code, _, stderr := runSvc(t, args, nil, nil)
		require.Equal(t, 0, code, "svc %v: %s", args, stderr)
	}
	for _, args := range [][]string{{"kek"}, {"kek", "spin"}, {"files"}, {"kek", "rotate", "--db-path", "x.db"}, {"kek", "rotate", "--bogus"},
		{"admin"}, {"admin", "spin"}, {"admin", "token", "--bogus"}, {"admin", "token", "--member", "admin"}} {
		code, _, stderr := runSvc(t, args, nil, nil)
		require.Equal(t, 2, code, "svc %v: %s", args, stderr)
	}
}
