// Approvals in the web app (docs/APPROVALS.md): the card an
// approval_request message shows in the DM with the agent, with Allow and
// Deny for whoever may decide it, and the number of approvals waiting for
// the signed-in person (the badge on Team). Cards and the count follow the
// tab's stream: a request or a decision (approval_decided, on the
// broker's approval:<id> thread) refreshes them. Every field an agent
// wrote (tool, input, reason) is a Text node.
import {h, replace, fmtTime} from './h.js';
import {api, errorText} from './api.js';
import {onMessage, onLiveState, liveMember} from './live.js';

const ID_RE = /^[A-Za-z0-9-]{1,128}$/;
const MAX_INPUT = 4096; // what of a tool's input a card shows; the rest is cut, visibly
const MAX_REASON = 4096; // the broker's bound on a reason
const REFRESH_MS = 300; // a burst of requests and decisions costs one count

const cache = new Map(); // id → Approval, as the broker last answered
const loading = new Map(); // id → the GET in flight
const countListeners = new Set();
let pending = 0;
let timer = 0;

// onPendingCount calls fn with the number of approvals waiting for the
// signed-in person's decision, now and on every change; it returns the
// unsubscribe.
export function onPendingCount(fn) {
  countListeners.add(fn);
  fn(pending);
  return () => countListeners.delete(fn);
}

// refreshCount lists the pending approvals again (debounced).
export function refreshCount() {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    const me = liveMember();
    if (!me) return;
    let res;
    try { res = await api('GET', '/approvals', {query: {status: 'pending'}}); } catch { return; }
    const list = Array.isArray(res && res.approvals) ? res.approvals : [];
    for (const a of list) if (valid(a)) cache.set(a.id, a);
    setCount(list.filter((a) => valid(a) && a.member !== me).length);
  }, REFRESH_MS);
}

function setCount(n) {
  pending = n;
  for (const fn of countListeners) fn(n);
}

function valid(a) { return a && typeof a.id === 'string' && ID_RE.test(a.id) && typeof a.member === 'string'; }

onMessage((msg) => {
  const data = msg && msg.data;
  if (!data || typeof data.approval !== 'string' || !ID_RE.test(data.approval)) return;
  if (data.kind === 'approval_decided' && data.thread === 'approval:' + data.approval) {
    reload(data.approval);
    refreshCount();
  } else if (data.kind === 'approval_request') {
    refreshCount();
  }
});
onLiveState((s) => { if (s === 'live') refreshCount(); });

// reload fetches an approval again and redraws its cards.
async function reload(id) {
  cache.delete(id);
  if (!document.querySelector(cardSel(id))) return;
  try { await load(id); } catch { /* the cards keep what they show */ }
  redraw(id);
}

function load(id) {
  if (cache.has(id)) return Promise.resolve(cache.get(id));
  if (!loading.has(id)) {
    loading.set(id, api('GET', '/approvals/' + encodeURIComponent(id)).then((a) => {
      if (valid(a)) cache.set(id, a);
      return a;
    }).finally(() => loading.delete(id)));
  }
  return loading.get(id);
}

function cardSel(id) { return '.approval-card[data-approval="' + id + '"]'; }

function redraw(id) {
  for (const el of document.querySelectorAll(cardSel(id))) fill(el, id, el.dataset.from, el.dataset.me);
}

// approvalCard is the card of an approval_request message, seen by me;
// null for a message that is no approval request.
export function approvalCard(msg, me) {
  const data = msg && msg.data;
  if (!data || data.kind !== 'approval_request' || typeof data.approval !== 'string' || !ID_RE.test(data.approval)) return null;
  const id = data.approval;
  const el = h('div', {class: 'approval-card', 'data-approval': id, 'data-from': String(msg.from || ''), 'data-me': me, role: 'group', 'aria-label': 'Approval request'});
  if (cache.has(id)) fill(el, id, msg.from, me);
  else {
    el.append(h('p', {class: 'hint'}, 'Loading the approval…'));
    load(id).then(() => fill(el, id, msg.from, me), (err) => replace(el, h('p', {class: 'msg error'}, 'The approval cannot be shown: ' + errorText(err))));
  }
  return el;
}

function describe(a) {
  const by = typeof a.decidedBy === 'string' ? a.decidedBy : '';
  const reason = typeof a.reason === 'string' && a.reason ? a.reason : '';
  const when = a.decidedAt ? ' · ' + fmtTime(a.decidedAt) : '';
  switch (a.status) {
    case 'pending': return 'Waiting for a decision · expires ' + fmtTime(a.expiresAt);
    case 'allowed': return 'Allowed by ' + by + (reason ? ': ' + reason : '') + when;
    case 'denied': return 'Denied by ' + by + (reason ? ': ' + reason : '') + when;
    case 'expired': return 'Expired, as denied' + (reason ? ' (' + reason + ')' : '') + when;
  }
  return String(a.status || '');
}

