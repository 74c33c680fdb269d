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
import {status} from '../ui.js';

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
    main.append(h('div', {class: 'page narrow settings'},
      h('h1', {}, 'Settings'),
      h('section', {class: 'card', 'aria-labelledby': 'push-h'},
        h('h2', {id: 'push-h'}, 'Browser notifications'),
        h('p', {class: 'hint'}, 'Get direct messages and objective events as notifications from this browser while svc is not open. The broker sends them only to browsers you turn this on in.'),
        state,
        h('div', {class: 'actions'}, on, off),
        st.node)));
    show();
    return () => { alive = false; };
  },
};
