// The app shell: session, layout with navigation, and the page router.
import {h, replace} from './h.js';
import {startTheme} from './theme.js';
import {api, onUnauthenticated, errorText} from './api.js';
import {route, routeUnder, setFallback, onRender, navigate, startRouter, refresh} from './router.js';
import {startLive, stopLive, onLiveState, liveState} from './live.js';
import {followLive} from './teamlive.js';
import {signinPage} from './pages/signin.js';
import {welcomePage} from './pages/welcome.js';
import {chatPage} from './pages/chat.js';
import {onPendingCount} from './approvals.js';
import {notFoundPage} from './pages/placeholder.js';

// lazy is a page whose module loads when it is first opened: the first
// load carries the shell, sign-in and Chat only. load() is a dynamic
// import; name the page's export (checked by gateway's import test).
function lazy(title, load, name) {
  let mod = null;
  return {
    title, auth: true,
    render(main, ctx) {
      let alive = true;
      let inner = null;
      const show = (page) => {
        if (!alive) return;
        const focused = document.activeElement === main || document.activeElement === document.body;
        main.replaceChildren();
        document.title = page.title + ' · svc';
        inner = page.render(main, ctx);
        const h1 = main.querySelector('h1');
        if (focused && h1) { h1.setAttribute('tabindex', '-1'); h1.focus(); }
      };
      if (mod) show(mod);
      else {
        main.append(h('p', {class: 'msg', role: 'status'}, 'Loading…'));
        load().then((m) => { mod = m[name]; show(mod); }, (err) => {
          if (alive) replace(main, h('p', {class: 'msg error', role: 'alert'}, 'This page could not be loaded: ' + errorText(err)));
        });
      }
      return () => { alive = false; if (typeof inner === 'function') inner(); };
    },
  };
}

const teamPage = lazy('Team', () => import('./pages/team.js'), 'teamPage');
const enrollPage = lazy('Device enrollment', () => import('./pages/enroll.js'), 'enrollPage');
const objectivesPage = lazy('Objectives', () => import('./pages/objectives.js'), 'objectivesPage');
const filesPage = lazy('Files', () => import('./pages/files.js'), 'filesPage');
const activityPage = lazy('Activity', () => import('./pages/activity.js'), 'activityPage');
const adminPage = lazy('Admin', () => import('./pages/admin.js'), 'adminPage');
const settingsPage = lazy('Settings', () => import('./pages/settings.js'), 'settingsPage');

// NAV is the main navigation, in order.
const NAV = [
  {path: '/ui/chat', label: 'Chat', page: chatPage},
  {path: '/ui/team', label: 'Team', page: teamPage},
  {path: '/ui/objectives', label: 'Objectives', page: objectivesPage},
  {path: '/ui/files', label: 'Files', page: filesPage},
  {path: '/ui/activity', label: 'Activity', page: activityPage},
  {path: '/ui/admin', label: 'Admin', page: adminPage},
  {path: '/ui/settings', label: 'Settings', page: settingsPage},
];

// safeNext is where to go after signing in: the ?next= path when, once
// the browser has resolved it (dot segments, percent-escapes), it is still
// a page of ours; else Chat.
function safeNext(next) {
  if (!next) return '/ui/chat';
  let u;
  try { u = new URL(next, location.origin); } catch { return '/ui/chat'; }
  if (u.origin !== location.origin || !u.pathname.startsWith('/ui/') || u.pathname.startsWith('/ui/signin')) return '/ui/chat';
  return u.pathname + u.search;
}

// app is what pages get: the session and a few actions.
const app = {
  session: null,
  async signedIn(session) {
    app.session = session;
    startLive(session.member);
    navigate(safeNext(new URL(location.href).searchParams.get('next')), {replace: true});
  },
  async signOut() {
    if (app.session) {
      try {
        const {optOutOnSignOut} = await import('./pages/settings.js');
        await optOutOnSignOut(app.session.member);
      } catch { /* signing out never fails for push */ }
    }
    try { await api('POST', '/session/logout'); } catch { /* the cookie is gone either way below */ }
    app.ended();
  },
  ended() {
    app.session = null;
    stopLive();
    navigate('/ui/signin', {replace: true});
  },
};

const root = document.getElementById('app');
let cleanup = null;

