package gateway

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	importRE     = regexp.MustCompile(`(?m)^import\s*\{([^}]*)\}\s*from\s*'([^']+)'`)
	exportDeclRE = regexp.MustCompile(`(?m)^export\s+(?:async\s+)?(?:function\*?|const|let|var|class)\s+([A-Za-z_$][\w$]*)`)
	// A minified vendored module ends its last statement with `;export{…}`.
	exportListRE   = regexp.MustCompile(`(?m)(?:^|;)export\s*\{([^}]*)\}`)
	importAnyRE    = regexp.MustCompile(`(?m)^import\s`)
	importedNameRE = regexp.MustCompile(`^[A-Za-z_$][\w$]*$`)
	// lazyRE is a page loaded on first use: lazy(title, () =>
	// import('./pages/x.js'), 'xPage'); dynamicRE is any dynamic import.
	lazyRE    = regexp.MustCompile(`import\('([^']+)'\),\s*'([A-Za-z_$][\w$]*)'\)`)
	dynamicRE = regexp.MustCompile(`import\('([^']+)'\)`)
)

// TestWebUIImportsResolve checks that every named import of the web app's
// modules is exported by the module it names. A missing export is a link
// error in the browser: the whole app fails to load, on every page. Two
// branches merged in parallel did exactly that once (objectives.js imported
// live.js's advance after chat had removed it).
func TestWebUIImportsResolve(t *testing.T) {
	exports := map[string]map[string]bool{}
	sources := map[string]string{}
	err := fs.WalkDir(uiFiles, "ui/static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, err := fs.ReadFile(uiFiles, p)
		if err != nil {
			return err
		}
		src := string(b)
		sources[p] = src
		names := map[string]bool{}
		for _, m := range exportDeclRE.FindAllStringSubmatch(src, -1) {
			names[m[1]] = true
		}
		for _, m := range exportListRE.FindAllStringSubmatch(src, -1) {
			for _, item := range strings.Split(m[1], ",") {
				f := strings.Fields(item)
				if len(f) == 3 && f[1] == "as" {
					names[f[2]] = true
				} else if len(f) == 1 {
					names[f[0]] = true
				}
			}
		}
		exports[p] = names
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, sources)

	checked, lazy := 0, 0
	for p, src := range sources {
		// Every import statement must be of the named form this test reads,
		// so none escapes the check.
		require.Equal(t, len(importAnyRE.FindAllString(src, -1)), len(importRE.FindAllString(src, -1)),
			"%s: an import this test cannot read (use import {a, b} from './x.js')", p)
		for _, m := range importRE.FindAllStringSubmatch(src, -1) {
			target := path.Clean(path.Join(path.Dir(p), m[2]))
			names, ok := exports[target]
			require.True(t, ok, "%s imports %s, which is not among the embedded modules", p, m[2])
			for _, item := range strings.Split(m[1], ",") {
				f := strings.Fields(item)
				if len(f) == 0 {
					continue
				}
				name := f[0]
				require.Regexp(t, importedNameRE, name, "%s: import list %q", p, m[1])
				require.True(t, names[name], "%s imports %s from %s, which does not export it", p, name, m[2])
				checked++
			}
		}
		// Dynamic imports: the module must exist; a lazy page's named
		// export must too (a miss shows "could not be loaded" only when the
		// page is opened, so nothing else would catch it).
		for _, m := range dynamicRE.FindAllStringSubmatch(src, -1) {
			_, ok := exports[path.Clean(path.Join(path.Dir(p), m[1]))]
			require.True(t, ok, "%s imports %s dynamically, which is not among the embedded modules", p, m[1])
		}
		for _, m := range lazyRE.FindAllStringSubmatch(src, -1) {
			target := path.Clean(path.Join(path.Dir(p), m[1]))
			require.True(t, exports[target][m[2]], "%s loads %s from %s, which does not export it", p, m[2], m[1])
			lazy++
		}
	}
	require.Greater(t, lazy, 5, "the lazy-page pattern no longer matches app.js")
	require.Greater(t, checked, 50, "the import pattern no longer matches the app's modules")
}
