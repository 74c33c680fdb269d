package e2e

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startFsBroker starts a broker whose files block has the given quota, with
// members admin (manage) and bob (none); it returns their tokens.
func startFsBroker(t *testing.T, quota int) (p *proc, admin, bob string) {
	t.Helper()
	dir := t.TempDir()
	admin, bob = randomToken(t), randomToken(t)
	cfgPath := filepath.Join(dir, "svc.json")
	files := obj{"root": filepath.Join(dir, "files")}
	if quota > 0 {
		files["quotaBytes"] = quota
	}
	writeConfig(t, cfgPath, obj{
		"team": obj{"name": "crew", "permissionPresets": obj{"admin": allLeaves}},
		"store": obj{"members": []obj{
			{"name": "admin", "permissions": []string{"admin"}, "token": admin},
			{"name": "bob", "permissions": []string{}, "token": bob},
		}},
		"files": files,
	})
	return mustStartSvc(t, procOpts{configPath: cfgPath}), admin, bob
}

// files.quotaBytes bounds the bytes of one home, counted per file, checked
// for declared, streamed and overwritten bodies and for moves between
// homes; refusals are 413 and store nothing.
func TestFsQuota(t *testing.T) {
	t.Parallel()
	const quota = 1000
	p, admin, bob := startFsBroker(t, quota)
	d := restDriver{p}
	require.Contains(t, p.stderr.String(), "quota_bytes=1000")

	mustWrite(t, p, bob, "/bob/a.bin", "", randomBytes(t, 600))
	mustWrite(t, p, bob, "/bob/b.bin", "", randomBytes(t, 400)) // exactly full
	requireRESTError(t, fsWrite(t, p, bob, "/bob/c.bin", "", "", randomBytes(t, 1)), "payload_too_large")
	r := fsWrite(t, p, bob, "/bob/c.bin", "", "", bytes.NewReader(randomBytes(t, 10))) // no declared length
	requireRESTError(t, r, "payload_too_large")
	require.Contains(t, r.body["message"], "quota")

	// An overwrite counts only what it adds.
	require.Equal(t, 200, fsWrite(t, p, bob, "/bob/a.bin", "overwrite", "", randomBytes(t, 600)).status)
	requireRESTError(t, fsWrite(t, p, bob, "/bob/a.bin", "overwrite", "", randomBytes(t, 601)), "payload_too_large")
	// Removing makes room.
	mustCall(t, d, bearer(bob), "Remove", obj{"path": "/bob/b.bin"})
	mustWrite(t, p, bob, "/bob/c.bin", "", randomBytes(t, 400))

	// The same content twice counts twice: the quota is what the home
	// holds, not what the disk stores.
	same := randomBytes(t, 300)
	mustWrite(t, p, admin, "/admin/x", "", same)
	mustWrite(t, p, admin, "/admin/y", "", same)
	mustWrite(t, p, admin, "/admin/z", "", same)
	requireRESTError(t, fsWrite(t, p, admin, "/admin/w", "", "", same), "payload_too_large")

	// A manager moving a file into a full home is refused too.
	mustFail(t, d, bearer(admin), "Move", obj{"from": "/admin/x", "to": "/bob/x"}, "payload_too_large")
	mustCall(t, d, bearer(admin), "Move", obj{"from": "/admin/x", "to": "/admin/moved"})

	for _, gone := range []string{"/bob/b.bin", "/admin/w", "/bob/x"} {
		mustFail(t, d, bearer(admin), "StatFile", obj{"path": gone}, "not_found")
	}
}

// ls and shared page by limit and after; next names the page that follows.
func TestFsListPages(t *testing.T) {
	t.Parallel()
	p, admin, bob := startFsBroker(t, 0)
	for _, tr := range transports {
		d := tr.connect(t, p)
		t.Run(tr.name, func(t *testing.T) {
			dir := "/admin/" + tr.name
			var names []string
			for i := range 7 {
				n := fmt.Sprintf("f%d", i)
				names = append(names, n)
				mustWrite(t, p, admin, dir+"/"+n, "", []byte(n))
				mustCall(t, d, bearer(admin), "Push", obj{"to": "bob", "body": n, "attachments": []string{dir + "/" + n}})
			}
			walk := func(op string, req obj, key string) (got []string, pages int) {
				after := ""
				for {
					q := obj{"limit": 3}
					for k, v := range req {
						q[k] = v
					}
					if after != "" {
						q["after"] = after
					}
					body := mustCall(t, d, bearer(bob), op, q)
					for _, e := range listOf(t, body, "entries") {
						got = append(got, e[key].(string))
					}
					pages++
					next, ok := body["next"].(string)
					if !ok {
						return got, pages
					}
					after = next
				}
			}
			got, pages := walk("ListFiles", obj{"path": dir}, "name")
			require.Equal(t, names, got, "a grantee pages through what it may see")
			require.Equal(t, 3, pages)
			var paths []string
			for _, n := range names {
				paths = append(paths, dir+"/"+n)
			}
			got, _ = walk("ListShared", obj{}, "path")
			require.Subset(t, got, paths)

			full := mustCall(t, d, bearer(admin), "ListFiles", obj{"path": dir})
			require.Len(t, listOf(t, full, "entries"), 7)
			require.NotContains(t, full, "next", "no next when nothing follows")
			mustFail(t, d, bearer(admin), "ListFiles", obj{"path": dir, "limit": 0}, "bad_request")
			mustFail(t, d, bearer(admin), "ListShared", obj{"limit": -1}, "bad_request")
		})
	}
}

// A download whose client stops reading is cut once a chunk has waited
// for the client longer than the write timeout: it holds no handler and
// no connection for good.
func TestFsReadStalledClientIsCut(t *testing.T) {
	t.Parallel()
	p, admin, _ := startFsBroker(t, 0)
	const size = 32 << 20
	mustWrite(t, p, admin, "/admin/big.bin", "", randomBytes(t, size))
	resp, _, cancel := p.sseGet(t, "/fs/read/admin/big.bin", sseOpts{rcvBuf: 4096}, withBearer(admin))
	defer cancel()
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	// Read nothing while the broker fills the socket buffers and waits.
	time.Sleep(15 * time.Second)
	n, err := io.Copy(io.Discard, resp.Body)
	require.Error(t, err, "the body ends short")
	require.Less(t, n, int64(size))
}
