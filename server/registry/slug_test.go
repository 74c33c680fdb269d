package registry

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/apierr"
)

func TestValidSlug(t *testing.T) {
	for _, tc := range []struct {
		slug string
		ok   bool
	}{
		{"gh", true}, {"a-b", true}, {"a1", true}, {strings.Repeat("a", 32), true},
		{"", false}, {"A", false}, {"a_b", false}, {"a--b", false}, {"-a", false}, {"a-", false},
		{strings.Repeat("a", 33), false}, {"resolve", false}, {"a/b", false}, {"a.b", false},
	} {
		t.Run(tc.slug, func(t *testing.T) {
			err := ValidSlug("slug", tc.slug)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Equal(t, apierr.CodeBadRequest, apierr.Classify(err).Code)
			}
		})
	}
}

// FuzzSlug holds ValidSlug to its grammar: an accepted slug is a bounded
// lowercase slug without "__" and never reserved. It never panics.
func FuzzSlug(f *testing.F) {
	for _, s := range []string{"", "GH_TOKEN", "PATH", "a", "a-b", "a__b", "a--b", "-a", "resolve", "\x00", "Ä", "A\nB", strings.Repeat("a", 200)} {
		f.Add(s)
	}
	slug := regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if ValidSlug("slug", s) == nil {
			if !slug.MatchString(s) || strings.Contains(s, "--") || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") || s == "resolve" || strings.Contains(s, "__") {
				t.Fatalf("slug %q accepted", s)
			}
		}
	})
}
