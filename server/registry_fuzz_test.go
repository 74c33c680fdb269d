package server

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzRegistryNames holds validEnvName and validRegistrySlug to their
// grammars: an accepted envName matches ^[A-Z_][A-Z0-9_]*$, is bounded
// and reserved by no rule; an accepted slug is a bounded lowercase
// slug without "__" and never reserved. Neither panics.
func FuzzRegistryNames(f *testing.F) {
	for _, s := range []string{"", "GH_TOKEN", "PATH", "SVC_X", "LD_", "DYLD_X", "a", "a-b", "a__b", "resolve", "\x00", "Ä", "A\nB", strings.Repeat("A", 200)} {
		f.Add(s)
	}
	env := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	slug := regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if validEnvName("envName", s) == nil {
			if !env.MatchString(s) || len(s) > maxEnvName || slices.Contains(reservedEnvNames, s) {
				t.Fatalf("envName %q accepted", s)
			}
			for _, p := range reservedEnvPrefixes {
				if strings.HasPrefix(s, p) {
					t.Fatalf("envName %q with a reserved prefix accepted", s)
				}
			}
		}
		if validRegistrySlug("slug", s) == nil {
			if !slug.MatchString(s) || strings.Contains(s, "--") || strings.HasPrefix(s, "-") || strings.HasSuffix(s, "-") || s == "resolve" || strings.Contains(s, "__") {
				t.Fatalf("slug %q accepted", s)
			}
		}
	})
}
