// History routing under /ui/: every app path serves the same shell, and
// links marked data-nav change pages without a reload.

const routes = new Map();
let fallback = null;
let render = () => {};

// route registers a page for an exact path ('/ui/chat').
export function route(path, page) { routes.set(path, page); }

// routeUnder registers a page for every path below prefix
// ('/ui/objectives/' → /ui/objectives/<id>); the page reads the rest.
const prefixes = [];
export function routeUnder(prefix, page) { prefixes.push([prefix, page]); }

// setFallback sets the page of an unknown /ui/ path.
export function setFallback(page) { fallback = page; }

// onRender sets what runs on every navigation: (page, url) => void.
export function onRender(fn) { render = fn; }

export function current() {
  const path = location.pathname.replace(/\/+$/, '') || '/ui';
  const under = prefixes.find(([p]) => path.startsWith(p) && path.length > p.length);
  return {path, page: routes.get(path === '/ui' ? '/ui/' : path) || (under && under[1]) || fallback, url: new URL(location.href)};
}

export function navigate(to, {replace = false} = {}) {
  const u = new URL(to, location.origin);
  if (u.origin !== location.origin || !u.pathname.startsWith('/ui/')) return;
  if (replace) history.replaceState(null, '', u.pathname + u.search);
  else if (u.pathname + u.search !== location.pathname + location.search) history.pushState(null, '', u.pathname + u.search);
  refresh();
}

export function refresh() {
  const c = current();
  render(c.page, c.url);
}

export function startRouter() {
  window.addEventListener('popstate', refresh);
  document.addEventListener('click', (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = e.target instanceof Element ? e.target.closest('a[data-nav]') : null;
    if (!a) return;
    e.preventDefault();
    navigate(a.getAttribute('href'));
  });
  refresh();
}
