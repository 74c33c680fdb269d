// The tab's live message stream (/subscribe), shared by every page:
// pages listen with onMessage and see each message once, live or replayed
// after a drop.
//
// The tabs of one browser share one /subscribe per member (tabshare.js,
// docs/WEBAPP.md "Tabs share one stream"): the leading tab holds the
// stream and posts each message and state change to the others. A tab
// that takes the lead resumes after the last message it was handed, so a
// change of leader loses nothing; messages are delivered to pages in id
// order, each once. Where tabs cannot share, each keeps its own stream.
import {ResumableStream} from './sse.js';
import {api} from './api.js';
import {addTopic, joinTabs, leaveTabs, leading, post} from './tabshare.js';

const MAX_ID_LEN = 19;
const ID_RE = /^[0-9]{1,19}$/;
const STATES = new Set(['connecting', 'live', 'reconnecting']);
const RECENT = 500; // messages kept to replay to a tab coming back

let stream = null; // this tab's own stream, while it leads (or cannot share)
let started = false;
let member = '';
let state = 'idle';
let last = null; // BigInt: the newest id delivered to this tab's pages
let recent = []; // [{id: BigInt, msg}] the newest RECENT delivered, oldest first
const listeners = new Set();
const stateListeners = new Set();

function setState(s) {
  if (s === state) return;
  state = s;
  if (leading()) post('live', {t: 'state', s});
  for (const fn of stateListeners) {
    try { fn(s); } catch (e) { console.error(e); }
  }
}

// deliver hands msg to the pages unless its id is not newer than the last
// one delivered (a replay after a drop or a change of leader).
function deliver(msg, id) {
  if (typeof id !== 'string' || id.length > MAX_ID_LEN || !ID_RE.test(id) || !msg || typeof msg !== 'object') return;
  const n = BigInt(id);
  if (last !== null && n <= last) return;
  last = n;
  recent.push({id: n, msg});
  if (recent.length > RECENT) recent.shift();
  for (const fn of listeners) {
    try { fn(msg); } catch (e) { console.error(e); }
  }
}

// checkSession asks for the session: a stream refused for an ended
// session would retry forever, and a tab told that another signed out
// must find out too; GET /session answers 401 then, and the app signs out
// (api.js, app.js). At most one check at a time.
let checking = false;
function checkSession() {
  if (checking) return;
  checking = true;
  api('GET', '/session').catch(() => {}).finally(() => { checking = false; });
}

function openStream() {
  const st = new ResumableStream('/subscribe?name=' + encodeURIComponent(member), {
    event: 'message',
    onItem: (msg, id) => {
      if (stream !== st) return;
      if (leading()) post('live', {t: 'item', id, msg});
      deliver(msg, id);
    },
    onState: (s) => { if (stream === st) setState(s); },
    onDrop: checkSession,
  });
  stream = st;
  if (last !== null) st.resumeAfter(last.toString());
  st.start();
}

function closeStream() {
  const st = stream;
  stream = null;
  if (st) st.stop();
}

addTopic('live', {
  lead() { if (started && !stream) openStream(); },
  resign() { closeStream(); },
  // A follower (re)joining asks for the stream's state and for what it
  // missed after the last message it holds.
  joined() { if (started) post('live', {t: 'hello', after: last === null ? '' : last.toString()}); },
  // Away (back/forward cache, frozen): what arrives meanwhile is not seen
  // here. Reconnecting until the leader answers; 'live' again makes the
  // pages refetch what they show, as after any drop.
  paused() { if (started) setState('reconnecting'); },
  receive(m) {
    if (!started) return;
    if (m.t === 'item') {
      if (!leading()) deliver(m.msg, m.id);
    } else if (m.t === 'state') {
      if (!leading() && STATES.has(m.s)) setState(m.s);
    } else if (m.t === 'hello') {
      if (!leading()) return;
      // Replay what the asker missed when every message after its
      // position is still here; else its page refetches on 'live'.
      if (typeof m.after === 'string' && ID_RE.test(m.after) && recent.length && BigInt(m.after) >= recent[0].id) {
        const after = BigInt(m.after);
        const items = recent.filter((r) => r.id > after).map((r) => ({id: r.id.toString(), msg: r.msg}));
        if (items.length) post('live', {t: 'replay', items});
      }
      post('live', {t: 'state', s: state});
    } else if (m.t === 'replay') {
      if (leading() || !Array.isArray(m.items)) return;
      for (const r of m.items.slice(0, RECENT)) if (r && typeof r === 'object') deliver(r.msg, r.id);
    } else if (m.t === 'ended') {
      checkSession();
    }
  },
});

export function startLive(name) {
  stop(false);
  member = name;
  started = true;
  const sharing = joinTabs(name);
  setState('connecting');
  if (!sharing) openStream();
}

// stopLive closes the stream: the session ended in this tab (signed out,
// expired). The other tabs are told, and each checks its own session.
export function stopLive() { stop(true); }

function stop(tell) {
  if (!started) return;
  started = false;
  closeStream();
  if (tell) post('live', {t: 'ended'});
  leaveTabs();
  last = null;
  recent = [];
  setState('idle');
}

export function liveState() { return started ? state : 'idle'; }

export function onMessage(fn) { listeners.add(fn); return () => listeners.delete(fn); }

export function onLiveState(fn) { stateListeners.add(fn); return () => stateListeners.delete(fn); }

// liveMember is the member the stream is open for ('' when none).
export function liveMember() { return started ? member : ''; }
