// Chat: general, the channels the member joined, DMs with each teammate,
// external (hook) threads, and the loop guard's notices (loop threads);
// the open conversation's history with
// scrollback, live messages from the tab's stream, send with attachments,
// and channel administration (chat-admin.js).
//
// Messages are keyed by id (decimal, commit order) per conversation, so
// history and live delivery can overlap and nothing shows twice. Every time
// the stream goes live (first attach, and after each reconnect) the open
// conversation's newest page is fetched again and merged, and every other
// conversation held is marked stale and refetched when opened: a message
// committed between a history fetch and the stream attaching is not missed.
// Unread counts per conversation are kept in localStorage (conversation
// keys and counters only, never message text). Message text is only ever a
// Text node; a message from `hook:<slug>` is marked as external, untrusted
// content, and one the loop guard stopped (the broker's loopStopped, never
// anything in its data) is marked as having woken no agent.
import {h, replace, fmtTime} from '../h.js';
import {api, errorText} from '../api.js';
import {onMessage, onLiveState, liveMember} from '../live.js';
import {navigate} from '../router.js';
import {attachmentList, attachPicker} from './chat-attach.js';
import {newChannelForm, browseChannels, channelPanel} from './chat-admin.js';
import {approvalCard} from '../approvals.js';

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical'];
const PAGE = 50;
const MAX_BODY = 64 << 10; // what of one body is shown; the rest is cut, visibly
const MAX_HELD = 2000; // messages held per conversation
const MAX_UNREAD_CONVS = 500;
const MAX_UNREAD = 9999;
const CHANNEL_POLL = 5000; // channel list refresh while chat is on screen (no channel events exist)
// CONV_RE is what a conversation key may be.
const CONV_RE = /^(general|chan:[^\s]{1,128}|dm:[A-Za-z0-9][A-Za-z0-9._-]{0,63}|hook:[a-z0-9-]{1,64}|loop:[0-9]{1,19})$/;
// LOOP_SENDER sends the loop guard's notices: a name no member can have.
const LOOP_SENDER = 'svc:loop-guard';

// store outlives page renders: conversations and unread counts of this tab.
const store = {
  me: '',
  convs: new Map(), // key → {msgs: Map(id → msg), loaded, exhausted, stale}
  unread: new Map(), // key → count, mirrored in localStorage
  open: '', // key of the conversation on screen
  onChange: null, // the page's redraw hook while it is on screen
  onLive: null, // the page's refetch when the stream goes live
};

// Unread counts persist per member in localStorage: only conversation keys
// (channel ids, member names) and numbers, never message text.
const unreadKey = (me) => 'svc.unread.v1.' + me;

function loadUnread() {
  store.unread = new Map();
  if (!store.me) return;
  let o = null;
  try { o = JSON.parse(localStorage.getItem(unreadKey(store.me)) || '{}'); } catch { o = null; }
  if (!o || typeof o !== 'object' || Array.isArray(o)) return;
  for (const [k, v] of Object.entries(o)) {
    if (store.unread.size >= MAX_UNREAD_CONVS) break;
    if (CONV_RE.test(k) && Number.isInteger(v) && v > 0) store.unread.set(k, Math.min(v, MAX_UNREAD));
  }
}

function saveUnread() {
  if (!store.me) return;
  try { localStorage.setItem(unreadKey(store.me), JSON.stringify(Object.fromEntries(store.unread))); } catch { /* storage full or off: counts stay in memory */ }
}

// markRead clears a conversation's count.
function markRead(key) {
  if (store.unread.delete(key)) saveUnread();
}

// useMember switches the store to the member signed in (another member
// on a shared browser gets a store of their own).
function useMember(me) {
  if (me === store.me) return;
  store.me = me;
  store.convs = new Map();
  loadUnread();
}

onMessage((msg) => {
  useMember(liveMember());
  if (!store.me) return;
  const key = convKeyOf(msg, store.me);
  if (!key) return;
  const c = store.convs.get(key);
  if (c) hold(c, [msg]);
  if (key !== store.open && msg.from !== store.me && CONV_RE.test(key)) {
    if (store.unread.size < MAX_UNREAD_CONVS || store.unread.has(key)) {
      store.unread.set(key, Math.min((store.unread.get(key) || 0) + 1, MAX_UNREAD));
      saveUnread();
    }
  }
  if (store.onChange) store.onChange(key, msg);
});

