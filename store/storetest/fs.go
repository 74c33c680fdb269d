package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// fsTests are the subtests of FsStore; RunAll runs them.
var fsTests = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"FsCreateGet", testFsCreateGet},
	{"FsHomes", testFsHomes},
	{"FsCreateConflict", testFsCreateConflict},
	{"FsCreatePrecondition", testFsCreatePrecondition},
	{"FsListDir", testFsListDir},
	{"FsListTree", testFsListTree},
	{"FsDedupRefcount", testFsDedupRefcount},
	{"FsReplaceFile", testFsReplaceFile},
	{"FsReplaceFileErrors", testFsReplaceFileErrors},
	{"FsDeleteEntry", testFsDeleteEntry},
	{"FsDeleteTree", testFsDeleteTree},
	{"FsDeleteTreeDepartedMember", testFsDeleteTreeDepartedMember},
	{"FsMoveEntry", testFsMoveEntry},
	{"FsMoveEntryErrors", testFsMoveEntryErrors},
	{"FsGrantEntries", testFsGrantEntries},
	{"FsGrantEntriesFollowMove", testFsGrantEntriesFollowMove},
	{"FsGrantEntriesDeletedID", testFsGrantEntriesDeletedID},
	{"FsGrantsGoWithMember", testFsGrantsGoWithMember},
	{"FsSharedWith", testFsSharedWith},
	{"FsPages", testFsPages},
	{"FsSharedBelow", testFsSharedBelow},
	{"FsUsage", testFsUsage},
	{"FsWithTxRollback", testFsWithTxRollback},
	{"FsWithTxConflictKeepsTx", testFsWithTxConflictKeepsTx},
	{"FsInline", testFsInline},
	{"FsInlineRefused", testFsInlineRefused},
	{"FsInlineWithTx", testFsInlineWithTx},
}

// blobOf is the hex SHA-256 of content, as server/vfs names blobs.
func blobOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// fsFile is a file entry of owner at p holding content.
func fsFile(owner, p, content string) store.FsEntry {
	return store.FsEntry{
		Path: p, Owner: owner, Kind: store.FsFile,
		Size: int64(len(content)), MimeType: "text/plain", Blob: blobOf(content),
		CreatedAt: at(time.Minute), UpdatedAt: at(2 * time.Minute),
	}
}

// fsDir is a directory entry of owner at p.
func fsDir(owner, p string) store.FsEntry {
	return store.FsEntry{Path: p, Owner: owner, Kind: store.FsDir, CreatedAt: at(time.Minute), UpdatedAt: at(time.Minute)}
}

// mustCreateEntries creates entries in order and returns them as stored.
func mustCreateEntries(t *testing.T, s store.FsStore, entries ...store.FsEntry) []store.FsEntry {
	t.Helper()
	out := make([]store.FsEntry, 0, len(entries))
	for _, e := range entries {
		got, err := s.CreateEntry(t.Context(), e)
		require.NoError(t, err, e.Path)
		require.NotZero(t, got.ID, e.Path)
		out = append(out, got)
	}
	return out
}

// fsEntryView is an FsEntry with comparable times and no ID.
type fsEntryView struct {
	Path, Owner, Kind, MimeType, Blob, Name string
	Size                                    int64
	CreatedAt, UpdatedAt                    int64
}

func viewFsEntry(e store.FsEntry) fsEntryView {
	return fsEntryView{
		Path: e.Path, Owner: e.Owner, Kind: e.Kind, MimeType: e.MimeType, Blob: e.Blob, Name: e.Name(),
		Size: e.Size, CreatedAt: ms(e.CreatedAt), UpdatedAt: ms(e.UpdatedAt),
	}
}

func fsPaths(es []store.FsEntry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Path)
	}
	return out
}

func requireReferenced(t *testing.T, s store.FsStore, sha string, want bool) {
	t.Helper()
	got, err := s.BlobReferenced(t.Context(), sha)
	require.NoError(t, err)
	require.Equal(t, want, got, "BlobReferenced(%s)", sha)
}

func requireGrant(t *testing.T, s store.FsStore, p, member string, want bool) {
	t.Helper()
	got, err := s.HasGrant(t.Context(), p, member)
	require.NoError(t, err)
	require.Equal(t, want, got, "HasGrant(%s, %s)", p, member)
}

func testFsCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	dir := fsDir("alice", "/alice/docs")
	file := fsFile("alice", "/alice/docs/a b%_ü.txt", "hello")
	created := mustCreateEntries(t, s, dir, file)
	require.NotEqual(t, created[0].ID, created[1].ID)
	require.Equal(t, viewFsEntry(file), viewFsEntry(created[1]))
	require.Equal(t, "a b%_ü.txt", created[1].Name())

	for i, want := range []store.FsEntry{dir, file} {
		got, err := s.GetEntry(ctx, want.Path)
		require.NoError(t, err)
		require.Equal(t, viewFsEntry(want), viewFsEntry(got))
		require.Equal(t, created[i].ID, got.ID)
	}
	requireReferenced(t, s, file.Blob, true)

	// Zero times come from the clock; a zero UpdatedAt equals CreatedAt.
	noTimes := fsFile("alice", "/alice/now.txt", "x")
	noTimes.CreatedAt, noTimes.UpdatedAt = time.Time{}, time.Time{}
	got := mustCreateEntries(t, s, noTimes)[0]
	require.False(t, got.CreatedAt.IsZero())
	require.Equal(t, ms(got.CreatedAt), ms(got.UpdatedAt))

	tests := []struct {
		name string
		path string
	}{
		{"absent", "/alice/nope"},
		{"root", "/"},
		{"home of no member", "/bob"},
		{"below home of no member", "/bob/x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.GetEntry(t.Context(), tc.path)
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}

func testFsHomes(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "bob", "alice")
	home, err := s.GetEntry(ctx, "/alice")
	require.NoError(t, err)
	want := member("alice")
	require.Equal(t, fsEntryView{
		Path: "/alice", Owner: "alice", Kind: store.FsDir, Name: "alice",
		CreatedAt: ms(want.CreatedAt), UpdatedAt: ms(want.UpdatedAt),
	}, viewFsEntry(home))
	require.Zero(t, home.ID)

	homes, err := s.ListDir(ctx, "/", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"/alice", "/bob"}, fsPaths(homes))
	for _, h := range homes {
		require.Equal(t, store.FsDir, h.Kind)
		require.Equal(t, h.Name(), h.Owner)
	}

	// A home has no row: it cannot be created or deleted as an entry.
	_, err = s.CreateEntry(ctx, fsDir("alice", "/alice"))
	require.ErrorIs(t, err, store.ErrPrecondition)
	_, err = s.DeleteEntry(ctx, "/alice")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testFsCreateConflict(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	orig := mustCreateEntries(t, s, fsDir("alice", "/alice/d"), fsFile("alice", "/alice/f", "one"))

	tests := []struct {
		name string
		e    store.FsEntry
	}{
		{"file over file", fsFile("alice", "/alice/f", "two")},
		{"dir over file", fsDir("alice", "/alice/f")},
		{"file over dir", fsFile("alice", "/alice/d", "two")},
		{"dir over dir", fsDir("alice", "/alice/d")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateEntry(t.Context(), tc.e)
			require.ErrorIs(t, err, store.ErrConflict)
		})
	}
	// The failed creates referenced nothing and changed nothing.
	requireReferenced(t, s, blobOf("two"), false)
	for _, want := range orig {
		got, err := s.GetEntry(ctx, want.Path)
		require.NoError(t, err)
		require.Equal(t, want.ID, got.ID)
		require.Equal(t, viewFsEntry(want), viewFsEntry(got))
	}
	// The failed create counted no reference: one delete purges "one".
	purged, err := s.DeleteEntry(ctx, "/alice/f")
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("one")}, purged)
}

func testFsCreatePrecondition(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	mustCreateEntries(t, s, fsDir("alice", "/alice/d"), fsFile("alice", "/alice/f", "x"))

	noBlob := fsFile("alice", "/alice/nb", "x")
	noBlob.Blob = ""
	badBlob := fsFile("alice", "/alice/bb", "x")
	badBlob.Blob = "ABC"
	upperBlob := fsFile("alice", "/alice/ub", "x")
	upperBlob.Blob = "A" + upperBlob.Blob[1:]
	negSize := fsFile("alice", "/alice/ns", "x")
	negSize.Size = -1
	dirBlob := fsDir("alice", "/alice/db")
	dirBlob.Blob = blobOf("x")
	dirSize := fsDir("alice", "/alice/ds")
	dirSize.Size = 3
	badKind := fsDir("alice", "/alice/bk")
	badKind.Kind = "link"
	noOwner := fsDir("", "/alice/no")

	tests := []struct {
		name string
		e    store.FsEntry
	}{
		{"parent missing", fsFile("alice", "/alice/missing/f", "x")},
		{"parent is a file", fsFile("alice", "/alice/f/g", "x")},
		{"home of no member", fsFile("bob", "/bob/f", "x")},
		{"home itself", fsDir("alice", "/alice")},
		{"root", fsDir("alice", "/")},
		{"relative", fsDir("alice", "alice/x")},
		{"empty", fsDir("alice", "")},
		{"double slash", fsDir("alice", "/alice//x")},
		{"trailing slash", fsDir("alice", "/alice/x/")},
		{"dot dot", fsDir("alice", "/alice/d/../x")},
		{"dot", fsDir("alice", "/alice/./x")},
		{"file without blob", noBlob},
		{"file with bad blob", badBlob},
		{"file with uppercase blob", upperBlob},
		{"file with negative size", negSize},
		{"dir with blob", dirBlob},
		{"dir with size", dirSize},
		{"unknown kind", badKind},
		{"no owner", noOwner},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.CreateEntry(t.Context(), tc.e)
			require.ErrorIs(t, err, store.ErrPrecondition)
		})
	}
	tree, err := s.ListTree(t.Context(), "/")
	require.NoError(t, err)
	require.Equal(t, []string{"/alice/d", "/alice/f"}, fsPaths(tree))
}

func testFsListDir(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsFile("alice", "/alice/d/z", "z"),
		fsFile("alice", "/alice/d/a", "a"),
		fsDir("alice", "/alice/d/m"),
		fsFile("alice", "/alice/d/m/deep", "deep"),
		fsFile("alice", "/alice/d-sibling", "s"),
		fsFile("alice", "/alice/top", "t"),
		fsFile("bob", "/bob/b", "b"),
	)
	tests := []struct {
		name string
		dir  string
		want []string
	}{
		{"home", "/alice", []string{"/alice/d", "/alice/d-sibling", "/alice/top"}},
		{"dir", "/alice/d", []string{"/alice/d/a", "/alice/d/m", "/alice/d/z"}},
		{"nested", "/alice/d/m", []string{"/alice/d/m/deep"}},
		{"other home", "/bob", []string{"/bob/b"}},
		{"root lists homes", "/", []string{"/alice", "/bob"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListDir(t.Context(), tc.dir, store.Page{})
			require.NoError(t, err)
			require.Equal(t, tc.want, fsPaths(got))
		})
	}

	mustPutMembers(t, s, "carol")
	empty, err := s.ListDir(ctx, "/carol", store.Page{})
	require.NoError(t, err)
	require.NotNil(t, empty)
	require.Empty(t, empty)

	errTests := []struct {
		name string
		dir  string
		want error
	}{
		{"absent dir", "/alice/nope", store.ErrNotFound},
		{"home of no member", "/dave", store.ErrNotFound},
		{"file", "/alice/top", store.ErrPrecondition},
	}
	for _, tc := range errTests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ListDir(t.Context(), tc.dir, store.Page{})
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func testFsListTree(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice", "alice2", "a_ice")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsDir("alice", "/alice/d/e"),
		fsFile("alice", "/alice/d/e/f", "f"),
		fsFile("alice", "/alice/d/a", "a"),
		fsFile("alice", "/alice/d-x", "dx"),
		fsFile("alice", "/alice/d0", "d0"),
		fsFile("alice2", "/alice2/x", "x"),
		fsFile("a_ice", "/a_ice/y", "y"),
	)
	tests := []struct {
		name string
		dir  string
		want []string
	}{
		{"dir", "/alice/d", []string{"/alice/d/a", "/alice/d/e", "/alice/d/e/f"}},
		{"home excludes longer names", "/alice", []string{"/alice/d", "/alice/d-x", "/alice/d/a", "/alice/d/e", "/alice/d/e/f", "/alice/d0"}},
		{"underscore is literal", "/a_ice", []string{"/a_ice/y"}},
		{"root", "/", []string{
			"/a_ice/y", "/alice/d", "/alice/d-x", "/alice/d/a", "/alice/d/e", "/alice/d/e/f", "/alice/d0", "/alice2/x",
		}},
		{"file has nothing below", "/alice/d/a", []string{}},
		{"absent", "/alice/nope", []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListTree(t.Context(), tc.dir)
			require.NoError(t, err)
			require.Equal(t, tc.want, fsPaths(got))
		})
	}
}

