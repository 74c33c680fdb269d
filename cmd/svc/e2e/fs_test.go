package e2e

// End-to-end tests of the virtual filesystem (docs/DECISIONS.md,
// Filesystem; docs/API.md, Files; the FsEntry of proto/svc/v1).

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
)

func init() {
	fsOp := func(method, path string, ok int, inv invoker) rpcSpec {
		return rpcSpec{method: method, path: path, okStatus: ok, invoke: inv}
	}
	rpcs["ListFiles"] = fsOp(http.MethodGet, "/fs/ls", http.StatusOK, unaryOn(apiv1.NewFsClient, apiv1.FsClient.ListFiles))
	rpcs["StatFile"] = fsOp(http.MethodGet, "/fs/stat", http.StatusOK, unaryOn(apiv1.NewFsClient, apiv1.FsClient.StatFile))
	rpcs["MakeDir"] = fsOp(http.MethodPost, "/fs/mkdir", http.StatusOK, unaryOn(apiv1.NewFsClient, apiv1.FsClient.MakeDir))
	rpcs["Remove"] = fsOp(http.MethodDelete, "/fs/rm", http.StatusNoContent, unaryOn(apiv1.NewFsClient, apiv1.FsClient.Remove))
	rpcs["Move"] = fsOp(http.MethodPost, "/fs/mv", http.StatusOK, unaryOn(apiv1.NewFsClient, apiv1.FsClient.Move))
	rpcs["ListShared"] = fsOp(http.MethodGet, "/fs/shared", http.StatusOK, unaryOn(apiv1.NewFsClient, apiv1.FsClient.ListShared))
	for _, op := range []string{"ListFiles", "StatFile", "Remove", "ListShared"} {
		queryOps[op] = true
	}
}

// fsEntryFields are the keys of an FsEntry (proto/svc/v1).
var fsEntryFields = []string{"createdAt", "kind", "mimeType", "name", "owner", "path", "size", "updatedAt"}

// requireFsEntry asserts the FsEntry shape and its identity.
func requireFsEntry(t testing.TB, e obj, p, kind, owner string) obj {
	t.Helper()
	require.NotNil(t, e, "no entry")
	require.Equal(t, fsEntryFields, keys(e), "FsEntry %v", e)
	require.Equal(t, p, e["path"], "entry %v", e)
	require.Equal(t, path.Base(p), e["name"], "entry %v", e)
	require.Equal(t, kind, e["kind"], "entry %v", e)
	require.Equal(t, owner, e["owner"], "entry %v", e)
	_, ok := e["size"].(float64)
	require.True(t, ok, "size is a number: %v", e)
	created, ok := e["createdAt"].(float64)
	require.True(t, ok, "createdAt is a number: %v", e)
	require.InDelta(t, float64(time.Now().UnixMilli()), created, float64(time.Hour.Milliseconds()))
	updated, ok := e["updatedAt"].(float64)
	require.True(t, ok, "updatedAt is a number: %v", e)
	require.GreaterOrEqual(t, updated, created)
	if kind == "dir" {
		require.Equal(t, 0.0, e["size"], "entry %v", e)
		require.Equal(t, "inode/directory", e["mimeType"], "entry %v", e)
	}
	return e
}

// entryOf returns body.entry.
func entryOf(t testing.TB, body obj) obj {
	t.Helper()
	e, ok := body["entry"].(obj)
	require.True(t, ok, "body has an entry: %v", body)
	return e
}

// entryPaths returns the paths of body.entries, in order.
func entryPaths(t testing.TB, body obj) []string {
	t.Helper()
	out := []string{}
	for _, e := range listOf(t, body, "entries") {
		require.Equal(t, fsEntryFields, keys(e), "FsEntry %v", e)
		out = append(out, e["path"].(string))
	}
	return out
}

// lsPaths lists dir as c and returns the entry paths.
func lsPaths(t testing.TB, d driver, c cred, dir string) []string {
	t.Helper()
	return entryPaths(t, mustCall(t, d, c, "ListFiles", obj{"path": dir}))
}

// sharedPaths returns the paths of ListShared as c.
func sharedPaths(t testing.TB, d driver, c cred) []string {
	t.Helper()
	return entryPaths(t, mustCall(t, d, c, "ListShared", nil))
}

// setHeader sets (or, for "", removes) a request header.
func setHeader(k, v string) reqOpt {
	return func(r *http.Request) {
		if v == "" {
			r.Header.Del(k)
			return
		}
		r.Header.Set(k, v)
	}
}

// fsWrite sends POST /fs/write. collide and contentType "" are not sent;
// body is []byte or an io.Reader (sent without a length).
func fsWrite(t testing.TB, p *proc, tok, p2, collide, contentType string, body any, opts ...reqOpt) httpResp {
	t.Helper()
	q := url.Values{"path": {p2}}
	if collide != "" {
		q.Set("collide", collide)
	}
	if tok != "" {
		opts = append(opts, withBearer(tok))
	}
	opts = append(opts, setHeader("Content-Type", contentType))
	return p.do(t, http.MethodPost, "/fs/write?"+q.Encode(), body, opts...)
}

// mustWrite writes data at p2 with collide=error and returns the entry.
func mustWrite(t testing.TB, p *proc, tok, p2, contentType string, data []byte) obj {
	t.Helper()
	r := fsWrite(t, p, tok, p2, "", contentType, data)
	require.Equal(t, http.StatusOK, r.status, "write %s: %s", p2, r.raw)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, []string{"entry", "renamed"}, keys(r.body), "body %s", r.raw)
	require.Equal(t, false, r.body["renamed"])
	e := entryOf(t, r.body)
	require.Equal(t, p2, e["path"])
	require.Equal(t, float64(len(data)), e["size"])
	return e
}

