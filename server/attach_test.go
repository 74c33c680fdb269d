package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"slices"
	"strings"
	"svc/server/apierr"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/auth"
	"svc/store"
	"svc/store/storetest"
)

// attachmentBroker is a broker whose store holds bob's /bob/x.txt and /bob/d,
// admin's /admin/secret.txt, and /admin/shared.txt granted to bob.
func attachmentBroker(t testing.TB) *testBroker {
	t.Helper()
	b, _ := mustBroker(t)
	ctx := context.Background()
	file := func(owner, path, content string) store.FsEntry {
		sum := sha256.Sum256([]byte(content))
		return store.FsEntry{Path: path, Owner: owner, Kind: store.FsFile, Size: int64(len(content)), MimeType: "text/plain", Blob: hex.EncodeToString(sum[:])}
	}
	for _, e := range []store.FsEntry{
		file("bob", "/bob/x.txt", "x"),
		{Path: "/bob/d", Owner: "bob", Kind: store.FsDir},
		file("admin", "/admin/secret.txt", "secret"),
		file("admin", "/admin/shared.txt", "shared"),
	} {
		_, err := b.store.CreateEntry(ctx, e)
		require.NoError(t, err)
	}
	require.NoError(t, storetest.GrantPaths(ctx, b.store, []string{"/admin/shared.txt"}, []string{"bob"}))
	return b
}

func TestAttachmentsNeedReadAccess(t *testing.T) {
	b := attachmentBroker(t)
	bob := &auth.Principal{Member: "bob"}
	admin := &auth.Principal{Member: "admin", Permissions: []string{auth.MembersManage}}
	tests := []struct {
		name string
		p    *auth.Principal
		path string
		want apierr.Code // "" admits
	}{
		{"own file", bob, "/bob/x.txt", ""},
		{"shared with the caller", bob, "/admin/shared.txt", ""},
		{"manager reads any home", admin, "/bob/x.txt", ""},
		{"another member's private file", bob, "/admin/secret.txt", apierr.CodeForbidden},
		{"absent in another home is just as forbidden", bob, "/admin/nothing.txt", apierr.CodeForbidden},
		{"absent in own home", bob, "/bob/nothing.txt", apierr.CodeBadRequest},
		{"directory", bob, "/bob/d", apierr.CodeBadRequest},
		{"home itself", bob, "/bob", apierr.CodeBadRequest},
		{"relative", bob, "bob/x.txt", apierr.CodeBadRequest},
		{"dot dot", bob, "/bob/../admin/secret.txt", apierr.CodeBadRequest},
		{"dot", bob, "/bob/./x.txt", apierr.CodeBadRequest},
		{"double slash", bob, "/bob//x.txt", apierr.CodeBadRequest},
		{"nul", bob, "/bob/x.txt\x00", apierr.CodeBadRequest},
		{"too long", bob, "/bob/" + strings.Repeat("a", maxAttachmentPath), apierr.CodeBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.attachments(context.Background(), tc.p, []string{tc.path})
			if tc.want == "" {
				require.NoError(t, err)
				require.Equal(t, tc.path, got[0].Path)
				require.Equal(t, path.Base(tc.path), got[0].Name)
				require.Positive(t, got[0].Size)
				require.Equal(t, "text/plain", got[0].MimeType)
				return
			}
			require.Equal(t, tc.want, apierr.Classify(err).Code, "%v", err)
		})
	}
	t.Run("at most 64", func(t *testing.T) {
		_, err := b.attachments(context.Background(), bob, slices.Repeat([]string{"/bob/x.txt"}, maxAttachments))
		require.NoError(t, err)
		_, err = b.attachments(context.Background(), bob, slices.Repeat([]string{"/bob/x.txt"}, maxAttachments+1))
		require.Equal(t, apierr.CodeBadRequest, apierr.Classify(err).Code)
	})
}

// Whatever bob may attach is his own or shared with him, however the path
// is spelled.
func FuzzAttachments(f *testing.F) {
	for _, s := range []string{"/bob/x.txt", "/bob/../admin/secret.txt", "/bob/%2e%2e/x", "//admin/secret.txt", "/bob/\x00", "/admin/secret.txt", "/admin/shared.txt/", "/admin//shared.txt"} {
		f.Add(s)
	}
	b := attachmentBroker(f)
	bob := &auth.Principal{Member: "bob"}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := b.attachments(context.Background(), bob, []string{p})
		if err != nil {
			return
		}
		require.Contains(t, []string{"/bob/x.txt", "/admin/shared.txt"}, got[0].Path, "from %q", p)
	})
}