func testFsDedupRefcount(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	same := blobOf("same")
	mustCreateEntries(t, s,
		fsFile("alice", "/alice/one", "same"),
		fsFile("alice", "/alice/two", "same"),
		fsFile("bob", "/bob/three", "same"),
		fsFile("bob", "/bob/other", "other"),
	)
	requireReferenced(t, s, same, true)

	for _, p := range []string{"/alice/one", "/bob/three"} {
		purged, err := s.DeleteEntry(ctx, p)
		require.NoError(t, err)
		require.Empty(t, purged, p)
		requireReferenced(t, s, same, true)
	}
	purged, err := s.DeleteEntry(ctx, "/alice/two")
	require.NoError(t, err)
	require.Equal(t, []string{same}, purged)
	requireReferenced(t, s, same, false)
	requireReferenced(t, s, blobOf("other"), true)

	// A purged blob comes back with its next reference, counted from one.
	mustCreateEntries(t, s, fsFile("alice", "/alice/again", "same"))
	requireReferenced(t, s, same, true)
	purged, err = s.DeleteEntry(ctx, "/alice/again")
	require.NoError(t, err)
	require.Equal(t, []string{same}, purged)
}

func testFsReplaceFile(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	orig := mustCreateEntries(t, s,
		fsFile("alice", "/alice/f", "v1"),
		fsFile("alice", "/alice/shared", "common"),
		fsFile("alice", "/alice/keep", "common"),
	)
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/f"}, []string{"bob"}))

	// New content: the old blob loses its only reference.
	got, purged, err := s.ReplaceFile(ctx, "/alice/f", store.FsContent{
		Blob: blobOf("version 2"), Size: 9, MimeType: "text/markdown", UpdatedAt: at(time.Hour),
	})
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("v1")}, purged)
	want := orig[0]
	want.Blob, want.Size, want.MimeType, want.UpdatedAt = blobOf("version 2"), 9, "text/markdown", at(time.Hour)
	require.Equal(t, viewFsEntry(want), viewFsEntry(got))
	require.Equal(t, orig[0].ID, got.ID)
	stored, err := s.GetEntry(ctx, "/alice/f")
	require.NoError(t, err)
	require.Equal(t, viewFsEntry(want), viewFsEntry(stored))
	requireReferenced(t, s, blobOf("v1"), false)
	requireReferenced(t, s, blobOf("version 2"), true)
	requireGrant(t, s, "/alice/f", "bob", true)

	// Same content again: nothing is purged, the blob stays referenced.
	got, purged, err = s.ReplaceFile(ctx, "/alice/f", store.FsContent{Blob: blobOf("version 2"), Size: 9, MimeType: "text/plain"})
	require.NoError(t, err)
	require.Empty(t, purged)
	require.Equal(t, "text/plain", got.MimeType)
	require.False(t, got.UpdatedAt.IsZero())
	requireReferenced(t, s, blobOf("version 2"), true)

	// The old blob is shared with another file: nothing is purged.
	_, purged, err = s.ReplaceFile(ctx, "/alice/shared", store.FsContent{Blob: blobOf("v1"), Size: 2})
	require.NoError(t, err)
	require.Empty(t, purged)
	requireReferenced(t, s, blobOf("common"), true)
	requireReferenced(t, s, blobOf("v1"), true)

	// Content moving to a blob another file holds, then back.
	_, purged, err = s.ReplaceFile(ctx, "/alice/f", store.FsContent{Blob: blobOf("common"), Size: 6})
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("version 2")}, purged)
	purged, err = s.DeleteEntry(ctx, "/alice/keep")
	require.NoError(t, err)
	require.Empty(t, purged)
	purged, err = s.DeleteEntry(ctx, "/alice/f")
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("common")}, purged)
}

func testFsReplaceFileErrors(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	mustCreateEntries(t, s, fsDir("alice", "/alice/d"), fsFile("alice", "/alice/f", "x"))
	good := store.FsContent{Blob: blobOf("y"), Size: 1}
	tests := []struct {
		name string
		path string
		c    store.FsContent
		want error
	}{
		{"absent", "/alice/nope", good, store.ErrNotFound},
		{"directory", "/alice/d", good, store.ErrPrecondition},
		{"home", "/alice", good, store.ErrPrecondition},
		{"bad blob", "/alice/f", store.FsContent{Blob: "nope", Size: 1}, store.ErrPrecondition},
		{"negative size", "/alice/f", store.FsContent{Blob: blobOf("y"), Size: -1}, store.ErrPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, purged, err := s.ReplaceFile(t.Context(), tc.path, tc.c)
			require.ErrorIs(t, err, tc.want)
			require.Empty(t, purged)
		})
	}
	requireReferenced(t, s, blobOf("y"), false)
	requireReferenced(t, s, blobOf("x"), true)
}

