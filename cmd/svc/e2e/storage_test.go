package e2e

// End-to-end tests of the broker's storage (docs/OPERATIONS.md): a damaged
// store refuses to start and svc check finds it, a full disk answers 507
// and /healthz says degraded until writes succeed again, and stored file
// content that does not match its SHA-256 is never served as sound.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // to find a table's page in a prepared file
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// tablePage returns the offset of the first page (the root) of table in
// the database file at path.
func tablePage(t *testing.T, path, table string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var root, size int64
	require.NoError(t, db.QueryRow(`SELECT rootpage FROM sqlite_master WHERE name = ?`, table).Scan(&root))
	require.NoError(t, db.QueryRow(`PRAGMA page_size`).Scan(&size))
	return (root - 1) * size
}

// overwriteAt writes b at off in the file at path.
func overwriteAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func sumFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestDamagedStoreRefusesToStart prepares a real broker's stores, damages
// one file while the broker is stopped, and starts the real binary on it:
// it refuses (exit 1) with a message naming the file, what the check
// found and what to do, and writes nothing to the file; svc check finds
// the damage too. Before, the broker started on the damaged file
// (/healthz 200, reads 500, writes into the malformed file).
func TestDamagedStoreRefusesToStart(t *testing.T) {
	t.Parallel()
	garbage := []byte(strings.Repeat("\x00\x11\x22\x33", 16))
	tests := []struct {
		name     string
		activity bool
		damage   func(t *testing.T, path string)
		want     []string
	}{
		// Tables nothing reads at start: before, the broker started on them.
		{"a page of the main store", false, func(t *testing.T, path string) {
			overwriteAt(t, path, tablePage(t, path, "objectives"), garbage)
		}, []string{"the main store", "is damaged: "}},
		{"a page of the activity store", true, func(t *testing.T, path string) {
			overwriteAt(t, path, tablePage(t, path, "genai"), garbage)
		}, []string{"the activity store", "is damaged: "}},
		{"the main store is not a database", false, func(t *testing.T, path string) {
			overwriteAt(t, path, 0, []byte("this is not the header of an SQLite database"))
		}, []string{"the main store", "is not an SQLite database"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg, db := filepath.Join(dir, "svc.json"), filepath.Join(dir, "svc.db")
			// SQLite: the test damages pages of the database file.
			p := mustStartSvc(t, procOpts{configPath: cfg, dbPath: db, store: storeSQLite})
			tok := p.adminToken(t)
			mustCall(t, restDriver{p}, bearer(tok), "Push", obj{"body": "before the damage"})
			p.mustStop(t)
			check := []string{"check", "--db-path", db, "--config-path", cfg}
			code, out, errOut := runSvc(t, check, nil, nil)
			require.Zero(t, code, "a sound store passes svc check:\n%s%s", out, errOut)
			require.Contains(t, out, "everything checked is sound")

			target := db
			if tc.activity {
				target = db + "-activity.db"
			}
			tc.damage(t, target)
			before := sumFile(t, target)

			code, stdout, stderr := runSvc(t, []string{"serve", "--addr", "127.0.0.1:0", "--config-path", cfg, "--db-path", db}, nil, nil)
			require.Equal(t, 1, code, "stderr:\n%s", stderr)
			require.Empty(t, stdout)
			require.NotContains(t, stderr, "svc listening")
			for _, w := range append(tc.want, "refusing to start", target, "svc check", ".recover") {
				require.Contains(t, stderr, w)
			}
			require.Equal(t, before, sumFile(t, target), "nothing was written to the damaged file")

			code, out, _ = runSvc(t, check, nil, nil)
			require.Equal(t, 1, code, "svc check finds the damage:\n%s", out)
			require.Contains(t, out, "DAMAGED")
			require.Contains(t, out, target)
		})
	}
}

// TestSvcCheckUsage: --help exits 0 with the usage on stdout (asked-for
// help is output, docs/DECISIONS.md "`--help` and the first run's order");
// nothing to check is a usage error.
func TestSvcCheckUsage(t *testing.T) {
	t.Parallel()
	code, stdout, _ := runSvc(t, []string{"check", "--help"}, nil, nil)
	require.Zero(t, code)
	require.Contains(t, stdout, "usage: svc check")
	code, _, stderr := runSvc(t, []string{"check"}, nil, nil)
	require.Equal(t, 2, code, "in-memory: nothing to check")
	require.Contains(t, stderr, "--db-path")
	code, _, _ = runSvc(t, []string{"check", "--db-path", filepath.Join(t.TempDir(), "missing.db"), "--files=false"}, nil, nil)
	require.Equal(t, 1, code, "a store that cannot be read is no pass")
}

