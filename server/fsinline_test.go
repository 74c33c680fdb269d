package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	apiv1 "svc/gen/svc/v1"
	"svc/server/apierr"
	"svc/server/vfs"
	"svc/store"
)

// shaOf is the hex SHA-256 of data, the name of its content.
func shaOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readAll reads the file at p as alice.
func (e *fsEnv) readAll(t *testing.T, p string) (store.FsEntry, []byte) {
	t.Helper()
	entry, f, err := e.fs.Read(context.Background(), e.principal("alice"), p)
	require.NoError(t, err, "read %s", p)
	got, err := io.ReadAll(f)
	require.NoError(t, err, "read %s", p)
	require.NoError(t, f.Close())
	return entry, got
}

// TestSmallFilesAreInline: a file of at most store.FsInlineMax bytes is
// kept in the store with its entry, no blob file; one byte more is a blob
// on disk as before. Declared or not, in one read or a byte at a time,
// the entry and the bytes read back are the same either way.
func TestSmallFilesAreInline(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		declared bool
		oneByte  bool // the body gives one byte per read
		inline   bool
	}{
		{"empty", 0, false, false, true},
		{"empty, declared", 0, true, false, true},
		{"one byte", 1, false, false, true},
		{"4 KiB, declared", 4 << 10, true, false, true},
		{"4 KiB, a byte a read", 4 << 10, false, true, true},
		{"at the bound", store.FsInlineMax, false, false, true},
		{"at the bound, declared", store.FsInlineMax, true, false, true},
		{"one over the bound", store.FsInlineMax + 1, false, false, false},
		{"one over the bound, declared", store.FsInlineMax + 1, true, false, false},
		{"one over the bound, a byte a read", store.FsInlineMax + 1, false, true, false},
		{"1 MiB", 1 << 20, false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newFsEnv(t, "", 4<<20)
			data := bytes.Repeat([]byte("0123456789abcdef"), tc.size/16+1)[:tc.size]
			w := FileWrite{Path: "/alice/d/f.bin", Body: bytes.NewReader(data), Size: -1}
			if tc.declared {
				w.Size = int64(tc.size)
			}
			if tc.oneByte {
				w.Body = iotest.OneByteReader(w.Body)
			}
			out, _, err := e.fs.Write(context.Background(), e.principal("alice"), w)
			require.NoError(t, err)
			require.Equal(t, shaOf(data), out.Blob)
			require.EqualValues(t, tc.size, out.Size)

			wantDisk, wantInline := 1, 0
			if tc.inline {
				wantDisk, wantInline = 0, 1
			}
			require.Equal(t, wantDisk, e.blobFiles(t), "blob files")
			require.Equal(t, wantInline, e.inlineContents(t), "inline contents")
			entry, got := e.readAll(t, "/alice/d/f.bin")
			require.Equal(t, out, entry)
			require.True(t, bytes.Equal(data, got), "read back %d bytes of %d", len(got), len(data))
			usage, err := e.st.Usage(context.Background(), "alice")
			require.NoError(t, err)
			require.EqualValues(t, tc.size, usage, "the quota counts it either way")

			_, err = e.fs.Remove(e.ctx("alice"), &apiv1.RemoveRequest{Path: "/alice/d/f.bin"})
			require.NoError(t, err)
			require.Equal(t, 0, e.storedContents(t))
			require.Equal(t, 0, e.blobFiles(t))
		})
	}
}

// writeLegacy stores data at p as a broker before inline storage did: a
// blob file, then the entry that references it.
func (e *fsEnv) writeLegacy(t *testing.T, p string, data []byte) store.FsEntry {
	t.Helper()
	ctx := context.Background()
	placed, err := e.fs.blobs.Put(ctx, bytes.NewReader(data), -1)
	require.NoError(t, err)
	defer placed.Unlock()
	out, err := e.st.CreateEntry(ctx, store.FsEntry{Path: p, Owner: "alice", Kind: store.FsFile, Size: placed.Size, MimeType: "application/octet-stream", Blob: placed.SHA})
	require.NoError(t, err)
	return out
}

// TestSmallBlobsOnDiskStayReadable: small files written before inline
// storage (blob files) read as before and read alike with the same
// content written now (inline); writing that content again keeps it
// readable, and the blob file goes once no entry references it.
func TestSmallBlobsOnDiskStayReadable(t *testing.T) {
	e := newFsEnv(t, "", 1<<20)
	data := []byte("written by the broker before the upgrade")
	old := e.writeLegacy(t, "/alice/old.txt", data)
	require.Equal(t, 1, e.blobFiles(t))
	require.Equal(t, 0, e.inlineContents(t))

	entry, got := e.readAll(t, "/alice/old.txt")
	require.Equal(t, old, entry)
	require.Equal(t, data, got)

	// The same bytes written now: inline, read alike.
	now := e.write(t, "alice", "/alice/now.txt", data)
	require.Equal(t, old.Blob, now.Blob)
	require.Equal(t, old.Size, now.Size)
	for _, p := range []string{"/alice/old.txt", "/alice/now.txt"} {
		_, got := e.readAll(t, p)
		require.Equal(t, data, got, p)
	}
	// Other content over the old file, then the last entry of the old
	// content: the blob file is purged.
	_, _, err := e.fs.Write(context.Background(), e.principal("alice"), FileWrite{Path: "/alice/old.txt", Collide: CollideOverwrite, Body: strings.NewReader("new"), Size: -1})
	require.NoError(t, err)
	_, got = e.readAll(t, "/alice/old.txt")
	require.Equal(t, []byte("new"), got)
	_, got = e.readAll(t, "/alice/now.txt")
	require.Equal(t, data, got)
	_, err = e.fs.Remove(e.ctx("alice"), &apiv1.RemoveRequest{Path: "/alice/now.txt"})
	require.NoError(t, err)
	require.Equal(t, 0, e.blobFiles(t), "the old blob file goes with its last entry")
	require.Equal(t, 1, e.inlineContents(t), "only the new content is left")
}

