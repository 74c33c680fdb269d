package vfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// MustOpenBlobs opens a blob store in a fresh temp directory.
func MustOpenBlobs(tb testing.TB) *Blobs {
	tb.Helper()
	b, err := Open(filepath.Join(tb.TempDir(), "files"))
	require.NoError(tb, err)
	return b
}

func shaOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// mustPut puts content and unlocks at once.
func mustPut(tb testing.TB, b *Blobs, content string) string {
	tb.Helper()
	placed, err := b.Put(context.Background(), strings.NewReader(content), -1)
	require.NoError(tb, err)
	placed.Unlock()
	return placed.SHA
}

func readBlob(tb testing.TB, b *Blobs, sha string) string {
	tb.Helper()
	f, err := b.Open(sha)
	require.NoError(tb, err)
	defer f.Close()
	data, err := io.ReadAll(f)
	require.NoError(tb, err)
	return string(data)
}

// files lists every regular file under b's root, relative to it.
func files(tb testing.TB, b *Blobs) []string {
	tb.Helper()
	var out []string
	require.NoError(tb, filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(b.root, p)
		out = append(out, filepath.ToSlash(rel))
		return err
	}))
	return out
}

func blobFile(sha string) string { return "blobs/" + sha[:2] + "/" + sha }

// refs is a stand-in for the store's reference counts.
type refs struct {
	mu sync.Mutex
	n  map[string]int
}

func newRefs() *refs { return &refs{n: map[string]int{}} }

func (r *refs) add(sha string, d int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[sha] += d
	return r.n[sha]
}

func (r *refs) referenced(_ context.Context, sha string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[sha] > 0, nil
}

func TestOpenModes(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "files")
	_, err := Open(root)
	require.NoError(t, err)
	for _, dir := range []string{root, filepath.Join(root, "blobs"), filepath.Join(root, "tmp")} {
		fi, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, fs.ModeDir|0o700, fi.Mode(), dir)
	}

	// An existing root with looser modes is tightened; opening twice works.
	loose := filepath.Join(t.TempDir(), "loose")
	require.NoError(t, os.MkdirAll(loose, 0o755))
	require.NoError(t, os.Chmod(loose, 0o755))
	for range 2 {
		_, err := Open(loose)
		require.NoError(t, err)
	}
	fi, err := os.Stat(loose)
	require.NoError(t, err)
	require.Equal(t, fs.ModeDir|0o700, fi.Mode())

	// A root that is a file cannot be opened.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = Open(file)
	require.Error(t, err)
}

func TestPutOpen(t *testing.T) {
	tests := []struct {
		name    string
		content string
	}{
		{"empty", ""},
		{"small", "hello"},
		{"binary", "\x00\xff\x01"},
		{"larger than a read", strings.Repeat("0123456789abcdef", copyBufSize/8)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := MustOpenBlobs(t)
			placed, err := b.Put(t.Context(), strings.NewReader(tc.content), int64(len(tc.content)))
			require.NoError(t, err)
			placed.Unlock()
			placed.Unlock() // idempotent
			require.Equal(t, shaOf(tc.content), placed.SHA)
			require.Equal(t, int64(len(tc.content)), placed.Size)
			require.Equal(t, tc.content, readBlob(t, b, placed.SHA))
			require.Equal(t, []string{blobFile(placed.SHA)}, files(t, b))

			fi, err := os.Stat(filepath.Join(b.root, blobFile(placed.SHA)))
			require.NoError(t, err)
			require.Equal(t, fs.FileMode(0o600), fi.Mode())
			fi, err = os.Stat(filepath.Join(b.root, "blobs", placed.SHA[:2]))
			require.NoError(t, err)
			require.Equal(t, fs.ModeDir|0o700, fi.Mode())
		})
	}
}

func TestPutDedup(t *testing.T) {
	b := MustOpenBlobs(t)
	a1 := mustPut(t, b, "same")
	a2 := mustPut(t, b, "same")
	other := mustPut(t, b, "other")
	require.Equal(t, a1, a2)
	require.ElementsMatch(t, []string{blobFile(a1), blobFile(other)}, files(t, b))
}