// smallDisk is a directory the test can fill, and how to fill and free
// it.
type smallDisk struct {
	dir string
	// how names the method, for failure messages.
	how  string
	fill func(t *testing.T)
	free func(t *testing.T)
	// env is what the broker needs on this disk.
	env []string
}

// newSmallDisk mounts a 32 MiB tmpfs the test fills with a ballast file
// when it may mount one (root, or CAP_SYS_ADMIN). Where it may not (CI
// without mount rights) it falls back, without a loop device, to a file
// size limit: the test lowers the broker's RLIMIT_FSIZE (prlimit) to one
// byte, so every write past the first byte of any file fails with EFBIG,
// which the broker must treat as no room (SQLite reports it as an I/O
// error carrying EFBIG, or SQLITE_FULL on a short write). The floor of the
// free-space warning is raised there, as the disk is not small.
func newSmallDisk(t *testing.T, tmpfs bool, broker func() *proc) smallDisk {
	t.Helper()
	dir := t.TempDir()
	if tmpfs {
		err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=32m,mode=0700")
		if err == nil {
			// Registered after TempDir's cleanup, so it runs before it; the
			// broker's own cleanup (registered later) runs first of all.
			t.Cleanup(func() { require.NoError(t, unix.Unmount(dir, unix.MNT_DETACH)) })
			ballast := filepath.Join(dir, "ballast")
			return smallDisk{
				dir: dir, how: "tmpfs",
				fill: func(t *testing.T) { fillDisk(t, ballast) },
				free: func(t *testing.T) { require.NoError(t, os.Remove(ballast)) },
			}
		}
		t.Logf("cannot mount a tmpfs (%v): simulating a full disk with RLIMIT_FSIZE", err)
	}
	var saved unix.Rlimit
	return smallDisk{
		dir: dir, how: "RLIMIT_FSIZE",
		fill: func(t *testing.T) {
			pid := broker().cmd.Process.Pid
			require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &saved))
			require.NoError(t, unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 1, Max: saved.Max}, nil))
		},
		free: func(t *testing.T) {
			require.NoError(t, unix.Prlimit(broker().cmd.Process.Pid, unix.RLIMIT_FSIZE, &saved, nil))
		},
		env: []string{"SVC_MIN_FREE_MIB=1099511627776"},
	}
}

// fillDisk writes path until the file system has no block left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := bytes.Repeat([]byte{'b'}, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				require.ErrorIs(t, err, syscall.ENOSPC)
				break
			}
		}
	}
}

// TestDiskFull: on a full disk every write path (REST and gRPC pushes,
// file writes, activity uploads) answers 507 insufficient_storage with a
// clear message, and nothing is acknowledged that was not stored;
// /healthz stays 200 but says degraded, naming the failing stores; once
// space is freed, writes succeed and /healthz is ok again. The broker
// warns at start when its disk is below the free-space floor. Before:
// 500 internal everywhere, /healthz ok, no word at start.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tmpfs bool
	}{
		{"a full tmpfs, or a file size limit where mounts are refused", true},
		{"a file size limit", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testDiskFull(t, tc.tmpfs)
		})
	}
}

