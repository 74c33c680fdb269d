package server

import (
	"context"
	"errors"
	"fmt"
	"path"

	"svc/server/auth"
	"svc/store"
)

// attachments checks that p may attach each path (a file it can read) and
// describes each. Errors name the offending attachment.
func (b *Broker) attachments(ctx context.Context, p *auth.Principal, paths []string) ([]store.Attachment, error) {
	if len(paths) > maxAttachments {
		return nil, invalid("attachments", "at most %d", maxAttachments)
	}
	out := make([]store.Attachment, 0, len(paths))
	for i, a := range paths {
		if err := checkAttachment(p, a); err != nil {
			var e *Error
			if errors.As(err, &e) && e.Code == CodeBadRequest {
				return nil, invalid(fmt.Sprintf("attachments[%d]", i), "%s", e.Message)
			}
			return nil, err
		}
		out = append(out, store.Attachment{Path: a, Name: path.Base(a)})
	}
	return out, nil
}