func TestPutRepairsWrongSize(t *testing.T) {
	b := MustOpenBlobs(t)
	sha := shaOf("full content")
	p := filepath.Join(b.root, blobFile(sha))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte("full"), 0o600))

	require.Equal(t, sha, mustPut(t, b, "full content"))
	require.Equal(t, "full content", readBlob(t, b, sha))
	require.Equal(t, []string{blobFile(sha)}, files(t, b))
}

func TestPutLimit(t *testing.T) {
	tests := []struct {
		name    string
		content string
		limit   int64
		wantErr error
	}{
		{"at limit", "12345", 5, nil},
		{"one over", "123456", 5, ErrTooLarge},
		{"far over", strings.Repeat("x", 3*copyBufSize), 10, ErrTooLarge},
		{"zero limit allows empty", "", 0, nil},
		{"zero limit refuses a byte", "x", 0, ErrTooLarge},
		{"negative is no limit", strings.Repeat("x", 3*copyBufSize), -1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := MustOpenBlobs(t)
			placed, err := b.Put(t.Context(), strings.NewReader(tc.content), tc.limit)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Empty(t, files(t, b), "nothing left behind")
				requireUnlocked(t, b)
				return
			}
			require.NoError(t, err)
			placed.Unlock()
			require.Equal(t, []string{blobFile(shaOf(tc.content))}, files(t, b))
		})
	}
}

func TestPutReaderErrors(t *testing.T) {
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		r    io.Reader
		want error
	}{
		{"reader fails", context.Background(), io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(boom)), boom},
		{"cancelled", cancelled, strings.NewReader("data"), context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := MustOpenBlobs(t)
			_, err := b.Put(tc.ctx, tc.r, -1)
			require.ErrorIs(t, err, tc.want)
			require.Empty(t, files(t, b))
			requireUnlocked(t, b)
		})
	}
}

func TestInvalidSHA(t *testing.T) {
	b := MustOpenBlobs(t)
	for _, sha := range []string{"", "../../etc/passwd", strings.ToUpper(shaOf("x")), shaOf("x")[:63], shaOf("x") + "0", "../" + shaOf("x")[3:]} {
		_, err := b.Open(sha)
		require.ErrorIs(t, err, ErrInvalidSHA, sha)
		require.ErrorIs(t, b.Remove(sha), ErrInvalidSHA, sha)
		_, err = b.Purge(t.Context(), sha, newRefs().referenced)
		require.ErrorIs(t, err, ErrInvalidSHA, sha)
	}
}

func TestOpenRemoveAbsent(t *testing.T) {
	b := MustOpenBlobs(t)
	_, err := b.Open(shaOf("nope"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, b.Remove(shaOf("nope")))
}

func TestRemoveKeepsOpenReaders(t *testing.T) {
	b := MustOpenBlobs(t)
	sha := mustPut(t, b, "content")
	f, err := b.Open(sha)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, b.Remove(sha))
	data, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, "content", string(data))
	_, err = b.Open(sha)
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestPurge(t *testing.T) {
	b := MustOpenBlobs(t)
	r := newRefs()
	kept := mustPut(t, b, "kept")
	gone := mustPut(t, b, "gone")
	r.add(kept, 1)

	removed, err := b.Purge(t.Context(), kept, r.referenced)
	require.NoError(t, err)
	require.False(t, removed)
	removed, err = b.Purge(t.Context(), gone, r.referenced)
	require.NoError(t, err)
	require.True(t, removed)
	removed, err = b.Purge(t.Context(), gone, r.referenced)
	require.NoError(t, err)
	require.False(t, removed, "already gone")
	require.Equal(t, []string{blobFile(kept)}, files(t, b))

	boom := errors.New("db down")
	_, err = b.Purge(t.Context(), kept, func(context.Context, string) (bool, error) { return false, boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{blobFile(kept)}, files(t, b), "kept when the check fails")
	requireUnlocked(t, b)
}

func TestSweep(t *testing.T) {
	b := MustOpenBlobs(t)
	r := newRefs()
	live := mustPut(t, b, "live")
	orphan := mustPut(t, b, "orphan")
	r.add(live, 1)

	// What a crash leaves: half-written temp files; plus strays.
	write := func(rel string) {
		p := filepath.Join(b.root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("junk"), 0o600))
	}
	write("tmp/put-123")
	write("tmp/dir/nested")
	write("blobs/" + live[:2] + "/not-a-sha")
	write("blobs/zz/" + shaOf("zz"))
	write("blobs/stray-file")
	misplaced := shaOf("misplaced")
	other := "00"
	if misplaced[:2] == other {
		other = "01"
	}
	write("blobs/" + other + "/" + misplaced)

	n, err := b.Sweep(t.Context(), r.referenced, 16)
	require.NoError(t, err)
	require.Equal(t, 7, n)
	require.Equal(t, []string{blobFile(live)}, files(t, b))
	_, err = b.Open(orphan)
	require.ErrorIs(t, err, fs.ErrNotExist)

	// Nothing left to do.
	n, err = b.Sweep(t.Context(), r.referenced, 16)
	require.NoError(t, err)
	require.Zero(t, n)

	boom := errors.New("db down")
	_, err = b.Sweep(t.Context(), func(context.Context, string) (bool, error) { return false, boom }, 16)
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{blobFile(live)}, files(t, b))

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = b.Sweep(cancelled, r.referenced, 16)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{blobFile(live)}, files(t, b))
}

