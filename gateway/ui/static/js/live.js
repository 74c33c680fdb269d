// The tab's one live message stream (/subscribe), shared by every page:
// pages listen with onMessage and see each message once, live or replayed
// after a drop.
import {ResumableStream} from './sse.js';
import {api} from './api.js';

let stream = null;
let member = '';
const listeners = new Set();
const stateListeners = new Set();

export function startLive(name) {
  stopLive();
  member = name;
  stream = new ResumableStream('/subscribe?name=' + encodeURIComponent(name), {
    event: 'message',
    onItem: (msg) => { for (const fn of listeners) fn(msg); },
    onState: (s) => { for (const fn of stateListeners) fn(s); },
    // A stream refused for an ended session would retry forever: asking
    // for the session answers 401 then, and the app signs out (api.js).
    onDrop: () => { api('GET', '/session').catch(() => {}); },
  });
  stream.start();
}

export function stopLive() {
  if (stream) stream.stop();
  stream = null;
}

export function liveState() { return stream ? stream.state : 'idle'; }

export function onMessage(fn) { listeners.add(fn); return () => listeners.delete(fn); }

export function onLiveState(fn) { stateListeners.add(fn); return () => stateListeners.delete(fn); }

// liveMember is the member the stream is open for ('' when none).
export function liveMember() { return stream ? member : ''; }
