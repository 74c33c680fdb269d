package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"slices"
	"strings"
	"svc/server/apierr"
	"svc/server/wire"
	"unicode/utf8"

	apiv1 "svc/gen/svc/v1"
	"svc/server/auth"
	"svc/server/vfs"
	"svc/store"
)

// Filesystem bounds.
const (
	// maxSuffix bounds the collision strategy "suffix": a-1.txt … a-1000.txt
	// are tried, then the write is a conflict.
	maxSuffix = 1000
	// maxMimeType bounds a stored MIME type.
	maxMimeType = 255
	// defaultMimeType is a file's type when the writer names none (CONTRACT
	// §4).
	defaultMimeType = "application/octet-stream"
	// dirMimeType is the MIME type a directory reports (freedesktop.org).
	dirMimeType = "inode/directory"
)

// Collision strategies of a write (docs/API.md, "Files": collide=).
const (
	CollideError     = "error"
	CollideOverwrite = "overwrite"
	CollideSuffix    = "suffix"
)

// errFsDisabled answers every filesystem call when the team config has no
// files block (an absent optional config block disables its feature).
var errFsDisabled = apierr.Errorf(apierr.CodeNotFound, "the filesystem is disabled: the team config has no files block")

// Fs implements apiv1.FsServer, the virtual filesystem, and the byte-level
// Read and Write that the hand-written gateway routes call.
//
// Access: a member reads and writes its own home; members.manage reads and
// writes every home; a read grant (message or objective attachment, to the
// member or to everyone) lets a member read that one file, and see the
// directories leading to it. Anything else in another home is 403 whether
// or not it exists, so existence never leaks.
type Fs struct {
	apiv1.UnimplementedFsServer
	*core
}

var _ apiv1.FsServer = (*Fs)(nil)

// Enabled reports whether the team config enables the filesystem.
func (f *Fs) Enabled() bool { return f.blobs != nil }

// MaxFileSize is the most bytes one file may hold; 0 when disabled.
func (f *Fs) MaxFileSize() int64 {
	if !f.Enabled() {
		return 0
	}
	return f.maxFileSize
}

// ListFiles implements apiv1.FsServer. "/" lists the homes the caller can
// see; an empty path lists the caller's home; a file lists itself.
func (f *Fs) ListFiles(ctx context.Context, req *apiv1.ListFilesRequest) (*apiv1.ListFilesResponse, error) {
	p := mustPrincipal(ctx)
	if !f.Enabled() {
		return nil, errFsDisabled
	}
	raw := req.GetPath()
	if raw == "" {
		raw = "/" + p.Member
	}
	vp, err := parseFsPath("path", raw)
	if err != nil {
		return nil, err
	}
	page, err := listPage(req.Limit, req.GetAfter())
	if err != nil {
		return nil, err
	}
	entries, more, err := f.list(ctx, p, vp, page)
	if err != nil {
		return nil, err
	}
	out := &apiv1.ListFilesResponse{Entries: make([]*apiv1.FsEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, FsEntryToProto(e))
	}
	if more {
		next := entries[len(entries)-1].Name()
		out.Next = &next
	}
	return out, nil
}

// StatFile implements apiv1.FsServer.
func (f *Fs) StatFile(ctx context.Context, req *apiv1.StatFileRequest) (*apiv1.StatFileResponse, error) {
	p := mustPrincipal(ctx)
	if !f.Enabled() {
		return nil, errFsDisabled
	}
	vp, err := parseFsPath("path", req.GetPath())
	if err != nil {
		return nil, err
	}
	if vp.IsRoot() {
		return &apiv1.StatFileResponse{Entry: FsEntryToProto(store.FsEntry{Path: "/", Kind: store.FsDir})}, nil
	}
	e, err := f.visible(ctx, p, vp)
	if err != nil {
		return nil, err
	}
	return &apiv1.StatFileResponse{Entry: FsEntryToProto(e)}, nil
}