// TestSweepBound: past its bound Sweep deletes nothing under blobs (a
// wrong database makes every blob look unreferenced), says how much it
// kept, and still removes temp files; at the bound, or unbounded, it
// deletes.
func TestSweepBound(t *testing.T) {
	tests := []struct {
		name      string
		orphans   int
		limit     int
		wantErr   bool
		wantFiles int // under blobs, after
	}{
		{name: "none", orphans: 0, limit: 0, wantFiles: 1},
		{name: "at the bound", orphans: 3, limit: 3, wantFiles: 1},
		{name: "one past the bound", orphans: 4, limit: 3, wantErr: true, wantFiles: 5},
		{name: "zero bound", orphans: 1, limit: 0, wantErr: true, wantFiles: 2},
		{name: "unbounded", orphans: 40, limit: -1, wantFiles: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := MustOpenBlobs(t)
			r := newRefs()
			r.add(mustPut(t, b, "live"), 1)
			var size int64
			for i := range tc.orphans {
				c := fmt.Sprintf("orphan %d", i)
				mustPut(t, b, c)
				size += int64(len(c))
			}
			require.NoError(t, os.WriteFile(filepath.Join(b.root, "tmp", "put-1"), []byte("junk"), 0o600))

			n, err := b.Sweep(t.Context(), r.referenced, tc.limit)
			var ue *UnreferencedError
			if tc.wantErr {
				require.ErrorAs(t, err, &ue)
				require.Equal(t, UnreferencedError{Count: tc.orphans, Bytes: size, Max: tc.limit}, *ue)
				require.Equal(t, 1, n, "the temp file goes all the same")
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.orphans+1, n)
			}
			got, err := CountBlobs(b.root)
			require.NoError(t, err)
			require.Equal(t, tc.wantFiles, got)
			require.Len(t, files(t, b), tc.wantFiles, "no temp file left")
		})
	}
}