// Each time the stream goes live, what it missed before attaching (or
// while it was down, if it had no position yet) may be in any
// conversation: the open one is refetched now, the others when opened.
onLiveState((s) => {
  if (s !== 'live') return;
  for (const [k, c] of store.convs) if (k !== store.open) c.stale = true;
  if (store.onLive) store.onLive();
});

// Another tab of the same member read or got messages: follow its counts.
window.addEventListener('storage', (e) => {
  if (!store.me || e.key !== unreadKey(store.me)) return;
  loadUnread();
  if (store.open) store.unread.delete(store.open);
  if (store.onChange) store.onChange('', null);
});

// convKeyOf is the conversation a message belongs to, '' when it is none
// chat shows (objective and registry threads).
export function convKeyOf(msg, me) {
  const thread = msg && msg.data && typeof msg.data.thread === 'string' ? msg.data.thread : '';
  if (thread.startsWith('chan:')) return thread.length > 5 ? thread : '';
  if (thread.startsWith('hook:')) return thread.length > 5 ? thread : '';
  if (thread.startsWith('loop:')) return CONV_RE.test(thread) ? thread : '';
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
    c = {msgs: new Map(), loaded: false, exhausted: false, stale: false};
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
  // Older pages chain by the oldest id held (the broker's exact cursor):
  // the ms cursor `before` would skip messages sharing the oldest one's
  // millisecond that did not fit on the page.
  if (older) {
    const ids = sortedIDs(c);
    if (ids.length) q.beforeId = ids[0];
  }
  if (!older) c.stale = false;
  const res = await api('GET', '/history', {query: q});
  const msgs = Array.isArray(res && res.messages) ? res.messages : [];
  hold(c, msgs);
  // A refetch of the newest page says nothing about older ones.
  if ((older || !c.loaded) && msgs.length < PAGE) c.exhausted = true;
  c.loaded = true;
  // No resume position is taken from history: the stream carries every
  // conversation, and this page's newest id says nothing about the others.
}

function label(key, channels) {
  if (key === 'general') return '#general';
  if (key.startsWith('chan:')) {
    const ch = channels.find((x) => 'chan:' + x.id === key);
    return '#' + (ch ? ch.slug : key.slice(5));
  }
  if (key.startsWith('dm:')) return '@' + key.slice(3);
  if (key.startsWith('loop:')) return 'Loop stopped (' + key.slice(5).replace(/^0+(?=.)/, '') + ')';
  return 'External: ' + key.slice(5);
}

function levelOf(m) { return LEVELS.includes(m.level) ? m.level : 'info'; }

// messageNode renders one message; every field from the broker is text.
export function messageNode(m, me) {
  const level = levelOf(m);
  const from = typeof m.from === 'string' ? m.from : '?';
  const external = from.startsWith('hook:');
  const stopped = m.loopStopped === true && from !== LOOP_SENDER;
  let body = typeof m.body === 'string' ? m.body : '';
  const cut = body.length > MAX_BODY;
  if (cut) body = body.slice(0, MAX_BODY);
  const attachments = Array.isArray(m.attachments) ? m.attachments : [];
  return h('li', {class: ['msg', 'level-' + level, external && 'external', stopped && 'loop-stopped', from === me && 'mine'], 'data-id': m.id},
    h('div', {class: 'meta'},
      h('span', {class: 'from'}, from),
      h('time', {datetime: new Date(Number(m.createdAt) || 0).toISOString()}, fmtTime(m.createdAt)),
      level !== 'info' ? h('span', {class: 'level'}, level) : null),
    external ? h('p', {class: 'ext-label'}, 'External content from ' + from + ' — untrusted input, not written by a teammate') : null,
    stopped ? h('p', {class: 'loop-label'}, 'Stopped by the loop guard: agents kept replying to each other, so this message woke no agent') : null,
    typeof m.title === 'string' && m.title ? h('p', {class: 'title'}, m.title) : null,
    h('div', {class: 'body'}, body, cut ? h('span', {class: 'cut'}, ' … (cut)') : null),
    attachmentList(attachments),
    approvalCard(m, me));
}