// readURL escapes each segment of a virtual path for GET /fs/read.
func readURL(p2 string) string {
	segs := strings.Split(strings.TrimPrefix(p2, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/fs/read/" + strings.Join(segs, "/")
}

// fsRead sends GET /fs/read with a raw (already escaped) URL path.
func fsReadRaw(t testing.TB, p *proc, tok, rawURL string, opts ...reqOpt) httpResp {
	t.Helper()
	if tok != "" {
		opts = append(opts, withBearer(tok))
	}
	return p.do(t, http.MethodGet, rawURL, nil, opts...)
}

// mustRead reads p2 and requires 200 with want and the MIME type.
func mustRead(t testing.TB, p *proc, tok, p2, mimeType string, want []byte) httpResp {
	t.Helper()
	r := fsReadRaw(t, p, tok, readURL(p2))
	require.Equal(t, http.StatusOK, r.status, "read %s: %s", p2, r.raw)
	require.True(t, bytes.Equal(want, r.raw), "read %s: got %d bytes %q, want %d bytes", p2, len(r.raw), trim(r.raw), len(want))
	require.Equal(t, mimeType, r.header.Get("Content-Type"))
	require.Equal(t, strconv.Itoa(len(want)), r.header.Get("Content-Length"))
	require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"))
	return r
}

func trim(b []byte) []byte { return b[:min(len(b), 200)] }

// requireReadRefused requires an error status for p2 and the code.
func requireReadRefused(t testing.TB, p *proc, tok, p2, code string) {
	t.Helper()
	requireRESTError(t, fsReadRaw(t, p, tok, readURL(p2)), code)
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// regularFiles lists the regular files under dir (none when dir is absent).
func regularFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if de.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// requirePrivateTree asserts every directory under root is 0700 and every
// file 0600 (docs/DECISIONS.md, Filesystem).
func requirePrivateTree(t testing.TB, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if de.IsDir() {
			want = 0o700
		}
		require.Equal(t, want, info.Mode().Perm(), "mode of %s", p)
		return nil
	})
	require.NoError(t, err)
}

// filesRoot is the first-boot files root of p: svc-files beside the config.
func filesRoot(p *proc) string { return filepath.Join(filepath.Dir(p.opts.configPath), "svc-files") }

// TestFsFiles drives every filesystem operation, over REST and gRPC for the
// RPCs, with the byte routes over REST.
func TestFsFiles(t *testing.T) {
	t.Parallel()
	onEachTransport(t, func(t *testing.T, p *proc, admin cred, d driver) {
		toks := map[string]string{"admin": tokenOf(admin)}
		for _, n := range []string{"alice", "bob", "carol"} {
			toks[n] = createMember(t, d, admin, n)
		}
		as := func(n string) cred { return bearer(toks[n]) }

		t.Run("write and read", func(t *testing.T) {
			r := fsWrite(t, p, toks["alice"], "/alice/docs/a.txt", "", "text/plain", []byte("hello"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
			require.Equal(t, []string{"entry", "renamed"}, keys(r.body))
			require.Equal(t, false, r.body["renamed"])
			e := requireFsEntry(t, entryOf(t, r.body), "/alice/docs/a.txt", "file", "alice")
			require.Equal(t, 5.0, e["size"])
			require.Equal(t, "text/plain", e["mimeType"])

			st := mustCall(t, d, as("alice"), "StatFile", obj{"path": "/alice/docs/a.txt"})
			require.Equal(t, []string{"entry"}, keys(st))
			require.Equal(t, e, entryOf(t, st))
			// Parent directories are created by the write.
			requireFsEntry(t, entryOf(t, mustCall(t, d, as("alice"), "StatFile", obj{"path": "/alice/docs"})), "/alice/docs", "dir", "alice")
			requireFsEntry(t, entryOf(t, mustCall(t, d, as("alice"), "StatFile", obj{"path": "/alice"})), "/alice", "dir", "alice")

			rr := mustRead(t, p, toks["alice"], "/alice/docs/a.txt", "text/plain", []byte("hello"))
			require.Empty(t, rr.header.Get("Content-Disposition"))
			require.Equal(t, "1", rr.header.Get("X-SVC-Protocol"))

			// A home always exists, even empty.
			requireFsEntry(t, entryOf(t, mustCall(t, d, as("carol"), "StatFile", obj{"path": "/carol"})), "/carol", "dir", "carol")
			require.Empty(t, lsPaths(t, d, as("carol"), "/carol"))
			// An empty file.
			mustWrite(t, p, toks["alice"], "/alice/empty", "", []byte{})
			mustRead(t, p, toks["alice"], "/alice/empty", "application/octet-stream", []byte{})
		})

		t.Run("content types", func(t *testing.T) {
			tests := []struct {
				name        string
				sent        string
				stored      string
				disposition bool
			}{
				{name: "absent", sent: "", stored: "application/octet-stream"},
				{name: "plain with charset", sent: "text/plain; charset=utf-8", stored: "text/plain; charset=utf-8"},
				{name: "json", sent: "application/json", stored: "application/json"},
				{name: "png", sent: "image/png", stored: "image/png"},
				{name: "html is a download", sent: "text/html", stored: "text/html", disposition: true},
				{name: "svg is a download", sent: "image/svg+xml", stored: "image/svg+xml", disposition: true},
				{name: "xhtml is a download", sent: "application/xhtml+xml", stored: "application/xhtml+xml", disposition: true},
			}
			for i, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					p2 := "/alice/types/f" + strconv.Itoa(i)
					data := []byte("<svg onload=alert(1)>" + tc.name)
					e := mustWrite(t, p, toks["alice"], p2, tc.sent, data)
					require.Equal(t, tc.stored, e["mimeType"])
					rr := mustRead(t, p, toks["alice"], p2, tc.stored, data)
					if tc.disposition {
						require.True(t, strings.HasPrefix(rr.header.Get("Content-Disposition"), "attachment"), "Content-Disposition %q", rr.header.Get("Content-Disposition"))
					} else {
						require.Empty(t, rr.header.Get("Content-Disposition"))
					}
				})
			}
			t.Run("malformed", func(t *testing.T) {
				requireRESTError(t, fsWrite(t, p, toks["alice"], "/alice/types/bad", "", "not a type", []byte("x")), "bad_request")
				mustFail(t, d, as("alice"), "StatFile", obj{"path": "/alice/types/bad"}, "not_found")
			})
		})

		t.Run("collisions", func(t *testing.T) {
			first := mustWrite(t, p, toks["alice"], "/alice/c/a.txt", "text/plain", []byte("one"))
			for _, collide := range []string{"", "error"} {
				requireRESTError(t, fsWrite(t, p, toks["alice"], "/alice/c/a.txt", collide, "text/plain", []byte("two")), "conflict")
			}
			mustRead(t, p, toks["alice"], "/alice/c/a.txt", "text/plain", []byte("one"))

			r := fsWrite(t, p, toks["alice"], "/alice/c/a.txt", "overwrite", "text/markdown", []byte("two!"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
			require.Equal(t, false, r.body["renamed"])
			e := requireFsEntry(t, entryOf(t, r.body), "/alice/c/a.txt", "file", "alice")
			require.Equal(t, 4.0, e["size"])
			require.Equal(t, "text/markdown", e["mimeType"])
			require.Equal(t, first["createdAt"], e["createdAt"], "an overwrite keeps the file's creation time")
			mustRead(t, p, toks["alice"], "/alice/c/a.txt", "text/markdown", []byte("two!"))

			for i, want := range []string{"/alice/c/a-1.txt", "/alice/c/a-2.txt"} {
				data := []byte("suffix " + strconv.Itoa(i))
				r := fsWrite(t, p, toks["alice"], "/alice/c/a.txt", "suffix", "text/plain", data)
				require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
				require.Equal(t, true, r.body["renamed"])
				requireFsEntry(t, entryOf(t, r.body), want, "file", "alice")
				mustRead(t, p, toks["alice"], want, "text/plain", data)
			}
			mustRead(t, p, toks["alice"], "/alice/c/a.txt", "text/markdown", []byte("two!"))

			// suffix without a collision keeps the name.
			r = fsWrite(t, p, toks["alice"], "/alice/c/fresh.txt", "suffix", "text/plain", []byte("f"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
			require.Equal(t, false, r.body["renamed"])
			requireFsEntry(t, entryOf(t, r.body), "/alice/c/fresh.txt", "file", "alice")
			// A name without an extension gets the suffix at its end.
			mustWrite(t, p, toks["alice"], "/alice/c/noext", "", []byte("1"))
			r = fsWrite(t, p, toks["alice"], "/alice/c/noext", "suffix", "", []byte("2"))
			require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
			requireFsEntry(t, entryOf(t, r.body), "/alice/c/noext-1", "file", "alice")

			requireRESTError(t, fsWrite(t, p, toks["alice"], "/alice/c/b.txt", "bogus", "", []byte("x")), "bad_request")
			mustFail(t, d, as("alice"), "StatFile", obj{"path": "/alice/c/b.txt"}, "not_found")
			// A directory is never replaced by a file, whatever the strategy.
			for _, collide := range []string{"", "error", "overwrite"} {
				requireRESTError(t, fsWrite(t, p, toks["alice"], "/alice/c", collide, "", []byte("x")), "conflict")
			}
			requireRESTError(t, fsWrite(t, p, toks["alice"], "/alice", "overwrite", "", []byte("x")), "conflict")
			// A file cannot be a parent.
			requireRESTError(t, fsWrite(t, p, toks["alice"], "/alice/c/a.txt/x", "", "", []byte("x")), "conflict")
			requireFsEntry(t, entryOf(t, mustCall(t, d, as("alice"), "StatFile", obj{"path": "/alice/c"})), "/alice/c", "dir", "alice")
		})

		t.Run("mkdir", func(t *testing.T) {
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/y"}, "not_found")
			mustFail(t, d, as("alice"), "StatFile", obj{"path": "/alice/x"}, "not_found")
			e := entryOf(t, mustCall(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/y", "recursive": true}))
			requireFsEntry(t, e, "/alice/x/y", "dir", "alice")
			requireFsEntry(t, entryOf(t, mustCall(t, d, as("alice"), "StatFile", obj{"path": "/alice/x"})), "/alice/x", "dir", "alice")
			requireFsEntry(t, entryOf(t, mustCall(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/z"})), "/alice/x/z", "dir", "alice")
			require.Equal(t, []string{"/alice/x/y", "/alice/x/z"}, lsPaths(t, d, as("alice"), "/alice/x"))

			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/y"}, "conflict")
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/y", "recursive": true}, "conflict")
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/alice"}, "conflict")
			mustWrite(t, p, toks["alice"], "/alice/x/file", "", []byte("f"))
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/file"}, "conflict")
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/alice/x/file/sub", "recursive": true}, "conflict")
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/"}, "bad_request")

			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/bob/z"}, "forbidden")
			mustFail(t, d, as("alice"), "MakeDir", obj{"path": "/ghost/z"}, "forbidden")
			mustFail(t, d, admin, "MakeDir", obj{"path": "/ghost/z"}, "not_found")
			requireFsEntry(t, entryOf(t, mustCall(t, d, admin, "MakeDir", obj{"path": "/bob/z"})), "/bob/z", "dir", "bob")
			require.Equal(t, []string{"/bob/z"}, lsPaths(t, d, as("bob"), "/bob"))
			mustCall(t, d, as("bob"), "Remove", obj{"path": "/bob/z"})
		})

		t.Run("list", func(t *testing.T) {
			mustWrite(t, p, toks["alice"], "/alice/l/b.txt", "", []byte("b"))
			mustWrite(t, p, toks["alice"], "/alice/l/a.txt", "", []byte("a"))
			mustWrite(t, p, toks["alice"], "/alice/l/sub/deep.txt", "", []byte("d"))
			body := mustCall(t, d, as("alice"), "ListFiles", obj{"path": "/alice/l"})
			require.Equal(t, []string{"entries"}, keys(body))
			require.Equal(t, []string{"/alice/l/a.txt", "/alice/l/b.txt", "/alice/l/sub"}, entryPaths(t, body))
			for _, e := range listOf(t, body, "entries") {
				kind := "file"
				if e["name"] == "sub" {
					kind = "dir"
				}
				requireFsEntry(t, e, e["path"].(string), kind, "alice")
			}
			// Without a path, the own home.
			home := entryPaths(t, mustCall(t, d, as("alice"), "ListFiles", obj{}))
			require.Contains(t, home, "/alice/l")
			require.Equal(t, home, lsPaths(t, d, as("alice"), "/alice"))
			// ls of a file describes the file.
			require.Equal(t, []string{"/alice/l/a.txt"}, lsPaths(t, d, as("alice"), "/alice/l/a.txt"))
			mustFail(t, d, as("alice"), "ListFiles", obj{"path": "/alice/nope"}, "not_found")

			// "/" lists the homes the caller can see.
			require.Equal(t, []string{"/alice"}, lsPaths(t, d, as("alice"), "/"))
			require.Equal(t, []string{"/carol"}, lsPaths(t, d, as("carol"), "/"))
			roots := mustCall(t, d, admin, "ListFiles", obj{"path": "/"})
			require.Equal(t, []string{"/admin", "/alice", "/bob", "/carol"}, entryPaths(t, roots))
			for _, e := range listOf(t, roots, "entries") {
				requireFsEntry(t, e, e["path"].(string), "dir", e["name"].(string))
			}
		})

		t.Run("remove", func(t *testing.T) {
			mustWrite(t, p, toks["alice"], "/alice/r/f.txt", "", []byte("f"))
			mustWrite(t, p, toks["alice"], "/alice/r/s/g.txt", "", []byte("g"))
			mustFail(t, d, as("alice"), "Remove", obj{"path": "/alice/r"}, "conflict")
			mustFail(t, d, as("alice"), "Remove", obj{"path": "/alice/r", "recursive": false}, "conflict")
			mustRead(t, p, toks["alice"], "/alice/r/s/g.txt", "application/octet-stream", []byte("g"))
			mustCall(t, d, as("alice"), "Remove", obj{"path": "/alice/r", "recursive": true})
			for _, gone := range []string{"/alice/r", "/alice/r/f.txt", "/alice/r/s", "/alice/r/s/g.txt"} {
				mustFail(t, d, as("alice"), "StatFile", obj{"path": gone}, "not_found")
			}
			requireReadRefused(t, p, toks["alice"], "/alice/r/f.txt", "not_found")

			mustCall(t, d, as("alice"), "MakeDir", obj{"path": "/alice/empty-dir"})
			mustCall(t, d, as("alice"), "Remove", obj{"path": "/alice/empty-dir"})
			mustWrite(t, p, toks["alice"], "/alice/one.txt", "", []byte("1"))
			mustCall(t, d, as("alice"), "Remove", obj{"path": "/alice/one.txt"})
			mustFail(t, d, as("alice"), "StatFile", obj{"path": "/alice/one.txt"}, "not_found")

			mustFail(t, d, as("alice"), "Remove", obj{"path": "/alice/nope"}, "not_found")
			mustFail(t, d, as("alice"), "Remove", obj{"path": "/alice", "recursive": true}, "bad_request")
			mustFail(t, d, as("alice"), "Remove", obj{"path": "/", "recursive": true}, "bad_request")

			mustWrite(t, p, toks["bob"], "/bob/b.txt", "", []byte("b"))
			mustFail(t, d, as("alice"), "Remove", obj{"path": "/bob/b.txt"}, "forbidden")
			mustFail(t, d, as("alice"), "Remove", obj{"path": "/bob/absent.txt"}, "forbidden")
			mustRead(t, p, toks["bob"], "/bob/b.txt", "application/octet-stream", []byte("b"))
			mustCall(t, d, admin, "Remove", obj{"path": "/bob/b.txt"})
			mustFail(t, d, as("bob"), "StatFile", obj{"path": "/bob/b.txt"}, "not_found")
		})

		t.Run("move", func(t *testing.T) {
			src := mustWrite(t, p, toks["alice"], "/alice/m/a.txt", "text/plain", []byte("move me"))
			body := mustCall(t, d, as("alice"), "Move", obj{"from": "/alice/m/a.txt", "to": "/alice/m2/b.txt"})
			require.Equal(t, []string{"entry"}, keys(body))
			e := requireFsEntry(t, entryOf(t, body), "/alice/m2/b.txt", "file", "alice")
			require.Equal(t, 7.0, e["size"])
			require.Equal(t, "text/plain", e["mimeType"])
			require.Equal(t, src["createdAt"], e["createdAt"])
			mustFail(t, d, as("alice"), "StatFile", obj{"path": "/alice/m/a.txt"}, "not_found")
			mustRead(t, p, toks["alice"], "/alice/m2/b.txt", "text/plain", []byte("move me"))

			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/m2", "to": "/alice/m3"}, "bad_request")
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice", "to": "/alice/m3"}, "bad_request")
			mustWrite(t, p, toks["alice"], "/alice/m2/c.txt", "", []byte("c"))
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/m2/b.txt", "to": "/alice/m2/c.txt"}, "conflict")
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/m2/b.txt", "to": "/alice/m2"}, "conflict")
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/none", "to": "/alice/none2"}, "not_found")
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/m2/b.txt", "to": "/bob/b.txt"}, "forbidden")
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/m2/b.txt", "to": "/ghost/b.txt"}, "forbidden")
			mustWrite(t, p, toks["bob"], "/bob/mine.txt", "", []byte("bob's"))
			mustFail(t, d, as("alice"), "Move", obj{"from": "/bob/mine.txt", "to": "/alice/stolen.txt"}, "forbidden")
			mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/m2/b.txt", "to": "relative.txt"}, "bad_request")
			mustRead(t, p, toks["alice"], "/alice/m2/b.txt", "text/plain", []byte("move me"))
			mustRead(t, p, toks["bob"], "/bob/mine.txt", "application/octet-stream", []byte("bob's"))

			// members.manage moves across homes; the file changes owner.
			e = entryOf(t, mustCall(t, d, admin, "Move", obj{"from": "/alice/m2/b.txt", "to": "/bob/from-alice.txt"}))
			requireFsEntry(t, e, "/bob/from-alice.txt", "file", "bob")
			mustRead(t, p, toks["bob"], "/bob/from-alice.txt", "text/plain", []byte("move me"))
			requireReadRefused(t, p, toks["alice"], "/bob/from-alice.txt", "forbidden")
		})

		t.Run("privacy", func(t *testing.T) {
			secret := []byte("BOB PRIVATE BYTES")
			mustWrite(t, p, toks["bob"], "/bob/private/secret.txt", "text/plain", secret)
			for _, target := range []string{"/bob/private/secret.txt", "/bob/private", "/bob/absent.txt", "/bob/absent/deeper"} {
				mustFail(t, d, as("alice"), "StatFile", obj{"path": target}, "forbidden")
				mustFail(t, d, as("alice"), "ListFiles", obj{"path": target}, "forbidden")
				r := fsReadRaw(t, p, toks["alice"], readURL(target))
				requireRESTError(t, r, "forbidden")
				require.NotContains(t, string(r.raw), string(secret))
			}
			mustFail(t, d, as("alice"), "ListFiles", obj{"path": "/bob"}, "forbidden")
			mustFail(t, d, as("alice"), "StatFile", obj{"path": "/bob"}, "forbidden")
			require.NotContains(t, lsPaths(t, d, as("alice"), "/"), "/bob")
			require.Empty(t, sharedPaths(t, d, as("alice")))
			// Writes into another home are refused and leave nothing.
			requireRESTError(t, fsWrite(t, p, toks["alice"], "/bob/private/secret.txt", "overwrite", "", []byte("pwned")), "forbidden")
			requireRESTError(t, fsWrite(t, p, toks["alice"], "/bob/new.txt", "", "", []byte("x")), "forbidden")
			requireRESTError(t, fsWrite(t, p, toks["alice"], "/ghost/new.txt", "", "", []byte("x")), "forbidden")
			mustRead(t, p, toks["bob"], "/bob/private/secret.txt", "text/plain", secret)
			mustFail(t, d, as("bob"), "StatFile", obj{"path": "/bob/new.txt"}, "not_found")

			// members.manage reads and writes anywhere.
			mustRead(t, p, toks["admin"], "/bob/private/secret.txt", "text/plain", secret)
			requireFsEntry(t, entryOf(t, mustCall(t, d, admin, "StatFile", obj{"path": "/bob/private/secret.txt"})), "/bob/private/secret.txt", "file", "bob")
			require.Contains(t, lsPaths(t, d, admin, "/bob"), "/bob/private")
			e := mustWrite(t, p, toks["admin"], "/bob/from-admin.txt", "", []byte("hi"))
			require.Equal(t, "bob", e["owner"])
			mustFail(t, d, admin, "StatFile", obj{"path": "/bob/absent.txt"}, "not_found")
			requireRESTError(t, fsWrite(t, p, toks["admin"], "/ghost/x.txt", "", "", []byte("x")), "not_found")
			requireReadRefused(t, p, toks["admin"], "/ghost/x.txt", "not_found")
		})

		t.Run("read refusals", func(t *testing.T) {
			requireReadRefused(t, p, toks["alice"], "/alice/docs", "bad_request")
			requireReadRefused(t, p, toks["alice"], "/alice", "bad_request")
			requireReadRefused(t, p, toks["alice"], "/alice/docs/absent.txt", "not_found")
			requireReadRefused(t, p, "", "/alice/docs/a.txt", "unauthenticated")
			requireReadRefused(t, p, randomToken(t), "/alice/docs/a.txt", "unauthenticated")
			requireRESTError(t, fsWrite(t, p, "", "/alice/anon.txt", "", "", []byte("x")), "unauthenticated")
			mustFail(t, d, anonymous, "ListFiles", obj{"path": "/"}, "unauthenticated")
		})

		t.Run("bad paths", func(t *testing.T) {
			bad := []string{
				"alice/x", "/alice/../alice/docs", "/alice//docs", "/alice/./docs", "/alice/docs/..",
				"/alice/x\x00y", "/alice/" + strings.Repeat("n", 300), "/" + strings.Repeat("alice/", 700) + "x",
			}
			for _, b := range bad {
				mustFail(t, d, as("alice"), "StatFile", obj{"path": b}, "bad_request")
				mustFail(t, d, as("alice"), "ListFiles", obj{"path": b}, "bad_request")
				mustFail(t, d, as("alice"), "MakeDir", obj{"path": b, "recursive": true}, "bad_request")
				mustFail(t, d, as("alice"), "Remove", obj{"path": b, "recursive": true}, "bad_request")
				mustFail(t, d, as("alice"), "Move", obj{"from": "/alice/docs/a.txt", "to": b}, "bad_request")
				mustFail(t, d, as("alice"), "Move", obj{"from": b, "to": "/alice/moved.txt"}, "bad_request")
				requireRESTError(t, fsWrite(t, p, toks["alice"], b, "", "", []byte("x")), "bad_request")
			}
			mustFail(t, d, as("alice"), "StatFile", obj{"path": ""}, "bad_request")
			requireRESTError(t, fsWrite(t, p, toks["alice"], "", "", "", []byte("x")), "bad_request")
			requireRESTError(t, fsWrite(t, p, toks["alice"], "/", "", "", []byte("x")), "bad_request")
			mustRead(t, p, toks["alice"], "/alice/docs/a.txt", "text/plain", []byte("hello"))
		})
	})
}

// TestFsTraversal throws path tricks at both byte routes and the query
// values of the RPCs: each is refused with 400 or 404, and no answer ever
// carries another home's bytes.
func TestFsTraversal(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	alice := createMember(t, d, admin, "alice")
	bob := createMember(t, d, admin, "bob")
	secret := []byte("BOB-SECRET-7f3a")
	mustWrite(t, p, bob, "/bob/secret.txt", "text/plain", secret)
	mustWrite(t, p, alice, "/alice/sub/a.txt", "text/plain", []byte("alice's"))

	reads := []string{
		"/fs/read/alice/../bob/secret.txt",
		"/fs/read/alice/sub/../../bob/secret.txt",
		"/fs/read/alice/sub/../a.txt",
		"/fs/read/alice/%2e%2e/bob/secret.txt",
		"/fs/read/alice/%2E%2E/bob/secret.txt",
		"/fs/read/alice/.%2e/bob/secret.txt",
		"/fs/read/%2e%2e/bob/secret.txt",
		"/fs/read/alice%2F..%2Fbob%2Fsecret.txt",
		"/fs/read/alice/..%2Fbob%2Fsecret.txt",
		"/fs/read/alice/sub%2Fa.txt",
		"/fs/read/bob%2Fsecret.txt",
		"/fs/read//bob/secret.txt",
		"/fs/read/alice//../bob/secret.txt",
		"/fs/read/alice/./sub/a.txt",
		"/fs/read/./bob/secret.txt",
		"/fs/read/alice/sub/a.txt%00",
		"/fs/read/alice/%00/../bob/secret.txt",
		"/fs/read/alice/sub/a.txt%00.png",
		"/fs/read/alice/%252e%252e/bob/secret.txt",
		"/fs/read/alice/..%5Cbob%5Csecret.txt",
		"/fs/read/alice/" + strings.Repeat("a", 300),
		"/fs/read/alice/" + strings.Repeat("a/", 600) + "x",
		"/fs/read/",
		"/fs/read",
		"/fs/read/..",
		"/fs/read/%2e%2e",
	}
	for _, raw := range reads {
		t.Run(raw[:min(len(raw), 60)], func(t *testing.T) {
			r := fsReadRaw(t, p, alice, raw)
			require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, r.status, "GET %s: %d %s", raw, r.status, trim(r.raw))
			require.NotContains(t, string(r.raw), string(secret))
			require.NotContains(t, string(r.raw), "alice's")
			code, _ := r.body["error"].(string)
			requireRESTError(t, r, code)
		})
	}

	queries := []string{
		"/alice/../bob/secret.txt", "/alice/%2e%2e/bob/secret.txt", "/alice/..%2Fbob/secret.txt",
		"//bob/secret.txt", "/alice/sub/../../bob", "/bob/secret.txt/..", "/alice/\x00/../bob",
		"/alice/..\\bob\\secret.txt", "\\bob\\secret.txt", "/alice/%00",
	}
	for _, q := range queries {
		t.Run("query "+q, func(t *testing.T) {
			for _, op := range []string{"StatFile", "ListFiles"} {
				r := d.call(t, bearer(alice), op, obj{"path": q})
				require.Contains(t, []string{"bad_request", "not_found"}, r.code, "%s %q: %v", op, q, r.body)
			}
			r := d.call(t, bearer(alice), "Remove", obj{"path": q, "recursive": true})
			require.Contains(t, []string{"bad_request", "not_found"}, r.code, "Remove %q", q)
			r = d.call(t, bearer(alice), "Move", obj{"from": q, "to": "/alice/got.txt"})
			require.Contains(t, []string{"bad_request", "not_found"}, r.code, "Move %q", q)
			// A literal % in a query value is only a character: a write may
			// succeed, but only inside the caller's own home.
			w := fsWrite(t, p, alice, q, "overwrite", "text/plain", []byte("pwned"))
			if w.status == http.StatusOK && strings.Contains(q, "%") {
				require.True(t, strings.HasPrefix(entryOf(t, w.body)["path"].(string), "/alice/"), "write %q: %s", q, w.raw)
				return
			}
			require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, w.status, "write %q: %s", q, w.raw)
		})
	}
	mustRead(t, p, bob, "/bob/secret.txt", "text/plain", secret)
	require.Equal(t, []string{"/bob/secret.txt"}, lsPaths(t, d, bearer(bob), "/bob"))
	mustFail(t, d, bearer(alice), "StatFile", obj{"path": "/alice/got.txt"}, "not_found")
}

// TestFsGrants: attachments grant read of the file to the message's
// recipients: a DM to the recipient, a channel post to channel members, a
// broadcast to everyone.
func TestFsGrants(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	toks := map[string]string{}
	for _, n := range []string{"alice", "bob", "carol", "dave"} {
		toks[n] = createMember(t, d, admin, n)
	}
	as := func(n string) cred { return bearer(toks[n]) }
	files := map[string][]byte{}
	for _, n := range []string{"dm.txt", "chan.txt", "all.txt", "private.txt"} {
		files[n] = []byte("content of " + n)
		mustWrite(t, p, toks["alice"], "/alice/s/"+n, "text/plain", files[n])
	}
	mustWrite(t, p, toks["alice"], "/alice/hidden/h.txt", "", []byte("h"))

	t.Run("dm", func(t *testing.T) {
		mustPush(t, d, as("alice"), obj{"to": "bob", "body": "have a look", "attachments": []string{"/alice/s/dm.txt"}})
		mustRead(t, p, toks["bob"], "/alice/s/dm.txt", "text/plain", files["dm.txt"])
		requireFsEntry(t, entryOf(t, mustCall(t, d, as("bob"), "StatFile", obj{"path": "/alice/s/dm.txt"})), "/alice/s/dm.txt", "file", "alice")
		requireReadRefused(t, p, toks["bob"], "/alice/s/private.txt", "forbidden")
		requireReadRefused(t, p, toks["carol"], "/alice/s/dm.txt", "forbidden")
		mustFail(t, d, as("carol"), "StatFile", obj{"path": "/alice/s/dm.txt"}, "forbidden")

		shared := mustCall(t, d, as("bob"), "ListShared", nil)
		require.Equal(t, []string{"entries"}, keys(shared))
		require.Equal(t, []string{"/alice/s/dm.txt"}, entryPaths(t, shared))
		requireFsEntry(t, listOf(t, shared, "entries")[0], "/alice/s/dm.txt", "file", "alice")
		require.Empty(t, sharedPaths(t, d, as("carol")))
		require.Empty(t, sharedPaths(t, d, as("alice")), "a sender's own files are not shared with it")

		// The shared file's home becomes visible, showing only the way to
		// the shared file.
		require.Equal(t, []string{"/alice", "/bob"}, lsPaths(t, d, as("bob"), "/"))
		require.Equal(t, []string{"/carol"}, lsPaths(t, d, as("carol"), "/"))
		require.Equal(t, []string{"/alice/s"}, lsPaths(t, d, as("bob"), "/alice"))
		require.Equal(t, []string{"/alice/s/dm.txt"}, lsPaths(t, d, as("bob"), "/alice/s"))
		mustFail(t, d, as("bob"), "ListFiles", obj{"path": "/alice/hidden"}, "forbidden")
		mustFail(t, d, as("bob"), "StatFile", obj{"path": "/alice/s/absent.txt"}, "forbidden")
		// A grant is read only.
		requireRESTError(t, fsWrite(t, p, toks["bob"], "/alice/s/dm.txt", "overwrite", "", []byte("x")), "forbidden")
		mustFail(t, d, as("bob"), "Remove", obj{"path": "/alice/s/dm.txt"}, "forbidden")
		mustFail(t, d, as("bob"), "Move", obj{"from": "/alice/s/dm.txt", "to": "/bob/dm.txt"}, "forbidden")
		mustRead(t, p, toks["alice"], "/alice/s/dm.txt", "text/plain", files["dm.txt"])
	})

	t.Run("channel", func(t *testing.T) {
		ch := mustCall(t, d, as("alice"), "CreateChannel", obj{"slug": "ops"})
		id := ch["id"].(string)
		mustCall(t, d, as("carol"), "AddChannelMember", obj{"channel": id, "member": "carol"})
		mustPush(t, d, as("alice"), obj{"body": "for the channel", "data": obj{"thread": "chan:" + id}, "attachments": []string{"/alice/s/chan.txt"}})
		mustRead(t, p, toks["carol"], "/alice/s/chan.txt", "text/plain", files["chan.txt"])
		require.Equal(t, []string{"/alice/s/chan.txt"}, sharedPaths(t, d, as("carol")))
		for _, outsider := range []string{"bob", "dave"} {
			requireReadRefused(t, p, toks[outsider], "/alice/s/chan.txt", "forbidden")
			require.NotContains(t, sharedPaths(t, d, as(outsider)), "/alice/s/chan.txt")
		}
		require.Equal(t, []string{"/dave"}, lsPaths(t, d, as("dave"), "/"))
	})

	t.Run("broadcast", func(t *testing.T) {
		mustPush(t, d, as("alice"), obj{"body": "for everyone", "attachments": []string{"/alice/s/all.txt"}})
		erin := createMember(t, d, admin, "erin")
		for _, n := range []string{"bob", "carol", "dave"} {
			mustRead(t, p, toks[n], "/alice/s/all.txt", "text/plain", files["all.txt"])
		}
		mustRead(t, p, erin, "/alice/s/all.txt", "text/plain", files["all.txt"])
		require.Equal(t, []string{"/alice/s/all.txt", "/alice/s/dm.txt"}, sharedPaths(t, d, as("bob")))
		require.Equal(t, []string{"/alice/s/all.txt"}, sharedPaths(t, d, as("dave")))
		require.Equal(t, []string{"/alice", "/dave"}, lsPaths(t, d, as("dave"), "/"))
		requireReadRefused(t, p, toks["dave"], "/alice/s/private.txt", "forbidden")
		require.Empty(t, sharedPaths(t, d, as("alice")))
	})

	t.Run("overwrite keeps the grant", func(t *testing.T) {
		r := fsWrite(t, p, toks["alice"], "/alice/s/dm.txt", "overwrite", "text/plain", []byte("second version"))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		mustRead(t, p, toks["bob"], "/alice/s/dm.txt", "text/plain", []byte("second version"))
	})

	t.Run("removal ends the share", func(t *testing.T) {
		mustCall(t, d, as("alice"), "Remove", obj{"path": "/alice/s/dm.txt"})
		require.Equal(t, []string{"/alice/s/all.txt"}, sharedPaths(t, d, as("bob")))
		r := fsReadRaw(t, p, toks["bob"], readURL("/alice/s/dm.txt"))
		require.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, r.status, "%s", r.raw)
		// A new file at the same path is a new file: the old grant does not
		// reach it.
		mustWrite(t, p, toks["alice"], "/alice/s/dm.txt", "text/plain", []byte("new private file"))
		requireReadRefused(t, p, toks["bob"], "/alice/s/dm.txt", "forbidden")
		require.Equal(t, []string{"/alice/s/all.txt"}, sharedPaths(t, d, as("bob")))
	})

	t.Run("session cookie", func(t *testing.T) {
		u := enroll(t, d, admin, "carol")
		sess := login(t, d, u)
		r := fsWrite(t, p, "", "/carol/by-cookie.txt", "", "text/plain", []byte("cookie"), withSession(sess))
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		rr := fsReadRaw(t, p, "", readURL("/carol/by-cookie.txt"), withSession(sess))
		require.Equal(t, http.StatusOK, rr.status, "%s", rr.raw)
		require.Equal(t, "cookie", string(rr.raw))
		// A cookie-borne write from another origin is refused.
		r = fsWrite(t, p, "", "/carol/csrf.txt", "", "text/plain", []byte("x"), withSession(sess), withHeader("Origin", "https://evil.example"))
		requireRESTError(t, r, "forbidden")
		mustFail(t, d, as("carol"), "StatFile", obj{"path": "/carol/csrf.txt"}, "not_found")
	})
}

// TestFsMaxFileSize: files.maxFileSize bounds a write, declared or streamed,
// and a refused write leaves nothing behind.
func TestFsMaxFileSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "files")
	adminTok := randomToken(t)
	cfgPath := filepath.Join(dir, "svc.json")
	const limit = 1000
	writeConfig(t, cfgPath, obj{
		"team":  obj{"name": "crew", "directive": "", "context": "", "permissionPresets": obj{"admin": allLeaves}},
		"store": obj{"members": []obj{{"name": "admin", "role": nil, "permissions": []string{"admin"}, "token": adminTok}}},
		"files": obj{"root": root, "maxFileSize": limit},
	})
	p := mustStartSvc(t, procOpts{configPath: cfgPath})
	d := restDriver{p}

	full := randomBytes(t, limit)
	mustWrite(t, p, adminTok, "/admin/full.bin", "", full)
	mustRead(t, p, adminTok, "/admin/full.bin", "application/octet-stream", full)

	over := randomBytes(t, limit+1)
	requireRESTError(t, fsWrite(t, p, adminTok, "/admin/over.bin", "", "", over), "payload_too_large")
	requireRESTError(t, fsWrite(t, p, adminTok, "/admin/streamed.bin", "", "", io.MultiReader(bytes.NewReader(over[:500]), bytes.NewReader(over[500:]))), "payload_too_large")
	requireRESTError(t, fsWrite(t, p, adminTok, "/admin/big.bin", "", "", bytes.NewReader(randomBytes(t, 64<<10))), "payload_too_large")
	requireRESTError(t, fsWrite(t, p, adminTok, "/admin/full.bin", "overwrite", "", over), "payload_too_large")
	// A declared length far over the limit is refused before the body is
	// read, and the client still gets the answer.
	requireRESTError(t, fsWrite(t, p, adminTok, "/admin/huge.bin", "", "", randomBytes(t, 8<<20)), "payload_too_large")
	mustWrite(t, p, adminTok, "/admin/after.bin", "", full[:10])
	for _, gone := range []string{"/admin/over.bin", "/admin/streamed.bin", "/admin/big.bin", "/admin/huge.bin"} {
		mustFail(t, d, bearer(adminTok), "StatFile", obj{"path": gone}, "not_found")
	}
	mustRead(t, p, adminTok, "/admin/full.bin", "application/octet-stream", full)
	require.Empty(t, regularFiles(t, filepath.Join(root, "tmp")), "a refused write leaves no temporary file")
	// Under 64 KiB, the accepted files are kept in the database, read
	// back above; the refused ones left nothing on disk either.
	require.Empty(t, regularFiles(t, filepath.Join(root, "blobs")), "only the accepted files are stored, inline")
	requirePrivateTree(t, root)
}

// TestFsDisabled: without a files block the filesystem is off (404).
func TestFsDisabled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	adminTok := randomToken(t)
	cfgPath := filepath.Join(dir, "svc.json")
	writeConfig(t, cfgPath, obj{
		"team":  obj{"name": "crew", "directive": "", "context": "", "permissionPresets": obj{"admin": allLeaves}},
		"store": obj{"members": []obj{{"name": "admin", "role": nil, "permissions": []string{"admin"}, "token": adminTok}}},
	})
	p := mustStartSvc(t, procOpts{configPath: cfgPath})
	for _, tr := range transports {
		d := tr.connect(t, p)
		mustFail(t, d, bearer(adminTok), "ListFiles", obj{"path": "/"}, "not_found")
		mustFail(t, d, bearer(adminTok), "StatFile", obj{"path": "/admin"}, "not_found")
		mustFail(t, d, bearer(adminTok), "MakeDir", obj{"path": "/admin/x"}, "not_found")
		mustFail(t, d, bearer(adminTok), "ListShared", nil, "not_found")
	}
	requireRESTError(t, fsWrite(t, p, adminTok, "/admin/x.txt", "", "", []byte("x")), "not_found")
	requireReadRefused(t, p, adminTok, "/admin/x.txt", "not_found")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, e.IsDir(), "no files root is created: %s", e.Name())
	}
}

// TestFsBlobDedupAndPurge: equal bytes are stored once under
// files.root/blobs, and the blob file goes with the last entry using it.
func TestFsBlobDedupAndPurge(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	adminTok := p.adminToken(t)
	admin := bearer(adminTok)
	d := restDriver{p}
	alice := createMember(t, d, admin, "alice")
	bob := createMember(t, d, admin, "bob")
	blobs := filepath.Join(filesRoot(p), "blobs")
	require.Empty(t, regularFiles(t, blobs))

	// Over 64 KiB: content on disk (smaller files are kept in the
	// database, see docs/DECISIONS.md).
	same := randomBytes(t, 68<<10)
	other := randomBytes(t, 68<<10)
	mustWrite(t, p, alice, "/alice/one.bin", "", same)
	mustWrite(t, p, bob, "/bob/two.bin", "image/png", same)
	mustWrite(t, p, alice, "/alice/copy/three.bin", "", same)
	stored := regularFiles(t, blobs)
	require.Len(t, stored, 1, "equal bytes are stored once")
	onDisk, err := os.ReadFile(stored[0])
	require.NoError(t, err)
	require.True(t, bytes.Equal(same, onDisk), "a blob holds the bytes as written")
	mustWrite(t, p, alice, "/alice/other.bin", "", other)
	require.Len(t, regularFiles(t, blobs), 2)
	requirePrivateTree(t, filesRoot(p))

	mustCall(t, d, bearer(alice), "Remove", obj{"path": "/alice/one.bin"})
	mustCall(t, d, bearer(alice), "Remove", obj{"path": "/alice/copy", "recursive": true})
	require.Len(t, regularFiles(t, blobs), 2, "a blob stays while an entry uses it")
	mustRead(t, p, bob, "/bob/two.bin", "image/png", same)
	mustCall(t, d, bearer(bob), "Remove", obj{"path": "/bob/two.bin"})
	left := regularFiles(t, blobs)
	require.Len(t, left, 1, "the blob goes with its last entry")
	onDisk, err = os.ReadFile(left[0])
	require.NoError(t, err)
	require.True(t, bytes.Equal(other, onDisk))

	// An overwrite releases the old bytes; a move keeps them.
	newer := randomBytes(t, 70<<10)
	r := fsWrite(t, p, alice, "/alice/other.bin", "overwrite", "", newer)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	left = regularFiles(t, blobs)
	require.Len(t, left, 1)
	onDisk, err = os.ReadFile(left[0])
	require.NoError(t, err)
	require.True(t, bytes.Equal(newer, onDisk))
	mustCall(t, d, bearer(alice), "Move", obj{"from": "/alice/other.bin", "to": "/alice/moved.bin"})
	require.Len(t, regularFiles(t, blobs), 1)
	mustRead(t, p, alice, "/alice/moved.bin", "application/octet-stream", newer)
	mustCall(t, d, bearer(alice), "Remove", obj{"path": "/alice/moved.bin"})
	require.Empty(t, regularFiles(t, blobs))
	require.Empty(t, regularFiles(t, filepath.Join(filesRoot(p), "tmp")))
}

// A deleted member's files go with it: the bytes leave the disk at once
// and a member re-created under the name starts with an empty home.
func TestFsDeletedMemberFilesGo(t *testing.T) {
	t.Parallel()
	p := mustStartSvc(t, procOpts{})
	admin := bearer(p.adminToken(t))
	d := restDriver{p}
	alice := createMember(t, d, admin, "alice")
	bob := createMember(t, d, admin, "bob")
	blobs := filepath.Join(filesRoot(p), "blobs")
	mustWrite(t, p, alice, "/alice/d/private.bin", "", randomBytes(t, 68<<10))
	kept := randomBytes(t, 68<<10)
	mustWrite(t, p, bob, "/bob/kept.bin", "", kept)
	require.Len(t, regularFiles(t, blobs), 2)

	mustCall(t, d, admin, "DeleteMember", obj{"name": "alice"})
	require.Len(t, regularFiles(t, blobs), 1, "the departed member's bytes are purged")
	mustRead(t, p, bob, "/bob/kept.bin", "application/octet-stream", kept)

	alice = createMember(t, d, admin, "alice")
	require.Empty(t, lsPaths(t, d, bearer(alice), "/alice"), "a re-created member inherits no files")
	requireReadRefused(t, p, alice, "/alice/d/private.bin", "not_found")
}

// TestFsKill9 kills the broker with a write in flight and two acknowledged,
// one on disk and one small enough to be kept in the database: after a
// restart on the same files both read back byte-identical and no
// temporary file is left.
func TestFsKill9(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := mustStartSvc(t, procOpts{configPath: filepath.Join(dir, "svc.json"), dbPath: filepath.Join(dir, "svc.db")})
	adminTok := p.adminToken(t)
	root := filesRoot(p)
	data := randomBytes(t, 256<<10)
	mustWrite(t, p, adminTok, "/admin/kept/data.bin", "application/x-test", data)
	// At most 64 KiB: its bytes commit with the entry, in the database.
	small := randomBytes(t, 64<<10)
	mustWrite(t, p, adminTok, "/admin/kept/small.bin", "application/x-test", small)

	// A write whose body is still arriving when the broker dies.
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/fs/write?path=/admin/partial.bin", pr)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	inflight := make(chan struct{})
	go func() {
		defer close(inflight)
		resp, err := (&http.Client{}).Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	// More than 64 KiB, so the body streams to a temporary file (a
	// smaller one is held in memory and kept in the database).
	_, err = pw.Write(randomBytes(t, 96<<10))
	require.NoError(t, err)
	tmp := filepath.Join(root, "tmp")
	deadline := time.Now().Add(callTimeout)
	for len(regularFiles(t, tmp)) == 0 {
		require.True(t, time.Now().Before(deadline), "the in-flight write never reached %s", tmp)
		time.Sleep(10 * time.Millisecond)
	}
	p.kill(t)
	_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	<-inflight

	p2 := p.restart(t)
	mustRead(t, p2, adminTok, "/admin/kept/data.bin", "application/x-test", data)
	mustRead(t, p2, adminTok, "/admin/kept/small.bin", "application/x-test", small)
	require.Empty(t, regularFiles(t, tmp), "boot clears temporary files")
	mustFail(t, restDriver{p2}, bearer(adminTok), "StatFile", obj{"path": "/admin/partial.bin"}, "not_found")
	require.Len(t, regularFiles(t, filepath.Join(root, "blobs")), 1)
	// The restarted broker writes and de-duplicates as before.
	mustWrite(t, p2, adminTok, "/admin/again.bin", "", data)
	require.Len(t, regularFiles(t, filepath.Join(root, "blobs")), 1)
	require.Equal(t, []string{"/admin/again.bin", "/admin/kept"}, slices.Sorted(slices.Values(lsPaths(t, restDriver{p2}, bearer(adminTok), "/admin"))))
}