func TestCountBlobs(t *testing.T) {
	n, err := CountBlobs(filepath.Join(t.TempDir(), "absent"))
	require.NoError(t, err)
	require.Zero(t, n, "no files root is no blob")
	b := MustOpenBlobs(t)
	n, err = CountBlobs(b.root)
	require.NoError(t, err)
	require.Zero(t, n)
	mustPut(t, b, "a")
	mustPut(t, b, "b")
	require.NoError(t, os.WriteFile(filepath.Join(b.root, "blobs", "stray"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(b.root, "tmp", "put-1"), []byte("x"), 0o600))
	n, err = CountBlobs(b.root)
	require.NoError(t, err)
	require.Equal(t, 3, n, "every file under blobs, strays too; temp files are not data")
}

// TestSweepKeepsRunningPut: a sweep while an upload streams leaves its temp
// file alone, and the upload completes.
func TestSweepKeepsRunningPut(t *testing.T) {
	b := MustOpenBlobs(t)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	var placed Placed
	go func() {
		var err error
		placed, err = b.Put(context.Background(), pr, -1)
		done <- err
	}()
	_, err := pw.Write([]byte("first half "))
	require.NoError(t, err)
	// The write returned, so Put has read it: its temp file exists.
	require.Len(t, files(t, b), 1)

	n, err := b.Sweep(t.Context(), newRefs().referenced, 16)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = pw.Write([]byte("second half"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	require.NoError(t, <-done)
	placed.Unlock()
	require.Equal(t, "first half second half", readBlob(t, b, placed.SHA))
	require.Equal(t, []string{blobFile(placed.SHA)}, files(t, b))
}

// TestPutHoldsLock: Put returns with the sha locked, so a purge waits for
// the writer's transaction and then sees its reference.
func TestPutHoldsLock(t *testing.T) {
	b := MustOpenBlobs(t)
	r := newRefs()
	placed, err := b.Put(t.Context(), strings.NewReader("x"), -1)
	require.NoError(t, err)

	purged := make(chan bool, 1)
	go func() {
		removed, err := b.Purge(context.Background(), placed.SHA, r.referenced)
		if err != nil {
			panic(err)
		}
		purged <- removed
	}()
	// The purger is blocked on the lock until the "transaction" commits.
	waitForLockUsers(t, b, placed.SHA, 2)
	r.add(placed.SHA, 1)
	placed.Unlock()
	require.False(t, <-purged)
	require.Equal(t, "x", readBlob(t, b, placed.SHA))
	requireUnlocked(t, b)
}

// TestPutReplacesPurged: a purge between two writers' Puts removes the file;
// the next Put of the same content places it again.
func TestPutReplacesPurged(t *testing.T) {
	b := MustOpenBlobs(t)
	r := newRefs()
	sha := mustPut(t, b, "again")
	removed, err := b.Purge(t.Context(), sha, r.referenced)
	require.NoError(t, err)
	require.True(t, removed)
	require.Equal(t, sha, mustPut(t, b, "again"))
	require.Equal(t, "again", readBlob(t, b, sha))
}

// TestConcurrentWritersAndPurgers runs the protocol of Blobs from many
// goroutines over a few shared contents: whoever holds a reference can
// always read its blob, and when every reference is gone so is every file.
func TestConcurrentWritersAndPurgers(t *testing.T) {
	b := MustOpenBlobs(t)
	r := newRefs()
	contents := []string{"alpha", "beta", "gamma"}
	const workers, rounds = 8, 150

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				content := contents[(w+i)%len(contents)]
				// Writer: Put, reference in the "transaction", unlock.
				placed, err := b.Put(context.Background(), strings.NewReader(content), -1)
				if err != nil {
					errs <- err
					return
				}
				r.add(placed.SHA, 1)
				placed.Unlock()

				// Holding a reference, the content is there.
				f, err := b.Open(placed.SHA)
				if err != nil {
					errs <- fmt.Errorf("referenced blob missing: %w", err)
					return
				}
				data, err := io.ReadAll(f)
				_ = f.Close()
				if err != nil || !bytes.Equal(data, []byte(content)) {
					errs <- fmt.Errorf("read %q: %v", data, err)
					return
				}

				// Purger: drop the reference ("commit"), then purge at zero.
				if r.add(placed.SHA, -1) == 0 {
					if _, err := b.Purge(context.Background(), placed.SHA, r.referenced); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Empty(t, files(t, b))
	requireUnlocked(t, b)
}

func TestLockExcludes(t *testing.T) {
	b := MustOpenBlobs(t)
	sha := shaOf("x")
	var (
		wg      sync.WaitGroup
		inside  int
		maxSeen int
		mu      sync.Mutex
	)
	for range 16 {
		wg.Go(func() {
			for range 50 {
				unlock := b.Lock(sha)
				mu.Lock()
				inside++
				maxSeen = max(maxSeen, inside)
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				unlock()
				unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, maxSeen)
	requireUnlocked(t, b)

	// Different shas do not wait for each other.
	u1 := b.Lock(shaOf("a"))
	u2 := b.Lock(shaOf("b"))
	u1()
	u2()
	requireUnlocked(t, b)
}

// requireUnlocked checks that no lock is held or waited for.
func requireUnlocked(t *testing.T, b *Blobs) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(t, b.locks)
	require.Empty(t, b.inflight)
}

// waitForLockUsers waits until n goroutines hold or wait for sha's lock.
func waitForLockUsers(t *testing.T, b *Blobs, sha string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		l := b.locks[sha]
		return l != nil && l.users == n
	}, 5*time.Second, time.Millisecond)
}
