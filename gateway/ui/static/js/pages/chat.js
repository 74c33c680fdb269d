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
import {renderMarkdown} from './chat-md.js';

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical'];
const PAGE = 50; // the first page is small: the conversation is usable at once
const MAX_BODY = 64 << 10; // what of one body is shown; the rest is cut, visibly
const MAX_HELD = 2000; // messages held per conversation
const MAX_UNREAD_CONVS = 500;
const MAX_UNREAD = 9999;
const CHANNEL_POLL = 5000; // channel list refresh while chat is on screen, without teamlive.js
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

// Agents are shown with a badge and their live state (working, blocked,
// idle) from teamlive.js, the tab's team stream. It is loaded by a computed
// path so chat still works, without the badges and with the channel list
// polled, where that module is not there.
const TEAMLIVE = '../teamlive.js';
const team = {mod: null, presence: new Map(), waiting: [], failed: false};
import(TEAMLIVE).then((m) => {
  if (!m || typeof m.onPresence !== 'function') return;
  team.mod = m;
  m.onPresence((map) => {
    team.presence = map instanceof Map ? map : new Map();
    for (const el of document.querySelectorAll('.who-tags[data-member]')) fillTags(el);
  });
  for (const fn of team.waiting.splice(0)) fn(m);
}, () => { team.failed = true; team.waiting.length = 0; /* chat polls the channel list instead */ });

// withTeamLive calls fn with teamlive.js once it is loaded.
function withTeamLive(fn) { if (team.mod) fn(team.mod); else if (!team.failed) team.waiting.push(fn); }

function isAgent(name) {
  const p = team.presence.get(name);
  if (p && typeof p.agent === 'boolean') return p.agent;
  return !!(team.mod && typeof team.mod.isAgent === 'function' && team.mod.isAgent(name));
}

const STATES = new Set(['working', 'blocked', 'idle']);

function fillTags(el) {
  const name = el.dataset.member;
  if (!isAgent(name)) { el.replaceChildren(); return; }
  const p = team.presence.get(name) || {};
  const state = STATES.has(p.state) ? p.state : 'idle';
  const online = Number(p.connected) > 0;
  replace(el, h('span', {class: 'agent-badge'}, 'agent'),
    h('span', {class: 'agent-state', 'data-state': online ? state : 'offline'}, online ? state : 'offline'));
}

// whoTags is the badge and state beside a member's name, kept current.
function whoTags(name) {
  const el = h('span', {class: 'who-tags', 'data-member': name});
  fillTags(el);
  return el;
}

const GROUP_MS = 5 * 60 * 1000; // one sender's messages this close share one header

// groups says m continues prev's group: same sender and level, within a
// few minutes, and neither needs a header of its own.
function groups(prev, m) {
  if (!prev || !m || prev.from !== m.from || levelOf(prev) !== levelOf(m)) return false;
  if (String(m.from || '').startsWith('hook:') || (m.title && typeof m.title === 'string')) return false;
  if (m.data && m.data.kind === 'approval_request') return false;
  const dt = Number(m.createdAt) - Number(prev.createdAt);
  return dt >= 0 && dt < GROUP_MS && dayOf(prev) === dayOf(m);
}

function dayOf(m) { return new Date(Number(m && m.createdAt) || 0).toDateString(); }

function daySeparator(m) {
  const d = new Date(Number(m.createdAt) || 0);
  const today = new Date();
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
  let text;
  if (d.toDateString() === today.toDateString()) text = 'Today';
  else if (d.toDateString() === yesterday.toDateString()) text = 'Yesterday';
  else text = d.toLocaleDateString([], {weekday: 'long', month: 'long', day: 'numeric', year: d.getFullYear() === today.getFullYear() ? undefined : 'numeric'});
  return h('li', {class: 'day-sep'}, h('span', {}, text));
}

