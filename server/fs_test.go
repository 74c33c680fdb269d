package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"svc/server/apierr"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/vfs"
	"svc/store"
	"svc/store/sqlite"
	"svc/store/storetest"
)

// fsEnv is a filesystem service over an in-memory store and a blob root in
// a temp dir, with members admin (members.manage), alice, bob and carol.
type fsEnv struct {
	fs    *Fs
	st    store.Store
	root  string
	perms map[string][]string
}

func newFsEnv(t *testing.T, dbPath string, maxFileSize int64) *fsEnv {
	t.Helper()
	perms := map[string][]string{"admin": {auth.MembersManage}, "alice": {}, "bob": {}, "carol": {}}
	st, err := sqlite.Open(context.Background(), dbPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	root := filepath.Join(t.TempDir(), "files")
	blobs, err := vfs.Open(root)
	require.NoError(t, err)
	srv := startTestServer(t, st, perms, Deps{}, WithFiles(blobs, maxFileSize, 0))
	return &fsEnv{fs: srv.Fs(), st: st, root: root, perms: perms}
}

func (e *fsEnv) principal(name string) *auth.Principal {
	return &auth.Principal{Member: name, Permissions: e.perms[name]}
}

func (e *fsEnv) ctx(name string) context.Context {
	return auth.WithPrincipal(context.Background(), e.principal(name))
}

func (e *fsEnv) write(t *testing.T, as, path string, data []byte) store.FsEntry {
	t.Helper()
	out, _, err := e.fs.Write(context.Background(), e.principal(as), FileWrite{Path: path, Body: bytes.NewReader(data), Size: -1})
	require.NoError(t, err, "write %s", path)
	return out
}

// blobFiles counts the files under the blob directory.
func (e *fsEnv) blobFiles(t *testing.T) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(filepath.Join(e.root, "blobs"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	}))
	return n
}

// inlineContents counts the contents the store keeps inline that file
// entries reference.
func (e *fsEnv) inlineContents(t *testing.T) int {
	t.Helper()
	entries, err := e.st.ListTree(context.Background(), "/")
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, en := range entries {
		if en.Kind != store.FsFile || seen[en.Blob] {
			continue
		}
		switch _, err := e.st.InlineContent(context.Background(), en.Blob); {
		case err == nil:
			seen[en.Blob] = true
		case !errors.Is(err, store.ErrNotFound):
			require.NoError(t, err)
		}
	}
	return len(seen)
}

// storedContents counts the contents stored: blob files and inline.
func (e *fsEnv) storedContents(t *testing.T) int {
	t.Helper()
	return e.blobFiles(t) + e.inlineContents(t)
}

// codeOf is the wire code of err, "" for nil.
func codeOf(err error) apierr.Code {
	if err == nil {
		return ""
	}
	return apierr.Classify(err).Code
}

// TestReadableFile pins the contract the attachment checks rely on: 400 for
// a bad path, 403 when unreadable whether or not it exists, 404 when absent
// where readable; directories are returned.
func TestReadableFile(t *testing.T) {
	e := newFsEnv(t, "", 1<<20)
	ctx := context.Background()
	e.write(t, "alice", "/alice/a.txt", []byte("a"))
	e.write(t, "alice", "/alice/d/in.txt", []byte("in"))
	e.write(t, "alice", "/alice/g.txt", []byte("g"))
	e.write(t, "alice", "/alice/all.txt", []byte("all"))
	require.NoError(t, storetest.GrantPaths(ctx, e.st, []string{"/alice/g.txt"}, []string{"bob"}))
	require.NoError(t, storetest.GrantPaths(ctx, e.st, []string{"/alice/all.txt"}, []string{store.Everyone}))

	tests := []struct {
		name string
		as   string
		path string
		code apierr.Code
		kind string // of the entry when allowed
	}{
		{name: "relative", as: "alice", path: "alice/a.txt", code: apierr.CodeBadRequest},
		{name: "empty", as: "alice", path: "", code: apierr.CodeBadRequest},
		{name: "root", as: "admin", path: "/", code: apierr.CodeBadRequest},
		{name: "dot dot", as: "alice", path: "/alice/../bob/x", code: apierr.CodeBadRequest},
		{name: "double slash", as: "alice", path: "/alice//a.txt", code: apierr.CodeBadRequest},
		{name: "NUL", as: "alice", path: "/alice/a\x00.txt", code: apierr.CodeBadRequest},
		{name: "own file", as: "alice", path: "/alice/a.txt", kind: store.FsFile},
		{name: "own dir", as: "alice", path: "/alice/d", kind: store.FsDir},
		{name: "own home", as: "alice", path: "/alice", kind: store.FsDir},
		{name: "own absent", as: "alice", path: "/alice/nope", code: apierr.CodeNotFound},
		{name: "other's private file", as: "bob", path: "/alice/a.txt", code: apierr.CodeForbidden},
		{name: "other's absent file", as: "bob", path: "/alice/nope", code: apierr.CodeForbidden},
		{name: "other's dir", as: "bob", path: "/alice/d", code: apierr.CodeForbidden},
		{name: "other's home", as: "bob", path: "/alice", code: apierr.CodeForbidden},
		{name: "granted file", as: "bob", path: "/alice/g.txt", kind: store.FsFile},
		{name: "granted to another", as: "carol", path: "/alice/g.txt", code: apierr.CodeForbidden},
		{name: "granted to everyone", as: "carol", path: "/alice/all.txt", kind: store.FsFile},
		{name: "manager reads any file", as: "admin", path: "/alice/a.txt", kind: store.FsFile},
		{name: "manager reads any dir", as: "admin", path: "/alice/d", kind: store.FsDir},
		{name: "manager absent", as: "admin", path: "/alice/nope", code: apierr.CodeNotFound},
		{name: "manager, no such home", as: "admin", path: "/ghost/x", code: apierr.CodeNotFound},
		{name: "no such home", as: "alice", path: "/ghost/x", code: apierr.CodeForbidden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.fs.readableFile(ctx, e.principal(tc.as), tc.path)
			require.Equal(t, tc.code, codeOf(err), "err %v", err)
			if tc.code == "" {
				require.Equal(t, tc.path, got.Path)
				require.Equal(t, tc.kind, got.Kind)
			}
		})
	}
}

