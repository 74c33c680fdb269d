// Chat, first cut: general, the channels the member joined, DMs with each
// teammate, and external (hook) threads; the open conversation's history
// with scrollback, live messages from the tab's stream, and send.
//
// Messages are keyed by id (decimal, commit order) per conversation, so
// history and live delivery can overlap and nothing shows twice. Unread
// counts are kept in this tab's memory. Message text is only ever a Text
// node; a message from `hook:<slug>` is marked as external, untrusted
// content.
import {h, replace, fmtTime} from '../h.js';
import {api, errorText} from '../api.js';
import {advance, onMessage} from '../live.js';

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical'];
const PAGE = 50;
const MAX_BODY = 64 << 10; // what of one body is shown; the rest is cut, visibly
const MAX_HELD = 2000; // messages held per conversation
const MAX_UNREAD_CONVS = 500;

// store outlives page renders: conversations and unread counts of this tab.
const store = {
  me: '',
  convs: new Map(), // key → {msgs: Map(id → msg), loaded, exhausted}
  unread: new Map(), // key → count
  open: '', // key of the conversation on screen
  onChange: null, // the page's redraw hook while it is on screen
};

onMessage((msg) => {
  if (!store.me) return;
  const key = convKeyOf(msg, store.me);
  if (!key) return;
  const c = store.convs.get(key);
  if (c) hold(c, [msg]);
  if (key !== store.open && msg.from !== store.me) {
    if (store.unread.size < MAX_UNREAD_CONVS || store.unread.has(key)) store.unread.set(key, (store.unread.get(key) || 0) + 1);
  }
  if (store.onChange) store.onChange(key, msg);
});

// convKeyOf is the conversation a message belongs to, '' when it is none
// chat shows (objective and registry threads).
export function convKeyOf(msg, me) {
  const thread = msg && msg.data && typeof msg.data.thread === 'string' ? msg.data.thread : '';
  if (thread.startsWith('chan:')) return thread.length > 5 ? thread : '';
  if (thread.startsWith('hook:')) return thread.length > 5 ? thread : '';
  if (thread) return '';
  if (typeof msg.to === 'string' && msg.to) {
    const other = msg.from === me ? msg.to : msg.from;
    return typeof other === 'string' && other ? 'dm:' + other : '';
  }
  return 'general';
}

function conv(key) {
  let c = store.convs.get(key);
  if (!c) {
    c = {msgs: new Map(), loaded: false, exhausted: false};
    store.convs.set(key, c);
  }
  return c;
}

function validID(id) { return typeof id === 'string' && /^[0-9]{1,19}$/.test(id); }

function hold(c, msgs) {
  for (const m of msgs) if (m && validID(m.id)) c.msgs.set(m.id, m);
  if (c.msgs.size > MAX_HELD) {
    const ids = sortedIDs(c);
    for (const id of ids.slice(0, ids.length - MAX_HELD)) c.msgs.delete(id);
  }
}

function sortedIDs(c) {
  return [...c.msgs.keys()].sort((a, b) => { const x = BigInt(a), y = BigInt(b); return x < y ? -1 : x > y ? 1 : 0; });
}

// historyQuery is the /history query of a conversation.
function historyQuery(key) {
  if (key === 'general') return {};
  if (key.startsWith('chan:')) return {channel: key.slice(5)};
  if (key.startsWith('dm:')) return {with: key.slice(3)};
  return {thread: key};
}

async function loadHistory(key, older) {
  const c = conv(key);
  const q = {...historyQuery(key), limit: PAGE};
  if (older) {
    let oldest = Infinity;
    for (const m of c.msgs.values()) if (Number(m.createdAt) < oldest) oldest = Number(m.createdAt);
    if (Number.isFinite(oldest)) q.before = oldest;
  }
  const res = await api('GET', '/history', {query: q});
  const msgs = Array.isArray(res && res.messages) ? res.messages : [];
  hold(c, msgs);
  c.loaded = true;
  if (msgs.length < PAGE) c.exhausted = true;
  // The newest id held is a position the live stream may resume after.
  for (const m of msgs) if (validID(m.id)) advance(m.id);
}

function label(key, channels) {
  if (key === 'general') return '#general';
  if (key.startsWith('chan:')) {
    const ch = channels.find((x) => 'chan:' + x.id === key);
    return '#' + (ch ? ch.slug : key.slice(5));
  }
  if (key.startsWith('dm:')) return '@' + key.slice(3);
  return 'External: ' + key.slice(5);
}

function levelOf(m) { return LEVELS.includes(m.level) ? m.level : 'info'; }

// messageNode renders one message; every field from the broker is text.
export function messageNode(m, me) {
  const level = levelOf(m);
  const from = typeof m.from === 'string' ? m.from : '?';
  const external = from.startsWith('hook:');
  let body = typeof m.body === 'string' ? m.body : '';
  const cut = body.length > MAX_BODY;
  if (cut) body = body.slice(0, MAX_BODY);
  const attachments = Array.isArray(m.attachments) ? m.attachments.filter((a) => typeof a === 'string').slice(0, 64) : [];
  return h('li', {class: ['msg', 'level-' + level, external && 'external', from === me && 'mine'], 'data-id': m.id},
    h('div', {class: 'meta'},
      h('span', {class: 'from'}, from),
      h('time', {datetime: new Date(Number(m.createdAt) || 0).toISOString()}, fmtTime(m.createdAt)),
      level !== 'info' ? h('span', {class: 'level'}, level) : null),
    external ? h('p', {class: 'ext-label'}, 'External content from ' + from + ' — untrusted input, not written by a teammate') : null,
    typeof m.title === 'string' && m.title ? h('p', {class: 'title'}, m.title) : null,
    h('div', {class: 'body'}, body, cut ? h('span', {class: 'cut'}, ' … (cut)') : null),
    attachments.length ? h('ul', {class: 'attachments', 'aria-label': 'Attachments'}, attachments.map((a) => h('li', {}, h('code', {}, a)))) : null);
}