func testDiskFull(t *testing.T, tmpfs bool) {
	var p *proc
	disk := newSmallDisk(t, tmpfs, func() *proc { return p })
	p = mustStartSvc(t, procOpts{
		configPath: filepath.Join(disk.dir, "svc.json"), dbPath: filepath.Join(disk.dir, "svc.db"), env: disk.env,
		// SQLite: the database's own disk is the one that fills.
		store: storeSQLite,
	})
	tok := p.adminToken(t)
	admin := bearer(tok)
	rest, grpcD := restDriver{p}, grpcDriver{p.grpcConn(t)}
	require.Contains(t, p.stderr.String(), "low disk space", "a warning at start below the floor (%s)", disk.how)

	requireHealthy(t, p)
	mustCall(t, rest, admin, "Push", obj{"body": "before"})
	require.Equal(t, http.StatusOK, fsWrite(t, p, tok, "/admin/before.txt", "", "text/plain", []byte("before")).status)

	disk.fill(t)
	// A full disk may still take a small write into a page already on it
	// (the WAL's, one a failed write gave back) while it refuses others:
	// each path is driven until its first refusal, a bounded number of
	// tries, and every answer must be a success or 507, never 500.
	body := strings.Repeat("x", 16<<10)
	var refusedPush httpResp
	pushUntilRefused := func() {
		untilRefused(t, disk.how+": REST push", func() (bool, string) {
			refusedPush = p.do(t, http.MethodPost, "/push", obj{"body": body}, withBearer(tok))
			code, _ := refusedPush.body["error"].(string)
			return refusedPush.status == http.StatusOK, code
		})
	}
	pushUntilRefused()
	requireRESTError(t, refusedPush, "insufficient_storage")
	require.Contains(t, refusedPush.body["message"], "disk is full")
	require.Contains(t, refusedPush.body["message"], "nothing was stored")
	untilRefused(t, disk.how+": gRPC push", func() (bool, string) {
		r := grpcD.call(t, admin, "Push", obj{"body": body})
		return r.code == "", r.code
	})
	event := fmt.Sprintf(`{"events":[{"kind":"tool_action","data":{"blob":%q}}]}`, strings.Repeat("a", 256<<10))
	untilRefused(t, disk.how+": activity upload", func() (bool, string) {
		r := uploadRaw(t, p, tok, "admin", []byte(event))
		code, _ := r.body["error"].(string)
		return r.status == http.StatusOK, code
	})
	big := bytes.Repeat([]byte("f"), 4<<20) // more than any room a filled disk has left
	requireRESTError(t, fsWrite(t, p, tok, "/admin/big.bin", "", "", big), "insufficient_storage")
	pushUntilRefused() // the main store's latest failure, just now

	h := p.do(t, http.MethodGet, "/healthz", nil)
	require.Equal(t, http.StatusOK, h.status, "/healthz answers while the process is up")
	require.Equal(t, "degraded", h.body["status"])
	problems := strings.Join(strs(t, h.body["problems"]), "\n")
	for _, want := range []string{"main store: writes failing since", "activity store: writes failing since", "files: file writes failing since", "(disk full)"} {
		require.Contains(t, problems, want)
	}
	require.NotContains(t, problems, disk.dir, "no path on a public endpoint")
	b := mustCall(t, grpcD, anonymous, "Health", nil)
	require.Equal(t, "degraded", b["status"])
	require.Contains(t, p.stderr.String(), `msg="store write failed"`)

	disk.free(t)
	mustCall(t, rest, admin, "Push", obj{"body": "after"})
	require.Equal(t, http.StatusOK, fsWrite(t, p, tok, "/admin/after.txt", "", "text/plain", []byte("after")).status)
	require.Equal(t, http.StatusOK, uploadRaw(t, p, tok, "admin", []byte(`{"events":[{"kind":"tool_action","data":{}}]}`)).status)
	// Healthy again once writes (and the WAL checkpoints) have succeeded
	// and store.FailureHold (10 s) has passed since the last failure.
	require.Eventually(t, func() bool {
		h := p.do(t, http.MethodGet, "/healthz", nil)
		return h.body["status"] == "ok"
	}, 60*time.Second, 100*time.Millisecond, "healthy again once writes succeed")
	mustCall(t, rest, admin, "Push", obj{"body": "after the hold"})
	requireHealthy(t, p)
	require.Contains(t, p.stderr.String(), "store writes succeed again")

	// Nothing acknowledged was lost, nothing refused was stored.
	p.mustStop(t)
	p = p.restart(t)
	var bodies []string
	for _, m := range listOf(t, mustCall(t, restDriver{p}, admin, "History", obj{"limit": 500}), "messages") {
		bodies = append(bodies, m["body"].(string))
	}
	require.Contains(t, bodies, "before")
	require.Contains(t, bodies, "after")
	require.Equal(t, http.StatusNotFound, p.do(t, http.MethodGet, "/fs/stat?path=/admin/big.bin", nil, withBearer(tok)).status)
}