// FRAME_ITEM is one item of the broker's frame around external content
// (server/hooks/frame.go): the broker escapes anything inside that could
// close or forge it, so the items can be read back for people.
const FRAME_ITEM = /<external_content endpoint="([^"]{0,200})" delivery="([^"]{0,200})" received="([^"]{0,64})"(?: verification="([^"]{0,300})")?>\n([\s\S]*?)\n?<\/external_content>/g;

// hookItems is what a hook message carries, without the framing written
// for agents: [{endpoint, delivery, received, verification, content}], or
// null when the body has no frame.
export function hookItems(body) {
  const items = [];
  for (const m of String(body).matchAll(FRAME_ITEM)) {
    items.push({endpoint: m[1], delivery: m[2], received: m[3], verification: m[4] || '', content: m[5]});
    if (items.length >= 100) break;
  }
  return items.length ? items : null;
}

// messageNode renders one message; every field from the broker is text
// (markdown is rendered from tokens by chat-md.js, never as HTML).
export function messageNode(m, me) {
  const level = levelOf(m);
  const from = typeof m.from === 'string' ? m.from : '?';
  const external = from.startsWith('hook:');
  const stopped = m.loopStopped === true && from !== LOOP_SENDER;
  let body = typeof m.body === 'string' ? m.body : '';
  const cut = body.length > MAX_BODY;
  if (cut) body = body.slice(0, MAX_BODY);
  const attachments = Array.isArray(m.attachments) ? m.attachments : [];
  const when = new Date(Number(m.createdAt) || 0);
  const time = h('time', {datetime: when.toISOString(), title: when.toLocaleString()}, fmtTime(m.createdAt));
  const levelTag = level !== 'info' ? h('span', {class: 'level'}, level) : null;
  if (external) {
    const items = hookItems(body);
    return h('li', {class: ['msg', 'level-' + level, 'external'], 'data-id': m.id},
      h('div', {class: 'meta'},
        h('span', {class: 'from'}, from),
        h('span', {class: 'tag untrusted', title: 'External content from ' + from + ': untrusted input, not written by a teammate'}, 'external · untrusted'),
        time, levelTag),
      h('p', {class: 'ext-label sr-only'}, 'External content from ' + from + ' — untrusted input, not written by a teammate'),
      items ? items.map((it) => h('div', {class: 'hook-item'},
        h('p', {class: 'hook-meta'}, h('span', {}, it.endpoint), ' · ', h('span', {}, it.received),
          it.verification ? [' · ', h('span', {class: 'hook-unverified'}, it.verification)] : null),
        h('pre', {class: 'body', tabindex: '0'}, it.content)))
        : h('pre', {class: 'body', tabindex: '0'}, body),
      cut ? h('p', {class: 'cut'}, '… (cut)') : null,
      attachmentList(attachments));
  }
  const approval = approvalCard(m, me);
  return h('li', {class: ['msg', 'level-' + level, stopped && 'loop-stopped', from === me && 'mine', approval && 'has-approval'], 'data-id': m.id},
    h('div', {class: 'meta'},
      h('span', {class: 'from'}, from), whoTags(from), time, levelTag),
    stopped ? h('p', {class: 'loop-label'}, 'Stopped by the loop guard: agents kept replying to each other, so this message woke no agent') : null,
    typeof m.title === 'string' && m.title ? h('p', {class: 'title'}, m.title) : null,
    // An approval request's text is what the card shows: not repeated.
    approval ? null : h('div', {class: 'body md'}, renderMarkdown(body, me), cut ? h('span', {class: 'cut'}, ' … (cut)') : null),
    attachmentList(attachments),
    approval);
}

const MENTION_MAX = 8; // names the completion offers at once
const MENTION_AT = /(^|\s)@([A-Za-z0-9._-]{0,64})$/;

// placeholderOf is the composer's hint for the conversation.
function placeholderOf(key, channels) {
  const l = label(key, channels);
  return 'Message ' + l;
}

export const chatPage = {
  title: 'Chat', auth: true, fill: true,
  render(main, {app, url}) {
    useMember(app.session.member);
    const me = store.me;
    const perms = Array.isArray(app.session.permissions) ? app.session.permissions : [];
    const canManage = perms.includes('members.manage');
    const requested = url.searchParams.get('c') || 'general';
    const key = CONV_RE.test(requested) ? requested : 'general';
    store.open = key;
    // The count before it is cleared places the "new messages" line.
    let unreadAtOpen = store.unread.get(key) || 0;
    let firstUnread = '';
    markRead(key);
    let channels = [];
    let channelsLoaded = false;
    let teammates = [];
    let alive = true;
    const chanID = key.startsWith('chan:') ? key.slice(5) : '';

    const convList = h('nav', {class: 'convs', id: 'convs', 'aria-label': 'Conversations'});
    const title = h('h1', {id: 'conv-title'}, label(key, channels));
    const note = h('p', {class: 'conv-note', hidden: true});
    const adminSlot = h('div', {class: 'chan-admin-slot'});
    const list = h('ol', {class: 'messages', 'aria-labelledby': 'conv-title', tabindex: '0'});
    let loadingOlder = false;
    const loadOlder = async () => {
      const c = conv(key);
      if (loadingOlder || !c.loaded || c.exhausted) return;
      loadingOlder = true;
      older.disabled = true;
      try { await loadHistory(key, true); if (alive) draw(true); } catch (err) { if (alive) showError(err); } finally { loadingOlder = false; older.disabled = false; }
    };
    const older = h('button', {type: 'button', class: 'quiet older', hidden: true, onclick: loadOlder}, 'Load older messages');
    const olderRow = h('li', {class: 'older-row'}, older);
    // Scrolling near the top loads the page before: the reader's place is kept.
    list.addEventListener('scroll', () => { if (list.scrollTop < 200) loadOlder(); }, {passive: true});
    const status = h('p', {class: 'msg', role: 'alert'});
    const showError = (err) => { replace(status, errorText(err)); status.className = 'msg error'; };

    const input = h('textarea', {id: 'compose', name: 'body', rows: '1', maxlength: String(MAX_BODY), required: true,
      placeholder: placeholderOf(key, channels), 'aria-autocomplete': 'list', 'aria-controls': 'mention-list', autocomplete: 'off'});
    const level = h('select', {id: 'compose-level', name: 'level', class: 'level-pick', title: 'Level'},
      LEVELS.map((l) => h('option', {value: l, selected: l === 'info'}, l)));
    const send = h('button', {type: 'submit', class: 'send'}, 'Send');
    const picker = attachPicker(me, {onError: showError, onBusy: (b) => { send.disabled = b; }});
    let canSend = !key.startsWith('hook:') && !key.startsWith('loop:');

    // Mention completion: "@" and a few letters offer teammates' names.
    const pop = h('ul', {class: 'mention-pop', id: 'mention-list', role: 'listbox', 'aria-label': 'Teammates', hidden: true});
    let choices = [];
    let active = 0;
    const closePop = () => { pop.hidden = true; choices = []; input.removeAttribute('aria-activedescendant'); };
    const drawPop = () => {
      replace(pop, choices.map((name, i) => h('li', {id: 'mention-opt-' + i, role: 'option', 'aria-selected': i === active ? 'true' : 'false',
        class: i === active ? 'active' : null,
        onmousedown: (e) => { e.preventDefault(); pick(name); }}, '@' + name, whoTags(name))));
      pop.hidden = !choices.length;
      if (choices.length) input.setAttribute('aria-activedescendant', 'mention-opt-' + active);
      else input.removeAttribute('aria-activedescendant');
    };
    const mentionQuery = () => {
      const pos = input.selectionStart;
      if (pos !== input.selectionEnd) return null;
      const m = MENTION_AT.exec(input.value.slice(0, pos));
      return m ? m[2] : null;
    };
    const suggest = () => {
      const q = mentionQuery();
      if (q === null) { closePop(); return; }
      const lq = q.toLowerCase();
      choices = teammates.map((t) => t.name).filter((n) => n !== me && n.toLowerCase().startsWith(lq)).slice(0, MENTION_MAX);
      active = 0;
      drawPop();
    };
    const pick = (name) => {
      const pos = input.selectionStart;
      const before = input.value.slice(0, pos).replace(/@[A-Za-z0-9._-]*$/, '@' + name + ' ');
      input.value = before + input.value.slice(pos);
      input.selectionStart = input.selectionEnd = before.length;
      closePop();
      grow();
      input.focus();
    };
    // The composer grows with its text, up to a few lines, then scrolls.
    const grow = () => { input.rows = Math.min(8, Math.max(1, input.value.split('\n').length)); };
    input.addEventListener('input', () => { grow(); suggest(); });
    input.addEventListener('blur', () => closePop());

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
        grow();
        level.value = 'info';
        picker.clear();
        replace(status, '');
        status.className = 'msg';
        firstUnread = ''; // one's own reply: everything above is read
        if (res && res.message) { hold(conv(key), [res.message]); draw(); }
        list.scrollTop = list.scrollHeight; // one's own message is in view
      } catch (err) {
        showError(err);
      } finally {
        send.disabled = false;
        input.focus();
      }
    }},
    pop,
    h('div', {class: 'compose-row'},
      h('label', {for: 'compose', class: 'sr-only'}, 'Message'), input, send),
    h('div', {class: 'compose-tools'},
      picker.node,
      h('label', {for: 'compose-level', class: 'sr-only'}, 'Level'), level,
      h('span', {class: 'compose-hint'}, 'Enter sends · Shift+Enter: new line')));
    input.addEventListener('keydown', (e) => {
      if (!pop.hidden && choices.length) {
        if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
          e.preventDefault();
          active = (active + (e.key === 'ArrowDown' ? 1 : choices.length - 1)) % choices.length;
          drawPop();
          return;
        }
        if ((e.key === 'Enter' || e.key === 'Tab') && !e.shiftKey && !e.isComposing) { e.preventDefault(); pick(choices[active]); return; }
        if (e.key === 'Escape') { e.preventDefault(); closePop(); return; }
      }
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });

    // On a narrow screen the conversation list is a drawer.
    const chat = h('section', {class: 'chat'});
    const drawerBtn = h('button', {type: 'button', class: 'quiet drawer-toggle', 'aria-controls': 'convs', 'aria-expanded': 'false',
      onclick: () => setDrawer(chat.dataset.drawer !== 'open')}, h('span', {'aria-hidden': 'true'}, '☰ '), 'Conversations');
    const scrim = h('div', {class: 'scrim', onclick: () => setDrawer(false)});
    const setDrawer = (open) => {
      chat.dataset.drawer = open ? 'open' : '';
      drawerBtn.setAttribute('aria-expanded', open ? 'true' : 'false');
      if (open) { const a = convList.querySelector('a[aria-current="page"]') || convList.querySelector('a'); if (a) a.focus(); }
    };
    convList.addEventListener('keydown', (e) => { if (e.key === 'Escape' && chat.dataset.drawer === 'open') { setDrawer(false); drawerBtn.focus(); } });

    const toolsSlot = h('div', {class: 'chan-tools'});
    const drawConvs = () => {
      const item = (k) => {
        const n = store.unread.get(k) || 0;
        return h('li', {}, h('a', {href: '/ui/chat?c=' + encodeURIComponent(k), 'data-nav': '', 'aria-current': k === key ? 'page' : null},
          h('span', {class: 'name'}, label(k, channels)),
          k.startsWith('dm:') ? whoTags(k.slice(3)) : null,
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
      input.placeholder = placeholderOf(key, channels);
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

    // Rendered messages are kept by id for the visit: a redraw regroups
    // them without rendering their markdown again.
    const nodes = new Map();
    const nodeOf = (m) => {
      let li = nodes.get(m.id);
      if (!li || li.msgRef !== m) { li = messageNode(m, me); li.msgRef = m; nodes.set(m.id, li); }
      return li;
    };
    const newLine = h('li', {class: 'new-line', id: 'new-line'}, h('span', {}, 'New messages'));

    // placeUnread finds the first of the messages counted unread at open:
    // the count-th newest from someone else.
    const placeUnread = (c, ids) => {
      if (!unreadAtOpen || !c.loaded) return;
      let n = unreadAtOpen;
      unreadAtOpen = 0;
      for (let i = ids.length - 1; i >= 0; i--) {
        const m = c.msgs.get(ids[i]);
        if (m.from === me) continue;
        if (--n === 0 || i === 0) { firstUnread = ids[i]; return; }
      }
    };

    const draw = (keepTop) => {
      const c = conv(key);
      const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
      const fromBottom = list.scrollHeight - list.scrollTop;
      const ids = sortedIDs(c);
      placeUnread(c, ids);
      const items = [olderRow];
      let prev = null;
      for (const id of ids) {
        const m = c.msgs.get(id);
        if (!prev || dayOf(prev) !== dayOf(m)) { items.push(daySeparator(m)); prev = null; }
        if (id === firstUnread) { items.push(newLine); prev = null; }
        const li = nodeOf(m);
        li.classList.toggle('cont', groups(prev, m));
        items.push(li);
        prev = m;
      }
      if (nodes.size > ids.length + PAGE) for (const id of [...nodes.keys()]) if (!c.msgs.has(id)) nodes.delete(id);
      replace(list, items);
      if (!c.msgs.size && c.loaded) list.append(h('li', {class: 'empty'}, 'No messages yet.'));
      older.hidden = !c.loaded || c.exhausted;
      olderRow.hidden = older.hidden;
      // Older messages keep what was on screen in place; otherwise the list
      // follows the newest only when the reader was already there, so a
      // refetch or a replayed message does not yank someone reading back.
      if (keepTop) list.scrollTop = list.scrollHeight - fromBottom;
      else if (firstUnread && !keepTop && c.loaded && !drawnOnce) newLine.scrollIntoView({block: 'center'});
      else if (atBottom || !drawnOnce) list.scrollTop = list.scrollHeight;
      if (c.loaded) drawnOnce = true;
      // A first page that does not fill the list cannot be scrolled up:
      // the next one is fetched at once.
      if (c.loaded && !c.exhausted && list.scrollHeight <= list.clientHeight) loadOlder();
    };
    let drawnOnce = false;

    // A live message newer than everything shown is appended alone; the
    // list is rebuilt only when one lands in between (history, replay).
    const drawNew = (msg) => {
      const lastLi = [...list.querySelectorAll('li.msg')].pop();
      const lastID = lastLi && lastLi.dataset.id;
      if (!msg || !validID(msg.id) || !lastID || list.querySelector('li.empty') || BigInt(msg.id) <= BigInt(lastID) || conv(key).msgs.size > MAX_HELD - 1) { draw(); return; }
      const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
      const prev = lastLi.msgRef;
      const m = conv(key).msgs.get(msg.id) || msg;
      if (!prev || dayOf(prev) !== dayOf(m)) list.append(daySeparator(m));
      const li = nodeOf(m);
      li.classList.toggle('cont', !!prev && dayOf(prev) === dayOf(m) && groups(prev, m));
      list.append(li);
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
    let again = false;
    async function refreshChannels() {
      if (!alive) return;
      if (refreshing) { again = true; return; }
      refreshing = true;
      try {
        const ch = await api('GET', '/channels');
        if (!alive) return;
        channels = Array.isArray(ch && ch.channels) ? ch.channels.filter((c) => c && typeof c.id === 'string' && typeof c.slug === 'string') : [];
        channelsLoaded = true;
        replace(title, label(key, channels));
        input.placeholder = placeholderOf(key, channels);
        drawConvs();
        drawTools();
        drawChannelState();
      } catch (err) { if (alive) showError(err); } finally {
        refreshing = false;
        if (again && alive) { again = false; refreshChannels(); }
      }
    }

    chat.append(scrim, convList,
      h('section', {class: 'conv', 'aria-labelledby': 'conv-title'},
        h('header', {class: 'conv-head'}, drawerBtn, title, adminSlot),
        note, list, status, form));
    main.append(chat);
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

    // Channel changes come from the team stream (teamlive.js): the list is
    // refetched on each. Without that module the list is polled while the
    // page is visible, so a change elsewhere still shows within seconds.
    let offChannels = null;
    let poll = setInterval(() => { if (document.visibilityState === 'visible') refreshChannels(); }, CHANNEL_POLL);
    withTeamLive((m) => {
      if (!alive || typeof m.onChannels !== 'function') return;
      clearInterval(poll);
      poll = 0;
      offChannels = m.onChannels(() => refreshChannels());
    });

    return () => {
      alive = false;
      clearInterval(poll);
      if (typeof offChannels === 'function') offChannels();
      store.onChange = null;
      store.onLive = null;
      store.open = '';
    };
  },
};