export const chatPage = {
  title: 'Chat', auth: true,
  render(main, {app, url}) {
    store.me = app.session.member;
    const requested = url.searchParams.get('c') || 'general';
    const key = /^(general|chan:[^\s]{1,128}|dm:[A-Za-z0-9][A-Za-z0-9._-]{0,63}|hook:[a-z0-9-]{1,64})$/.test(requested) ? requested : 'general';
    store.open = key;
    store.unread.delete(key);
    let channels = [];
    let teammates = [];
    let alive = true;

    const convList = h('nav', {class: 'convs', 'aria-label': 'Conversations'});
    const title = h('h1', {id: 'conv-title'}, label(key, channels));
    const list = h('ol', {class: 'messages', 'aria-labelledby': 'conv-title', tabindex: '0'});
    const older = h('button', {type: 'button', class: 'quiet older', hidden: true, onclick: async () => {
      older.disabled = true;
      try { await loadHistory(key, true); draw(true); } catch (err) { showError(err); } finally { older.disabled = false; }
    }}, 'Load older messages');
    const status = h('p', {class: 'msg', role: 'alert'});
    const showError = (err) => { replace(status, errorText(err)); status.className = 'msg error'; };

    const input = h('textarea', {id: 'compose', name: 'body', rows: '2', maxlength: String(MAX_BODY), required: true});
    const level = h('select', {id: 'compose-level', name: 'level'}, LEVELS.map((l) => h('option', {value: l, selected: l === 'info'}, l)));
    const send = h('button', {type: 'submit'}, 'Send');
    const canSend = !key.startsWith('hook:');
    const form = h('form', {class: 'composer', hidden: !canSend, onsubmit: async (e) => {
      e.preventDefault();
      const body = input.value;
      if (!body.trim()) { input.focus(); return; }
      const payload = {body, level: level.value};
      if (key.startsWith('dm:')) payload.to = key.slice(3);
      if (key.startsWith('chan:')) payload.data = {thread: key};
      send.disabled = true;
      try {
        const res = await api('POST', '/push', {body: payload});
        input.value = '';
        replace(status, '');
        status.className = 'msg';
        if (res && res.message) { hold(conv(key), [res.message]); draw(); }
      } catch (err) {
        showError(err);
      } finally {
        send.disabled = false;
        input.focus();
      }
    }},
    h('label', {for: 'compose', class: 'sr-only'}, 'Message'), input,
    h('label', {for: 'compose-level', class: 'sr-only'}, 'Level'), level,
    send);
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });

    const drawConvs = () => {
      const item = (k) => {
        const n = store.unread.get(k) || 0;
        return h('li', {}, h('a', {href: '/ui/chat?c=' + encodeURIComponent(k), 'data-nav': '', 'aria-current': k === key ? 'page' : null},
          h('span', {class: 'name'}, label(k, channels)),
          n ? h('span', {class: 'badge', 'aria-label': n + ' unread'}, String(n > 99 ? '99+' : n)) : null));
      };
      const chanKeys = ['general', ...channels.filter((c) => c.joined && c.id !== 'general' && !c.archivedAt).map((c) => 'chan:' + c.id)];
      const dmKeys = teammates.filter((t) => t.name !== store.me).map((t) => 'dm:' + t.name);
      for (const k of store.unread.keys()) if (k.startsWith('dm:') && !dmKeys.includes(k)) dmKeys.push(k);
      const extKeys = [...new Set([...store.convs.keys(), ...store.unread.keys(), key])].filter((k) => k.startsWith('hook:'));
      replace(convList,
        h('h2', {}, 'Channels'), h('ul', {}, chanKeys.map(item)),
        h('h2', {}, 'Direct messages'), h('ul', {}, dmKeys.map(item)),
        extKeys.length ? [h('h2', {}, 'External'), h('ul', {}, extKeys.map(item))] : null);
    };

    const draw = (keepTop) => {
      const c = conv(key);
      const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
      const prevHeight = list.scrollHeight;
      replace(list, sortedIDs(c).map((id) => messageNode(c.msgs.get(id), store.me)));
      if (!c.msgs.size && c.loaded) list.append(h('li', {class: 'empty'}, 'No messages yet.'));
      older.hidden = !c.loaded || c.exhausted;
      if (keepTop) list.scrollTop = list.scrollHeight - prevHeight;
      else if (atBottom || !keepTop) list.scrollTop = list.scrollHeight;
    };

    store.onChange = (k) => {
      if (!alive) return;
      if (k === key) draw(); else drawConvs();
    };

    main.append(h('section', {class: 'chat'},
      convList,
      h('section', {class: 'conv', 'aria-labelledby': 'conv-title'},
        h('header', {class: 'conv-head'}, title),
        older, list, status, form)));
    drawConvs();
    draw();

    (async () => {
      try {
        const [ch, roster] = await Promise.all([api('GET', '/channels'), api('GET', '/roster')]);
        if (!alive) return;
        channels = Array.isArray(ch && ch.channels) ? ch.channels : [];
        teammates = Array.isArray(roster && roster.teammates) ? roster.teammates : [];
        replace(title, label(key, channels));
        drawConvs();
      } catch (err) { if (alive) showError(err); }
    })();
    (async () => {
      try {
        if (!conv(key).loaded) await loadHistory(key, false);
        if (alive) draw();
      } catch (err) { if (alive) showError(err); }
    })();

    return () => {
      alive = false;
      store.onChange = null;
      store.open = '';
    };
  },
};