func testFsDeleteEntry(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/full"),
		fsFile("alice", "/alice/full/f", "f"),
		fsDir("alice", "/alice/empty"),
		fsFile("alice", "/alice/g", "g"),
	)
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/g"}, []string{"bob"}))

	_, err := s.DeleteEntry(ctx, "/alice/full")
	require.ErrorIs(t, err, store.ErrPrecondition)
	_, err = s.GetEntry(ctx, "/alice/full/f")
	require.NoError(t, err)

	purged, err := s.DeleteEntry(ctx, "/alice/empty")
	require.NoError(t, err)
	require.Empty(t, purged)
	_, err = s.GetEntry(ctx, "/alice/empty")
	require.ErrorIs(t, err, store.ErrNotFound)

	purged, err = s.DeleteEntry(ctx, "/alice/g")
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("g")}, purged)
	_, err = s.DeleteEntry(ctx, "/alice/g")
	require.ErrorIs(t, err, store.ErrNotFound)

	// Grants went with the entry: a new file at the same path is not shared.
	mustCreateEntries(t, s, fsFile("alice", "/alice/g", "g2"))
	requireGrant(t, s, "/alice/g", "bob", false)
}

func testFsDeleteTree(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsDir("alice", "/alice/d/e"),
		fsFile("alice", "/alice/d/e/f", "f"),
		fsFile("alice", "/alice/d/dup1", "dup"),
		fsFile("alice", "/alice/d-keep", "dup"),
		fsFile("alice", "/alice/d/own", "own"),
		fsFile("bob", "/bob/x", "x"),
	)
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/d/e/f"}, []string{"bob"}))

	n, purged, err := s.DeleteTree(ctx, "/alice/d")
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.ElementsMatch(t, []string{blobOf("f"), blobOf("own")}, purged)
	requireReferenced(t, s, blobOf("dup"), true)
	requireGrant(t, s, "/alice/d/e/f", "bob", false)
	tree, err := s.ListTree(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, []string{"/alice/d-keep", "/bob/x"}, fsPaths(tree))

	// A single file is a tree of one.
	n, purged, err = s.DeleteTree(ctx, "/alice/d-keep")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{blobOf("dup")}, purged)

	// A home is emptied but still exists; an empty home is fine.
	n, purged, err = s.DeleteTree(ctx, "/bob")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{blobOf("x")}, purged)
	_, err = s.GetEntry(ctx, "/bob")
	require.NoError(t, err)
	n, purged, err = s.DeleteTree(ctx, "/carol")
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, purged)

	errTests := []struct {
		name string
		path string
		want error
	}{
		{"absent", "/alice/nope", store.ErrNotFound},
		{"home of no member", "/dave", store.ErrNotFound},
		{"root", "/", store.ErrPrecondition},
		{"unclean", "/alice/../bob", store.ErrPrecondition},
	}
	for _, tc := range errTests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.DeleteTree(t.Context(), tc.path)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func testFsDeleteTreeDepartedMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "alicex")
	mustCreateEntries(t, s, fsDir("alice", "/alice/d"), fsFile("alice", "/alice/d/f", "f"),
		fsFile("alicex", "/alicex/f", "x"))
	require.NoError(t, s.DeleteMember(ctx, "alice"))

	// A member's files go with the member, so a re-created name starts with
	// an empty home; a name that merely starts the same keeps its files.
	_, err := s.GetEntry(ctx, "/alice")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetEntry(ctx, "/alice/d/f")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.GetEntry(ctx, "/alicex/f")
	require.NoError(t, err)
	ref, err := s.BlobReferenced(ctx, blobOf("f"))
	require.NoError(t, err)
	require.False(t, ref, "the departed member's blob is left for the sweep")
	mustPutMembers(t, s, "alice")
	entries, err := s.ListDir(ctx, "/alice", store.Page{})
	require.NoError(t, err)
	require.Empty(t, entries)
	_, _, err = s.DeleteTree(ctx, "/nobody")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func testFsMoveEntry(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	orig := mustCreateEntries(t, s, fsDir("alice", "/alice/d"), fsFile("alice", "/alice/f", "content"))[1]
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/f"}, []string{"carol"}))

	got, err := s.MoveEntry(ctx, store.FsMove{From: "/alice/f", To: "/alice/d/g", UpdatedAt: at(time.Hour)})
	require.NoError(t, err)
	want := orig
	want.Path, want.UpdatedAt = "/alice/d/g", at(time.Hour)
	require.Equal(t, viewFsEntry(want), viewFsEntry(got))
	require.Equal(t, orig.ID, got.ID)
	require.Equal(t, "g", got.Name())
	_, err = s.GetEntry(ctx, "/alice/f")
	require.ErrorIs(t, err, store.ErrNotFound)
	stored, err := s.GetEntry(ctx, "/alice/d/g")
	require.NoError(t, err)
	require.Equal(t, orig.ID, stored.ID)
	requireGrant(t, s, "/alice/d/g", "carol", true)
	requireGrant(t, s, "/alice/f", "carol", false)
	requireReferenced(t, s, orig.Blob, true)

	// Across homes with a new owner; a zero time comes from the clock.
	got, err = s.MoveEntry(ctx, store.FsMove{From: "/alice/d/g", To: "/bob/g", Owner: "bob"})
	require.NoError(t, err)
	require.Equal(t, "bob", got.Owner)
	require.Equal(t, "/bob/g", got.Path)
	require.False(t, got.UpdatedAt.IsZero())
	list, err := s.ListDir(ctx, "/bob", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"/bob/g"}, fsPaths(list))
	list, err = s.ListDir(ctx, "/alice/d", store.Page{})
	require.NoError(t, err)
	require.Empty(t, list)

	// The move counted no new reference: one delete purges the blob.
	purged, err := s.DeleteEntry(ctx, "/bob/g")
	require.NoError(t, err)
	require.Equal(t, []string{orig.Blob}, purged)
}

