// The colour theme: light, dark or the system's (the default). The
// choice is this browser's, kept in localStorage (svc.theme.v1), and
// applied as <html data-theme> before the first page draws; the colours
// themselves are CSS variables (app.css, css/pages.css).
const KEY = 'svc.theme.v1';
export const THEMES = ['system', 'light', 'dark'];

// theme is the stored choice ('system' when none or unreadable).
export function theme() {
  let v = null;
  try { v = localStorage.getItem(KEY); } catch { v = null; }
  return THEMES.includes(v) ? v : 'system';
}

// setTheme stores and applies a choice.
export function setTheme(v) {
  const t = THEMES.includes(v) ? v : 'system';
  try {
    if (t === 'system') localStorage.removeItem(KEY); else localStorage.setItem(KEY, t);
  } catch { /* applied for this page only */ }
  apply(t);
}

function apply(t) {
  if (t === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

// startTheme applies the stored choice and follows another tab's.
export function startTheme() {
  apply(theme());
  window.addEventListener('storage', (e) => { if (e.key === KEY || e.key === null) apply(theme()); });
}
