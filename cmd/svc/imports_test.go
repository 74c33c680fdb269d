package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// importRule constrains the non-test imports of the packages under pkg.
type importRule struct {
	name string
	pkg  string // a package and everything under it
	// except are packages under pkg the rule does not cover.
	except []string
	// allowed, when set, lists the module packages (and their subpackages)
	// the covered packages may import; any other svc/ import breaks the rule.
	allowed []string
	// forbidden lists packages (and subpackages) they must never import.
	// An entry ending in "!" forbids that package alone, not its
	// subpackages.
	forbidden []string
	// future rules cover packages that may not exist yet (the client
	// packages); the others must match at least one package.
	future bool
}

// sharedPackages are the subpackages of server every service and
// capability uses (the error table); capabilityPackages are the
// capabilities that have left the server root for packages of their own,
// plannedCapabilities those still to leave it (docs/ARCHITECTURE.md,
// Capabilities and shared packages). The other subpackages of server are
// engines: pure mechanisms that know nothing of the services.
var (
	sharedPackages      = []string{"svc/server/apierr", "svc/server/registry", "svc/server/wire"}
	capabilityPackages  = []string{"svc/server/notify", "svc/server/toolsources", "svc/server/secrets", "svc/server/activity"}
	plannedCapabilities = []string{}
)

// capabilityRules: a capability imports the shared packages, engines,
// store and gen, never the root or another capability. A planned
// capability's rule is a future rule: it applies once the package exists.
func capabilityRules() []importRule {
	all := append(slices.Clone(capabilityPackages), plannedCapabilities...)
	var out []importRule
	for _, c := range all {
		forbidden := []string{"svc/server!", "svc/gateway", "svc/cmd"}
		for _, other := range all {
			if other != c {
				forbidden = append(forbidden, other)
			}
		}
		out = append(out, importRule{name: "capability " + c + " never imports the root or another capability", pkg: c,
			allowed: []string{"svc/server", "svc/store", "svc/gen", "svc/redact"}, forbidden: forbidden,
			future: slices.Contains(plannedCapabilities, c)})
	}
	return out
}

// importRules are the import rules of docs/ARCHITECTURE.md.
var importRules = append([]importRule{
	{name: "gen imports nothing of ours", pkg: "svc/gen", allowed: []string{"svc/gen"}},
	// The one redaction engine, shared by the broker and the runner (which
	// may never import server): a leaf.
	{name: "redact imports nothing of ours", pkg: "svc/redact", allowed: []string{"svc/redact"}},
	{name: "store stays transport-free", pkg: "svc/store", allowed: []string{"svc/store"},
		forbidden: []string{"google.golang.org/grpc", "google.golang.org/protobuf", "net/http"}},
	{name: "server uses store, gen, redact and itself", pkg: "svc/server",
		allowed: []string{"svc/server", "svc/store", "svc/gen", "svc/redact"}, forbidden: []string{"svc/store/sqlite", "svc/store/postgres"}},
	{name: "engines never import the server root or the gateway", pkg: "svc/server", except: []string{"svc/server!"},
		forbidden: []string{"svc/server!", "svc/gateway", "svc/cmd"}},
	// The engines and the store count in plain atomics the server reads
	// for GET /metrics (server/metrics.go): Prometheus stays above them.
	{name: "engines and the store know nothing of Prometheus", pkg: "svc", except: []string{"svc/server!", "svc/gateway", "svc/cmd"},
		forbidden: []string{"github.com/prometheus"}},
	{name: "gateway uses server and gen", pkg: "svc/gateway",
		allowed: []string{"svc/gateway", "svc/server", "svc/gen"}},
	{name: "clients are real clients: gen and grpc, never server or store", pkg: "svc/cmd/internal", future: true,
		allowed: []string{"svc/cmd/internal", "svc/gen", "svc/redact"}, forbidden: []string{"svc/server", "svc/store", "svc/gateway"}},
	{name: "the load generator is a real client too", pkg: "svc/cmd/svcload",
		allowed: []string{"svc/gen"}, forbidden: []string{"svc/server", "svc/store", "svc/gateway"}},
	{name: "nothing outside cmd imports cmd", pkg: "svc", except: []string{"svc/cmd"}, forbidden: []string{"svc/cmd"}},
}, append(sharedRules(), capabilityRules()...)...)

