package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3" // to damage a row of the stopped broker's file
	"github.com/stretchr/testify/require"
)

// TestCheckFindsDamagedInlineContent: a small file's content kept in the
// database (fs_inline) whose bytes changed is damage to svc check, named
// like a damaged blob, on both stores; a read of it is 500 data_loss
// before any byte; and the blob runbook repairs it: the original bytes put
// under files.root/blobs are what the broker serves, and svc check says
// REPAIRED and exits 0.
func TestCheckFindsDamagedInlineContent(t *testing.T) {
	for _, tc := range []struct {
		name string
		// store returns the flags that select the store and changes the
		// eleventh byte of every fs_inline row of the stopped broker.
		store func(t *testing.T, dir string) (flags []string, damage func())
	}{
		{"sqlite", func(t *testing.T, dir string) ([]string, func()) {
			path := filepath.Join(dir, "svc.db")
			return []string{"--db-path", path}, func() {
				db, err := sql.Open("sqlite3", "file:"+path)
				require.NoError(t, err)
				defer db.Close()
				res, err := db.Exec(`UPDATE fs_inline SET data = CAST(substr(data, 1, 10) || x'ff' || substr(data, 12) AS BLOB)`)
				require.NoError(t, err)
				n, err := res.RowsAffected()
				require.NoError(t, err)
				require.EqualValues(t, 1, n, "one content kept inline")
			}
		}},
		{"postgres", func(t *testing.T, dir string) ([]string, func()) {
			url := pgCluster(t).NewDatabase(t)
			return []string{"--db-url", url}, func() {
				ctx := context.Background()
				conn, err := pgx.Connect(ctx, url)
				require.NoError(t, err)
				defer conn.Close(ctx)
				tag, err := conn.Exec(ctx, `UPDATE fs_inline SET data = set_byte(data, 10, 255)`)
				require.NoError(t, err)
				require.EqualValues(t, 1, tag.RowsAffected(), "one content kept inline")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "svc.json")
			flags, damage := tc.store(t, dir)
			serveArgs := append([]string{"--config-path", cfgPath}, flags...)
			checkArgs := append([]string{"check", "--config-path", cfgPath}, flags...)
			check := func() (string, error) {
				var out bytes.Buffer
				err := run(context.Background(), checkArgs, nil, &out, io.Discard)
				return out.String(), err
			}

			s := startServe(t, serveArgs...)
			token := regexp.MustCompile(`admin token: (\S+)`).FindStringSubmatch(s.stdout.String())[1]
			data := []byte(strings.Repeat("small enough to be kept in the database ", 100)) // 4 KB
			sum := sha256.Sum256(data)
			sha := hex.EncodeToString(sum[:])
			s.writeFile(t, "/admin/small.txt", token, data)
			require.NoError(t, s.stop())
			blobs := filepath.Join(dir, "svc-files", "blobs")
			onDisk, err := filepath.Glob(filepath.Join(blobs, "*", "*"))
			require.NoError(t, err)
			require.Empty(t, onDisk, "the content is kept in the database")

			out, err := check()
			require.NoError(t, err, out)
			require.Contains(t, out, "ok      files kept in the database: 1 stored contents")

			damage()
			out, err = check()
			var ee *exitError
			require.ErrorAs(t, err, &ee, out)
			require.Equal(t, 1, ee.code)
			require.Contains(t, out, "DAMAGED file /admin/small.txt (sha "+sha+", kept in the database)")
			require.Contains(t, out, "hash_mismatch")
			require.Contains(t, out, "DAMAGED files kept in the database: 1 of 1 stored contents")

			s = startServe(t, serveArgs...)
			read := func() (int, []byte) {
				req, err := http.NewRequest(http.MethodGet, s.base+"/fs/read/admin/small.txt", nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				require.NoError(t, err, "damage is found before the headers")
				return resp.StatusCode, b
			}
			code, body := read()
			require.Equal(t, http.StatusInternalServerError, code, "%s", body)
			require.Contains(t, string(body), `"data_loss"`)
			require.Contains(t, string(body), "/admin/small.txt is damaged or missing in the broker's storage")

			// The runbook: the original bytes, named by their sha.
			require.NoError(t, os.MkdirAll(filepath.Join(blobs, sha[:2]), 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(blobs, sha[:2], sha), data, 0o600))
			code, body = read()
			require.Equal(t, http.StatusOK, code, "%s", body)
			require.Equal(t, data, body)
			require.NoError(t, s.stop())

			out, err = check()
			require.NoError(t, err, out)
			require.Contains(t, out, "REPAIRED file /admin/small.txt (sha "+sha+")")
			require.Contains(t, out, "ok      files kept in the database: 1 stored contents")
		})
	}
}
