// The tabs of one browser share one set of streams per member
// (docs/WEBAPP.md, "Tabs share one stream"). A browser allows six HTTP/1.1
// connections per origin, and each tab held two streams (/subscribe and
// /team/stream): the fourth tab's requests queued forever behind the
// others' streams.
//
// One tab, the leader, holds a Web Lock named for the member for as long
// as it lives and keeps the streams open; it posts every item and state
// change on a BroadcastChannel named for the member, and the other tabs
// (followers) listen. The browser hands the lock to a waiting tab when the
// leader closes, so the streams move with it. A tab leaves (releasing the
// lock) when its page is hidden for good or frozen (pagehide, freeze) and
// joins again when it comes back (pageshow, resume).
//
// Modules that own a stream register a topic: lead() opens their stream
// in this tab, resign() closes it, joined() runs each time the tab (re)joins
// (a follower asks the leader for what it missed), paused() when it leaves
// for a while (pagehide, freeze), receive(msg) gets what another tab
// posted on the topic. Everything posted is structured-cloned
// between tabs of our own origin; receivers still check what they read.

const PREFIX = 'svc-tabs:';

const topics = new Map(); // name → {lead, resign, joined, receive}
let member = '';
let joinedTabs = false; // joinTabs called and not left
let chan = null; // the BroadcastChannel while connected
let abort = null; // aborts this connection's waiting lock request
let release = null; // resolves the held lock's promise: gives it up
let leader = false;
let away = false; // left at pagehide/freeze, to join again on return

// supported reports whether this browser can share streams between tabs;
// where not, each tab keeps its own.
export function supported() {
  return typeof BroadcastChannel === 'function' && typeof navigator === 'object' &&
    !!navigator.locks && typeof navigator.locks.request === 'function';
}

// addTopic registers a stream's handlers; a module calls it once at load.
export function addTopic(name, {lead = () => {}, resign = () => {}, joined = () => {}, receive = () => {}, paused = () => {}} = {}) {
  topics.set(name, {lead, resign, joined, receive, paused});
}

// shared reports whether the tab is sharing (joinTabs succeeded): its
// streams are then opened only through lead().
export function shared() { return joinedTabs; }

// leading reports whether this tab holds the streams now.
export function leading() { return leader; }

// post sends msg on topic to every other tab of the member.
export function post(topic, msg) {
  if (!chan) return;
  try { chan.postMessage({...msg, topic}); } catch (e) { console.error(e); }
}

// joinTabs starts sharing for member. It returns false where the browser
// cannot share: the caller opens its own streams then.
export function joinTabs(name) {
  leaveTabs();
  if (!supported()) return false;
  member = name;
  joinedTabs = true;
  watchPage(true);
  connect();
  return true;
}

// leaveTabs stops sharing: this tab's streams close (resign) and, if it
// led, another tab takes the lock and opens them.
export function leaveTabs() {
  if (!joinedTabs) return;
  joinedTabs = false;
  watchPage(false);
  disconnect();
  away = false;
}

function each(fn) {
  for (const t of topics.values()) {
    try { fn(t); } catch (e) { console.error(e); }
  }
}

function connect() {
  const ch = new BroadcastChannel(PREFIX + member);
  chan = ch;
  ch.onmessage = (e) => {
    if (chan !== ch) return;
    const m = e.data;
    if (!m || typeof m !== 'object' || typeof m.topic !== 'string' || typeof m.t !== 'string') return;
    const t = topics.get(m.topic);
    if (t) {
      try { t.receive(m); } catch (err) { console.error(err); }
    }
  };
  const ac = new AbortController();
  abort = ac;
  // The lock is held until the promise the callback returns settles: the
  // leader keeps it pending until it leaves (or the tab is gone, which
  // releases it too).
  navigator.locks.request(PREFIX + member, {signal: ac.signal}, () => {
    if (abort !== ac) return undefined; // left while the grant was on its way
    return new Promise((resolve) => {
      release = resolve;
      leader = true;
      each((t) => t.lead());
    });
  }).catch(() => { /* aborted: this tab left before its turn */ });
  each((t) => t.joined());
}

function disconnect() {
  if (abort) abort.abort();
  abort = null;
  if (leader) {
    leader = false;
    each((t) => t.resign());
  }
  if (release) release();
  release = null;
  if (chan) chan.close();
  chan = null;
}

let onHide = null;
let onShow = null;

// watchPage leaves when the page is hidden for good, put in the
// back/forward cache or frozen (a frozen leader would hold the lock and
// deliver nothing), and joins again when it comes back.
function watchPage(on) {
  if (on && !onHide) {
    onHide = () => {
      if (!joinedTabs || away) return;
      away = true;
      disconnect();
      each((t) => t.paused());
    };
    onShow = () => {
      if (!joinedTabs || !away) return;
      away = false;
      connect();
    };
    addEventListener('pagehide', onHide);
    addEventListener('pageshow', onShow);
    document.addEventListener('freeze', onHide);
    document.addEventListener('resume', onShow);
  } else if (!on && onHide) {
    removeEventListener('pagehide', onHide);
    removeEventListener('pageshow', onShow);
    document.removeEventListener('freeze', onHide);
    document.removeEventListener('resume', onShow);
    onHide = onShow = null;
  }
}