// MakeDir implements apiv1.FsServer. Without recursive, a missing parent is
// 404; an existing entry at path is 409.
func (f *Fs) MakeDir(ctx context.Context, req *apiv1.MakeDirRequest) (*apiv1.MakeDirResponse, error) {
	p := mustPrincipal(ctx)
	if !f.Enabled() {
		return nil, errFsDisabled
	}
	vp, err := parseFsPath("path", req.GetPath())
	if err != nil {
		return nil, err
	}
	if vp.IsRoot() {
		return nil, apierr.Invalid("path", "must be inside a home")
	}
	if err := f.checkWrite(p, vp); err != nil {
		return nil, err
	}
	if vp.IsHome() {
		return nil, apierr.Errorf(apierr.CodeConflict, "%s exists", vp)
	}
	var out store.FsEntry
	err = f.commit(ctx, func(ctx context.Context, tx store.Tx) error {
		if req.GetRecursive() {
			if err := ensureParents(ctx, tx, vp); err != nil {
				return err
			}
		} else if err := requireParentDir(ctx, tx, vp); err != nil {
			return err
		}
		var err error
		out, err = tx.CreateEntry(ctx, store.FsEntry{Path: vp.String(), Owner: vp.Home(), Kind: store.FsDir})
		return createErr(vp, err)
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.MakeDirResponse{Entry: FsEntryToProto(out)}, nil
}

// Remove implements apiv1.FsServer: 204; a directory with content needs
// recursive. Content no longer referenced is purged after the commit.
func (f *Fs) Remove(ctx context.Context, req *apiv1.RemoveRequest) (*apiv1.RemoveResponse, error) {
	p := mustPrincipal(ctx)
	if !f.Enabled() {
		return nil, errFsDisabled
	}
	vp, err := parseFsPath("path", req.GetPath())
	if err != nil {
		return nil, err
	}
	if vp.IsRoot() || vp.IsHome() {
		return nil, apierr.Invalid("path", "the root and homes cannot be removed; remove what they hold")
	}
	if err := f.checkOwn(p, vp); err != nil {
		return nil, err
	}
	e, err := f.store.GetEntry(ctx, vp.String())
	if err != nil {
		return nil, notFound(vp, err)
	}
	var purged []string
	if e.Kind == store.FsDir && req.GetRecursive() {
		_, purged, err = f.store.DeleteTree(ctx, vp.String())
	} else {
		purged, err = f.store.DeleteEntry(ctx, vp.String())
	}
	switch {
	case errors.Is(err, store.ErrPrecondition):
		return nil, apierr.Errorf(apierr.CodeConflict, "%s is a directory with content; remove it with recursive", vp)
	case err != nil:
		return nil, notFound(vp, err)
	}
	f.purge(ctx, purged)
	setHTTPStatus(ctx, http.StatusNoContent)
	return &apiv1.RemoveResponse{}, nil
}

// Move implements apiv1.FsServer: one file, within trees the caller may
// write; missing parents of the destination are created, an existing
// destination is 409, a directory source 400.
func (f *Fs) Move(ctx context.Context, req *apiv1.MoveRequest) (*apiv1.MoveResponse, error) {
	p := mustPrincipal(ctx)
	if !f.Enabled() {
		return nil, errFsDisabled
	}
	from, err := parseFsPath("from", req.GetFrom())
	if err != nil {
		return nil, err
	}
	to, err := parseFsPath("to", req.GetTo())
	if err != nil {
		return nil, err
	}
	if from.IsRoot() || from.IsHome() {
		return nil, apierr.Invalid("from", "directory moves are not supported")
	}
	if to.IsRoot() {
		return nil, apierr.Invalid("to", "must be inside a home")
	}
	if err := f.checkOwn(p, from); err != nil {
		return nil, err
	}
	if err := f.checkWrite(p, to); err != nil {
		return nil, err
	}
	src, err := f.store.GetEntry(ctx, from.String())
	if err != nil {
		return nil, notFound(from, err)
	}
	if src.Kind != store.FsFile {
		return nil, apierr.Invalid("from", "directory moves are not supported")
	}
	if to.IsHome() {
		return nil, apierr.Errorf(apierr.CodeConflict, "%s exists", to)
	}
	var out store.FsEntry
	err = f.commit(ctx, func(ctx context.Context, tx store.Tx) error {
		if err := ensureParents(ctx, tx, to); err != nil {
			return err
		}
		if to.Home() != from.Home() {
			// The size as it is now, in the commit: an overwrite may have
			// changed it since the lookup.
			cur, err := tx.GetEntry(ctx, from.String())
			if err != nil {
				return notFound(from, err)
			}
			if err := f.withinQuota(ctx, tx, to.Home(), cur.Size, store.FsEntry{}, false); err != nil {
				return err
			}
		}
		var err error
		out, err = tx.MoveEntry(ctx, store.FsMove{From: from.String(), To: to.String(), Owner: to.Home()})
		switch {
		case errors.Is(err, store.ErrConflict):
			return apierr.Errorf(apierr.CodeConflict, "%s exists", to)
		case errors.Is(err, store.ErrPrecondition):
			// The source turned into a directory meanwhile, or a parent of
			// the destination into a file.
			return apierr.Errorf(apierr.CodeConflict, "cannot move %s to %s", from, to)
		case err != nil:
			return notFound(from, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &apiv1.MoveResponse{Entry: FsEntryToProto(out)}, nil
}

// ListShared implements apiv1.FsServer: the files outside the caller's home
// granted to it or to everyone, by path.
func (f *Fs) ListShared(ctx context.Context, req *apiv1.ListSharedRequest) (*apiv1.ListSharedResponse, error) {
	p := mustPrincipal(ctx)
	if !f.Enabled() {
		return nil, errFsDisabled
	}
	page, err := listPage(req.Limit, req.GetAfter())
	if err != nil {
		return nil, err
	}
	// One more than asked says whether a next page exists.
	shared, err := f.store.SharedWith(ctx, p.Member, store.Page{After: page.After, Limit: page.Limit + 1})
	if err != nil {
		return nil, err
	}
	more := len(shared) > page.Limit
	shared = shared[:min(len(shared), page.Limit)]
	out := &apiv1.ListSharedResponse{Entries: make([]*apiv1.FsEntry, 0, len(shared))}
	for _, e := range shared {
		out.Entries = append(out.Entries, FsEntryToProto(e))
	}
	if more {
		out.Next = &shared[len(shared)-1].Path
	}
	return out, nil
}

// FileWrite is one write of a file's bytes.
type FileWrite struct {
	Path     string
	Collide  string // CollideError (also ""), CollideOverwrite or CollideSuffix
	MimeType string // a media type; "" is application/octet-stream
	// Size is the declared length of Body; negative when unknown. A
	// declared length over the limit is refused before anything is read.
	Size int64
	Body io.Reader
}

// Write stores w.Body as the file at w.Path for p and returns its entry and
// whether the suffix strategy renamed it. Parent directories are created.
// A body of at most store.FsInlineMax bytes is held in memory and stored
// inline by the transaction that writes the entry; a larger one is
// streamed to disk (never held in memory), fsynced and renamed into the
// blob store before the transaction that references it. Either way a
// crash leaves either the old state or the new one.
func (f *Fs) Write(ctx context.Context, p *auth.Principal, w FileWrite) (store.FsEntry, bool, error) {
	var none store.FsEntry
	if !f.Enabled() {
		return none, false, errFsDisabled
	}
	vp, err := parseFsPath("path", w.Path)
	if err != nil {
		return none, false, err
	}
	if vp.IsRoot() {
		return none, false, apierr.Invalid("path", "must name a file inside a home")
	}
	collide := w.Collide
	switch collide {
	case "":
		collide = CollideError
	case CollideError, CollideOverwrite, CollideSuffix:
	default:
		return none, false, apierr.Invalid("collide", "must be error, overwrite or suffix")
	}
	mimeType, err := normalizeMimeType(w.MimeType)
	if err != nil {
		return none, false, err
	}
	if err := f.checkWrite(p, vp); err != nil {
		return none, false, err
	}
	if vp.IsHome() {
		return none, false, apierr.Errorf(apierr.CodeConflict, "%s is a directory", vp)
	}
	if w.Size > f.maxFileSize {
		return none, false, errTooLarge(f.maxFileSize)
	}
	// Refuse what is certain to fail before reading a large body.
	var replaced int64 // what an overwrite gives back to the quota
	switch cur, err := f.store.GetEntry(ctx, vp.String()); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return none, false, err
	case cur.Kind == store.FsDir:
		return none, false, apierr.Errorf(apierr.CodeConflict, "%s is a directory", vp)
	case collide == CollideError:
		return none, false, apierr.Errorf(apierr.CodeConflict, "%s exists; write with collide=overwrite or collide=suffix", vp)
	case collide == CollideOverwrite:
		replaced = cur.Size
	}
	// The body may hold no more than the file limit, nor than what the
	// home's quota leaves (checked again, exactly, in the commit).
	limit, byQuota := f.maxFileSize, false
	if f.quotaBytes > 0 {
		used, err := f.store.Usage(ctx, vp.Home())
		if err != nil {
			return none, false, err
		}
		if left := f.quotaBytes - used + replaced; left < limit {
			limit, byQuota = max(left, 0), true
		}
		if w.Size > limit {
			return none, false, f.errOverQuota(vp.Home(), used, w.Size-replaced)
		}
	}

	// A body of at most store.FsInlineMax bytes is read into memory and
	// kept inline, written by the transaction that writes its entry: one
	// fsync, the commit's. A larger one streams to the blob store.
	body := w.Body
	var inline []byte
	inlineMax := int64(store.FsInlineMax)
	if limit >= 0 {
		inlineMax = min(limit, inlineMax)
	}
	if w.Size <= inlineMax {
		head, whole, err := readSmall(ctx, body, inlineMax, w.Size)
		if err != nil {
			return none, false, bodyErr(ctx, err)
		}
		if whole {
			inline = head
		} else {
			body = io.MultiReader(bytes.NewReader(head), body)
		}
	}
	var placed vfs.Placed
	if inline != nil {
		sum := sha256.Sum256(inline)
		placed = vfs.Placed{SHA: hex.EncodeToString(sum[:]), Size: int64(len(inline))}
	} else {
		// The lock protocol of vfs.Blobs: the blob is in place and its sha
		// locked before the transaction; unlock after it, then purge outside.
		placed, err = f.blobs.Put(ctx, body, limit)
	}
	switch {
	case errors.Is(err, vfs.ErrTooLarge) && byQuota:
		return none, false, f.errOverQuota(vp.Home(), -1, limit+1)
	case errors.Is(err, vfs.ErrTooLarge):
		return none, false, errTooLarge(f.maxFileSize)
	case err != nil:
		return none, false, bodyErr(ctx, err)
	}
	var (
		out     store.FsEntry
		renamed bool
		purged  []string
	)
	err = f.commit(ctx, func(ctx context.Context, tx store.Tx) error {
		out, renamed, purged = store.FsEntry{}, false, nil
		if err := ensureParents(ctx, tx, vp); err != nil {
			return err
		}
		target := vp
		cur, err := tx.GetEntry(ctx, vp.String())
		if err := f.withinQuota(ctx, tx, vp.Home(), placed.Size, cur, collide == CollideOverwrite && err == nil); err != nil {
			return err
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case cur.Kind == store.FsDir:
			return apierr.Errorf(apierr.CodeConflict, "%s is a directory", vp)
		case collide == CollideOverwrite:
			out, purged, err = tx.ReplaceFile(ctx, vp.String(), store.FsContent{Blob: placed.SHA, Size: placed.Size, MimeType: mimeType})
			if errors.Is(err, store.ErrPrecondition) {
				return apierr.Errorf(apierr.CodeConflict, "%s is a directory", vp)
			}
			if err != nil {
				return err
			}
			return putInline(ctx, tx, placed.SHA, inline)
		case collide == CollideSuffix:
			if target, err = freeSuffix(ctx, tx, vp); err != nil {
				return err
			}
			renamed = true
		default:
			return apierr.Errorf(apierr.CodeConflict, "%s exists; write with collide=overwrite or collide=suffix", vp)
		}
		out, err = tx.CreateEntry(ctx, store.FsEntry{
			Path: target.String(), Owner: target.Home(), Kind: store.FsFile,
			Size: placed.Size, MimeType: mimeType, Blob: placed.SHA,
		})
		if err != nil {
			return createErr(target, err)
		}
		return putInline(ctx, tx, placed.SHA, inline)
	})
	placed.Unlock()
	if err != nil {
		// The content may be referenced by nothing now (inline content
		// went with the transaction).
		if inline == nil {
			f.purge(ctx, []string{placed.SHA})
		}
		return none, false, err
	}
	f.purge(ctx, purged)
	return out, renamed, nil
}

// Read opens the file at path for p: its entry and its content, which the
// caller closes. A directory is 400. The content is verified as it is
// read (FileContent); content missing from the disk, or of another size
// than recorded, is 500 data_loss before any byte, reported in the log
// and on /metrics.
func (f *Fs) Read(ctx context.Context, p *auth.Principal, path string) (store.FsEntry, *FileContent, error) {
	if !f.Enabled() {
		return store.FsEntry{}, nil, errFsDisabled
	}
	// An overwrite or remove that commits between the lookup and the open
	// may purge the blob the lookup named; the second lookup sees the
	// commit.
	for attempt := 0; ; attempt++ {
		e, err := f.readableFile(ctx, p, path)
		if err != nil {
			return e, nil, err
		}
		if e.Kind != store.FsFile {
			return e, nil, apierr.Invalid("path", "%s is a directory", e.Path)
		}
		r, err := f.openContent(ctx, e)
		switch {
		case err == nil:
			return e, &FileContent{r: r, entry: e, report: f.blobDamaged}, nil
		case errors.Is(err, fs.ErrNotExist) && attempt == 0:
			continue
		case errors.Is(err, store.ErrDamaged):
			return e, nil, f.blobDamaged(ctx, e, err)
		default:
			return e, nil, fmt.Errorf("open file content: %w", err)
		}
	}
}

// openContent opens e's content for a verified read: inline in the
// store when it is kept there, else its blob on disk (every content
// written before inline storage, and every one over store.FsInlineMax).
// Inline content that does not hash to its name is read from a blob file
// of that name when one exists: that is how an operator repairs it
// (docs/OPERATIONS.md), the same way as a damaged blob. It is hashed
// before the first byte goes out, which costs little at 64 KiB.
func (f *Fs) openContent(ctx context.Context, e store.FsEntry) (*vfs.Reader, error) {
	if e.Size <= store.FsInlineMax {
		data, err := f.store.InlineContent(ctx, e.Blob)
		switch {
		case err == nil:
			sum := sha256.Sum256(data)
			if int64(len(data)) == e.Size && hex.EncodeToString(sum[:]) == e.Blob {
				return vfs.ReadInline(e.Blob, e.Size, data)
			}
			if r, err := f.blobs.Read(e.Blob, e.Size); err == nil {
				return r, nil
			}
			if int64(len(data)) != e.Size {
				return vfs.ReadInline(e.Blob, e.Size, data) // the size's DamageError
			}
			return nil, &vfs.DamageError{SHA: e.Blob, Kind: vfs.DamageHash, Detail: "the copy in the database hashes to " + hex.EncodeToString(sum[:])}
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
	}
	return f.blobs.Read(e.Blob, e.Size)
}

// putInline keeps data, when the write is small enough to have read it,
// as the content sha in tx, the transaction that references it.
func putInline(ctx context.Context, tx store.Tx, sha string, data []byte) error {
	if data == nil {
		return nil
	}
	return tx.PutInline(ctx, sha, data)
}

// readSmall reads r while it holds at most max bytes: whole reports that
// r ended within them and head is all of it; otherwise head is the first
// bytes read (more than max), and the rest is still in r. size is the
// declared length (negative when unknown), which sizes the buffer. The
// context is checked before each read, as the blob store does.
func readSmall(ctx context.Context, r io.Reader, max, size int64) (head []byte, whole bool, err error) {
	n := max + 1
	if size >= 0 && size < max {
		n = size + 1 // the read that finds the end needs a byte of room
	}
	buf := make([]byte, 0, n)
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if len(buf) == cap(buf) {
			if int64(len(buf)) > max {
				return buf, false, nil
			}
			buf = slices.Grow(buf, int(max+1)-len(buf))
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		switch {
		case err == io.EOF:
			if int64(len(buf)) > max {
				return buf, false, nil
			}
			return buf, true, nil
		case err != nil:
			return nil, false, err
		}
	}
}

// bodyErr is the answer to a write whose body could not be read or
// stored.
func bodyErr(ctx context.Context, err error) error {
	// The body's reader may refuse the client (it sent too slowly): that
	// answer wins over the cancellation it causes.
	var refused *apierr.Error
	if errors.As(err, &refused) {
		return refused
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return apierr.Invalid("body", "ended before its declared length")
	}
	return fmt.Errorf("store file content: %w", err)
}

// ownsOrManages reports whether vp is in p's home or p holds members.manage.
func ownsOrManages(p *auth.Principal, vp vfs.Path) bool {
	return vp.Home() == p.Member || p.Has(auth.MembersManage)
}

// checkOwn refuses (403) a change to vp unless p owns its home or manages.
func (f *Fs) checkOwn(p *auth.Principal, vp vfs.Path) error {
	if !ownsOrManages(p, vp) {
		return fmt.Errorf("%w: %s is outside your home", auth.ErrForbidden, vp)
	}
	return nil
}

// checkWrite refuses a new entry at vp: 403 unless p owns its home or
// manages, 404 when the home is no member's.
func (f *Fs) checkWrite(p *auth.Principal, vp vfs.Path) error {
	if err := f.checkOwn(p, vp); err != nil {
		return err
	}
	if _, ok := f.team.Member(vp.Home()); !ok {
		return apierr.Errorf(apierr.CodeNotFound, "no member %q owns %s", vp.Home(), vp.HomePath())
	}
	return nil
}

// visible returns the entry at vp if p may see it: what p may read, plus
// the directories leading to a file granted to p.
func (f *Fs) visible(ctx context.Context, p *auth.Principal, vp vfs.Path) (store.FsEntry, error) {
	return f.entryFor(ctx, p, vp, f.store.SharedBelow)
}

// list returns a page of what ListFiles shows of vp to p, and whether more
// follows it.
func (f *Fs) list(ctx context.Context, p *auth.Principal, vp vfs.Path, page store.Page) ([]store.FsEntry, bool, error) {
	limited := vp.IsRoot() && !p.Has(auth.MembersManage) || !vp.IsRoot() && !ownsOrManages(p, vp)
	if limited && !vp.IsRoot() {
		ok, err := f.store.SharedBelow(ctx, p.Member, vp.String())
		if err != nil {
			return nil, false, err
		}
		if !ok {
			return nil, false, errNotReadable(vp)
		}
	}
	if !vp.IsRoot() {
		e, err := f.store.GetEntry(ctx, vp.String())
		if err != nil {
			return nil, false, notFound(vp, err)
		}
		if e.Kind == store.FsFile {
			return []store.FsEntry{e}, false, nil
		}
	}
	// A limited view filters what the store lists: it reads on, a page at
	// a time, until its page is full or the directory ends. One entry more
	// than asked says whether a next page exists.
	out := make([]store.FsEntry, 0, min(page.Limit, 64))
	after := page.After
	for {
		entries, err := f.store.ListDir(ctx, vp.String(), store.Page{After: after, Limit: page.Limit + 1})
		switch {
		case errors.Is(err, store.ErrPrecondition):
			// A directory turned into a file since the lookup.
			return nil, false, apierr.Errorf(apierr.CodeConflict, "%s is not a directory", vp)
		case err != nil:
			return nil, false, notFound(vp, err)
		}
		for _, e := range entries {
			if limited {
				shown, err := f.shownTo(ctx, p, e)
				if err != nil {
					return nil, false, err
				}
				if !shown {
					continue
				}
			}
			if len(out) == page.Limit {
				return out, true, nil
			}
			out = append(out, e)
		}
		if len(entries) <= page.Limit {
			return out, false, nil
		}
		after = entries[len(entries)-1].Name()
	}
}

// shownTo reports whether a limited listing shows e to p: p's own home, and
// what leads to a file shared with p.
func (f *Fs) shownTo(ctx context.Context, p *auth.Principal, e store.FsEntry) (bool, error) {
	if e.Path == "/"+p.Member {
		return true, nil
	}
	return f.store.SharedBelow(ctx, p.Member, e.Path)
}

// Listing pages (ls, shared): 1000 entries when the caller names no limit,
// never more.
const (
	defaultListLimit = 1000
	maxListLimit     = 1000
)

// listPage reads a listing's limit and after.
func listPage(limit *int32, after string) (store.Page, error) {
	p := store.Page{After: after, Limit: defaultListLimit}
	if limit != nil {
		if *limit < 1 {
			return p, apierr.Invalid("limit", "must be at least 1")
		}
		p.Limit = int(min(*limit, maxListLimit))
	}
	if len(after) > vfs.MaxPathLen || !utf8.ValidString(after) {
		return p, apierr.Invalid("after", "must be a name or path from a previous page")
	}
	return p, nil
}

// parseFsPath validates a virtual path from a request field.
func parseFsPath(field, raw string) (vfs.Path, error) {
	if raw == "" {
		return vfs.Path{}, apierr.Invalid(field, "is required")
	}
	vp, err := vfs.Parse(raw)
	if err != nil {
		var pe *vfs.PathError
		if errors.As(err, &pe) {
			return vfs.Path{}, apierr.Invalid(field, "invalid path: %s", pe.Reason)
		}
		return vfs.Path{}, apierr.Invalid(field, "invalid path")
	}
	return vp, nil
}

// ensureParents creates, inside tx, every missing directory above vp below
// its home; an ancestor that is a file is 409.
func ensureParents(ctx context.Context, tx store.Tx, vp vfs.Path) error {
	segs := vp.Segments()
	dir := vp.HomePath()
	for _, seg := range segs[1 : len(segs)-1] {
		var err error
		if dir, err = dir.Join(seg); err != nil {
			return apierr.Invalid("path", "invalid path")
		}
		e, err := tx.GetEntry(ctx, dir.String())
		switch {
		case errors.Is(err, store.ErrNotFound):
			if _, err := tx.CreateEntry(ctx, store.FsEntry{Path: dir.String(), Owner: dir.Home(), Kind: store.FsDir}); err != nil {
				return createErr(dir, err)
			}
		case err != nil:
			return err
		case e.Kind != store.FsDir:
			return apierr.Errorf(apierr.CodeConflict, "%s is a file", dir)
		}
	}
	return nil
}

// requireParentDir refuses vp whose parent is missing (404) or a file (409).
func requireParentDir(ctx context.Context, tx store.Tx, vp vfs.Path) error {
	parent := vp.Parent()
	e, err := tx.GetEntry(ctx, parent.String())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.Errorf(apierr.CodeNotFound, "%s does not exist; create it first or pass recursive", parent)
	case err != nil:
		return err
	case e.Kind != store.FsDir:
		return apierr.Errorf(apierr.CodeConflict, "%s is a file", parent)
	}
	return nil
}

// freeSuffix returns the first of vp-1, vp-2, … that names nothing.
func freeSuffix(ctx context.Context, tx store.Tx, vp vfs.Path) (vfs.Path, error) {
	for n := 1; n <= maxSuffix; n++ {
		cand, err := vp.Suffixed(n)
		if err != nil {
			return vfs.Path{}, apierr.Invalid("path", "no room for a suffix: %v", err)
		}
		switch _, err := tx.GetEntry(ctx, cand.String()); {
		case errors.Is(err, store.ErrNotFound):
			return cand, nil
		case err != nil:
			return vfs.Path{}, err
		}
	}
	return vfs.Path{}, apierr.Errorf(apierr.CodeConflict, "%s and its first %d suffixed names exist", vp, maxSuffix)
}

// createErr maps a CreateEntry error at vp.
func createErr(vp vfs.Path, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrConflict):
		return apierr.Errorf(apierr.CodeConflict, "%s exists", vp)
	case errors.Is(err, store.ErrPrecondition):
		return apierr.Errorf(apierr.CodeConflict, "the parent of %s is not a directory", vp)
	}
	return err
}

// notFound maps the store's ErrNotFound at vp to a 404 naming it.
func notFound(vp vfs.Path, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return apierr.Errorf(apierr.CodeNotFound, "no such file or directory: %s", vp)
	}
	return err
}

// errNotReadable is the one answer for anything p may not see, present or
// not.
func errNotReadable(vp vfs.Path) error {
	return fmt.Errorf("%w: %s is not readable by you", auth.ErrForbidden, vp)
}

// withinQuota refuses (413) adding size bytes to home when its quota
// would not hold them; an overwrite of cur gives cur's bytes back first.
// It runs inside the commit, so concurrent writes cannot both squeeze
// under the quota.
func (f *Fs) withinQuota(ctx context.Context, tx store.Tx, home string, size int64, cur store.FsEntry, overwrite bool) error {
	if f.quotaBytes <= 0 {
		return nil
	}
	used, err := tx.Usage(ctx, home)
	if err != nil {
		return err
	}
	grows := size
	if overwrite && cur.Kind == store.FsFile {
		grows -= cur.Size
	}
	if used+grows > f.quotaBytes {
		return f.errOverQuota(home, used, grows)
	}
	return nil
}

// errOverQuota says why a write does not fit home's quota; used < 0 when
// not known.
func (f *Fs) errOverQuota(home string, used, needs int64) error {
	if used < 0 {
		return apierr.Errorf(apierr.CodePayloadTooLarge, "/%s is over its quota of %d bytes (files.quotaBytes): the body is larger than what is left", home, f.quotaBytes)
	}
	return apierr.Errorf(apierr.CodePayloadTooLarge, "/%s would be over its quota of %d bytes (files.quotaBytes): %d used, this needs %d more", home, f.quotaBytes, used, needs)
}

func errTooLarge(limit int64) error {
	return apierr.Errorf(apierr.CodePayloadTooLarge, "a file holds at most %d bytes (files.maxFileSize)", limit)
}

// normalizeMimeType validates a Content-Type and returns its canonical
// form; "" is application/octet-stream.
func normalizeMimeType(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return defaultMimeType, nil
	}
	mt, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(mt, "/") {
		return "", apierr.Invalid("Content-Type", "must be a media type such as text/plain")
	}
	out := mime.FormatMediaType(mt, params)
	if out == "" || len(out) > maxMimeType {
		return "", apierr.Invalid("Content-Type", "must be a media type of at most %d bytes", maxMimeType)
	}
	return out, nil
}

// fsEntryToProto renders an entry (FsEntry in proto/svc/v1).
func FsEntryToProto(e store.FsEntry) *apiv1.FsEntry {
	pe := &apiv1.FsEntry{
		Path: e.Path, Name: e.Name(), Kind: e.Kind, Size: float64(e.Size), MimeType: e.MimeType,
		Owner: e.Owner, CreatedAt: wire.MS(e.CreatedAt), UpdatedAt: wire.MS(e.UpdatedAt),
	}
	if e.Path == "/" {
		pe.Name = "/"
	}
	if e.Kind == store.FsDir {
		pe.MimeType, pe.Size = dirMimeType, 0
	}
	if e.CreatedAt.IsZero() {
		pe.CreatedAt = 0
	}
	if e.UpdatedAt.IsZero() {
		pe.UpdatedAt = 0
	}
	return pe
}
