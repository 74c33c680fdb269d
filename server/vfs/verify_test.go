package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"svc/store"
)

// TestVerifiedRead: a blob is served only as its name says. Damage found
// at open (missing, another size) fails before any byte; damage found at
// the end (the bytes changed) fails the read that reaches the end, which
// withholds its bytes, so the reader never holds the whole content. Before,
// flipped bytes were served as they were.
func TestVerifiedRead(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 20000) // 320 KB: several reads
	tests := []struct {
		name     string
		content  string
		damage   func(t *testing.T, path string)
		openErr  string // DamageError kind at open
		readErr  string // DamageError kind at the end
		readSize int    // 0: io.ReadAll
	}{
		{name: "intact", content: big},
		{name: "intact, one byte at a time", content: "hello, world", readSize: 1},
		{name: "empty", content: ""},
		{name: "ten bytes flipped", content: big, damage: func(t *testing.T, path string) {
			flip(t, path, 1000, 10)
		}, readErr: DamageHash},
		{name: "last byte flipped", content: big, damage: func(t *testing.T, path string) {
			flip(t, path, int64(len(big)-1), 1)
		}, readErr: DamageHash},
		{name: "flipped, one byte at a time", content: "hello, world", damage: func(t *testing.T, path string) {
			flip(t, path, 3, 1)
		}, readErr: DamageHash, readSize: 1},
		{name: "cut short", content: big, damage: func(t *testing.T, path string) {
			require.NoError(t, os.Truncate(path, 100))
		}, openErr: DamageSize},
		{name: "grown", content: big, damage: func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString("more")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, openErr: DamageSize},
		{name: "missing", content: big, damage: func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
		}, openErr: DamageMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := MustOpenBlobs(t)
			sha := mustPut(t, b, tc.content)
			if tc.damage != nil {
				tc.damage(t, b.path(sha))
			}
			r, err := b.Read(sha, int64(len(tc.content)))
			if tc.openErr != "" {
				requireDamage(t, err, sha, tc.openErr)
				if tc.openErr == DamageMissing {
					require.ErrorIs(t, err, fs.ErrNotExist, "a purge race and a missing blob look alike")
				}
				return
			}
			require.NoError(t, err)
			defer r.Close()
			var src io.Reader = r
			if tc.readSize == 1 {
				src = iotest.OneByteReader(r)
			}
			got, err := io.ReadAll(src)
			if tc.readErr == "" {
				require.NoError(t, err)
				require.Equal(t, tc.content, string(got))
				return
			}
			requireDamage(t, err, sha, tc.readErr)
			require.Less(t, len(got), len(tc.content), "the read that found the damage kept its bytes")
			_, err = r.Read(make([]byte, 10))
			requireDamage(t, err, sha, tc.readErr) // sticky
		})
	}
}

func requireDamage(t *testing.T, err error, sha, kind string) {
	t.Helper()
	var de *DamageError
	require.ErrorAs(t, err, &de)
	require.Equal(t, kind, de.Kind, "%v", err)
	require.Equal(t, sha, de.SHA)
	require.ErrorIs(t, err, store.ErrDamaged)
}

// flip inverts n bytes of the file at path from off.
func flip(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, n)
	_, err = f.ReadAt(buf, off)
	require.NoError(t, err)
	for i := range buf {
		buf[i] ^= 0xff
	}
	_, err = f.WriteAt(buf, off)
	require.NoError(t, err)
}

// TestPutHealth: a Put that fails for want of room marks file writes
// failing (and its error wraps store.ErrStorageFull, which the server
// answers 507); the next Put that succeeds clears it; other failures
// (the client's body, a limit) say nothing about the disk.
func TestPutHealth(t *testing.T) {
	full := &fs.PathError{Op: "write", Path: "/files/tmp/put-1", Err: syscall.ENOSPC}
	tests := []struct {
		name    string
		err     error
		failing bool
	}{
		{"no space", full, true},
		{"quota", fmt.Errorf("put blob: %w", &fs.PathError{Op: "write", Err: syscall.EDQUOT}), true},
		{"file size limit", &fs.PathError{Op: "write", Err: syscall.EFBIG}, true},
		{"disk error", &fs.PathError{Op: "write", Err: syscall.EIO}, true},
		{"too large", ErrTooLarge, false},
		{"client went", io.ErrUnexpectedEOF, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := MustOpenBlobs(t)
			clock := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			b.health.failing.Now = func() time.Time { return clock }
			b.health.put(tc.err)
			if !tc.failing {
				require.NoError(t, b.Health())
				return
			}
			require.ErrorIs(t, b.Health(), tc.err)
			require.ErrorContains(t, b.Health(), "file writes failing since")
			if storageFull(tc.err) {
				require.ErrorIs(t, b.Health(), store.ErrStorageFull)
			}
			mustPut(t, b, "fits")
			require.Error(t, b.Health(), "a small write right after does not clear it")
			clock = clock.Add(store.FailureHold)
			mustPut(t, b, "fits again")
			require.NoError(t, b.Health())
		})
	}
	require.True(t, storageFull(fmt.Errorf("put blob: %w", full)))
	require.False(t, storageFull(errors.New("no space left on device")), "only the errno counts")
}