func testFsMoveEntryErrors(t *testing.T, s store.Store) {
	mustPutMembers(t, s, "alice")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsFile("alice", "/alice/f", "f"),
		fsFile("alice", "/alice/g", "g"),
	)
	tests := []struct {
		name     string
		from, to string
		want     error
	}{
		{"absent source", "/alice/nope", "/alice/x", store.ErrNotFound},
		{"target exists", "/alice/f", "/alice/g", store.ErrConflict},
		{"target is a dir", "/alice/f", "/alice/d", store.ErrConflict},
		{"onto itself", "/alice/f", "/alice/f", store.ErrConflict},
		{"directory source", "/alice/d", "/alice/e", store.ErrPrecondition},
		{"home source", "/alice", "/alice/e", store.ErrPrecondition},
		{"target parent missing", "/alice/f", "/alice/nope/f", store.ErrPrecondition},
		{"target parent is a file", "/alice/f", "/alice/g/f", store.ErrPrecondition},
		{"target home of no member", "/alice/f", "/bob/f", store.ErrPrecondition},
		{"target is a home", "/alice/f", "/bob", store.ErrPrecondition},
		{"target unclean", "/alice/f", "/alice/d/../x", store.ErrPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.MoveEntry(t.Context(), store.FsMove{From: tc.from, To: tc.to})
			require.ErrorIs(t, err, tc.want)
		})
	}
	tree, err := s.ListTree(t.Context(), "/")
	require.NoError(t, err)
	require.Equal(t, []string{"/alice/d", "/alice/f", "/alice/g"}, fsPaths(tree))
}

func testFsGrantEntries(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	es := mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsFile("alice", "/alice/a", "a"),
		fsFile("alice", "/alice/b", "b"),
		fsFile("alice", "/alice/pub", "pub"),
		fsFile("alice", "/alice/other", "other"),
		fsFile("alice", "/alice/kept", "kept"),
	)
	d, a, b, pub, kept := es[0], es[1], es[2], es[3], es[5]
	unknown := es[len(es)-1].ID + 1000
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/kept"}, []string{"carol"}))

	// Directory ids, unknown ids and unknown grantees are skipped.
	require.NoError(t, s.GrantEntries(ctx, []int64{a.ID, d.ID, unknown, -1, 0, b.ID}, []string{"bob", "nobody"}))
	// Granting again, or more grantees of a granted file, keeps the grants.
	require.NoError(t, s.GrantEntries(ctx, []int64{a.ID}, []string{"bob"}))
	require.NoError(t, s.GrantEntries(ctx, []int64{kept.ID}, []string{"bob"}))
	require.NoError(t, s.GrantEntries(ctx, []int64{pub.ID}, []string{store.Everyone}))
	require.NoError(t, s.GrantEntries(ctx, nil, []string{"carol"}))
	require.NoError(t, s.GrantEntries(ctx, []int64{a.ID}, nil))

	tests := []struct {
		name   string
		path   string
		member string
		want   bool
	}{
		{"granted", "/alice/a", "bob", true},
		{"granted in the same call", "/alice/b", "bob", true},
		{"not granted to others", "/alice/a", "carol", false},
		{"no id given", "/alice/other", "bob", false},
		{"unknown grantee skipped", "/alice/a", "nobody", false},
		{"directory never granted", "/alice/d", "bob", false},
		{"everyone", "/alice/pub", "carol", true},
		{"everyone includes bob", "/alice/pub", "bob", true},
		{"existing grant kept", "/alice/kept", "carol", true},
		{"added beside an existing grant", "/alice/kept", "bob", true},
		{"nil ids granted nothing", "/alice/other", "carol", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireGrant(t, s, tc.path, tc.member, tc.want)
		})
	}
	shared, err := s.SharedWith(ctx, "bob", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"/alice/a", "/alice/b", "/alice/kept", "/alice/pub"}, fsPaths(shared))

	// Inside a transaction, a file created in it can be granted by its id.
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		e, err := tx.CreateEntry(ctx, fsFile("alice", "/alice/new", "new"))
		if err != nil {
			return err
		}
		return tx.GrantEntries(ctx, []int64{e.ID}, []string{"carol"})
	}))
	requireGrant(t, s, "/alice/new", "carol", true)
	requireGrant(t, s, "/alice/new", "bob", false)
}

// testFsGrantEntriesFollowMove: a grant by id reaches the file that was
// checked wherever it is now, and never a file later written at its old path.
func testFsGrantEntriesFollowMove(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	es := mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsFile("alice", "/alice/before", "before"),
		fsFile("alice", "/alice/after", "after"),
	)
	before, after := es[1], es[2]

	// Granted, then moved: the grant goes with the entry.
	require.NoError(t, s.GrantEntries(ctx, []int64{before.ID}, []string{"bob"}))
	_, err := s.MoveEntry(ctx, store.FsMove{From: "/alice/before", To: "/alice/d/before"})
	require.NoError(t, err)
	// Checked, moved (to another home) and replaced by a new file at the
	// old path, then granted by the id that was checked.
	_, err = s.MoveEntry(ctx, store.FsMove{From: "/alice/after", To: "/carol/after", Owner: "carol"})
	require.NoError(t, err)
	mustCreateEntries(t, s, fsFile("alice", "/alice/before", "new"), fsFile("alice", "/alice/after", "new"))
	require.NoError(t, s.GrantEntries(ctx, []int64{after.ID}, []string{"bob"}))

	tests := []struct {
		name string
		path string
		want bool
	}{
		{"granted then moved", "/alice/d/before", true},
		{"new file at the granted path", "/alice/before", false},
		{"moved then granted", "/carol/after", true},
		{"new file at the checked path", "/alice/after", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireGrant(t, s, tc.path, "bob", tc.want)
		})
	}
	shared, err := s.SharedWith(ctx, "bob", store.Page{})
	require.NoError(t, err)
	require.Equal(t, []string{"/alice/d/before", "/carol/after"}, fsPaths(shared))
}