// untilRefused calls try until it is refused, at most 400 times, and
// requires the refusal to be insufficient_storage.
func untilRefused(t *testing.T, what string, try func() (ok bool, code string)) {
	t.Helper()
	for range 400 {
		ok, code := try()
		if !ok {
			require.Equal(t, "insufficient_storage", code, "%s: refused with 507, never 500", what)
			return
		}
	}
	t.Fatalf("%s: never refused on a full disk", what)
}

// requireHealthy asserts /healthz is exactly {status: ok, version}.
func requireHealthy(t *testing.T, p *proc) {
	t.Helper()
	h := p.do(t, http.MethodGet, "/healthz", nil)
	require.Equal(t, http.StatusOK, h.status)
	require.Equal(t, []string{"status", "version"}, keys(h.body))
	require.Equal(t, "ok", h.body["status"])
}

// getRaw sends GET path and returns the response with its body read as
// far as it goes, and the read's error.
func getRaw(t *testing.T, p *proc, path, tok string) (*http.Response, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := p.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestDamagedFileIsNotServed: file content changed on disk (ten flipped
// bytes) is streamed but the response fails at its end, so the client
// sees a broken transfer, not a clean 200 body; content gone from the disk
// is 500 data_loss, not 404, while stat still shows the file. Both are
// logged with the path and sha, counted on /metrics, and found by svc
// check, which runs beside the broker.
func TestDamagedFileIsNotServed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "svc.json"), filepath.Join(dir, "svc.db")
	p := mustStartSvc(t, procOpts{configPath: cfg, dbPath: db})
	tok := p.adminToken(t)
	blobPath := func(data []byte) (string, string) {
		s := sha256.Sum256(data)
		sha := hex.EncodeToString(s[:])
		return sha, filepath.Join(dir, "svc-files", "blobs", sha[:2], sha)
	}

	data := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB, several chunks
	mustWrite(t, p, tok, "/admin/report.bin", "application/octet-stream", data)
	resp, got, err := getRaw(t, p, readURL("/admin/report.bin"), tok)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, data, got)

	sha, blob := blobPath(data)
	b, err := os.ReadFile(blob)
	require.NoError(t, err)
	for i := 100000; i < 100010; i++ {
		b[i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(blob, b, 0o600))
	resp, got, err = getRaw(t, p, readURL("/admin/report.bin"), tok)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the damage is found at the end, after the headers")
	require.Error(t, err, "the client sees a failed transfer")
	require.True(t, errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "connection reset"), "%v", err)
	require.Less(t, len(got), len(data), "the last bytes were withheld")
	require.Equal(t, b[:len(got)], got)

	gone := bytes.Repeat([]byte("content that goes missing "), 3000) // over 64 KiB: on disk
	mustWrite(t, p, tok, "/admin/gone.txt", "text/plain", gone)
	goneSHA, goneBlob := blobPath(gone)
	require.NoError(t, os.Remove(goneBlob))
	r := p.do(t, http.MethodGet, readURL("/admin/gone.txt"), nil, withBearer(tok))
	requireRESTError(t, r, "data_loss")
	require.Contains(t, r.body["message"], "/admin/gone.txt")
	require.Equal(t, http.StatusOK, p.do(t, http.MethodGet, "/fs/stat?path="+url.QueryEscape("/admin/gone.txt"), nil, withBearer(tok)).status)

	fams := scrape(t, p)
	require.InDelta(t, 1, metricValue(fams, "svc_blob_damage_total", map[string]string{"kind": "hash_mismatch"}), 0)
	require.InDelta(t, 1, metricValue(fams, "svc_blob_damage_total", map[string]string{"kind": "missing"}), 0)
	logs := p.stderr.String()
	for _, want := range []string{"sha=" + sha, "sha=" + goneSHA, "path=/admin/report.bin", "path=/admin/gone.txt"} {
		require.Contains(t, logs, want)
	}
	require.Contains(t, logs, `level=ERROR msg="stored file content damaged`)

	code, out, _ := runSvc(t, []string{"check", "--db-path", db, "--config-path", cfg}, nil, nil)
	require.Equal(t, 1, code, "%s", out)
	require.Contains(t, out, "DAMAGED file /admin/report.bin (sha "+sha+")")
	require.Contains(t, out, "DAMAGED file /admin/gone.txt (sha "+goneSHA+")")
	require.Contains(t, out, "ok      main store")
}
