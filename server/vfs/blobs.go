package vfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"svc/store"
)

// Errors of the blob store.
var (
	// ErrTooLarge means Put read more than its limit.
	ErrTooLarge = errors.New("content too large")
	// ErrInvalidSHA means a blob name is not a lowercase hex SHA-256.
	ErrInvalidSHA = errors.New("invalid blob sha")
)

const (
	blobsDir = "blobs"
	tmpDir   = "tmp"
	// copyBufSize is Put's read size.
	copyBufSize = 64 << 10
)

// Blobs is the content-addressed blob store under one root directory:
// root/blobs/<sha[0:2]>/<sha> holds the content whose hex SHA-256 is sha,
// root/tmp holds uploads in flight. Files are 0600, directories 0700.
//
// One process owns a root at a time. The database, not the disk, says
// which blobs are live (store.FsStore counts references); the disk only
// ever holds complete blobs, because Put writes to tmp, fsyncs, and renames.
//
// # Locking protocol
//
// Each sha has an in-process lock so that a writer that references a blob
// and a purger that removes it cannot interleave:
//
//   - Writer: placed, err := Put(...) returns with the sha locked, the
//     content in place (written, or already there); run the transaction
//     that references placed.SHA (store CreateEntry/ReplaceFile); after it
//     commits or rolls back, placed.Unlock(). If it rolled back, Purge the
//     sha: the content may now be unreferenced.
//   - Purger: after the transaction that returned purged shas has
//     committed, Purge(ctx, sha, store.BlobReferenced) for each: it locks
//     the sha, re-checks the database and removes the file only if nothing
//     references it.
//
// Put places the file under the lock, so a purge that ran just before
// cannot leave the writer's reference pointing at nothing, and a purge
// that runs just after sees the writer's committed reference. Lock order
// is sha lock, then database: never call Put, Lock or Purge inside a
// transaction (in-memory SQLite has one connection, and a writer holding
// it while waiting for a sha lock would deadlock with a purger that holds
// the lock and waits to read), and hold at most one sha lock at a time.
type Blobs struct {
	root string

	mu       sync.Mutex
	locks    map[string]*shaLock // sha -> lock, while anyone holds or waits
	inflight map[string]struct{} // temp files of running Puts, kept by Sweep

	health putHealth // verify.go
}

type shaLock struct {
	mu    sync.Mutex
	users int // holders and waiters; guarded by Blobs.mu
}

// Placed is a blob that Put has placed on disk, with its sha still locked.
type Placed struct {
	SHA    string // hex SHA-256 of the content
	Size   int64  // bytes
	unlock func()
}

// Unlock releases the sha's lock. Call it once the transaction that
// references the blob has ended; calling it again does nothing.
func (p Placed) Unlock() {
	if p.unlock != nil {
		p.unlock()
	}
}

// Open opens the blob store at root, creating root, root/blobs and
// root/tmp with mode 0700 when missing and setting that mode when not.
func Open(root string) (*Blobs, error) {
	for _, dir := range []string{root, filepath.Join(root, blobsDir), filepath.Join(root, tmpDir)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open blobs: %w", err)
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open blobs: %w", err)
		}
	}
	b := &Blobs{root: root, locks: map[string]*shaLock{}, inflight: map[string]struct{}{}}
	b.health.failing.What = "file writes"
	return b, nil
}

// Lock locks sha in this process and returns the function that unlocks it
// (idempotent). See the protocol on Blobs.
func (b *Blobs) Lock(sha string) (unlock func()) {
	b.mu.Lock()
	l := b.locks[sha]
	if l == nil {
		l = &shaLock{}
		b.locks[sha] = l
	}
	l.users++
	b.mu.Unlock()

	l.mu.Lock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Unlock()
			b.mu.Lock()
			if l.users--; l.users == 0 {
				delete(b.locks, sha)
			}
			b.mu.Unlock()
		})
	}
}

// Put streams r into the store and returns the placed blob, its sha
// locked; the caller must call Unlock (see the protocol on Blobs). It
// hashes while writing to a temp file, fails with ErrTooLarge as soon as
// more than limit bytes arrive (a negative limit means none), fsyncs the
// file, then under the sha's lock renames it into place, or drops it when
// the blob already exists, and fsyncs the directory. On any error nothing
// is left behind and nothing is locked. No room on the disk (ENOSPC, a
// quota, a file size limit) is an error wrapping store.ErrStorageFull.
func (b *Blobs) Put(ctx context.Context, r io.Reader, limit int64) (Placed, error) {
	p, err := b.put(ctx, r, limit)
	b.health.put(err)
	if storageFull(err) {
		err = fmt.Errorf("%w: %w", store.ErrStorageFull, err)
	}
	return p, err
}