// testFsGrantEntriesDeletedID: the id of a deleted file names no file ever
// again, so a grant by an attachment's old EntryID reaches nothing, not a
// file created after the delete.
func testFsGrantEntriesDeletedID(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	gone := mustCreateEntries(t, s, fsFile("alice", "/alice/first", "1"), fsFile("alice", "/alice/gone", "gone"))[1]
	_, err := s.DeleteEntry(ctx, "/alice/gone")
	require.NoError(t, err)
	created := mustCreateEntries(t, s, fsFile("carol", "/carol/secret", "secret"), fsFile("alice", "/alice/gone", "again"))
	for _, e := range created {
		require.NotEqual(t, gone.ID, e.ID, "id of a deleted entry reused for %s", e.Path)
	}

	require.NoError(t, s.GrantEntries(ctx, []int64{gone.ID}, []string{"bob"}))
	requireGrant(t, s, "/carol/secret", "bob", false)
	requireGrant(t, s, "/alice/gone", "bob", false)
}

func testFsGrantsGoWithMember(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	mustCreateEntries(t, s, fsFile("alice", "/alice/a", "a"), fsFile("alice", "/alice/pub", "pub"))
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/a"}, []string{"bob", "carol"}))
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/pub"}, []string{store.Everyone}))

	require.NoError(t, s.DeleteMember(ctx, "bob"))
	require.NoError(t, s.ReplaceMembers(ctx, []store.Member{member("alice"), member("bob")}))
	// A re-created bob does not inherit the old bob's grant; carol's went
	// with ReplaceMembers; Everyone grants stay.
	requireGrant(t, s, "/alice/a", "bob", false)
	requireGrant(t, s, "/alice/a", "carol", false)
	requireGrant(t, s, "/alice/pub", "bob", true)
}

func testFsSharedWith(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "alice2", "bob", "carol")
	mustCreateEntries(t, s,
		fsDir("bob", "/bob/d"),
		fsFile("bob", "/bob/d/z", "z"),
		fsFile("bob", "/bob/a", "a"),
		fsFile("bob", "/bob/private", "p"),
		fsFile("alice2", "/alice2/x", "x"),
		fsFile("alice", "/alice/own", "own"),
		fsFile("carol", "/carol/pub", "pub"),
		fsFile("carol", "/carol/to-carol", "c"),
	)
	require.NoError(t, GrantPaths(ctx, s, []string{"/bob/d/z", "/bob/a", "/alice2/x", "/alice/own"}, []string{"alice"}))
	require.NoError(t, GrantPaths(ctx, s, []string{"/carol/pub"}, []string{store.Everyone}))
	require.NoError(t, GrantPaths(ctx, s, []string{"/carol/to-carol"}, []string{"carol"}))

	tests := []struct {
		name   string
		member string
		want   []string
	}{
		{"grants and everyone, own home excluded", "alice", []string{"/alice2/x", "/bob/a", "/bob/d/z", "/carol/pub"}},
		{"only everyone", "bob", []string{"/carol/pub"}},
		{"own everyone file excluded", "carol", []string{}},
		{"unknown member sees everyone files", "dave", []string{"/carol/pub"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.SharedWith(t.Context(), tc.member, store.Page{})
			require.NoError(t, err)
			require.Equal(t, tc.want, fsPaths(got))
			for _, e := range got {
				require.Equal(t, store.FsFile, e.Kind)
				require.NotZero(t, e.ID)
			}
		})
	}
}

// Listings page by the last name (ListDir) or path (SharedWith) seen.
func testFsPages(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol", "dave")
	var files []store.FsEntry
	for _, n := range []string{"a", "b0", "b.txt", "c", "d"} {
		files = append(files, fsFile("alice", "/alice/"+n, n))
	}
	mustCreateEntries(t, s, append(files, fsDir("alice", "/alice/b"), fsDir("alice", "/alice/b/x"), fsFile("alice", "/alice/b/x/y", "y"))...)
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/a", "/alice/b.txt", "/alice/b/x/y", "/alice/d"}, []string{"bob"}))

	tests := []struct {
		name string
		list func(p store.Page) ([]store.FsEntry, error)
		page store.Page
		want []string
	}{
		{"dir, first page", func(p store.Page) ([]store.FsEntry, error) { return s.ListDir(ctx, "/alice", p) }, store.Page{Limit: 2}, []string{"/alice/a", "/alice/b"}},
		{"dir, after a name", func(p store.Page) ([]store.FsEntry, error) { return s.ListDir(ctx, "/alice", p) }, store.Page{After: "b", Limit: 2}, []string{"/alice/b.txt", "/alice/b0"}},
		{"dir, last page", func(p store.Page) ([]store.FsEntry, error) { return s.ListDir(ctx, "/alice", p) }, store.Page{After: "b0", Limit: 5}, []string{"/alice/c", "/alice/d"}},
		{"dir, past the end", func(p store.Page) ([]store.FsEntry, error) { return s.ListDir(ctx, "/alice", p) }, store.Page{After: "z"}, []string{}},
		{"homes, paged", func(p store.Page) ([]store.FsEntry, error) { return s.ListDir(ctx, "/", p) }, store.Page{After: "alice", Limit: 2}, []string{"/bob", "/carol"}},
		{"shared, first page", func(p store.Page) ([]store.FsEntry, error) { return s.SharedWith(ctx, "bob", p) }, store.Page{Limit: 2}, []string{"/alice/a", "/alice/b.txt"}},
		{"shared, after a path", func(p store.Page) ([]store.FsEntry, error) { return s.SharedWith(ctx, "bob", p) }, store.Page{After: "/alice/b.txt"}, []string{"/alice/b/x/y", "/alice/d"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.list(tc.page)
			require.NoError(t, err)
			require.Equal(t, tc.want, fsPaths(got))
		})
	}
}

