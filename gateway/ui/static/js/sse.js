// A resumable server-sent event stream (CONTRACT §4): the broker sends
// `event: ready` on attach, then `id: <n>` / `event: <name>` / `data:
// <json>` per item. When the connection drops, the stream reconnects with
// ?lastEventId=<last id seen> and the broker replays every later item in
// order before going live, so nothing is lost; items at or before the last
// id are dropped here, so nothing is delivered twice.
//
// Ids are decimal strings in commit order, compared as BigInt. The resume
// position is only ever an id this stream delivered: the stream carries
// every conversation, so an id learned elsewhere (one conversation's
// history) is no position for the whole stream — resuming after it would
// skip other conversations' messages still in flight. Before the first
// item there is no position: a drop then resumes live-only, and the page
// closes that gap itself (onState 'live': refetch what it shows). Pages key
// what they show by id, so an overlap of history and live shows once.

const MAX_ID_LEN = 19;
const ID_RE = /^[0-9]{1,19}$/;
const MAX_DATA = 4 << 20; // a frame larger than this is not a message of ours

export class ResumableStream {
  // url: the stream's URL without lastEventId; event: the item event name;
  // onItem(obj, id) per new item; onState('connecting'|'live'|'reconnecting');
  // onDrop() on every failed or dropped connection (EventSource hides the
  // status: the page checks whether its session still stands).
  // resumable false: a stream whose every connection starts afresh (the
  // team stream: a snapshot, then changes): items need no id, none is
  // deduplicated, and a reconnect carries no lastEventId.
  constructor(url, {event = 'message', onItem, onState = () => {}, onDrop = () => {}, minDelay = 250, maxDelay = 8000, resumable = true, maxData = MAX_DATA} = {}) {
    this.onDrop = onDrop;
    this.resumable = resumable;
    this.maxData = maxData;
    this.url = url;
    this.event = event;
    this.onItem = onItem;
    this.onState = onState;
    this.minDelay = minDelay;
    this.maxDelay = maxDelay;
    this.delay = minDelay;
    this.last = null; // BigInt of the last id delivered, or null
    this.floor = null; // BigInt from advance(), used until an item arrives
    this.es = null;
    this.timer = 0;
    this.stopped = true;
    this.state = 'idle';
    this.onHide = null; // pagehide/pageshow listeners while started
    this.onShow = null;
    this.parked = false; // closed by pagehide, to resume on pageshow
  }

  // lastId is the position the stream would resume after ('' when none).
  get lastId() { return this.last === null ? '' : this.last.toString(); }

  // advance records a position the page already holds (the newest id of
  // the history it loaded), for a stream whose history is everything it
  // carries (one member's activity: history and stream are the same rows).
  // It only matters while the stream has delivered nothing yet: a drop then
  // resumes after it instead of going live-only. Once items flow, their
  // ids are the position. Never for /subscribe: one conversation's history
  // is no position for a stream of all of them.
  advance(id) {
    if (typeof id !== 'string' || id.length > MAX_ID_LEN || !ID_RE.test(id)) return;
    const n = BigInt(id);
    if (this.floor === null || n > this.floor) this.floor = n;
  }

  // resumeAfter sets the position to id, an id of this same stream that
  // another tab's connection delivered (js/tabshare.js: a tab taking over
  // the shared stream resumes after the last item it was handed), so the
  // items after it are replayed and the ones up to it not delivered again.
  resumeAfter(id) {
    if (typeof id !== 'string' || id.length > MAX_ID_LEN || !ID_RE.test(id)) return;
    const n = BigInt(id);
    if (this.last === null || n > this.last) this.last = n;
  }

  start() {
    this.stopped = false;
    this.watchPage(true);
    this.connect(this.last === null ? 'connecting' : 'reconnecting');
  }

  stop() {
    this.stopped = true;
    this.watchPage(false);
    clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.es = null;
    this.setState('idle');
  }

  // watchPage closes the connection when the page is hidden for good or
  // put in the back/forward cache (pagehide), and resumes it when the page
  // comes back from that cache (pageshow). Chromium keeps a cached page's
  // open stream, and a browser allows six HTTP/1.1 connections per origin:
  // a few full-page loads (a reload, a file opened in the tab and Back)
  // left the app's own requests queued behind its old pages' streams,
  // stuck at "Loading…" (docs/WEBAPP.md, "Screenshots and the whole-app
  // check").
  watchPage(on) {
    if (on && !this.onHide) {
      this.onHide = () => {
        if (this.stopped) return;
        clearTimeout(this.timer);
        if (this.es) this.es.close();
        this.es = null;
        this.parked = true;
      };
      this.onShow = () => {
        if (this.stopped || !this.parked) return;
        this.parked = false;
        this.connect('reconnecting');
      };
      addEventListener('pagehide', this.onHide);
      addEventListener('pageshow', this.onShow);
    } else if (!on && this.onHide) {
      removeEventListener('pagehide', this.onHide);
      removeEventListener('pageshow', this.onShow);
      this.onHide = this.onShow = null;
      this.parked = false;
    }
  }

  setState(s) {
    if (s === this.state) return;
    this.state = s;
    this.onState(s);
  }

  connect(state) {
    this.setState(state);
    let url = this.url;
    const after = this.last !== null ? this.last : this.floor;
    if (after !== null && this.resumable) url += (url.includes('?') ? '&' : '?') + 'lastEventId=' + after.toString();
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
    if (!this.resumable) {
      const obj = parse(data, this.maxData);
      if (obj) this.onItem(obj, typeof id === 'string' ? id : '');
      return;
    }
    if (typeof id !== 'string' || id.length > MAX_ID_LEN || !ID_RE.test(id)) return;
    const n = BigInt(id);
    if (this.last !== null && n <= this.last) return; // replayed: already delivered
    const obj = parse(data, this.maxData);
    if (!obj) return;
    this.last = n;
    this.onItem(obj, id);
  }
}

// parse decodes one frame's JSON object, or null for anything else.
function parse(data, max) {
  if (typeof data !== 'string' || data.length > max) return null;
  let obj;
  try { obj = JSON.parse(data); } catch { return null; }
  return obj && typeof obj === 'object' ? obj : null;
}
