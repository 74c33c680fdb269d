package server

import (
	"context"
	"errors"
	"fmt"
	"svc/server/apierr"

	"svc/server/auth"
	"svc/server/vfs"
	"svc/store"
)

// Bounds of attachments, of messages and objectives alike: how many, and
// how long a path.
const (
	maxAttachments    = 64
	maxAttachmentPath = 1024
)

// attachments checks that p may attach each path, a file it can read (its
// own, any with members.manage, or one shared with it), and describes each.
// Errors name the offending attachment: 403 when p may not read it (whether
// or not it exists), 400 when it is malformed, absent or a directory.
func (c *core) attachments(ctx context.Context, p *auth.Principal, paths []string) ([]store.Attachment, error) {
	if len(paths) > maxAttachments {
		return nil, apierr.Invalid("attachments", "at most %d", maxAttachments)
	}
	out := make([]store.Attachment, 0, len(paths))
	for i, a := range paths {
		field := fmt.Sprintf("attachments[%d]", i)
		if len(a) > maxAttachmentPath {
			return nil, apierr.Invalid(field, "at most %d bytes", maxAttachmentPath)
		}
		e, err := c.readableFile(ctx, p, a)
		var se *apierr.Error
		switch {
		case errors.As(err, &se) && se.Code == apierr.CodeNotFound:
			return nil, apierr.Invalid(field, "attachment not found: %s", a)
		case errors.As(err, &se) && se.Code == apierr.CodeBadRequest:
			return nil, apierr.Invalid(field, "%s", se.Message)
		case errors.Is(err, auth.ErrForbidden):
			return nil, fmt.Errorf("%w: attachment %s is not readable by you", auth.ErrForbidden, a)
		case err != nil:
			return nil, err
		case e.Kind != store.FsFile:
			return nil, apierr.Invalid(field, "attachment is a directory: %s", a)
		}
		out = append(out, store.Attachment{Path: e.Path, Name: e.Name(), Size: e.Size, MimeType: e.MimeType, EntryID: e.ID})
	}
	return out, nil
}

// entryIDs are the filesystem entries of attachments, for grants.
func entryIDs(as []store.Attachment) []int64 {
	ids := make([]int64, len(as))
	for i, a := range as {
		ids[i] = a.EntryID
	}
	return ids
}

// readableFile returns the entry at path if p may read it: 400 for a bad
// path (the root included), 403 when p may not read it whether or not it
// exists, 404 when it is absent where p may read. Readable: p's own home,
// every home with members.manage, and a file granted to p or to everyone.
// Directories are returned too; callers that need a file refuse them.
func (c *core) readableFile(ctx context.Context, p *auth.Principal, path string) (store.FsEntry, error) {
	vp, err := parseFsPath("path", path)
	if err != nil {
		return store.FsEntry{}, err
	}
	if vp.IsRoot() {
		return store.FsEntry{}, apierr.Invalid("path", "must name an entry inside a home")
	}
	return c.entryFor(ctx, p, vp, func(ctx context.Context, member, path string) (bool, error) {
		return c.store.HasGrant(ctx, path, member)
	})
}

// entryFor returns the entry at vp if p owns its home, manages, or shared
// says the entry is shared with p: 403 otherwise whether or not it exists,
// 404 when it is absent where p may look.
func (c *core) entryFor(ctx context.Context, p *auth.Principal, vp vfs.Path, shared func(ctx context.Context, member, path string) (bool, error)) (store.FsEntry, error) {
	if !ownsOrManages(p, vp) {
		ok, err := shared(ctx, p.Member, vp.String())
		if err != nil {
			return store.FsEntry{}, err
		}
		if !ok {
			return store.FsEntry{}, errNotReadable(vp)
		}
	}
	e, err := c.store.GetEntry(ctx, vp.String())
	if err != nil {
		return store.FsEntry{}, notFound(vp, err)
	}
	return e, nil
}