func testFsSharedBelow(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob", "carol")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsDir("alice", "/alice/d/e"),
		fsFile("alice", "/alice/d/e/f", "f"),
		fsFile("alice", "/alice/d/private", "p"),
		fsFile("alice", "/alice/pub", "pub"),
		fsFile("alice", "/alice/dd", "dd"),
		fsFile("bob", "/bob/mine", "m"),
	)
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/d/e/f", "/bob/mine"}, []string{"bob"}))
	require.NoError(t, GrantPaths(ctx, s, []string{"/alice/pub"}, []string{store.Everyone}))
	tests := []struct {
		member, path string
		want         bool
	}{
		{"bob", "/alice", true},
		{"bob", "/alice/d", true},
		{"bob", "/alice/d/e", true},
		{"bob", "/alice/d/e/f", true},
		{"bob", "/alice/d/private", false},
		{"bob", "/alice/dd", false},
		{"bob", "/alice/pub", true},
		{"bob", "/bob", false}, // his own files are never "shared with" him
		{"carol", "/alice", true},
		{"carol", "/alice/d", false},
		{"carol", "/bob", false},
	}
	for _, tc := range tests {
		t.Run(tc.member+" "+tc.path, func(t *testing.T) {
			got, err := s.SharedBelow(ctx, tc.member, tc.path)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func testFsUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "al", "bob")
	mustCreateEntries(t, s,
		fsDir("alice", "/alice/d"),
		fsFile("alice", "/alice/d/x", "12345"),
		fsFile("alice", "/alice/y", "123"),
		fsFile("alice", "/alice/same", "123"), // the same content counts again
		fsFile("al", "/al/z", "1234567"),
	)
	requireUsage := func(want map[string]int64) {
		t.Helper()
		for member, w := range want {
			got, err := s.Usage(ctx, member)
			require.NoError(t, err)
			require.Equal(t, w, got, member)
		}
	}
	requireUsage(map[string]int64{"alice": 11, "al": 7, "bob": 0, "nobody": 0})

	// Every change keeps it: replace, move within and across homes, delete,
	// delete a tree, a member's files going with the member.
	_, _, err := s.ReplaceFile(ctx, "/alice/y", store.FsContent{Blob: blobOf("1234567890"), Size: 10, MimeType: "text/plain"})
	require.NoError(t, err)
	requireUsage(map[string]int64{"alice": 18})
	_, err = s.MoveEntry(ctx, store.FsMove{From: "/alice/y", To: "/alice/d/y"})
	require.NoError(t, err)
	requireUsage(map[string]int64{"alice": 18})
	_, err = s.MoveEntry(ctx, store.FsMove{From: "/alice/d/y", To: "/bob/y", Owner: "bob"})
	require.NoError(t, err)
	requireUsage(map[string]int64{"alice": 8, "bob": 10})
	_, err = s.DeleteEntry(ctx, "/alice/same")
	require.NoError(t, err)
	requireUsage(map[string]int64{"alice": 5})
	_, _, err = s.DeleteTree(ctx, "/alice/d")
	require.NoError(t, err)
	requireUsage(map[string]int64{"alice": 0, "al": 7, "bob": 10})
	require.NoError(t, s.DeleteMember(ctx, "bob"))
	requireUsage(map[string]int64{"bob": 0})
	rollback := errors.New("roll back")
	require.ErrorIs(t, s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.CreateEntry(ctx, fsFile("al", "/al/w", "12")); err != nil {
			return err
		}
		got, err := tx.Usage(ctx, "al")
		require.NoError(t, err)
		require.Equal(t, int64(9), got, "inside the transaction of the change")
		return rollback
	}), rollback)
	requireUsage(map[string]int64{"al": 7})
}

func testFsWithTxRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice", "bob")
	mustCreateEntries(t, s, fsFile("alice", "/alice/f", "old"))

	var purgedInTx []string
	err := s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.CreateEntry(ctx, fsDir("alice", "/alice/d")); err != nil {
			return err
		}
		if _, err := tx.CreateEntry(ctx, fsFile("alice", "/alice/d/n", "new")); err != nil {
			return err
		}
		var err error
		if _, purgedInTx, err = tx.ReplaceFile(ctx, "/alice/f", store.FsContent{Blob: blobOf("newer"), Size: 5}); err != nil {
			return err
		}
		if err := GrantPaths(ctx, tx, []string{"/alice/f"}, []string{"bob"}); err != nil {
			return err
		}
		// The transaction sees its own writes.
		if ok, err := tx.BlobReferenced(ctx, blobOf("new")); err != nil || !ok {
			return errors.Join(err, errors.New("created blob not referenced inside the transaction"))
		}
		if list, err := tx.ListDir(ctx, "/alice/d", store.Page{}); err != nil || len(list) != 1 {
			return errors.Join(err, errors.New("created file not listed inside the transaction"))
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	require.Equal(t, []string{blobOf("old")}, purgedInTx)

	tree, err := s.ListTree(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, []string{"/alice/f"}, fsPaths(tree))
	require.Equal(t, blobOf("old"), tree[0].Blob)
	requireReferenced(t, s, blobOf("old"), true)
	requireReferenced(t, s, blobOf("new"), false)
	requireReferenced(t, s, blobOf("newer"), false)
	requireGrant(t, s, "/alice/f", "bob", false)
	// The rolled-back replace left the old count alone.
	purged, err := s.DeleteEntry(ctx, "/alice/f")
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("old")}, purged)
}

