// A resumable server-sent event stream (CONTRACT §4): the broker sends
// `event: ready` on attach, then `id: <n>` / `event: <name>` / `data:
// <json>` per item. When the connection drops, the stream reconnects with
// ?lastEventId=<last id seen> and the broker replays every later item in
// order before going live, so nothing is lost; items at or before the last
// id are dropped here, so nothing is delivered twice.
//
// Ids are decimal strings in commit order, compared as BigInt. A page that
// loaded history before the first item can advance() the position to the
// newest id it holds, so even a drop before any live item loses nothing.
// Pages key what they show by id as well, so an overlap of history and
// live delivery shows once.

const MAX_ID_LEN = 19;
const ID_RE = /^[0-9]{1,19}$/;
const MAX_DATA = 4 << 20; // a frame larger than this is not a message of ours

export class ResumableStream {
  // url: the stream's URL without lastEventId; event: the item event name;
  // onItem(obj, id) per new item; onState('connecting'|'live'|'reconnecting');
  // onDrop() on every failed or dropped connection (EventSource hides the
  // status: the page checks whether its session still stands).
  constructor(url, {event = 'message', onItem, onState = () => {}, onDrop = () => {}, minDelay = 250, maxDelay = 8000} = {}) {
    this.onDrop = onDrop;
    this.url = url;
    this.event = event;
    this.onItem = onItem;
    this.onState = onState;
    this.minDelay = minDelay;
    this.maxDelay = maxDelay;
    this.delay = minDelay;
    this.last = null; // BigInt of the last id delivered, or null
    this.floor = null; // BigInt of the newest id the page holds from elsewhere
    this.es = null;
    this.timer = 0;
    this.stopped = true;
    this.state = 'idle';
  }

  // lastId is the position the stream would resume after ('' when none).
  get lastId() { const p = this.resumeAfter(); return p === null ? '' : p.toString(); }

  // advance records a position the page already holds (the newest id of
  // the history it loaded). It only matters while the stream has delivered
  // nothing yet: a drop then resumes after it instead of going live-only
  // and losing what came in between. Once items flow, their ids are the
  // position: an id from history may be ahead of items still in flight.
  advance(id) {
    if (typeof id !== 'string' || !ID_RE.test(id)) return;
    const n = BigInt(id);
    if (this.floor === null || n > this.floor) this.floor = n;
  }

  // resumeAfter is the position a reconnect asks for, null for none.
  resumeAfter() { return this.last !== null ? this.last : this.floor; }

  start() {
    this.stopped = false;
    this.connect(this.resumeAfter() === null ? 'connecting' : 'reconnecting');
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.es = null;
    this.setState('idle');
  }

  setState(s) {
    if (s === this.state) return;
    this.state = s;
    this.onState(s);
  }

  connect(state) {
    this.setState(state);
    let url = this.url;
    const after = this.resumeAfter();
    if (after !== null) url += (url.includes('?') ? '&' : '?') + 'lastEventId=' + after.toString();
    const es = new EventSource(url);
    this.es = es;
    es.addEventListener('ready', () => {
      if (this.es !== es) return;
      this.delay = this.minDelay;
      this.setState('live');
    });
    es.addEventListener(this.event, (e) => {
      if (this.es !== es) return;
      this.deliver(e.lastEventId, e.data);
    });
    es.onerror = () => {
      if (this.es !== es) return;
      // The browser's own retry would resume from the last id it saw on
      // this connection only; ours resumes from what the page holds.
      es.close();
      this.es = null;
      if (this.stopped) return;
      this.setState('reconnecting');
      this.onDrop();
      const wait = this.delay;
      this.delay = Math.min(this.delay * 2, this.maxDelay);
      this.timer = setTimeout(() => { if (!this.stopped) this.connect('reconnecting'); }, wait);
    };
  }

  deliver(id, data) {
    if (typeof id !== 'string' || id.length > MAX_ID_LEN || !ID_RE.test(id)) return;
    const n = BigInt(id);
    if (this.last !== null && n <= this.last) return; // replayed: already delivered
    if (typeof data !== 'string' || data.length > MAX_DATA) return;
    let obj;
    try { obj = JSON.parse(data); } catch { return; }
    if (!obj || typeof obj !== 'object') return;
    this.last = n;
    this.onItem(obj, id);
  }
}