func TestNormalizeMimeType(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		bad  bool
	}{
		{name: "empty", in: "", want: "application/octet-stream"},
		{name: "blank", in: "  ", want: "application/octet-stream"},
		{name: "plain", in: "text/plain", want: "text/plain"},
		{name: "upper case", in: "Text/HTML", want: "text/html"},
		{name: "parameter", in: "text/plain; charset=UTF-8", want: "text/plain; charset=UTF-8"},
		{name: "spacing", in: "text/plain;charset=utf-8", want: "text/plain; charset=utf-8"},
		{name: "no slash", in: "text", bad: true},
		{name: "words", in: "not a type", bad: true},
		{name: "bad parameter", in: "text/plain; =x", bad: true},
		{name: "too long", in: "application/" + strings.Repeat("x", 300), bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalizeMimeType(tc.in)
			if tc.bad {
				require.Equal(t, apierr.CodeBadRequest, codeOf(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestWriteRefusalsKeepNothing: a write refused after its bytes were
// stored leaves no blob behind, and one refused before reads nothing.
func TestWriteRefusalsKeepNothing(t *testing.T) {
	e := newFsEnv(t, "", 16)
	e.write(t, "alice", "/alice/f", []byte("kept"))
	require.Equal(t, 1, e.storedContents(t))
	tests := []struct {
		name string
		w    FileWrite
		code apierr.Code
	}{
		{name: "parent is a file", w: FileWrite{Path: "/alice/f/x", Body: strings.NewReader("new bytes"), Size: -1}, code: apierr.CodeConflict},
		{name: "over the limit, streamed", w: FileWrite{Path: "/alice/big", Body: strings.NewReader(strings.Repeat("x", 17)), Size: -1}, code: apierr.CodePayloadTooLarge},
		{name: "over the limit, declared", w: FileWrite{Path: "/alice/big", Body: failReader{t}, Size: 17}, code: apierr.CodePayloadTooLarge},
		{name: "exists", w: FileWrite{Path: "/alice/f", Body: failReader{t}, Size: -1}, code: apierr.CodeConflict},
		{name: "directory", w: FileWrite{Path: "/alice", Body: failReader{t}, Size: -1, Collide: CollideOverwrite}, code: apierr.CodeConflict},
		{name: "another home", w: FileWrite{Path: "/bob/x", Body: failReader{t}, Size: -1}, code: apierr.CodeForbidden},
		{name: "bad collide", w: FileWrite{Path: "/alice/x", Body: failReader{t}, Size: -1, Collide: "replace"}, code: apierr.CodeBadRequest},
		{name: "bad type", w: FileWrite{Path: "/alice/x", Body: failReader{t}, Size: -1, MimeType: "nonsense"}, code: apierr.CodeBadRequest},
		{name: "cut short", w: FileWrite{Path: "/alice/short", Body: io.MultiReader(strings.NewReader("ab"), errReader{io.ErrUnexpectedEOF}), Size: -1}, code: apierr.CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.fs.Write(context.Background(), e.principal("alice"), tc.w)
			require.Equal(t, tc.code, codeOf(err), "err %v", err)
			require.Equal(t, 1, e.storedContents(t))
			tmp, err := os.ReadDir(filepath.Join(e.root, "tmp"))
			require.NoError(t, err)
			require.Empty(t, tmp)
		})
	}
}

// failReader fails the test when a write reads a body it should refuse
// unread.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("the body was read")
	return 0, io.EOF
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestConcurrentWritesAndRemovesOfEqualBytes runs writers and removers of
// the same content at once: whatever interleaves, a blob is on disk exactly
// while an entry references it, and every acknowledged file reads back.
//
// Content over store.FsInlineMax is a blob on disk, what the lock protocol
// of vfs.Blobs is for; content at most that large is kept inline and must
// come and go with its entries the same way.
func TestConcurrentWritesAndRemovesOfEqualBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   []byte
		onDisk int // blob files while one entry holds the content
	}{
		{"on disk", bytes.Repeat([]byte("same bytes "), store.FsInlineMax/10), 1},
		{"inline", bytes.Repeat([]byte("same bytes "), 100), 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testConcurrentEqualBytes(t, tc.data, tc.onDisk) })
	}
}

func testConcurrentEqualBytes(t *testing.T, data []byte, onDisk int) {
	e := newFsEnv(t, filepath.Join(t.TempDir(), "svc.db"), 1<<20)
	const workers, rounds = 4, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				p := fmt.Sprintf("/alice/w%d/%d", w, i)
				if _, _, err := e.fs.Write(context.Background(), e.principal("alice"), FileWrite{Path: p, Body: bytes.NewReader(data), Size: -1}); err != nil {
					t.Errorf("write %s: %v", p, err)
					return
				}
				entry, f, err := e.fs.Read(context.Background(), e.principal("alice"), p)
				if err != nil {
					t.Errorf("read %s: %v", p, err)
					return
				}
				got, err := io.ReadAll(f)
				_ = f.Close()
				if err != nil || !bytes.Equal(data, got) || entry.Size != int64(len(data)) {
					t.Errorf("read %s: %d bytes, %v", p, len(got), err)
					return
				}
				if _, err := e.fs.Remove(e.ctx("alice"), &apiv1.RemoveRequest{Path: p}); err != nil {
					t.Errorf("remove %s: %v", p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, 0, e.storedContents(t), "the last remove purges the blob")
	e.write(t, "bob", "/bob/last", data)
	require.Equal(t, 1, e.storedContents(t))
	require.Equal(t, onDisk, e.blobFiles(t))
}

// TestListVisibility: another member's tree shows only the way to the
// files shared with the caller.
func TestListVisibility(t *testing.T) {
	e := newFsEnv(t, "", 1<<20)
	ctx := context.Background()
	e.write(t, "alice", "/alice/a/b/shared.txt", []byte("s"))
	e.write(t, "alice", "/alice/a/b/private.txt", []byte("p"))
	e.write(t, "alice", "/alice/a/c/private.txt", []byte("p"))
	e.write(t, "alice", "/alice/top.txt", []byte("t"))
	require.NoError(t, storetest.GrantPaths(ctx, e.st, []string{"/alice/a/b/shared.txt"}, []string{"bob"}))

	ls := func(as, path string) ([]string, apierr.Code) {
		resp, err := e.fs.ListFiles(e.ctx(as), &apiv1.ListFilesRequest{Path: path})
		if err != nil {
			return nil, codeOf(err)
		}
		var out []string
		for _, en := range resp.GetEntries() {
			out = append(out, en.GetPath())
		}
		return out, ""
	}
	tests := []struct {
		name string
		as   string
		path string
		want []string
		code apierr.Code
	}{
		{name: "root, with a share", as: "bob", path: "/", want: []string{"/alice", "/bob"}},
		{name: "root, none", as: "carol", path: "/", want: []string{"/carol"}},
		{name: "root, manager", as: "admin", path: "/", want: []string{"/admin", "/alice", "/bob", "/carol"}},
		{name: "home", as: "bob", path: "/alice", want: []string{"/alice/a"}},
		{name: "way down", as: "bob", path: "/alice/a", want: []string{"/alice/a/b"}},
		{name: "shared dir", as: "bob", path: "/alice/a/b", want: []string{"/alice/a/b/shared.txt"}},
		{name: "the file", as: "bob", path: "/alice/a/b/shared.txt", want: []string{"/alice/a/b/shared.txt"}},
		{name: "off the way", as: "bob", path: "/alice/a/c", code: apierr.CodeForbidden},
		{name: "absent off the way", as: "bob", path: "/alice/zzz", code: apierr.CodeForbidden},
		{name: "no share", as: "carol", path: "/alice", code: apierr.CodeForbidden},
		{name: "owner sees all", as: "alice", path: "/alice/a/b", want: []string{"/alice/a/b/private.txt", "/alice/a/b/shared.txt"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, code := ls(tc.as, tc.path)
			require.Equal(t, tc.code, code)
			require.Equal(t, tc.want, got)
		})
	}
}
