package browsertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/cmd/svc/internal/npmcache"
)

// AxeVersion is the pinned axe-core release.
const AxeVersion = "4.11.0"

var axePackage = npmcache.Package{
	Name: "axe-core", Version: AxeVersion,
	Dir:            "axe-core-" + AxeVersion,
	InstallTimeout: 3 * time.Minute,
	Verify: func(dir string) error {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "package.json"))
		if err != nil {
			return err
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(b, &pkg); err != nil {
			return err
		}
		if pkg.Version != AxeVersion {
			return fmt.Errorf("axe-core %s installed, want %s", pkg.Version, AxeVersion)
		}
		_, err = os.Stat(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
		return err
	},
}

// axeSource is axe.min.js, read once per process.
func axeSource(t testing.TB) string {
	t.Helper()
	dir, err := axePackage.Ensure(t)
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	return string(b)
}

// AxeViolation is one rule axe found broken.
type AxeViolation struct {
	ID      string `json:"id"`
	Impact  string `json:"impact"`
	Help    string `json:"help"`
	HelpURL string `json:"helpUrl"`
	Nodes   []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v AxeViolation) String() string {
	var targets []string
	for _, n := range v.Nodes {
		targets = append(targets, fmt.Sprint(n.Target...))
	}
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
}

// Axe runs axe-core on the page as it is (WCAG 2 A and AA rules and best
// practices) and returns the violations. The script is evaluated through
// the DevTools protocol, which the page's CSP does not govern; the page
// itself still runs under its CSP.
func (p *Page) Axe(t testing.TB) []AxeViolation {
	t.Helper()
	src := axeSource(t)
	Eval[int](t, p, "load axe-core", src+";0")
	raw := Eval[string](t, p, "run axe-core", `axe.run(document, {resultTypes: ['violations']}).then(r => JSON.stringify(r.violations))`)
	var out []AxeViolation
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("axe-core answer: %v", err)
	}
	return out
}

// RequireNoCriticalA11y fails the test when axe finds a critical
// violation; lesser ones are logged.
func (p *Page) RequireNoCriticalA11y(t testing.TB, what string) {
	t.Helper()
	var critical []string
	for _, v := range p.Axe(t) {
		if v.Impact == "critical" {
			critical = append(critical, v.String())
		} else {
			t.Logf("axe on %s (%s): %s", what, p.Name, v)
		}
	}
	if len(critical) > 0 {
		shot := p.Screenshot("axe-" + what)
		t.Fatalf("axe-core: critical accessibility violations on %s:\n%s\nscreenshot: %s", what, strings.Join(critical, "\n"), shot)
	}
}