function inputText(input) {
  let s;
  try { s = JSON.stringify(input, null, 2); } catch { s = String(input); }
  if (typeof s !== 'string') s = 'null';
  return s.length > MAX_INPUT ? s.slice(0, MAX_INPUT) + '\n… (cut)' : s;
}

function fill(el, id, from, me) {
  const a = cache.get(id);
  if (!a) return;
  // The card shows an approval only in a message from the member that
  // asked: anyone could DM a message naming another agent's approval.
  if (a.member !== from) {
    replace(el, h('p', {class: 'hint'}, 'This message names an approval it did not ask for; it is not shown.'));
    return;
  }
  el.dataset.status = a.status;
  const st = h('p', {class: 'msg', role: 'status', 'aria-live': 'polite'});
  const canDecide = a.status === 'pending' && a.member !== me;
  const reasonId = 'approval-reason-' + id;
  const reason = h('input', {id: reasonId, class: 'approval-reason', maxlength: String(MAX_REASON), autocomplete: 'off', placeholder: 'Reason (optional)'});
  const decide = (decision) => async () => {
    for (const b of el.querySelectorAll('button')) b.disabled = true;
    replace(st, decision === 'allow' ? 'Allowing…' : 'Denying…');
    const body = {decision};
    if (reason.value.trim()) body.reason = reason.value;
    try {
      const res = await api('POST', '/approvals/' + encodeURIComponent(id) + '/decide', {body});
      if (valid(res)) cache.set(id, res);
      redraw(id);
      refreshCount();
    } catch (err) {
      st.className = 'msg error';
      replace(st, err.status === 409 ? 'Already decided.' : err.status === 403 ? 'You may not decide this approval.' : errorText(err));
      if (err.status === 409) { await reload(id); refreshCount(); }
      for (const b of el.querySelectorAll('button')) b.disabled = false;
    }
  };
  // Compact: who asks for what on one line, the input in a short
  // scrolling box, then the decision row, so Allow and Deny are in view
  // without scrolling. The message's own text is not repeated (chat.js).
  replace(el,
    h('p', {class: 'approval-title'}, a.member + ' asks to use ', h('code', {}, a.tool),
      typeof a.objective === 'string' && a.objective ? [' · objective ', h('code', {}, a.objective)] : null),
    h('pre', {class: 'approval-input', tabindex: '0'}, inputText(a.input)),
    h('p', {class: 'approval-status', 'data-status': a.status}, describe(a)),
    canDecide ? h('div', {class: 'actions'},
      h('label', {for: reasonId, class: 'sr-only'}, 'Reason (optional, shown to the agent)'),
      reason,
      h('button', {type: 'button', class: 'approval-allow', onclick: decide('allow')}, 'Allow'),
      h('button', {type: 'button', class: 'approval-deny danger', onclick: decide('deny')}, 'Deny')) : null,
    st);
}

// pendingList renders the approvals waiting for me (the Team page's
// section), newest first. shown holds the ids the section showed before on
// this visit: one decided meanwhile stays, with its decision, so a card
// does not vanish under the hand that decided it.
export async function pendingList(me, shown) {
  const res = await api('GET', '/approvals', {query: {status: 'pending'}});
  const waiting = (Array.isArray(res && res.approvals) ? res.approvals : []).filter((a) => valid(a) && a.member !== me);
  for (const a of waiting) cache.set(a.id, a);
  setCount(waiting.length);
  const ids = new Set(waiting.map((a) => a.id));
  const list = [...waiting];
  for (const id of shown) if (!ids.has(id) && cache.has(id)) list.push(cache.get(id));
  list.sort((x, y) => Number(y.requestedAt) - Number(x.requestedAt));
  for (const a of list) shown.add(a.id);
  if (!list.length) return h('p', {class: 'hint', id: 'approvals-none'}, 'No approval waits for you.');
  return h('ul', {class: 'approvals', id: 'approvals'}, list.map((a) => h('li', {},
    approvalCard({from: a.member, data: {kind: 'approval_request', approval: a.id}}, me),
    h('p', {class: 'hint'}, h('a', {href: '/ui/chat?c=' + encodeURIComponent('dm:' + a.member), 'data-nav': ''}, 'Open the conversation with ' + a.member)))));
}