// sharedRules: a shared package imports engines, store and gen, never the
// root or a capability.
func sharedRules() []importRule {
	var out []importRule
	for _, p := range sharedPackages {
		out = append(out, importRule{name: "shared package " + p + " never imports the root or a capability", pkg: p,
			forbidden: append([]string{"svc/server!", "svc/gateway", "svc/cmd"}, append(slices.Clone(capabilityPackages), plannedCapabilities...)...)})
	}
	return out
}

// TestImportRules enforces the dependency direction of
// docs/ARCHITECTURE.md on the non-test imports of every package in the
// module.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "sqlite_omit_load_extension",
		"-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "svc/...").CombinedOutput()
	require.NoError(t, err, string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.NotEmpty(t, lines)
	for _, r := range importRules {
		t.Run(r.name, func(t *testing.T) {
			checked, violations := checkImports(lines, r)
			require.Empty(t, violations)
			if !r.future {
				require.Positive(t, checked, "no package matched %s", r.pkg)
			}
		})
	}
}

// Each rule catches what it forbids, so a rule that could never fail
// cannot pass unnoticed.
func TestImportRulesCatchViolations(t *testing.T) {
	rule := func(name string) importRule {
		for _, r := range importRules {
			if r.name == name {
				return r
			}
		}
		t.Fatalf("no rule %q", name)
		return importRule{}
	}
	tests := []struct {
		rule string
		line string
		want int // violations; -1: the rule does not cover the package
	}{
		{"gen imports nothing of ours", "svc/gen/svc/v1 svc/store", 1},
		{"gen imports nothing of ours", "svc/gen/svc/v1 google.golang.org/grpc", 0},
		{"redact imports nothing of ours", "svc/redact svc/store", 1},
		{"redact imports nothing of ours", "svc/redact svc/server/otlp", 1},
		{"redact imports nothing of ours", "svc/redact encoding/base64 strings", 0},
		{"store stays transport-free", "svc/store/sqlite net/http", 1},
		{"store stays transport-free", "svc/store/sqlite svc/redact", 1},
		{"store stays transport-free", "svc/store/sqlite svc/gen/svc/v1", 1},
		{"store stays transport-free", "svc/store/sqlite svc/store database/sql", 0},
		{"server uses store, gen, redact and itself", "svc/server svc/store/sqlite", 1},
		{"server uses store, gen, redact and itself", "svc/server svc/store/postgres", 1},
		{"gateway uses server and gen", "svc/gateway svc/store/postgres", 1},
		{"server uses store, gen, redact and itself", "svc/server svc/gateway", 1},
		{"server uses store, gen, redact and itself", "svc/server svc/redact svc/server/otlp", 0},
		{"gateway uses server and gen", "svc/gateway svc/redact", 1},
		{"engines never import the server root or the gateway", "svc/server/hub svc/server", 1},
		{"engines never import the server root or the gateway", "svc/server/egress svc/gateway", 1},
		{"engines never import the server root or the gateway", "svc/server/teamconfig svc/server/auth svc/server/kek", 0},
		{"engines never import the server root or the gateway", "svc/server svc/server/hub", -1},
		{"engines and the store know nothing of Prometheus", "svc/server/hub github.com/prometheus/client_golang/prometheus", 1},
		{"engines and the store know nothing of Prometheus", "svc/store/sqlite github.com/prometheus/client_golang/prometheus", 1},
		{"engines and the store know nothing of Prometheus", "svc/server/groupcommit sync/atomic", 0},
		{"engines and the store know nothing of Prometheus", "svc/server github.com/prometheus/client_golang/prometheus", -1},
		{"gateway uses server and gen", "svc/gateway svc/store", 1},
		{"clients are real clients: gen and grpc, never server or store", "svc/cmd/internal/client svc/server/auth", 2},
		{"clients are real clients: gen and grpc, never server or store", "svc/cmd/internal/mcp svc/store", 2},
		{"clients are real clients: gen and grpc, never server or store", "svc/cmd/internal/runner svc/gen/svc/v1 svc/cmd/internal/client google.golang.org/grpc", 0},
		{"clients are real clients: gen and grpc, never server or store", "svc/cmd/internal/runner svc/redact", 0},
		{"nothing outside cmd imports cmd", "svc/server svc/cmd/internal/client", 1},
		{"nothing outside cmd imports cmd", "svc/cmd/svc svc/cmd/internal/client", -1},
		{"shared package svc/server/apierr never imports the root or a capability", "svc/server/apierr svc/server", 1},
		{"shared package svc/server/apierr never imports the root or a capability", "svc/server/apierr svc/server/notify", 1},
		{"shared package svc/server/apierr never imports the root or a capability", "svc/server/apierr svc/server/auth svc/store", 0},
		{"shared package svc/server/registry never imports the root or a capability", "svc/server/registry svc/server", 1},
		{"shared package svc/server/registry never imports the root or a capability", "svc/server/registry svc/server/toolsources", 1},
		{"shared package svc/server/registry never imports the root or a capability",
			"svc/server/registry svc/server/apierr svc/server/auth svc/server/kek svc/store", 0},
		{"capability svc/server/notify never imports the root or another capability", "svc/server/notify svc/server", 1},
		{"capability svc/server/notify never imports the root or another capability", "svc/server/notify svc/server/toolsources", 1},
		{"capability svc/server/notify never imports the root or another capability", "svc/server/notify svc/gateway", 2},
		{"capability svc/server/notify never imports the root or another capability",
			"svc/server/notify svc/server/apierr svc/server/hooks svc/server/kek svc/store svc/gen/svc/v1", 0},
		{"capability svc/server/notify never imports the root or another capability", "svc/server/hooks svc/server", -1},
		{"capability svc/server/toolsources never imports the root or another capability", "svc/server/toolsources svc/server/secrets", 1},
		{"capability svc/server/toolsources never imports the root or another capability",
			"svc/server/toolsources svc/server/registry svc/server/apierr svc/server/toolcall svc/store svc/gen/svc/v1", 0},
		{"capability svc/server/secrets never imports the root or another capability", "svc/server/secrets svc/server", 1},
		{"capability svc/server/secrets never imports the root or another capability", "svc/server/secrets svc/server/toolsources", 1},
	}
	for _, tc := range tests {
		t.Run(tc.rule+": "+tc.line, func(t *testing.T) {
			checked, violations := checkImports([]string{tc.line}, rule(tc.rule))
			if tc.want < 0 {
				require.Zero(t, checked)
				return
			}
			require.Equal(t, 1, checked)
			require.Len(t, violations, tc.want, "%v", violations)
		})
	}
}

// checkImports applies r to lines of "package import import ...": how many
// packages it covered, and what broke it.
func checkImports(lines []string, r importRule) (checked int, violations []string) {
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if !matches(pkg, []string{r.pkg}) || matches(pkg, r.except) {
			continue
		}
		checked++
		for _, imp := range imports {
			if r.allowed != nil && strings.HasPrefix(imp, "svc/") && !matches(imp, r.allowed) {
				violations = append(violations, fmt.Sprintf("%s imports %s", pkg, imp))
			}
			if matches(imp, r.forbidden) {
				violations = append(violations, fmt.Sprintf("%s imports forbidden %s", pkg, imp))
			}
		}
	}
	return checked, violations
}

// matches reports whether p is one of the packages, or under one; an entry
// ending in "!" matches that package alone.
func matches(p string, packages []string) bool {
	for _, q := range packages {
		if exact, ok := strings.CutSuffix(q, "!"); ok {
			if p == exact {
				return true
			}
			continue
		}
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}
