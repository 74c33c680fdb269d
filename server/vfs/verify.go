package vfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"svc/store"
)

// Kinds of damage a read finds (DamageError.Kind).
const (
	// DamageMissing: no file where a blob should be.
	DamageMissing = "missing"
	// DamageSize: the file's size is not the recorded one.
	DamageSize = "size_mismatch"
	// DamageHash: the bytes do not hash to the blob's name.
	DamageHash = "hash_mismatch"
)

// DamageError is a blob whose file is not what its name and recorded
// size say: missing, cut or grown, or changed. It wraps store.ErrDamaged;
// a missing blob also matches fs.ErrNotExist.
type DamageError struct {
	SHA  string
	Kind string // DamageMissing, DamageSize or DamageHash
	// Detail says what was found.
	Detail string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("blob %s damaged (%s): %s", e.SHA, e.Kind, e.Detail)
}

func (e *DamageError) Unwrap() error { return store.ErrDamaged }

// Is lets a missing blob match fs.ErrNotExist: a reader that raced a
// purge sees the same error as one that finds the blob gone for good.
func (e *DamageError) Is(target error) bool {
	return e.Kind == DamageMissing && target == fs.ErrNotExist
}

// Read opens the blob sha, recorded as size bytes, for a verified read.
// A missing file or one of another size is a *DamageError at once; a
// change of the bytes is found as they stream (see Reader).
func (b *Blobs) Read(sha string, size int64) (*Reader, error) {
	f, err := b.Open(sha)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &DamageError{SHA: sha, Kind: DamageMissing, Detail: "no file at " + b.path(sha)}
	case err != nil:
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open blob: %w", err), f.Close())
	}
	if fi.Size() != size {
		_ = f.Close()
		return nil, &DamageError{SHA: sha, Kind: DamageSize, Detail: fmt.Sprintf("%d bytes on disk, %d recorded", fi.Size(), size)}
	}
	return &Reader{f: f, h: sha256.New(), sha: sha, size: size}, nil
}

// ReadInline is Read for content kept in the database rather than on
// disk (store.FsStore.PutInline): the same checks, of its size at once
// and of its hash as it streams, so damaged inline content is reported
// as a blob file's would be.
func ReadInline(sha string, size int64, data []byte) (*Reader, error) {
	if int64(len(data)) != size {
		return nil, &DamageError{SHA: sha, Kind: DamageSize, Detail: fmt.Sprintf("%d bytes inline, %d recorded", len(data), size)}
	}
	return &Reader{f: io.NopCloser(bytes.NewReader(data)), h: sha256.New(), sha: sha, size: size}, nil
}

// Reader streams a blob and checks its bytes against its name: blobs are
// named by their SHA-256, so the name is the checksum. The hash is only
// known once the last byte is read, so the read that reaches the end
// verifies before it returns its bytes: on a mismatch it returns none of
// them and a *DamageError, and a client that was sent the rest sees a
// body cut short, never a clean copy of damaged content.
type Reader struct {
	f    io.ReadCloser
	h    hash.Hash
	sha  string
	size int64
	n    int64
	err  error // sticky: io.EOF once verified, or what failed
}

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.n == r.size {
		return 0, r.verify()
	}
	if left := r.size - r.n; int64(len(p)) > left {
		p = p[:left]
	}
	k, err := r.f.Read(p)
	r.h.Write(p[:k])
	r.n += int64(k)
	switch {
	case r.n == r.size:
		if verr := r.verify(); verr != io.EOF {
			return 0, verr
		}
		return k, nil
	case errors.Is(err, io.EOF):
		// The file shrank after it was opened (its size was checked).
		r.err = &DamageError{SHA: r.sha, Kind: DamageSize, Detail: fmt.Sprintf("ended after %d of %d bytes", r.n, r.size)}
		return 0, r.err
	case err != nil:
		r.err = err
		return k, err
	}
	return k, nil
}

// verify compares the hash of the whole content with the name and sets
// the sticky result: io.EOF or a *DamageError.
func (r *Reader) verify() error {
	if got := hex.EncodeToString(r.h.Sum(nil)); got != r.sha {
		r.err = &DamageError{SHA: r.sha, Kind: DamageHash, Detail: "content hashes to " + got}
	} else {
		r.err = io.EOF
	}
	return r.err
}

// Close closes the file (nothing for inline content).
func (r *Reader) Close() error { return r.f.Close() }

// storageFull reports whether err means there is no room to write: a full
// disk, a quota, or a file size limit.
func storageFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// diskFailure reports whether err is the disk failing a read or write.
func diskFailure(err error) bool {
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// putHealth is what the last Puts say about the disk under the root, for
// Health: failing once a Put failed for want of room or of a working
// disk, until a Put succeeds after store.FailureHold without failures.
type putHealth struct {
	failing store.Failing
	// probed is when Health last tried the disk itself (unix nanoseconds).
	probed atomic.Int64
}

// probeEvery bounds how often Health tries the disk while writes fail:
// /healthz answers anyone, and a probe writes and fsyncs a file.
const probeEvery = store.FailureHold

// probeDue reports whether a probe may run now, and claims it.
func (h *putHealth) probeDue(now time.Time) bool {
	last := h.probed.Load()
	return now.UnixNano()-last >= int64(probeEvery) && h.probed.CompareAndSwap(last, now.UnixNano())
}

// put takes the outcome of a Put.
func (h *putHealth) put(err error) {
	switch {
	case err == nil:
		h.failing.Succeed()
	case storageFull(err):
		h.failing.Fail(fmt.Errorf("%w: %w", store.ErrStorageFull, err))
	case diskFailure(err):
		h.failing.Fail(err)
	}
}

// Health implements store.HealthReporter: why writes of file content fail
// now, or nil.
//
// While writes fail, Health tries the disk itself now and then (probe):
// files of at most store.FsInlineMax bytes are kept in the database, so a
// team that writes only those would never give the blob store a write
// that succeeds, and /healthz would say file writes fail long after the
// disk has room again.
func (b *Blobs) Health() error {
	fe := b.health.failing.Err()
	if fe != nil && b.health.probeDue(time.Now()) {
		b.health.put(b.probe())
		fe = b.health.failing.Err()
	}
	if fe != nil {
		return fe
	}
	return nil
}

// probe writes, fsyncs and removes a temp file as large as the smallest
// content the blob store keeps: whether a file write would succeed now.
func (b *Blobs) probe() error {
	f, err := os.CreateTemp(filepath.Join(b.root, tmpDir), "probe-*")
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, store.FsInlineMax+1))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close(), ignoreNotExist(os.Remove(f.Name()))) // a sweep may have taken it
}

// Verify reads the blob sha of the store rooted at root, recorded as size
// bytes, through Read: nil when it is sound, a *DamageError when not. It
// creates and changes nothing under root (svc check runs it beside a
// broker or without one).
func Verify(root, sha string, size int64) error {
	b := &Blobs{root: root}
	r, err := b.Read(sha, size)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r)
	return errors.Join(err, r.Close())
}
