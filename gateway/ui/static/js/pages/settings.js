// Settings: browser notifications (issue 15 item 8). Opting in asks the
// browser for notification permission, registers the service worker
// (/ui/static/sw.js, scope /ui/), subscribes with the broker's VAPID public
// key and registers the subscription with the broker; the broker then
// pushes DMs and objective events to this browser while the member has no
// tab open. Opting out deletes it on the broker and unsubscribes.
//
// The subscription id the broker returns is kept in localStorage (it is no
// secret: only its owner can delete it), so opting out can name it.
// Signing out opts out first (app.js).
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {status, confirmDialog, ago, str, obj} from '../ui.js';
import {theme, setTheme, THEMES} from '../theme.js';

const SW_URL = '/ui/static/sw.js';
const SCOPE = '/ui/';
const idKey = (me) => 'svc.push.v1.' + me;

function supported() {
  return 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;
}

// keyBytes decodes the broker's base64url VAPID public key.
function keyBytes(b64) {
  const s = b64.replace(/-/g, '+').replace(/_/g, '/');
  const bin = atob(s + '='.repeat((4 - s.length % 4) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function sameKey(a, b) {
  if (!a || !b) return false;
  const x = new Uint8Array(a);
  if (x.length !== b.length) return false;
  return x.every((v, i) => v === b[i]);
}

async function registration() {
  return navigator.serviceWorker.getRegistration(SCOPE);
}

// register sends the subscription to the broker and returns its id.
async function register(sub) {
  const j = sub.toJSON();
  const res = await api('POST', '/push/subscriptions', {body: {endpoint: j.endpoint, keys: {p256dh: j.keys.p256dh, auth: j.keys.auth}}});
  if (!res || typeof res.id !== 'string') throw new Error('The broker did not return a subscription id.');
  return res.id;
}

// pushKeys are the localStorage keys of push ids this browser holds.
function pushKeys() {
  const out = [];
  try {
    for (let i = 0; i < localStorage.length; i += 1) {
      const k = localStorage.key(i);
      if (k && k.startsWith('svc.push.v1.')) out.push(k);
    }
  } catch { /* storage off: nothing held */ }
  return out;
}

export async function optIn(me) {
  const res = await api('GET', '/push/vapid-public-key');
  const key = keyBytes(String(res && res.publicKey || ''));
  const perm = await Notification.requestPermission();
  if (perm !== 'granted') throw new Error('The browser did not allow notifications (' + perm + '). Allow them for this site in the browser settings, then try again.');
  await navigator.serviceWorker.register(SW_URL, {scope: SCOPE});
  const reg = await navigator.serviceWorker.ready;
  let sub = await reg.pushManager.getSubscription();
  // A subscription made for another key (the broker's was replaced) cannot
  // receive: start over. So for one this browser made for another member
  // (signed in here before, whose session ended without signing out): the
  // broker may still hold it for them, and reusing its endpoint would show
  // their messages to this member. A new endpoint leaves theirs dead (the
  // push service answers 410 and the broker drops it).
  const others = pushKeys().filter((k) => k !== idKey(me));
  if (sub && (others.length || (sub.options && sub.options.applicationServerKey && !sameKey(sub.options.applicationServerKey, key)))) {
    await sub.unsubscribe();
    sub = null;
  }
  for (const k of others) { try { localStorage.removeItem(k); } catch { /* gone with the endpoint */ } }
  if (!sub) sub = await reg.pushManager.subscribe({userVisibleOnly: true, applicationServerKey: key});
  const id = await register(sub);
  try { localStorage.setItem(idKey(me), id); } catch { /* opting out re-registers to learn it */ }
}

export async function optOut(me) {
  const reg = await registration();
  const sub = reg ? await reg.pushManager.getSubscription() : null;
  let id = null;
  try { id = localStorage.getItem(idKey(me)); } catch { id = null; }
  // Registering the same subscription again returns its id (it keeps it).
  if (!id && sub) id = await register(sub);
  if (id) {
    try {
      await api('DELETE', '/push/subscriptions/' + encodeURIComponent(id));
    } catch (err) {
      if (err.status !== 404) throw err; // already gone on the broker
    }
  }
  try { localStorage.removeItem(idKey(me)); } catch { /* nothing kept */ }
  if (sub) await sub.unsubscribe();
}

// optOutOnSignOut turns push off when this browser turned it on for me:
// a signed-out browser shows nobody's messages (the next person at a
// shared machine would read them). Best effort, bounded: signing out
// never waits on it for long, nor fails for it.
export async function optOutOnSignOut(me) {
  let id = null;
  try { id = localStorage.getItem(idKey(me)); } catch { id = null; }
  if (!id || !supported()) return;
  await Promise.race([optOut(me).catch(() => {}), new Promise((r) => setTimeout(r, 3000))]);
}

// pushState is 'unsupported', 'blocked', 'on' or 'off'.
export async function pushState(me) {
  if (!supported()) return 'unsupported';
  if (Notification.permission === 'denied') return 'blocked';
  const reg = await registration();
  const sub = reg ? await reg.pushManager.getSubscription() : null;
  let id = null;
  try { id = localStorage.getItem(idKey(me)); } catch { id = null; }
  return sub && id && Notification.permission === 'granted' ? 'on' : 'off';
}

const TEXT = {
  unsupported: 'This browser cannot receive notifications from svc.',
  blocked: 'Notifications are blocked for this site. Allow them in the browser settings to turn them on.',
  on: 'On: direct messages and objective events show as notifications while no svc tab is open.',
  off: 'Off.',
};

const THEME_TEXT = {system: 'Same as the system', light: 'Light', dark: 'Dark'};

// profileCard shows who is signed in: name, role, permissions. Changing
// them is an admin's (Team page); the API has no self-edit.
function profileCard(session) {
  const role = obj(session.role);
  const perms = Array.isArray(session.permissions) ? session.permissions.filter((p) => typeof p === 'string') : [];
  const manager = perms.includes('members.manage');
  return h('section', {class: 'card', 'aria-labelledby': 'profile-h', id: 'profile'},
    h('h2', {id: 'profile-h'}, 'Profile'),
    h('dl', {class: 'facts profile'},
      h('dt', {}, 'Name'), h('dd', {class: 'profile-name'}, str(session.member)),
      h('dt', {}, 'Role'), h('dd', {class: 'profile-role'}, str(role.title) || 'No role title'),
      str(role.description) ? [h('dt', {}, 'About the role'), h('dd', {class: 'pre'}, str(role.description).slice(0, 4000))] : null,
      h('dt', {}, 'Permissions'), h('dd', {class: 'profile-perms'}, perms.length ? perms.join(', ') : 'none beyond a member\'s')),
    h('p', {class: 'hint'}, manager
      ? ['Your name cannot change; role and permissions are edited on ', h('a', {href: '/ui/team', 'data-nav': ''}, 'Team'), '.']
      : 'Your name cannot change; an admin edits role and permissions.'));
}

// themeCard picks light, dark or the system's theme for this browser.
function themeCard() {
  const now = theme();
  return h('section', {class: 'card', 'aria-labelledby': 'theme-h'},
    h('h2', {id: 'theme-h'}, 'Appearance'),
    h('fieldset', {class: 'checks theme-choice'}, h('legend', {}, 'Theme (this browser)'),
      THEMES.map((t) => h('div', {class: 'check-row'},
        h('input', {type: 'radio', name: 'theme', id: 'theme-' + t, value: t, checked: t === now, onchange: () => setTheme(t)}),
        h('label', {for: 'theme-' + t, class: 'check'}, THEME_TEXT[t])))));
}

// sessionsCard lists the member's browser sessions (GET
// /members/:me/sessions) with Sign out for each other one and for all
// others at once (DELETE …/sessions/:id), and the member's device tokens
// (GET …/tokens) with Revoke. The current session is marked and offers
// the header's Sign out instead.
function sessionsCard(me) {
  const base = '/members/' + encodeURIComponent(me);
  const st = status();
  const sessList = h('ul', {class: 'sessions', id: 'sessions', 'aria-busy': 'true'});
  const tokList = h('ul', {class: 'sessions tokens', id: 'devices', 'aria-busy': 'true'});
  const allOthers = h('button', {type: 'button', class: 'danger-text quiet', id: 'signout-others', hidden: true}, 'Sign out all other sessions');
  let sessions = [];

  const when = (label, ms) => (Number(ms) > 0 ? [label, ago(ms)] : null);
  const end = async (ids) => {
    for (const id of ids) await api('DELETE', base + '/sessions/' + encodeURIComponent(id));
  };
  const drawSessions = () => {
    sessList.setAttribute('aria-busy', 'false');
    const others = sessions.filter((x) => !x.current);
    allOthers.hidden = others.length < 1;
    replace(sessList, sessions.map((x) => h('li', {class: ['session', x.current ? 'current' : null], 'data-session': x.id},
      h('div', {class: 'what'}, h('strong', {}, x.current ? 'This browser' : 'Another browser session'),
        h('span', {class: 'hint'}, ' · ', when('signed in ', x.createdAt), ' · ', when('last active ', x.lastSeenAt))),
      x.current ? h('span', {class: 'hint'}, 'Use Sign out at the top to end it.')
        : h('button', {type: 'button', class: 'quiet danger-text', 'aria-label': 'Sign out the session signed in ' + (ago(x.createdAt).textContent || ''), onclick: async (e) => {
          const btn = e.currentTarget;
          btn.disabled = true;
          st.busy('Signing it out…');
          try { await end([x.id]); st.ok('That session is signed out.'); await loadSessions(); allOthers.hidden ? st.node.focus() : allOthers.focus(); } catch (err) { btn.disabled = false; st.error(err); }
        }}, 'Sign out'))));
  };
  async function loadSessions() {
    const r = await api('GET', base + '/sessions');
    sessions = (Array.isArray(r && r.sessions) ? r.sessions : []).filter((x) => x && typeof x.id === 'string')
      .sort((a, b) => (b.current - a.current) || ((Number(b.lastSeenAt) || 0) - (Number(a.lastSeenAt) || 0)));
    drawSessions();
  }
  allOthers.addEventListener('click', async () => {
    const others = sessions.filter((x) => !x.current);
    if (!others.length) return;
    if (!await confirmDialog(`Sign out ${others.length === 1 ? 'the other session' : `all ${others.length} other sessions`}? Those browsers go back to the sign-in page; this one stays signed in.`, {yes: 'Sign out others', danger: true})) return;
    allOthers.disabled = true;
    st.busy('Signing out the other sessions…');
    try { await end(others.map((x) => x.id)); st.ok('Every other session is signed out.'); } catch (err) { st.error(err); }
    allOthers.disabled = false;
    try { await loadSessions(); } catch (err) { st.error(err); }
    st.node.setAttribute('tabindex', '-1');
    st.node.focus();
  });

  async function loadTokens() {
    const r = await api('GET', base + '/tokens');
    const toks = (Array.isArray(r && r.tokens) ? r.tokens : []).filter((t) => t && typeof t.id === 'string');
    tokList.setAttribute('aria-busy', 'false');
    replace(tokList, toks.length ? toks.map((t) => h('li', {class: 'session token', 'data-token-id': t.id},
      h('div', {class: 'what'}, h('strong', {}, str(t.label) || 'unlabelled token'),
        h('span', {class: 'hint'}, ' · ', str(t.origin) || 'token', ' · ', when('made ', t.createdAt), Number(t.lastUsedAt) > 0 ? [' · ', when('last used ', t.lastUsedAt)] : ' · never used')),
      h('button', {type: 'button', class: 'quiet danger-text', 'aria-label': 'Revoke the token ' + (str(t.label) || t.id), onclick: async () => {
        if (!await confirmDialog(`Revoke the token "${str(t.label) || t.id}"? The device or program using it stops working at once.`, {yes: 'Revoke', danger: true})) return;
        st.busy('Revoking…');
        try { await api('DELETE', base + '/tokens/' + encodeURIComponent(t.id)); st.ok('Token revoked.'); await loadTokens(); } catch (err) { st.error(err); }
        st.node.setAttribute('tabindex', '-1');
        st.node.focus();
      }}, 'Revoke'))) : h('li', {class: 'empty'}, 'No device holds a token of yours.'));
  }

  const node = h('section', {class: 'card', 'aria-labelledby': 'sessions-h'},
    h('h2', {id: 'sessions-h'}, 'Sessions and devices'),
    h('h3', {}, 'Browser sessions'),
    sessList, h('div', {class: 'actions'}, allOthers),
    h('h3', {}, 'Device tokens'),
    h('p', {class: 'hint'}, 'Devices approved with svc login and agents acting as you hold a token each.'),
    tokList, st.node);
  const load = () => Promise.all([
    loadSessions().catch((err) => { sessList.setAttribute('aria-busy', 'false'); st.error(err); }),
    loadTokens().catch((err) => { tokList.setAttribute('aria-busy', 'false'); st.error(err); })]);
  return {node, load};
}

export const settingsPage = {
  title: 'Settings', auth: true,
  render(main, {app}) {
    const me = app.session.member;
    let alive = true;
    const state = h('p', {class: 'push-state', id: 'push-state', 'aria-live': 'polite'}, 'Checking…');
    const st = status();
    const on = h('button', {type: 'button', id: 'push-on', hidden: true}, 'Turn on notifications');
    const off = h('button', {type: 'button', id: 'push-off', class: 'quiet', hidden: true}, 'Turn off notifications');
    const show = async () => {
      let s;
      try { s = await pushState(me); } catch (err) { st.error(err); s = 'off'; }
      if (!alive) return;
      state.dataset.state = s;
      replace(state, TEXT[s]);
      on.hidden = s !== 'off';
      off.hidden = s !== 'on';
    };
    const act = (btn, fn, busy, done, next) => async () => {
      btn.disabled = true;
      st.busy(busy);
      try {
        await fn(me);
        st.ok(done);
      } catch (err) {
        st.error(err);
      } finally {
        btn.disabled = false;
        await show();
        if (alive) (next() && !next().hidden ? next() : btn).focus();
      }
    };
    on.addEventListener('click', act(on, optIn, 'Turning on…', 'Notifications are on.', () => off));
    off.addEventListener('click', act(off, optOut, 'Turning off…', 'Notifications are off.', () => on));
    const sessions = sessionsCard(me);
    main.append(h('div', {class: 'page settings'},
      h('h1', {}, 'Settings'),
      h('div', {class: 'settings-grid'},
        profileCard(app.session),
        themeCard(),
        h('section', {class: 'card', 'aria-labelledby': 'push-h'},
          h('h2', {id: 'push-h'}, 'Browser notifications'),
          h('p', {class: 'hint'}, 'Get direct messages and objective events as notifications from this browser while svc is not open. The broker sends them only to browsers you turn this on in.'),
          state,
          h('div', {class: 'actions'}, on, off),
          st.node),
        sessions.node)));
    show();
    sessions.load();
    return () => { alive = false; };
  },
};
