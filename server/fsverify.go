package server

import (
	"context"
	"errors"
	"svc/server/apierr"
	"sync"

	"svc/server/vfs"
	"svc/store"
)

// FileContent is the content of a file being read: its bytes are checked
// against the blob's name as they stream (vfs.Reader). When they do not
// match, the read that reaches the end fails with an error wrapping
// store.ErrDamaged instead of returning the last bytes; the damage is
// logged and counted once. A caller that has sent the headers must then
// abort the response, so the client sees a failed transfer, not a clean
// copy of damaged content.
type FileContent struct {
	r      *vfs.Reader
	entry  store.FsEntry
	report func(ctx context.Context, e store.FsEntry, err error) error
	once   sync.Once
}

// Read implements io.Reader.
func (c *FileContent) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && errors.Is(err, store.ErrDamaged) {
		c.once.Do(func() { _ = c.report(context.Background(), c.entry, err) })
	}
	return n, err
}

// Close closes the content.
func (c *FileContent) Close() error { return c.r.Close() }

// blobDamaged reports content of e that is not what its entry records:
// an error line an operator acts on (the path, the sha, what was found)
// and svc_blob_damage_total. It returns the client's answer: 500
// data_loss naming the file.
func (f *Fs) blobDamaged(ctx context.Context, e store.FsEntry, err error) error {
	kind := "other"
	var de *vfs.DamageError
	if errors.As(err, &de) {
		kind = de.Kind
	}
	f.log.ErrorContext(ctx, "stored file content damaged: restore the file or remove it",
		"path", e.Path, "sha", e.Blob, "size", e.Size, "kind", kind, "err", err)
	if f.metrics != nil {
		f.metrics.storage.blobDamaged(kind)
	}
	return &apierr.Error{
		Code:    apierr.CodeDataLoss,
		Message: "the content of " + e.Path + " is damaged or missing in the broker's storage; its operator must restore it (see the broker's log)",
		Err:     err,
	}
}