// TestOverwriteAcrossTheBound: overwriting a small file with a large one
// and back keeps exactly the current content, wherever it is kept.
func TestOverwriteAcrossTheBound(t *testing.T) {
	e := newFsEnv(t, "", 1<<20)
	small := []byte("small")
	large := bytes.Repeat([]byte("L"), store.FsInlineMax+10)
	for i, data := range [][]byte{small, large, small, large} {
		_, _, err := e.fs.Write(context.Background(), e.principal("alice"), FileWrite{Path: "/alice/f", Collide: CollideOverwrite, Body: bytes.NewReader(data), Size: -1})
		require.NoError(t, err, "write %d", i)
		_, got := e.readAll(t, "/alice/f")
		require.Equal(t, data, got, "write %d", i)
		require.Equal(t, 1, e.storedContents(t), "write %d", i)
	}
}

// refusingReader gives some bytes, then refuses the client, as the
// gateway's slow-body guard does.
type refusingReader struct{ n int }

func (r *refusingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, apierr.Errorf(apierr.CodeRateLimited, "the body came too slowly")
	}
	k := min(r.n, len(p))
	r.n -= k
	return k, nil
}

// TestSmallWriteRefusals: a small body that fails while being read is
// answered as a streamed one is (the reader's refusal, a cancellation, a
// body cut short, another failure) and keeps nothing; a body over what
// the quota or file limit leaves is refused as before.
func TestSmallWriteRefusals(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		ctx   context.Context
		body  io.Reader
		size  int64
		code  apierr.Code
		isErr error
	}{
		{name: "reader refuses", ctx: context.Background(), body: &refusingReader{n: 10}, size: -1, code: apierr.CodeRateLimited},
		{name: "cut short", ctx: context.Background(), body: io.MultiReader(strings.NewReader("ab"), errReader{io.ErrUnexpectedEOF}), size: 5, code: apierr.CodeBadRequest},
		{name: "cancelled", ctx: cancelled, body: strings.NewReader("abc"), size: -1, isErr: context.Canceled},
		{name: "disk-like failure", ctx: context.Background(), body: errReader{errors.New("boom")}, size: -1, code: apierr.CodeInternal},
		{name: "over the file limit", ctx: context.Background(), body: strings.NewReader(strings.Repeat("x", 101)), size: -1, code: apierr.CodePayloadTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newFsEnv(t, "", 100)
			_, _, err := e.fs.Write(tc.ctx, e.principal("alice"), FileWrite{Path: "/alice/f", Body: tc.body, Size: tc.size})
			require.Error(t, err)
			if tc.isErr != nil {
				require.ErrorIs(t, err, tc.isErr)
			} else {
				require.Equal(t, tc.code, codeOf(err), "err %v", err)
			}
			require.Equal(t, 0, e.storedContents(t))
			_, err = e.st.GetEntry(context.Background(), "/alice/f")
			require.ErrorIs(t, err, store.ErrNotFound)
		})
	}
}

// TestInlineDamageIsReported: inline content that does not hash to its
// name is reported as damaged blob files are (vfs.ReadInline).
func TestInlineDamageIsReported(t *testing.T) {
	data := []byte("0123456789")
	r, err := vfs.ReadInline(shaOf(data), 10, []byte("0123456788"))
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	var de *vfs.DamageError
	require.ErrorAs(t, err, &de)
	require.Equal(t, vfs.DamageHash, de.Kind)
	_, err = vfs.ReadInline(shaOf(data), 11, data)
	require.ErrorAs(t, err, &de)
	require.Equal(t, vfs.DamageSize, de.Kind)
	r, err = vfs.ReadInline(shaOf(data), 10, data)
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// FuzzReadSmall: whatever the body and however it is cut into reads,
// readSmall reports it whole exactly when it holds at most max bytes, and
// what it read followed by what is left is the body.
func FuzzReadSmall(f *testing.F) {
	f.Add([]byte("hello"), uint16(16), int16(-1), uint8(0))
	f.Add([]byte("hello"), uint16(5), int16(5), uint8(1))
	f.Add([]byte("hello!"), uint16(5), int16(3), uint8(2))
	f.Add([]byte{}, uint16(0), int16(0), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, max uint16, declared int16, chunk uint8) {
		var r io.Reader = bytes.NewReader(data)
		switch chunk % 3 {
		case 1:
			r = iotest.OneByteReader(r)
		case 2:
			r = iotest.DataErrReader(r)
		}
		head, whole, err := readSmall(context.Background(), r, int64(max), int64(declared))
		require.NoError(t, err)
		require.Equal(t, len(data) <= int(max), whole)
		if whole {
			require.Equal(t, data, append([]byte{}, head...))
			return
		}
		require.Greater(t, len(head), int(max))
		rest, err := io.ReadAll(r)
		require.NoError(t, err)
		require.Equal(t, data, append(append([]byte{}, head...), rest...))
	})
}
