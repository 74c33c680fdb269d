// The tab's one team stream (GET /team/stream), shared by every page:
// presence and live activity of every member (which of them are agents),
// and the channel and objective changes the member may see, pushed as they
// happen, so no page polls for them (docs/WEBAPP.md, "Live team").
//
// The stream is not resumable: each connection starts with a snapshot of
// every member's presence, which replaces what the tab held, then carries
// changes. A change missed during a drop is therefore never stale for
// presence; a page that lists channels or objectives reloads its list when
// onTeamState reports 'live' again after a drop.
//
// The tabs of one browser share one team stream per member, as they share
// /subscribe (tabshare.js, docs/WEBAPP.md "Tabs share one stream"): the
// leading tab holds it and posts each event; a tab joining asks the leader
// for its presence as a snapshot. The connection itself is a
// ResumableStream (sse.js) that starts afresh on each reconnect, for the
// same backoff and back/forward-cache handling as the message stream.
import {api} from './api.js';
import {onLiveState} from './live.js';
import {ResumableStream} from './sse.js';
import {addTopic, leading, post, shared} from './tabshare.js';

const MAX_DATA = 1 << 20; // a frame larger than this is not one of ours
const MAX_MEMBERS = 10000;
const STATES = new Set(['idle', 'working', 'blocked']);
const CHANNEL_OPS = new Set(['created', 'updated', 'archived', 'members']);
const OBJECTIVE_OPS = new Set(['created', 'updated']);

const LIVE_STATES = new Set(['connecting', 'live', 'reconnecting']);

let stream = null; // this tab's own connection, while it leads (or cannot share)
let stopped = true;
let state = 'idle';
let ready = false; // a snapshot arrived on this connection or an earlier one
let presence = new Map(); // name → {connected, state, agent}
const presenceListeners = new Set();
const channelListeners = new Set();
const objectiveListeners = new Set();
const stateListeners = new Set();

// member turns one wire TeamMember into what pages read, or null.
function member(m) {
  if (!m || typeof m !== 'object' || typeof m.name !== 'string' || !m.name || m.name.length > 64) return null;
  const n = Number(m.connected);
  return {
    name: m.name,
    gone: m.gone === true,
    connected: Number.isInteger(n) && n > 0 ? n : 0,
    state: STATES.has(m.state) ? m.state : 'idle',
    agent: m.agent === true,
  };
}

function emitPresence(changed) {
  for (const fn of presenceListeners) {
    try { fn(new Map(presence), changed); } catch (e) { console.error(e); }
  }
}

function emit(set, ev) {
  for (const fn of set) {
    try { fn(ev); } catch (e) { console.error(e); }
  }
}

function setState(s) {
  if (s === state) return;
  state = s;
  if (leading()) post('team', {t: 'state', s});
  for (const fn of stateListeners) {
    try { fn(s); } catch (e) { console.error(e); }
  }
}

// deliver applies one event of the stream (decoded by sse.js here, or
// posted by the leading tab).
function deliver(ev) {
  if (!ev || typeof ev !== 'object') return;
  if (ev.snapshot && typeof ev.snapshot === 'object') {
    const next = new Map();
    const list = Array.isArray(ev.snapshot.members) ? ev.snapshot.members.slice(0, MAX_MEMBERS) : [];
    for (const raw of list) {
      const m = member(raw);
      if (m && !m.gone) next.set(m.name, {connected: m.connected, state: m.state, agent: m.agent});
    }
    presence = next;
    ready = true;
    emitPresence(null);
  } else if (ev.presence) {
    const m = member(ev.presence);
    if (!m) return;
    if (m.gone) presence.delete(m.name);
    else if (presence.has(m.name) || presence.size < MAX_MEMBERS) presence.set(m.name, {connected: m.connected, state: m.state, agent: m.agent});
    emitPresence(m.name);
  } else if (ev.channel && typeof ev.channel === 'object') {
    const c = ev.channel;
    if (!CHANNEL_OPS.has(c.op) || !c.channel || typeof c.channel !== 'object' || typeof c.channel.id !== 'string') return;
    const out = {op: c.op, channel: c.channel};
    if (c.op === 'members' && typeof c.member === 'string') {
      out.member = c.member;
      out.role = typeof c.role === 'string' ? c.role : '';
    }
    emit(channelListeners, out);
  } else if (ev.objective && typeof ev.objective === 'object') {
    const o = ev.objective;
    if (!OBJECTIVE_OPS.has(o.op) || !o.objective || typeof o.objective !== 'object' || typeof o.objective.id !== 'string') return;
    emit(objectiveListeners, {op: o.op, objective: o.objective});
  }
}

