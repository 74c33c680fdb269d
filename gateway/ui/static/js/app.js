// The app shell: session, layout with navigation, and the page router.
import {h, replace} from './h.js';
import {api, onUnauthenticated, errorText} from './api.js';
import {route, setFallback, onRender, navigate, startRouter, refresh} from './router.js';
import {startLive, stopLive, onLiveState, liveState} from './live.js';
import {signinPage} from './pages/signin.js';
import {welcomePage} from './pages/welcome.js';
import {chatPage} from './pages/chat.js';
import {teamPage} from './pages/team.js';
import {enrollPage} from './pages/enroll.js';
import {activityPage} from './pages/activity.js';
import {adminPage} from './pages/admin.js';
import {settingsPage, optOutOnSignOut} from './pages/settings.js';
import {objectivesPage} from './pages/objectives.js';
import {filesPage} from './pages/files.js';
import {notFoundPage} from './pages/placeholder.js';

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
    if (app.session) await optOutOnSignOut(app.session.member);
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
  const nav = h('nav', {'aria-label': 'Main'}, h('ul', {},
    NAV.map((n) => h('li', {}, h('a', {href: n.path, 'data-nav': '', 'aria-current': n.page === page ? 'page' : null}, n.label)))));
  const me = h('div', {class: 'me'},
    status,
    h('span', {class: 'who'}, app.session.member),
    h('button', {type: 'button', class: 'quiet', onclick: () => app.signOut()}, 'Sign out'));
  const node = h('div', {class: 'shell'}, h('header', {class: 'top'}, skip, h('a', {class: 'brand', href: '/ui/chat', 'data-nav': ''}, 'svc'), nav, me), main);
  return {node, main, off};
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
  route('/ui/', {title: 'Chat', auth: true, redirect: '/ui/chat'});
  route('/ui/signin', signinPage);
  route('/ui/welcome', welcomePage);
  for (const n of NAV) route(n.path, n.page);
  route('/ui/enroll', enrollPage);
  setFallback(notFoundPage);
  onRender(render);
  onUnauthenticated(() => { if (app.session) app.ended(); });
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
