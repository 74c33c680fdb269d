package browsertest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// SeriousA11y runs axe-core on the page as it is and returns the
// violations of serious or critical impact: the bar issue 27 sets for
// every page ("no serious or critical violation"). Lesser ones are
// logged, so a run still shows them.
func (p *Page) SeriousA11y(t testing.TB, what string) []AxeViolation {
	t.Helper()
	var bad []AxeViolation
	for _, v := range p.Axe(t) {
		switch v.Impact {
		case "serious", "critical":
			bad = append(bad, v)
		default:
			t.Logf("axe on %s (%s): %s", what, p.Name, v)
		}
	}
	return bad
}

// RequireNoSeriousA11y fails the test when SeriousA11y finds anything,
// listing every violation with a screenshot.
func (p *Page) RequireNoSeriousA11y(t testing.TB, what string) {
	t.Helper()
	bad := p.SeriousA11y(t, what)
	if len(bad) == 0 {
		return
	}
	lines := make([]string, len(bad))
	for i, v := range bad {
		lines[i] = v.String()
	}
	t.Fatalf("axe-core: serious or critical violations on %s:\n%s\nscreenshot: %s", what, strings.Join(lines, "\n"), p.Screenshot("axe-"+what))
}

// Overflowing is one element whose visible part ends right of the
// viewport.
type Overflowing struct {
	// Path is a short CSS-like path to the element (tag#id.class > …).
	Path  string  `json:"path"`
	Right float64 `json:"right"`
	Text  string  `json:"text"`
}

func (o Overflowing) String() string {
	return fmt.Sprintf("%s (right edge %.0f px) %q", o.Path, o.Right, o.Text)
}

// Overflow is what makes the page wider than its viewport: the
// document's scroll width past the viewport's width (innerWidth less a
// vertical scrollbar that takes room), and every visible element
// whose right edge, clipped by the ancestors that hide what overflows
// them, lies past the viewport (only the outermost of nested offenders is
// listed). What sits past the edge inside a box that scrolls sideways
// counts (the person has to scroll to see it: a navigation bar hiding
// Admin), except inside a code block (pre), which scrolls by convention.
func (p *Page) Overflow(t testing.TB) (scrollWidth, viewWidth int, offenders []Overflowing) {
	t.Helper()
	raw := Eval[string](t, p, "measure overflow", overflowJS)
	var out struct {
		ScrollWidth int           `json:"scrollWidth"`
		InnerWidth  int           `json:"innerWidth"`
		Offenders   []Overflowing `json:"offenders"`
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("overflow answer: %v", err)
	}
	return out.ScrollWidth, out.InnerWidth, out.Offenders
}

const overflowJS = `(() => {
  // The layout viewport: innerWidth less a classic scrollbar, if any.
  const vw = document.documentElement.clientWidth;
  const path = (el) => {
    const parts = [];
    for (let e = el; e && e.nodeType === 1 && parts.length < 4; e = e.parentElement) {
      let s = e.tagName.toLowerCase();
      if (e.id) s += '#' + e.id;
      else if (typeof e.className === 'string' && e.className.trim()) s += '.' + e.className.trim().split(/\s+/).slice(0, 2).join('.');
      parts.unshift(s);
      if (e.id) break;
    }
    return parts.join(' > ');
  };
  // Only a box that hides what overflows it (hidden, clip) makes it
  // invisible; one that scrolls sideways (auto, scroll) leaves it for the
  // person to scroll to, which counts, except in a code block, which
  // scrolls by convention.
  const clips = (e) => {
    const x = getComputedStyle(e).overflowX;
    return x === 'hidden' || x === 'clip' || ((x === 'auto' || x === 'scroll') && e.tagName === 'PRE');
  };
  const offenders = [];
  const flagged = new Set();
  for (const el of document.body.querySelectorAll('*')) {
    const s = getComputedStyle(el);
    if (s.display === 'none' || s.visibility === 'hidden' || s.visibility === 'collapse' || Number(s.opacity) === 0) continue;
    if (el.closest('[hidden], dialog:not([open]), details:not([open]) > :not(summary)')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let right = r.right, left = r.left;
    let parentFlagged = false;
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (flagged.has(a)) { parentFlagged = true; break; }
      if (a !== document.body && clips(a)) {
        const ar = a.getBoundingClientRect();
        right = Math.min(right, ar.right);
        left = Math.max(left, ar.left);
      }
    }
    if (parentFlagged || right <= left) continue;
    if (right > vw + 1) {
      flagged.add(el);
      offenders.push({path: path(el), right, text: (el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 60)});
    }
  }
  return JSON.stringify({scrollWidth: document.scrollingElement.scrollWidth, innerWidth: vw, offenders: offenders.slice(0, 20)});
})()`