function openStream() {
  const st = new ResumableStream('/team/stream', {
    event: 'team',
    resumable: false,
    maxData: MAX_DATA,
    onItem: (ev) => {
      if (stream !== st) return;
      if (leading()) post('team', {t: 'ev', ev});
      deliver(ev);
    },
    onState: (s) => { if (stream === st) setState(s); },
    // A stream refused for an ended session would retry forever: asking
    // for the session answers 401 then, and the app signs out (api.js).
    onDrop: () => { api('GET', '/session').catch(() => {}); },
  });
  stream = st;
  st.start();
}

function closeStream() {
  const st = stream;
  stream = null;
  if (st) st.stop();
}

// snapshot is the presence this tab holds, as the stream's snapshot event.
function snapshot() {
  const members = [];
  for (const [name, p] of presence) members.push({name, connected: p.connected, state: p.state, agent: p.agent});
  return {snapshot: {members}};
}

addTopic('team', {
  lead() { if (!stopped && !stream) openStream(); },
  resign() { closeStream(); },
  joined() { if (!stopped) post('team', {t: 'hello'}); },
  // Away (back/forward cache, frozen): events missed meanwhile; 'live'
  // again after the leader answers makes the pages reload their lists.
  paused() { if (!stopped) setState('reconnecting'); },
  receive(m) {
    if (stopped) return;
    if (m.t === 'ev') {
      if (!leading()) deliver(m.ev);
    } else if (m.t === 'state') {
      if (!leading() && LIVE_STATES.has(m.s)) setState(m.s);
    } else if (m.t === 'hello' && leading()) {
      if (ready) post('team', {t: 'ev', ev: snapshot()});
      post('team', {t: 'state', s: state});
    }
  },
});

// followLive ties the team stream to the tab's message stream (live.js),
// which the app starts at sign-in and stops at sign-out: one call at boot
// is all the app needs.
let following = false;
export function followLive() {
  if (following) return;
  following = true;
  onLiveState((s) => {
    if (s === 'idle') stopTeamLive();
    else if (stopped) startTeamLive();
  });
}

// startTeamLive opens the tab's team stream.
// Where the tabs share (tabshare.js), only the leading tab connects; the
// others ask it for the presence it holds.
export function startTeamLive() {
  stopTeamLive();
  stopped = false;
  setState('connecting');
  if (!shared() || leading()) openStream();
  else post('team', {t: 'hello'});
}

// stopTeamLive closes it (at sign-out) and forgets what it showed.
export function stopTeamLive() {
  stopped = true;
  closeStream();
  ready = false;
  presence = new Map();
  setState('idle');
}

// onPresence calls fn(map, changed) at once with the current state and on
// every change: map is a Map of name → {connected, state, agent} (a copy;
// empty until the first snapshot, see presenceReady), changed the member
// whose entry changed, null for a whole snapshot.
export function onPresence(fn) {
  presenceListeners.add(fn);
  try { fn(new Map(presence), null); } catch (e) { console.error(e); }
  return () => presenceListeners.delete(fn);
}

// presenceReady reports whether a snapshot has arrived.
export function presenceReady() { return ready; }

// onChannels calls fn({op, channel, member?, role?}) for each channel
// change: op created, updated (renamed), archived, or members (member
// joined with role, or left when role is '').
export function onChannels(fn) { channelListeners.add(fn); return () => channelListeners.delete(fn); }

// onObjectives calls fn({op, objective}) for each objective created or
// changed.
export function onObjectives(fn) { objectiveListeners.add(fn); return () => objectiveListeners.delete(fn); }

// onTeamState calls fn('connecting'|'live'|'reconnecting'|'idle') on each
// change of the stream's state.
export function onTeamState(fn) { stateListeners.add(fn); return () => stateListeners.delete(fn); }

export function teamState() { return state; }

// isAgent reports whether name is an agent: a runner has connected for it
// (docs/DECISIONS.md, "Agents").
export function isAgent(name) {
  const p = presence.get(name);
  return !!(p && p.agent);
}
