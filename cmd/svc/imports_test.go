package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportRules enforces the dependency direction of docs/ARCHITECTURE.md
// on the non-test imports of every package in the module.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "sqlite_omit_load_extension",
		"-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "svc/...").CombinedOutput()
	require.NoError(t, err, string(out))

	// allowed lists, per package prefix, the module packages it may import;
	// forbidden lists outside packages it must not touch.
	rules := []struct {
		name      string
		pkg       string
		allowed   []string
		forbidden []string
	}{
		{name: "gen imports nothing of ours", pkg: "svc/gen", allowed: []string{"svc/gen"}},
		{name: "store stays transport-free", pkg: "svc/store", allowed: []string{"svc/store"},
			forbidden: []string{"google.golang.org/grpc", "google.golang.org/protobuf", "net/http"}},
		{name: "server uses store, gen and itself", pkg: "svc/server",
			allowed: []string{"svc/server", "svc/store", "svc/gen"}, forbidden: []string{"svc/store/sqlite"}},
		{name: "gateway uses server and gen", pkg: "svc/gateway",
			allowed: []string{"svc/gateway", "svc/server", "svc/gen"}},
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NotEmpty(t, lines)
	for _, tc := range rules {
		t.Run(tc.name, func(t *testing.T) {
			checked := 0
			for _, line := range lines {
				fields := strings.Fields(line)
				pkg, imports := fields[0], fields[1:]
				if pkg != tc.pkg && !strings.HasPrefix(pkg, tc.pkg+"/") {
					continue
				}
				checked++
				for _, imp := range imports {
					if strings.HasPrefix(imp, "svc/") && !hasAnyPrefix(imp, tc.allowed) {
						t.Errorf("%s imports %s", pkg, imp)
					}
					if hasAnyPrefix(imp, tc.forbidden) {
						t.Errorf("%s imports forbidden %s", pkg, imp)
					}
				}
			}
			require.Positive(t, checked, "no package matched %s", tc.pkg)
		})
	}
	for _, line := range lines {
		for _, imp := range strings.Fields(line)[1:] {
			require.False(t, strings.HasPrefix(imp, "svc/cmd"), "%s imports %s: nothing imports cmd", strings.Fields(line)[0], imp)
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}
