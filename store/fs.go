package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// FsInlineMax is the largest content the store keeps inline, in the
// database beside its metadata (PutInline): a file that small is written
// with the transaction's one fsync instead of a blob file's, its
// directory's and the transaction's (docs/PERFORMANCE.md, "Issue 30: hook
// ingress and small files").
const FsInlineMax = 64 << 10

// CheckInline fails with ErrPrecondition unless data may be stored inline
// as the content sha: at most FsInlineMax bytes that hash to sha.
func CheckInline(sha string, data []byte) error {
	if len(data) > FsInlineMax {
		return fmt.Errorf("inline content of %d bytes, over %d: %w", len(data), FsInlineMax, ErrPrecondition)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != sha {
		return fmt.Errorf("inline content does not hash to %q: %w", sha, ErrPrecondition)
	}
	return nil
}

// Everyone is the grantee that stands for every member (a file attached to a
// general broadcast).
const Everyone = "*"

// Kinds of filesystem entries.
const (
	FsFile = "file"
	FsDir  = "dir"
)

// FsEntry is a file or directory of the virtual filesystem.
//
// Paths are canonical absolute virtual paths (server/vfs.Parse output): the
// store checks only that a path is clean, absolute and at least two
// segments deep. A member's home "/<name>" has no row: it exists exactly
// while the member does, and the store reads it as a directory owned by the
// member (ID 0, times of the member row). The root "/" has no entry.
type FsEntry struct {
	ID        int64  // assigned by the store; stays with the entry across moves; 0 for a home
	Path      string // e.g. "/alice/notes/a.txt"
	Owner     string // member name; not a foreign key, entries outlive members
	Kind      string // FsFile or FsDir
	Size      int64  // bytes of a file's content; 0 for a directory
	MimeType  string // of a file; "" for a directory
	Blob      string // hex SHA-256 of a file's content; "" for a directory
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Name returns the last segment of the entry's path.
func (e FsEntry) Name() string {
	for i := len(e.Path) - 1; i >= 0; i-- {
		if e.Path[i] == '/' {
			return e.Path[i+1:]
		}
	}
	return e.Path
}

// Page selects a window of an ordered listing: the entries after After
// ("" from the start), at most Limit of them (<= 0: all).
type Page struct {
	After string
	Limit int
}

// FsContent is the new content of a file for ReplaceFile.
type FsContent struct {
	Blob      string // hex SHA-256 of the content
	Size      int64
	MimeType  string
	UpdatedAt time.Time // the clock's time when zero
}

// FsMove renames a file for MoveEntry.
type FsMove struct {
	From      string
	To        string
	Owner     string    // new owner; "" keeps the entry's
	UpdatedAt time.Time // the clock's time when zero
}

// FsStore keeps the virtual filesystem's entries, blobs and read grants.
//
// The store counts the file entries that reference each blob. A method that
// drops a blob's last reference deletes the blob's row and returns its sha
// in purged; after the transaction commits, the caller removes the content
// (server/vfs Blobs.Purge, which re-checks BlobReferenced under the blob's
// lock, so purging a sha that was referenced again meanwhile is safe).
// Every method is atomic on its own and inside WithTx.
type FsStore interface {
	// GetEntry returns the entry at path, a home as a directory of its
	// member; ErrNotFound when there is none.
	GetEntry(ctx context.Context, path string) (FsEntry, error)
	// ListDir returns the direct children of dir ordered by name, the page
	// p of them (After a name). For "/" it returns the homes (one per
	// member). ErrNotFound when dir does not exist; ErrPrecondition when
	// dir is a file.
	ListDir(ctx context.Context, dir string, p Page) ([]FsEntry, error)
	// ListTree returns every entry below dir (dir itself excluded) ordered
	// by path, bytewise; below "/" that is every stored entry. Homes are not
	// included. An absent dir gives an empty list.
	ListTree(ctx context.Context, dir string) ([]FsEntry, error)
	// CreateEntry stores a new file or directory and returns it with ID set
	// and zero times taken from the clock; a file references its Blob.
	// ErrConflict when path is taken; ErrPrecondition when the parent is
	// not an existing directory (or a member's home), the path is not at
	// least two segments deep, Owner is empty, or Kind, Blob, Size and
	// MimeType do not agree (a directory has none of them). A failed
	// create writes nothing, so inside WithTx the transaction can go on and
	// try another name (the "suffix" collision strategy).
	CreateEntry(ctx context.Context, e FsEntry) (FsEntry, error)
	// ReplaceFile sets the content, size, MIME type and update time of the
	// file at path, keeping its ID, owner, creation time and grants. It
	// returns the updated entry and the sha of the old blob if that lost
	// its last reference. ErrNotFound when absent; ErrPrecondition when
	// path is a directory.
	ReplaceFile(ctx context.Context, path string, c FsContent) (entry FsEntry, purged []string, err error)
	// DeleteEntry removes the file or empty directory at path with its
	// grants. ErrNotFound when absent (a home included); ErrPrecondition
	// when path is a directory with children.
	DeleteEntry(ctx context.Context, path string) (purged []string, err error)
	// DeleteTree removes the entry at path and everything below it, grants
	// included, and returns how many entries it removed. For a home it
	// empties the home. ErrNotFound when path is neither an entry nor a
	// home; ErrPrecondition for "/".
	DeleteTree(ctx context.Context, path string) (removed int, purged []string, err error)
	// MoveEntry moves the file m.From to m.To, keeping its ID (so its
	// grants), blob and creation time. ErrNotFound when m.From is absent;
	// ErrConflict when m.To exists; ErrPrecondition when m.From is a
	// directory or m.To's parent is not an existing directory or home.
	MoveEntry(ctx context.Context, m FsMove) (FsEntry, error)
	// GrantEntries grants read of the files with the given entry IDs to
	// each grantee (a member name or Everyone): exactly the files that were
	// checked, wherever they are now, never whatever a path names by the
	// time the grant commits. IDs of no file (absent, or a directory) and
	// grantees that are neither a member nor Everyone are skipped; grants
	// that exist are kept. A member's grants go when the member does.
	GrantEntries(ctx context.Context, ids []int64, grantees []string) error
	// HasGrant reports whether the file at path is granted to member or to
	// Everyone; false when there is no such file.
	HasGrant(ctx context.Context, path, member string) (bool, error)
	// SharedWith returns the files granted to member or to Everyone that
	// lie outside member's own home, ordered by path, the page p of them
	// (After a path).
	SharedWith(ctx context.Context, member string, p Page) ([]FsEntry, error)
	// SharedBelow reports whether a file of SharedWith(member) is at path
	// or below it: whether path is, or leads to, a file shared with member.
	SharedBelow(ctx context.Context, member, path string) (bool, error)
	// Usage returns the bytes the files in member's home hold (each file
	// counts its size, however its content is shared).
	Usage(ctx context.Context, member string) (int64, error)
	// BlobReferenced reports whether any file entry references sha.
	BlobReferenced(ctx context.Context, sha string) (bool, error)
	// PutInline keeps data as the content sha in the database: call it in
	// the transaction whose CreateEntry or ReplaceFile references sha, so
	// the content commits with the entry. data must pass CheckInline and
	// be the size the blob row records (ErrPrecondition); ErrNotFound when
	// no entry references sha. Content already kept inline stays as it is.
	// It goes with the blob row when the last reference does.
	PutInline(ctx context.Context, sha string, data []byte) error
	// InlineContent returns the content sha kept in the database;
	// ErrNotFound when it is not (a blob on disk, or no such blob).
	InlineContent(ctx context.Context, sha string) ([]byte, error)
}

// FileBlob is one stored content that file entries reference, as the
// stores' checks list what is on disk (svc check); content kept inline is
// listed apart, with its bytes (InlineContents), and hashed there too.
type FileBlob struct {
	SHA  string
	Size int64
	// Path is one file entry that holds this content.
	Path string
}