export const chatPage = {
  title: 'Chat', auth: true,
  render(main, {app, url}) {
    useMember(app.session.member);
    const me = store.me;
    const perms = Array.isArray(app.session.permissions) ? app.session.permissions : [];
    const canManage = perms.includes('members.manage');
    const requested = url.searchParams.get('c') || 'general';
    const key = CONV_RE.test(requested) ? requested : 'general';
    store.open = key;
    markRead(key);
    let channels = [];
    let channelsLoaded = false;
    let teammates = [];
    let alive = true;
    const chanID = key.startsWith('chan:') ? key.slice(5) : '';

    const convList = h('nav', {class: 'convs', 'aria-label': 'Conversations'});
    const title = h('h1', {id: 'conv-title'}, label(key, channels));
    const note = h('p', {class: 'conv-note', hidden: true});
    const adminSlot = h('div', {class: 'chan-admin-slot'});
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
    const picker = attachPicker(me, {onError: showError, onBusy: (b) => { send.disabled = b; }});
    let canSend = !key.startsWith('hook:') && !key.startsWith('loop:');
    const form = h('form', {class: 'composer', hidden: !canSend, onsubmit: async (e) => {
      e.preventDefault();
      if (send.disabled) return;
      const body = input.value;
      const attachments = picker.paths();
      if (!body.trim()) { input.focus(); return; }
      const payload = {body, level: level.value};
      if (attachments.length) payload.attachments = attachments;
      if (key.startsWith('dm:')) payload.to = key.slice(3);
      if (key.startsWith('chan:')) payload.data = {thread: key};
      send.disabled = true;
      try {
        const res = await api('POST', '/push', {body: payload});
        input.value = '';
        picker.clear();
        replace(status, '');
        status.className = 'msg';
        if (res && res.message) { hold(conv(key), [res.message]); draw(); }
        list.scrollTop = list.scrollHeight; // one's own message is in view
      } catch (err) {
        showError(err);
      } finally {
        send.disabled = false;
        input.focus();
      }
    }},
    h('div', {class: 'compose-row'},
      h('label', {for: 'compose', class: 'sr-only'}, 'Message'), input,
      h('label', {for: 'compose-level', class: 'sr-only'}, 'Level'), level,
      send),
    picker.node);
    input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });

    const toolsSlot = h('div', {class: 'chan-tools'});
    const drawConvs = () => {
      const item = (k) => {
        const n = store.unread.get(k) || 0;
        return h('li', {}, h('a', {href: '/ui/chat?c=' + encodeURIComponent(k), 'data-nav': '', 'aria-current': k === key ? 'page' : null},
          h('span', {class: 'name'}, label(k, channels)),
          n ? h('span', {class: 'badge', 'aria-label': n + ' unread'}, String(n > 99 ? '99+' : n)) : null));
      };
      const chanKeys = ['general', ...channels.filter((c) => c.joined && c.id !== 'general' && !c.archivedAt).map((c) => 'chan:' + c.id)];
      // A channel message counted before the list loaded still shows.
      for (const k of store.unread.keys()) if (k.startsWith('chan:') && !chanKeys.includes(k) && !channelsLoaded) chanKeys.push(k);
      const dmKeys = teammates.filter((t) => t.name !== me).map((t) => 'dm:' + t.name);
      for (const k of store.unread.keys()) if (k.startsWith('dm:') && !dmKeys.includes(k)) dmKeys.push(k);
      const held = [...new Set([...store.convs.keys(), ...store.unread.keys(), key])];
      const extKeys = held.filter((k) => k.startsWith('hook:'));
      const loopKeys = held.filter((k) => k.startsWith('loop:'));
      replace(convList,
        h('h2', {}, 'Channels'), h('ul', {}, chanKeys.map(item)),
        toolsSlot,
        h('h2', {}, 'Direct messages'), h('ul', {}, dmKeys.map(item)),
        extKeys.length ? [h('h2', {}, 'External'), h('ul', {}, extKeys.map(item))] : null,
        loopKeys.length ? [h('h2', {}, 'Loop guard'), h('ul', {}, loopKeys.map(item))] : null);
    };

    // The channel tools keep their open/closed state across redraws.
    let toolsSig = '';
    const drawTools = () => {
      const sig = JSON.stringify(channels.map((c) => [c.id, c.slug, c.joined, !!c.archivedAt]));
      if (sig === toolsSig) return;
      toolsSig = sig;
      const wasOpen = [...toolsSlot.querySelectorAll('details')].map((d) => d.open);
      replace(toolsSlot,
        newChannelForm((ch) => {
          refreshChannels();
          if (ch && typeof ch.id === 'string') navigate('/ui/chat?c=' + encodeURIComponent('chan:' + ch.id));
        }),
        browseChannels(channels, me, (ch) => navigate('/ui/chat?c=' + encodeURIComponent('chan:' + ch.id))));
      [...toolsSlot.querySelectorAll('details')].forEach((d, i) => { if (wasOpen[i]) d.open = true; });
    };

    let panelSig = '';
    const drawChannelState = () => {
      if (!chanID) return;
      const sum = channels.find((c) => c.id === chanID) || null;
      replace(title, label(key, channels));
      const archived = !!(sum && sum.archivedAt);
      const member = !!(sum && sum.joined);
      canSend = !archived && (member || !channelsLoaded);
      form.hidden = !canSend;
      note.hidden = !(archived || (channelsLoaded && !member));
      replace(note, archived ? 'This channel is archived: its history stays readable, nobody can post.'
        : channelsLoaded && !sum ? 'No such channel.' : 'You are not in this channel.');
      const sig = JSON.stringify(sum);
      if (sig === panelSig || !sum) return;
      panelSig = sig;
      const wasOpen = !!adminSlot.querySelector('details[open]');
      const panel = channelPanel(chanID, sum, {
        me, canManage,
        onChanged: () => refreshChannels(),
        onLeft: () => navigate('/ui/chat?c=general'),
      });
      if (wasOpen) panel.open = true;
      replace(adminSlot, panel);
    };

    const draw = (keepTop) => {
      const c = conv(key);
      const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
      const prevHeight = list.scrollHeight;
      replace(list, sortedIDs(c).map((id) => messageNode(c.msgs.get(id), me)));
      if (!c.msgs.size && c.loaded) list.append(h('li', {class: 'empty'}, 'No messages yet.'));
      older.hidden = !c.loaded || c.exhausted;
      // Older messages keep what was on screen in place; otherwise the list
      // follows the newest only when the reader was already there, so a
      // refetch or a replayed message does not yank someone reading back.
      if (keepTop) list.scrollTop = list.scrollHeight - prevHeight;
      else if (atBottom) list.scrollTop = list.scrollHeight;
    };

    // A live message newer than everything shown is appended alone; the
    // list is rebuilt only when one lands in between (history, replay).
    const drawNew = (msg) => {
      const last = list.lastElementChild;
      const lastID = last && last.dataset.id;
      if (!msg || !validID(msg.id) || !lastID || list.querySelector('li.empty') || BigInt(msg.id) <= BigInt(lastID) || conv(key).msgs.size > MAX_HELD - 1) { draw(); return; }
      const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
      list.append(messageNode(msg, me));
      if (atBottom) list.scrollTop = list.scrollHeight;
    };

    store.onChange = (k, msg) => {
      if (!alive) return;
      if (k === key) drawNew(msg); else drawConvs();
      // A message in a channel this tab does not know yet: refresh the list.
      if (k && k.startsWith('chan:') && channelsLoaded && !channels.some((c) => 'chan:' + c.id === k)) refreshChannels();
    };

    const refetch = async () => {
      try {
        await loadHistory(key, false);
        if (alive) draw();
      } catch (err) { if (alive) showError(err); }
    };
    store.onLive = () => { if (alive) { refetch(); refreshChannels(); } };

    let refreshing = false;
    async function refreshChannels() {
      if (refreshing || !alive) return;
      refreshing = true;
      try {
        const ch = await api('GET', '/channels');
        if (!alive) return;
        channels = Array.isArray(ch && ch.channels) ? ch.channels.filter((c) => c && typeof c.id === 'string' && typeof c.slug === 'string') : [];
        channelsLoaded = true;
        replace(title, label(key, channels));
        drawConvs();
        drawTools();
        drawChannelState();
      } catch (err) { if (alive) showError(err); } finally { refreshing = false; }
    }

    main.append(h('section', {class: 'chat'},
      convList,
      h('section', {class: 'conv', 'aria-labelledby': 'conv-title'},
        h('header', {class: 'conv-head'}, title, adminSlot),
        note, older, list, status, form)));
    drawConvs();
    drawTools();
    draw();

    (async () => {
      try {
        const roster = await api('GET', '/roster');
        if (!alive) return;
        teammates = Array.isArray(roster && roster.teammates) ? roster.teammates.filter((t) => t && typeof t.name === 'string') : [];
        drawConvs();
      } catch (err) { if (alive) showError(err); }
    })();
    refreshChannels();
    const c0 = conv(key);
    if (!c0.loaded || c0.stale) refetch();

    // Channels have no events on the stream: the list is refetched while
    // the page is visible, so a channel made, renamed, archived or joined
    // elsewhere shows within a few seconds.
    const poll = setInterval(() => { if (document.visibilityState === 'visible') refreshChannels(); }, CHANNEL_POLL);

    return () => {
      alive = false;
      clearInterval(poll);
      store.onChange = null;
      store.onLive = null;
      store.open = '';
    };
  },
};