// testFsWithTxConflictKeepsTx: a create that finds its path taken fails
// alone and the transaction goes on, which is how a service tries a-1.txt,
// a-2.txt, ... in one transaction.
func testFsWithTxConflictKeepsTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	mustCreateEntries(t, s, fsFile("alice", "/alice/a.txt", "a"), fsFile("alice", "/alice/a-1.txt", "b"))

	var placed string
	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		for _, p := range []string{"/alice/a.txt", "/alice/a-1.txt", "/alice/a-2.txt"} {
			_, err := tx.CreateEntry(ctx, fsFile("alice", p, "c"))
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return err
			}
			placed = p
			return nil
		}
		return errors.New("no free name")
	}))
	require.Equal(t, "/alice/a-2.txt", placed)
	// The conflicting attempts counted no references.
	purged, err := s.DeleteEntry(ctx, "/alice/a-2.txt")
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("c")}, purged)
}

// requireInline checks what InlineContent says of content: kept inline
// (want) or not (ErrNotFound).
func requireInline(t *testing.T, s store.FsStore, content string, want bool) {
	t.Helper()
	got, err := s.InlineContent(t.Context(), blobOf(content))
	if !want {
		require.ErrorIs(t, err, store.ErrNotFound, "inline %q", content)
		return
	}
	require.NoError(t, err, "inline %q", content)
	require.Equal(t, []byte(content), got)
}

// testFsInline: content kept inline is read back, is shared by the entries
// of equal content like a blob, survives moves and overwrites of other
// entries, and goes with the last entry that references it.
func testFsInline(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	mustCreateEntries(t, s, fsFile("alice", "/alice/a", "small"), fsFile("alice", "/alice/b", "small"), fsFile("alice", "/alice/disk", "on disk"))
	requireInline(t, s, "small", false)
	require.NoError(t, s.PutInline(ctx, blobOf("small"), []byte("small")))
	requireInline(t, s, "small", true)
	require.NoError(t, s.PutInline(ctx, blobOf("small"), []byte("small")), "putting it again keeps it")
	requireInline(t, s, "small", true)
	requireInline(t, s, "on disk", false)

	empty := fsFile("alice", "/alice/empty", "")
	mustCreateEntries(t, s, empty)
	require.NoError(t, s.PutInline(ctx, blobOf(""), []byte{}))
	got, err := s.InlineContent(ctx, blobOf(""))
	require.NoError(t, err)
	require.Empty(t, got)

	max := string(make([]byte, store.FsInlineMax))
	mustCreateEntries(t, s, fsFile("alice", "/alice/max", max))
	require.NoError(t, s.PutInline(ctx, blobOf(max), []byte(max)))
	requireInline(t, s, max, true)

	_, err = s.MoveEntry(ctx, store.FsMove{From: "/alice/a", To: "/alice/c"})
	require.NoError(t, err)
	requireInline(t, s, "small", true)
	purged, err := s.DeleteEntry(ctx, "/alice/c")
	require.NoError(t, err)
	require.Empty(t, purged)
	requireInline(t, s, "small", true)
	// The last reference goes by an overwrite: the content goes with it.
	_, purged, err = s.ReplaceFile(ctx, "/alice/b", store.FsContent{Blob: blobOf("other"), Size: 5})
	require.NoError(t, err)
	require.Equal(t, []string{blobOf("small")}, purged)
	requireInline(t, s, "small", false)
	// And by a tree removal.
	_, purged, err = s.DeleteTree(ctx, "/alice")
	require.NoError(t, err)
	require.Contains(t, purged, blobOf(max))
	requireInline(t, s, max, false)
	requireInline(t, s, "", false)
}

// testFsInlineRefused: PutInline keeps only content that an entry
// references, of the recorded size, hashing to its name, and no larger
// than store.FsInlineMax; a refusal keeps nothing.
func testFsInlineRefused(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	big := string(make([]byte, store.FsInlineMax+1))
	mustCreateEntries(t, s, fsFile("alice", "/alice/f", "content"), fsFile("alice", "/alice/big", big))
	// An entry recording another size for the same name (no complete write
	// does that; the store still refuses to keep content of another size).
	lying := fsFile("alice", "/alice/lying", "12345")
	lying.Blob = blobOf("1234")
	mustCreateEntries(t, s, lying)
	tests := []struct {
		name string
		sha  string
		data string
		want error
	}{
		{"no entry references it", blobOf("nobody"), "nobody", store.ErrNotFound},
		{"bytes of another name", blobOf("content"), "tampered", store.ErrPrecondition},
		{"not a sha", "not-a-sha", "content", store.ErrPrecondition},
		{"over the inline bound", blobOf(big), big, store.ErrPrecondition},
		{"another size than recorded", blobOf("1234"), "1234", store.ErrPrecondition},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.PutInline(ctx, tc.sha, []byte(tc.data)), tc.want)
			_, err := s.InlineContent(ctx, tc.sha)
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}

// testFsInlineWithTx: content put in a transaction that rolls back is not
// kept, and one that commits is seen by the transaction before it does.
func testFsInlineWithTx(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustPutMembers(t, s, "alice")
	err := s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.CreateEntry(ctx, fsFile("alice", "/alice/f", "rolled back")); err != nil {
			return err
		}
		if err := tx.PutInline(ctx, blobOf("rolled back"), []byte("rolled back")); err != nil {
			return err
		}
		if _, err := tx.InlineContent(ctx, blobOf("rolled back")); err != nil {
			return errors.Join(err, errors.New("inline content not seen inside its transaction"))
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	requireInline(t, s, "rolled back", false)
	_, err = s.GetEntry(ctx, "/alice/f")
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, s.WithTx(ctx, func(tx store.Tx) error {
		if _, err := tx.CreateEntry(ctx, fsFile("alice", "/alice/f", "committed")); err != nil {
			return err
		}
		return tx.PutInline(ctx, blobOf("committed"), []byte("committed"))
	}))
	requireInline(t, s, "committed", true)
}