func (b *Blobs) put(ctx context.Context, r io.Reader, limit int64) (Placed, error) {
	tmp, err := os.CreateTemp(filepath.Join(b.root, tmpDir), "put-*")
	if err != nil {
		return Placed{}, fmt.Errorf("put blob: %w", err)
	}
	name := tmp.Name()
	b.mu.Lock()
	b.inflight[name] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.inflight, name)
		b.mu.Unlock()
	}()

	sha, size, err := fill(ctx, tmp, r, limit)
	if err != nil {
		return Placed{}, errors.Join(fmt.Errorf("put blob: %w", err), os.Remove(name))
	}
	unlock := b.Lock(sha)
	if err := b.place(name, sha, size); err != nil {
		unlock()
		return Placed{}, errors.Join(fmt.Errorf("put blob: %w", err), ignoreNotExist(os.Remove(name)))
	}
	return Placed{SHA: sha, Size: size, unlock: unlock}, nil
}

// fill copies r into f, hashing, then fsyncs and closes f.
func fill(ctx context.Context, f *os.File, r io.Reader, limit int64) (sha string, size int64, err error) {
	h := sha256.New()
	// Checking ctx before each read stops a stalled or cancelled upload.
	src := io.Reader(readerFunc(func(p []byte) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return r.Read(p)
	}))
	if limit >= 0 {
		src = io.LimitReader(src, limit+1) // one byte more tells "too large"
	}
	size, err = io.CopyBuffer(io.MultiWriter(f, h), src, make([]byte, copyBufSize))
	if err == nil && limit >= 0 && size > limit {
		err = ErrTooLarge
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// place moves the complete temp file into place as sha; the caller holds
// sha's lock. An existing blob of the right size is kept (de-duplication);
// one of the wrong size, which no complete write leaves, is replaced.
func (b *Blobs) place(tmp, sha string, size int64) error {
	dst := b.path(sha)
	shard := filepath.Dir(dst)
	switch err := os.Mkdir(shard, 0o700); {
	case err == nil:
		if err := syncDir(filepath.Dir(shard)); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		return os.Remove(tmp)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(shard)
}

// Open opens the blob sha for reading. An absent blob gives an error
// wrapping fs.ErrNotExist.
func (b *Blobs) Open(sha string) (*os.File, error) {
	if !validSHA(sha) {
		return nil, fmt.Errorf("open blob %q: %w", sha, ErrInvalidSHA)
	}
	f, err := os.Open(b.path(sha))
	if err != nil {
		return nil, fmt.Errorf("open blob: %w", err)
	}
	return f, nil
}

// Remove deletes the blob sha; an absent blob is not an error. The caller
// holds sha's lock and has checked that nothing references it; Purge does
// both. Readers that opened the blob before keep reading it.
func (b *Blobs) Remove(sha string) error {
	if !validSHA(sha) {
		return fmt.Errorf("remove blob %q: %w", sha, ErrInvalidSHA)
	}
	if err := ignoreNotExist(os.Remove(b.path(sha))); err != nil {
		return fmt.Errorf("remove blob: %w", err)
	}
	return nil
}

// Purge removes the blob sha unless referenced reports it in use, holding
// sha's lock across the check and the removal; it reports whether it
// removed the file. referenced is usually a store's BlobReferenced. Call it
// outside any transaction, after the one that dropped the reference has
// committed.
func (b *Blobs) Purge(ctx context.Context, sha string, referenced func(ctx context.Context, sha string) (bool, error)) (bool, error) {
	if !validSHA(sha) {
		return false, fmt.Errorf("purge blob %q: %w", sha, ErrInvalidSHA)
	}
	unlock := b.Lock(sha)
	defer unlock()
	used, err := referenced(ctx, sha)
	if err != nil {
		return false, fmt.Errorf("purge blob: %w", err)
	}
	if used {
		return false, nil
	}
	if _, err := os.Lstat(b.path(sha)); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return true, b.Remove(sha)
}

// UnreferencedError is Sweep's refusal: more files under blobs than it
// may delete unasked are unknown to the database. That is what a wrong
// or empty database looks like, so nothing was deleted; an operator who
// knows the database is right deletes them on purpose (svc files sweep).
type UnreferencedError struct {
	Count int   // unreferenced blobs and strays
	Bytes int64 // their size
	Max   int   // what Sweep may delete unasked
}

func (e *UnreferencedError) Error() string {
	return fmt.Sprintf("%d files under blobs (%d bytes) are referenced by no file entry, more than the %d a sweep deletes unasked", e.Count, e.Bytes, e.Max)
}

// Sweep makes the disk agree with the database, typically at boot: it
// deletes every temp file (except those of Puts running now), every file
// under blobs that is not named like a blob, and every blob referenced
// does not report in use (each through Purge, so Sweep is safe alongside
// writers that follow the protocol). It returns how many files it removed.
//
// limit bounds what it deletes under blobs: when more than limit files
// there are strays or unreferenced, it deletes none of them and returns an
// *UnreferencedError (temp files still go). A negative limit is no bound.
func (b *Blobs) Sweep(ctx context.Context, referenced func(ctx context.Context, sha string) (bool, error), limit int) (int, error) {
	removed := 0
	tmps, err := os.ReadDir(filepath.Join(b.root, tmpDir))
	if err != nil {
		return removed, fmt.Errorf("sweep blobs: %w", err)
	}
	for _, e := range tmps {
		name := filepath.Join(b.root, tmpDir, e.Name())
		b.mu.Lock()
		_, busy := b.inflight[name]
		b.mu.Unlock()
		if busy {
			continue
		}
		if err := os.RemoveAll(name); err != nil {
			return removed, fmt.Errorf("sweep blobs: %w", err)
		}
		removed++
	}

	strays, orphans, size, err := b.unreferenced(ctx, referenced)
	if err != nil {
		return removed, fmt.Errorf("sweep blobs: %w", err)
	}
	if n := len(strays) + len(orphans); limit >= 0 && n > limit {
		return removed, &UnreferencedError{Count: n, Bytes: size, Max: limit}
	}
	for _, p := range strays {
		if err := os.RemoveAll(p); err != nil {
			return removed, fmt.Errorf("sweep blobs: %w", err)
		}
		removed++
	}
	for _, sha := range orphans {
		if err := ctx.Err(); err != nil {
			return removed, fmt.Errorf("sweep blobs: %w", err)
		}
		gone, err := b.Purge(ctx, sha, referenced)
		if err != nil {
			return removed, fmt.Errorf("sweep blobs: %w", err)
		}
		if gone {
			removed++
		}
	}
	return removed, nil
}

// unreferenced lists what Sweep would delete under blobs: strays (paths
// not shaped like a blob) and the shas referenced does not report in use,
// with their total size. Purge checks each sha again under its lock.
func (b *Blobs) unreferenced(ctx context.Context, referenced func(ctx context.Context, sha string) (bool, error)) (strays, orphans []string, size int64, err error) {
	shards, err := os.ReadDir(filepath.Join(b.root, blobsDir))
	if err != nil {
		return nil, nil, 0, err
	}
	for _, shard := range shards {
		dir := filepath.Join(b.root, blobsDir, shard.Name())
		if !shard.IsDir() || !validShard(shard.Name()) {
			strays = append(strays, dir)
			size += duSize(dir)
			continue
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			return nil, nil, 0, err
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return nil, nil, 0, err
			}
			p := filepath.Join(dir, f.Name())
			sha := f.Name()
			if !f.Type().IsRegular() || !validSHA(sha) || sha[:2] != shard.Name() {
				strays = append(strays, p)
				size += duSize(p)
				continue
			}
			used, err := referenced(ctx, sha)
			if err != nil {
				return nil, nil, 0, err
			}
			if !used {
				orphans = append(orphans, sha)
				size += duSize(p)
			}
		}
	}
	return strays, orphans, size, nil
}

// duSize is the bytes of the regular files at or under p; unreadable
// parts count 0 (it only informs a message).
func duSize(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// CountBlobs counts the files under root's blobs directory without
// opening the store (which would create it): 0 when there is none. Boot
// uses it to tell a files root that holds data from a new one.
func CountBlobs(root string) (int, error) {
	n := 0
	err := filepath.WalkDir(filepath.Join(root, blobsDir), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.IsDir() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count blobs: %w", err)
	}
	return n, nil
}

// path is where the blob sha lives; sha is valid.
func (b *Blobs) path(sha string) string {
	return filepath.Join(b.root, blobsDir, sha[:2], sha)
}

// readerFunc is a function that is an io.Reader.
type readerFunc func(p []byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// syncDir fsyncs a directory so that a rename or create in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// validSHA reports whether s is a lowercase hex SHA-256, the only names
// that ever reach the disk.
func validSHA(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHexLower(s[i]) {
			return false
		}
	}
	return true
}

func validShard(s string) bool { return len(s) == 2 && isHexLower(s[0]) && isHexLower(s[1]) }

func isHexLower(c byte) bool { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }
