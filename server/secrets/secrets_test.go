package secrets

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"svc/server/apierr"
)

func TestValidEnvName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"GH_TOKEN", true}, {"_X", true}, {"A1", true}, {"A", true},
		{"", false}, {"gh_token", false}, {"1A", false}, {"A-B", false}, {"A B", false}, {"Ä", false},
		{"PATH", false}, {"HOME", false}, {"USER", false}, {"SHELL", false}, {"PWD", false}, {"TERM", false},
		{"SVC_TOKEN", false}, {"LD_PRELOAD", false}, {"DYLD_INSERT_LIBRARIES", false}, {"SVC_", false},
		{"PATHS", true}, {"MY_SVC_X", true}, {strings.Repeat("A", maxEnvName), true}, {strings.Repeat("A", maxEnvName+1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validEnvName("envName", tc.name)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.Equal(t, apierr.CodeBadRequest, apierr.Classify(err).Code)
			}
		})
	}
}

// FuzzEnvName holds validEnvName to its grammar: an accepted envName
// matches ^[A-Z_][A-Z0-9_]*$, is bounded and reserved by no rule. It
// never panics.
func FuzzEnvName(f *testing.F) {
	for _, s := range []string{"", "GH_TOKEN", "PATH", "SVC_X", "LD_", "DYLD_X", "a", "a-b", "a__b", "resolve", "\x00", "Ä", "A\nB", strings.Repeat("A", 200)} {
		f.Add(s)
	}
	env := regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
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
	})
}