function layout(page) {
  const main = h('main', {id: 'main', tabindex: '-1'});
  if (!app.session) {
    return {node: h('div', {class: 'shell out'}, h('header', {class: 'top'}, h('span', {class: 'brand'}, 'svc')), main), main};
  }
  const status = h('span', {class: 'live', role: 'status', 'aria-live': 'polite'});
  const showState = (s) => {
    status.dataset.state = s;
    status.textContent = {live: 'Live', connecting: 'Connecting…', reconnecting: 'Reconnecting…', idle: 'Offline'}[s] || s;
  };
  showState(liveState());
  const off = onLiveState(showState);
  const skip = h('a', {class: 'skip', href: '#main', onclick: (e) => { e.preventDefault(); main.focus(); }}, 'Skip to content');
  // Team carries the number of approvals waiting for this person.
  const approvalsBadge = h('span', {class: 'badge', id: 'approvals-badge', hidden: true});
  const offApprovals = onPendingCount((n) => {
    approvalsBadge.hidden = n === 0;
    approvalsBadge.textContent = n > 99 ? '99+' : String(n);
    approvalsBadge.setAttribute('aria-label', n === 1 ? '1 approval waits for you' : n + ' approvals wait for you');
  });
  // On a phone the navigation folds behind a menu button, so every page
  // (Admin and Settings too) stays one tap away without sideways scrolling.
  const menuBtn = h('button', {type: 'button', class: 'quiet menu-toggle', 'aria-controls': 'main-nav', 'aria-expanded': 'false',
    onclick: () => setMenu(menuBtn.getAttribute('aria-expanded') !== 'true')}, h('span', {'aria-hidden': 'true'}, '☰ '), 'Menu');
  const nav = h('nav', {'aria-label': 'Main', id: 'main-nav'}, h('ul', {},
    NAV.map((n) => h('li', {}, h('a', {href: n.path, 'data-nav': '', 'aria-current': n.page === page ? 'page' : null}, n.label,
      n.page === teamPage ? [' ', approvalsBadge] : null)))));
  const setMenu = (open) => {
    menuBtn.setAttribute('aria-expanded', open ? 'true' : 'false');
    nav.classList.toggle('open', open);
  };
  nav.addEventListener('keydown', (e) => { if (e.key === 'Escape' && nav.classList.contains('open')) { setMenu(false); menuBtn.focus(); } });
  const me = h('div', {class: 'me'},
    status,
    h('span', {class: 'who'}, app.session.member),
    h('button', {type: 'button', class: 'quiet', onclick: () => app.signOut()}, 'Sign out'));
  // A page that fills the window (chat) scrolls inside itself: the header
  // stays, the page below it takes the rest of the height.
  const node = h('div', {class: ['shell', page.fill && 'fill']},
    h('header', {class: 'top'}, skip, h('a', {class: 'brand', href: '/ui/chat', 'data-nav': ''}, 'svc'), menuBtn, nav, me), main);
  return {node, main, off: () => { off(); offApprovals(); }};
}

let firstRender = true;

function render(page, url) {
  if (cleanup) { try { cleanup(); } catch { /* a page's cleanup must not stop the next */ } }
  cleanup = null;
  if (page.auth && !app.session) {
    const next = url.pathname + url.search;
    navigate('/ui/signin' + (next.startsWith('/ui/') && url.pathname !== '/ui/' && url.pathname !== '/ui' ? '?next=' + encodeURIComponent(next) : ''), {replace: true});
    return;
  }
  if (page.redirect) {
    navigate(page.redirect, {replace: true});
    return;
  }
  if (!page.auth && page.signedOutOnly && app.session) {
    navigate('/ui/chat', {replace: true});
    return;
  }
  const l = layout(page);
  replace(root, l.node);
  root.className = '';
  document.title = page.title + ' · svc';
  const pageCleanup = page.render(l.main, {app, url});
  cleanup = () => { if (l.off) l.off(); if (typeof pageCleanup === 'function') pageCleanup(); };
  if (!firstRender) {
    const h1 = l.main.querySelector('h1');
    (h1 || l.main).setAttribute('tabindex', '-1');
    (h1 || l.main).focus();
  }
  firstRender = false;
}

async function boot() {
  startTheme();
  // A page left for another keeps no stream open (chromium holds a page
  // it may come back to with its connections, six per host at most):
  // tabshare.js leaves on pagehide and joins again on pageshow, and
  // ResumableStream parks itself the same way where tabs do not share.
  route('/ui/', {title: 'Chat', auth: true, redirect: '/ui/chat'});
  route('/ui/signin', signinPage);
  route('/ui/welcome', welcomePage);
  for (const n of NAV) route(n.path, n.page);
  route('/ui/enroll', enrollPage);
  routeUnder('/ui/objectives/', objectivesPage);
  setFallback(notFoundPage);
  onRender(render);
  onUnauthenticated(() => { if (app.session) app.ended(); });
  followLive(); // the team stream opens and closes with the message stream
  try {
    const s = await api('GET', '/session');
    app.session = s;
    startLive(s.member);
  } catch (err) {
    if (err.status !== 401) {
      replace(root, h('p', {class: 'boot error', role: 'alert'}, 'Cannot reach the broker: ' + errorText(err)));
      return;
    }
  }
  startRouter();
}

boot();
export {app, refresh};
