// Objectives: the team's board by status, live, with a form to create one;
// and one objective's detail (?id=): its fields, attachments, the audit
// log oldest first, the obj:<id> thread, and the actions the caller's
// permissions allow (the server decides; its refusal is shown).
//
// Live: the broker sends an objective's lifecycle events as messages on
// obj:<id> (data.kind 'objective_event') to its originator, assignee,
// watchers and members.manage holders, on the tab's one stream (live.js).
// The board refetches the objective such a message names; the detail page
// reloads itself and appends thread posts.
import {h, replace, append, fmtTime} from '../h.js';
import {api, errorText} from '../api.js';
import {onMessage, onLiveState} from '../live.js';
import {onObjectives, onTeamState} from '../teamlive.js';
import {status, field, form, ago, bytes, uid, str} from '../ui.js';
import {readHref, joinPath, upload} from './files-api.js';

export const STATUSES = [
  {key: 'active', label: 'Active'},
  {key: 'blocked', label: 'Blocked'},
  {key: 'done', label: 'Done'},
  {key: 'cancelled', label: 'Cancelled'},
];
const TERMINAL = new Set(['done', 'cancelled']);
const MAX_TEXT = 64 << 10; // what of one text is shown
const MAX_THREAD = 1000;
const ID_RE = /^[A-Za-z0-9-]{1,64}$/;

function cut(s, n = MAX_TEXT) { s = str(s); return s.length > n ? s.slice(0, n) + ' … (cut)' : s; }
function statusLabel(s) { const x = STATUSES.find((t) => t.key === s); return x ? x.label : 'Unknown'; }
function statusBadge(s) { return h('span', {class: ['obj-status', 'st-' + (STATUSES.some((t) => t.key === s) ? s : 'unknown')]}, statusLabel(s)); }
// detailHref is an objective's page: /ui/objectives/<id> (chat's obj:
// links land there); ?id=<id>, the older form, still opens it.
export function detailHref(id) { return '/ui/objectives/' + encodeURIComponent(id); }

// objectiveEventOf is the objective id a live message reports on, '' if none.
function objectiveIdOf(msg) {
  const t = msg && msg.data && typeof msg.data.thread === 'string' ? msg.data.thread : '';
  if (!t.startsWith('obj:')) return '';
  const id = t.slice(4);
  return ID_RE.test(id) ? id : '';
}

async function members() {
  const r = await api('GET', '/roster');
  return (Array.isArray(r && r.teammates) ? r.teammates : []).map((t) => str(t && t.name)).filter(Boolean).sort();
}

export const objectivesPage = {
  title: 'Objectives', auth: true,
  render(main, ctx) {
    const rest = ctx.url.pathname.replace(/^\/ui\/objectives\/?/, '').replace(/\/+$/, '');
    let id = ctx.url.searchParams.get('id');
    if (rest) { try { id = decodeURIComponent(rest); } catch { id = ''; } }
    if (id !== null) return renderDetail(main, ctx, ID_RE.test(id) ? id : '');
    return renderBoard(main, ctx);
  },
};

// ---- Board ----

function renderBoard(main, {app}) {
  const me = app.session.member;
  const perms = Array.isArray(app.session.permissions) ? app.session.permissions : [];
  const objs = new Map();
  let alive = true;
  const st = status();
  const board = h('div', {class: 'board', 'aria-busy': 'true'});

  const card = (o) => h('li', {class: 'obj-card', 'data-id': o.id},
    h('a', {class: 'obj-title', href: detailHref(o.id), 'data-nav': ''}, cut(o.title, 200) || '(untitled)'),
    h('div', {class: 'meta'},
      h('span', {}, 'Assignee: ', h('strong', {}, str(o.assignee))),
      h('span', {}, 'updated ', ago(o.updatedAt))),
    o.status === 'blocked' && o.blockReason ? h('p', {class: 'reason'}, 'Blocked: ' + cut(o.blockReason, 300)) : null);

  const draw = () => {
    board.setAttribute('aria-busy', 'false');
    const all = [...objs.values()].sort((a, b) => (Number(b.updatedAt) || 0) - (Number(a.updatedAt) || 0));
    replace(board, STATUSES.map((s) => {
      const items = all.filter((o) => o.status === s.key);
      const hid = 'col-' + s.key;
      return h('section', {class: ['column', 'col-' + s.key], 'aria-labelledby': hid, 'data-status': s.key},
        h('h2', {id: hid}, s.label, ' ', h('span', {class: 'count'}, `(${items.length})`)),
        items.length ? h('ul', {class: 'cards'}, items.map(card)) : h('p', {class: 'empty'}, 'None.'));
    }));
  };

  async function loadAll() {
    try {
      const r = await api('GET', '/objectives');
      if (!alive) return;
      objs.clear();
      for (const o of Array.isArray(r && r.objectives) ? r.objectives : []) if (o && ID_RE.test(str(o.id))) objs.set(o.id, o);
      draw();
    } catch (err) { if (alive) st.error(err); }
  }

  // Live: the team stream carries every objective created or changed,
  // whole (every member may read them all), so the board needs no fetch
  // per change. An objective arriving older than the one shown (same id,
  // earlier updatedAt) is not drawn.
  const off = onObjectives(({objective: o}) => {
    if (!alive || !o || !ID_RE.test(str(o.id))) return;
    const had = objs.get(o.id);
    if (had && (Number(had.updatedAt) || 0) > (Number(o.updatedAt) || 0)) return;
    objs.set(o.id, o);
    draw();
  });
  // Changes made while the stream was down are not replayed: after a
  // drop, read the board again.
  let dropped = false;
  const offLive = onTeamState((s) => {
    if (s === 'reconnecting') dropped = true;
    else if (s === 'live' && dropped && alive) { dropped = false; loadAll(); }
  });

  const canCreate = perms.includes('objectives.create');
  main.append(h('section', {class: 'objectives'},
    h('div', {class: 'page-head'},
      h('h1', {}, 'Objectives'),
      h('button', {type: 'button', class: 'quiet', onclick: () => { st.clear(); loadAll(); }}, 'Refresh')),
    h('p', {class: 'hint'}, 'The team\'s objectives, updated live.'),
    canCreate ? createForm(me, (o) => { objs.set(o.id, o); draw(); }) : null,
    st.node,
    board));
  loadAll();
  return () => { alive = false; off(); offLive(); };
}

// createForm is the "New objective" form in a disclosure.
function createForm(me, created) {
  const title = h('input', {type: 'text', name: 'title', maxlength: '200', required: true, autocomplete: 'off'});
  const outcome = h('textarea', {name: 'outcome', rows: '2', required: true});
  const body = h('textarea', {name: 'body', rows: '3'});
  const assignee = h('select', {name: 'assignee', required: true}, h('option', {value: ''}, 'Choose…'));
  const watchersBox = h('fieldset', {class: 'checks'}, h('legend', {}, 'Watchers'), h('p', {class: 'hint'}, 'Loading members…'));
  const attachments = new Map(); // path → label
  const attachList = h('ul', {class: 'attach-list', 'aria-label': 'Attachments'});
  const pathInput = h('input', {type: 'text', list: uid('dl'), autocomplete: 'off', spellcheck: 'false', placeholder: '/' + me + '/…'});
  const datalist = h('datalist', {id: pathInput.getAttribute('list')});
  const fileInput = h('input', {type: 'file', multiple: true, id: 'attach-upload'});
  const attachSt = status();

  const drawAttach = () => replace(attachList, [...attachments.keys()].map((p) => h('li', {},
    h('code', {}, p), ' ',
    h('button', {type: 'button', class: 'quiet', 'aria-label': 'Remove attachment ' + p, onclick: () => { attachments.delete(p); drawAttach(); pathInput.focus(); }}, 'Remove'))));
  const addPath = () => {
    const p = pathInput.value.trim();
    if (!p.startsWith('/')) { attachSt.error('A file path starts with /, e.g. /' + me + '/notes.txt'); return; }
    if (attachments.size >= 64) { attachSt.error('At most 64 attachments.'); return; }
    attachments.set(p, p);
    pathInput.value = '';
    attachSt.clear();
    drawAttach();
  };
  pathInput.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); addPath(); } });
  fileInput.addEventListener('change', async () => {
    const files = [...fileInput.files];
    fileInput.value = '';
    for (const f of files) {
      attachSt.busy('Uploading ' + f.name + '…');
      try {
        const r = await upload(joinPath('/' + me + '/attachments', f.name), f, 'suffix');
        attachments.set(r.entry.path, r.entry.path);
        drawAttach();
        attachSt.ok('Uploaded ' + r.entry.path);
      } catch (err) { attachSt.error(`${f.name}: ${errorText(err)}`); return; }
    }
  });

  (async () => {
    try {
      const names = await members();
      for (const n of names) assignee.append(h('option', {value: n}, n));
      replace(watchersBox, h('legend', {}, 'Watchers'),
        h('div', {class: 'check-list'}, names.map((n) => {
          const cb = h('input', {type: 'checkbox', name: 'watchers', value: n, id: uid('w')});
          return h('span', {class: 'check'}, cb, h('label', {for: cb.id}, n));
        })));
    } catch (err) { replace(watchersBox, h('legend', {}, 'Watchers'), h('p', {class: 'msg error'}, errorText(err))); }
    try {
      const r = await api('GET', '/fs/ls', {query: {path: '/' + me}});
      const files = [];
      const walk = async (entries, depth) => {
        for (const e of entries) {
          if (files.length >= 200) return;
          if (e.kind === 'file') files.push(e.path);
          else if (e.kind === 'dir' && depth < 2) {
            const sub = await api('GET', '/fs/ls', {query: {path: e.path}});
            await walk(Array.isArray(sub && sub.entries) ? sub.entries : [], depth + 1);
          }
        }
      };
      await walk(Array.isArray(r && r.entries) ? r.entries : [], 0);
      replace(datalist, files.map((p) => h('option', {value: p})));
    } catch { /* suggestions only */ }
  })();

  const f = form({label: 'New objective', submit: 'Create objective', busy: 'Creating…', action: async (el) => {
    if (!title.value.trim()) { title.focus(); throw new Error('A title is required.'); }
    if (!outcome.value.trim()) { outcome.focus(); throw new Error('An outcome is required: how will anyone know it is done?'); }
    if (!assignee.value) { assignee.focus(); throw new Error('Choose an assignee.'); }
    const watchers = [...el.querySelectorAll('input[name=watchers]:checked')].map((c) => c.value);
    const payload = {title: title.value, outcome: outcome.value, assignee: assignee.value};
    if (body.value.trim()) payload.body = body.value;
    if (watchers.length) payload.watchers = watchers;
    if (attachments.size) payload.attachments = [...attachments.keys()];
    const o = await api('POST', '/objectives', {body: payload});
    created(o);
    title.value = ''; outcome.value = ''; body.value = ''; attachments.clear(); drawAttach();
    for (const c of el.querySelectorAll('input[name=watchers]')) c.checked = false;
    return 'Created "' + cut(o.title, 200) + '".';
  }},
  field('Title', title),
  field('Outcome', outcome, 'The verifiable definition of done.'),
  field('Details (optional)', body),
  field('Assignee', assignee),
  watchersBox,
  h('fieldset', {class: 'attach'}, h('legend', {}, 'Attachments'),
    attachList,
    h('div', {class: 'attach-add'}, field('A file from your files', pathInput), datalist,
      h('button', {type: 'button', class: 'quiet', onclick: addPath}, 'Attach path')),
    field('Or upload and attach', fileInput, 'Uploads go to /' + me + '/attachments.'),
    attachSt.node));
  f.classList.add('new-objective');
  return h('details', {class: 'create'}, h('summary', {}, 'New objective'), f);
}

// ---- Detail ----

function eventText(ev) {
  const p = ev && typeof ev.payload === 'object' && ev.payload ? ev.payload : {};
  switch (ev.kind) {
    case 'assigned': return `assigned to ${str(p.assignee)}`;
    case 'blocked': return `blocked: ${cut(p.reason, 8192)}`;
    case 'unblocked': return 'unblocked';
    case 'completed': return `completed: ${cut(p.result, 8192)}`;
    case 'cancelled': return p.reason ? `cancelled: ${cut(p.reason, 8192)}` : 'cancelled';
    case 'reassigned': return `reassigned from ${str(p.from)} to ${str(p.to)}` + (p.note ? `: ${cut(p.note, 8192)}` : '');
    case 'watcher_added': return `added watcher ${str(p.watcher)}`;
    case 'watcher_removed': return `removed watcher ${str(p.watcher)}`;
    default: return str(ev.kind) || 'event';
  }
}

function byDecimalId(a, b) {
  const x = str(a.id), y = str(b.id);
  if (/^[0-9]+$/.test(x) && /^[0-9]+$/.test(y)) { const bx = BigInt(x), by = BigInt(y); return bx < by ? -1 : bx > by ? 1 : 0; }
  return (Number(a.createdAt) || 0) - (Number(b.createdAt) || 0);
}

function renderDetail(main, {app}, id) {
  const me = app.session.member;
  const perms = Array.isArray(app.session.permissions) ? app.session.permissions : [];
  const has = (p) => perms.includes(p);
  let alive = true;
  const back = h('p', {}, h('a', {href: '/ui/objectives', 'data-nav': ''}, '← All objectives'));
  if (!id) {
    main.append(h('section', {class: 'objective'}, back, h('h1', {}, 'No such objective'), h('p', {class: 'msg error'}, 'That is not an objective id.')));
    return () => {};
  }
  const head = h('h1', {id: 'obj-title', tabindex: '-1'}, 'Objective');
  const summary = h('div', {class: 'obj-summary'});
  const actionsBox = h('div', {class: 'obj-actions'});
  const events = h('ol', {class: 'audit', 'aria-labelledby': 'audit-h'});
  const thread = h('ol', {class: 'messages thread', 'aria-labelledby': 'thread-h', tabindex: '0'});
  const threadSt = status();
  const st = status();
  const msgs = new Map();
  let obj = null;
  let names = null; // the members, once GET /roster answered ([] if it failed)
  let canThread = true;

  const drawThread = () => {
    const list = [...msgs.values()].sort(byDecimalId);
    replace(thread, list.map((m) => h('li', {class: ['msg', m.data && m.data.kind === 'objective_event' ? 'lifecycle' : null], 'data-id': m.id},
      h('div', {class: 'meta'}, h('span', {class: 'from'}, str(m.from)), h('time', {datetime: new Date(Number(m.createdAt) || 0).toISOString()}, fmtTime(m.createdAt))),
      h('div', {class: 'body'}, cut(m.body)))));
    if (!list.length) thread.append(h('li', {class: 'empty'}, canThread ? 'No messages yet.' : 'The thread is for the objective\'s originator, assignee, watchers and managers.'));
  };

  const drawObj = (o, evs) => {
    obj = o;
    replace(head, cut(o.title, 200) || '(untitled)');
    document.title = (str(o.title).slice(0, 60) || 'Objective') + ' · svc';
    const row = (k, v) => (v === null || v === undefined || v === '' ? null : [h('dt', {}, k), h('dd', {}, v)]);
    const atts = Array.isArray(o.attachments) ? o.attachments.filter((a) => a && typeof a.path === 'string') : [];
    replace(summary,
      h('p', {}, statusBadge(o.status)),
      h('dl', {class: 'facts'},
        row('Outcome', h('span', {class: 'pre'}, cut(o.outcome))),
        row('Details', o.body ? h('span', {class: 'pre obj-body'}, cut(o.body)) : null),
        row('Assignee', str(o.assignee)),
        row('Originator', str(o.originator)),
        row('Watchers', Array.isArray(o.watchers) && o.watchers.length ? o.watchers.map(str).join(', ') : 'none'),
        row('Blocked because', o.status === 'blocked' ? h('span', {class: 'pre'}, cut(o.blockReason)) : null),
        row('Result', o.result ? h('span', {class: 'pre'}, cut(o.result)) : null),
        row('Created', ago(o.createdAt)),
        row('Updated', ago(o.updatedAt))),
      atts.length ? [h('h2', {}, 'Attachments'), h('ul', {class: 'attachments'}, atts.map((a) => h('li', {},
        h('a', {href: readHref(a.path), download: str(a.name) || 'file'}, str(a.name) || a.path), ' ', h('span', {class: 'hint'}, `${bytes(a.size)} · ${str(a.mimeType)} · `), h('code', {}, a.path))))] : null);
    const list = (Array.isArray(evs) ? evs.slice() : []).sort(byDecimalId);
    replace(events, list.map((ev) => h('li', {class: 'ev ev-' + str(ev.kind).replace(/[^a-z_]/g, ''), 'data-kind': str(ev.kind)},
      h('time', {datetime: new Date(Number(ev.createdAt) || 0).toISOString()}, fmtTime(ev.createdAt)), ' ',
      h('strong', {class: 'actor'}, str(ev.actor)), ' ',
      h('span', {class: 'what'}, eventText(ev)))));
    drawActions();
  };

  // Each action is a button that opens a dialog holding its form: the
  // page shows one row of buttons, not a form per action. The server's
  // refusal shows in the dialog, which stays open to try again.
  const opener = (key, text, open, cls) => h('button', {type: 'button', class: ['act-open', cls], 'data-act': key, onclick: open}, text);
  // A dialog whose choices come from the members (Reassign) is drawn at
  // once, maybe before GET /roster answered: its fields' refresh() fills
  // them again when the members arrive (drawActions calls it).
  const act = (key, title, submit, fields, run, {danger = false, intro = null} = {}) => () => {
    const f = fields();
    dialogChoices = f.refresh || null;
    actionDialog({
      key, title, submit, danger, intro, fields: f,
      run: async (values) => {
        await run(values);
        st.ok(title + ': done.');
        await reload();
      },
      closed: () => { dialogChoices = null; const b = actionsBox.querySelector(`[data-act="${key}"]`); (b || head).focus(); },
    });
  };

  // Actions are redrawn only when what they depend on changed, so a live
  // update does not move focus from the row.
  let actionsKey = '';
  let watchersDialog = null; // redraws the open Watchers dialog
  let dialogChoices = null; // refills the open action dialog's member choices
  const drawActions = () => {
    if (!obj) return;
    const o = obj;
    if (watchersDialog) watchersDialog();
    if (dialogChoices) dialogChoices();
    const key = JSON.stringify([o.status, o.assignee, o.originator, o.watchers, names]);
    if (key === actionsKey) return;
    actionsKey = key;
    const live = !TERMINAL.has(o.status);
    const assignee = o.assignee === me;
    const origin = o.originator === me;
    const base = '/objectives/' + encodeURIComponent(o.id);
    const out = [];
    const danger = [];
    if (live && (assignee || has('members.manage'))) {
      if (o.status === 'active') {
        out.push(opener('block', 'Block…', act('block', 'Block', 'Block', () => {
          const reason = h('textarea', {rows: '3', name: 'reason', required: true, maxlength: '8192'});
          return {nodes: [field('Reason', reason, 'What it waits for; the team sees it on the board.')], values: () => ({reason: reason.value}), focus: reason};
        }, ({reason}) => {
          if (!reason.trim()) throw new Error('A reason is required to block.');
          return api('PATCH', base, {body: {status: 'blocked', blockReason: reason}});
        })));
      } else if (o.status === 'blocked') {
        out.push(opener('unblock', 'Unblock', async () => {
          st.busy('Unblocking…');
          try {
            await api('PATCH', base, {body: {status: 'active'}});
            st.ok('Unblock: done.');
            await reload();
          } catch (err) { st.error(err); }
        }));
      }
    }
    if (live && assignee) {
      out.push(opener('complete', 'Mark done…', act('complete', 'Mark done', 'Mark done', () => {
        const result = h('textarea', {rows: '3', name: 'result', required: true, maxlength: '8192'});
        return {nodes: [field('Result', result, 'What was done, against the outcome.')], values: () => ({result: result.value}), focus: result};
      }, ({result}) => {
        if (!result.trim()) throw new Error('A result is required to complete.');
        return api('POST', base + '/complete', {body: {result}});
      })));
    }
    if (live && has('members.manage')) {
      out.push(opener('reassign', 'Reassign…', act('reassign', 'Reassign', 'Reassign', () => {
        const to = h('select', {name: 'to', required: true});
        let drawn = null;
        const fill = () => {
          const choices = (names || []).filter((n) => n !== o.assignee);
          const sig = JSON.stringify([names === null, choices]);
          if (sig === drawn) return; // unchanged: the user's pick stays
          drawn = sig;
          const was = to.value;
          replace(to, h('option', {value: ''}, names === null ? 'Loading members…' : 'Choose…'), choices.map((n) => h('option', {value: n}, n)));
          if (choices.includes(was)) to.value = was;
        };
        fill();
        const note = h('input', {type: 'text', name: 'note', maxlength: '8192', autocomplete: 'off'});
        return {nodes: [h('p', {class: 'hint'}, 'Now assigned to ' + str(o.assignee) + '.'), field('To', to), field('Note (optional)', note)],
          values: () => ({to: to.value, note: note.value}), focus: to, refresh: fill};
      }, ({to, note}) => {
        if (!to) throw new Error('Choose who takes it over.');
        return api('POST', base + '/reassign', {body: note.trim() ? {to, note} : {to}});
      })));
    }
    if (origin || has('objectives.watch')) {
      const count = Array.isArray(o.watchers) ? o.watchers.length : 0;
      out.push(opener('watchers', `Watchers (${count})…`, () => openWatchers(base)));
    }
    if (live && (origin || has('objectives.cancel'))) {
      danger.push(opener('cancel', 'Cancel objective…', act('cancel', 'Cancel objective', 'Cancel objective', () => {
        const reason = h('input', {type: 'text', name: 'reason', maxlength: '8192', autocomplete: 'off'});
        return {nodes: [field('Reason (optional)', reason)], values: () => ({reason: reason.value}), focus: reason};
      }, ({reason}) => api('POST', base + '/cancel', {body: reason.trim() ? {reason} : {}}),
      {danger: true, intro: `Cancel "${cut(o.title, 200)}"? It cannot be undone: a cancelled objective stays cancelled, and its assignee stops working on it.`}), 'danger-text'));
    }
    const empty = h('p', {class: 'hint'}, live ? 'You have no actions on this objective.' : 'This objective is ' + statusLabel(o.status).toLowerCase() + '; nothing more can change but its watchers.');
    replace(actionsBox, out.length || danger.length
      ? [h('div', {class: 'act-row', role: 'group', 'aria-label': 'Actions on this objective'}, out, danger.length ? h('span', {class: 'act-sep'}) : null, danger),
        live ? null : empty]
      : empty);
  };

  // openWatchers shows the watchers with Remove and an Add; the dialog
  // follows the objective while open (live updates, its own changes).
  const openWatchers = (base) => {
    const wst = status();
    const body = h('div', {class: 'watchers-body'});
    const draw = () => {
      const watchers = obj && Array.isArray(obj.watchers) ? obj.watchers.map(str) : [];
      const add = h('select', {id: 'watcher-add'}, h('option', {value: ''}, 'Choose…'), (names || []).filter((n) => !watchers.includes(n)).map((n) => h('option', {value: n}, n)));
      const change = (what, busy) => async () => {
        wst.busy(busy);
        try { await api('PATCH', base + '/watchers', {body: what}); wst.clear(); await reload(); } catch (err) { wst.error(err); }
      };
      replace(body,
        watchers.length ? h('ul', {class: 'watchers'}, watchers.map((w) => h('li', {}, h('span', {}, w),
          h('button', {type: 'button', class: 'quiet danger-text', 'aria-label': 'Remove watcher ' + w, onclick: change({remove: [w]}, 'Removing ' + w + '…')}, 'Remove')))) : h('p', {class: 'hint'}, 'No watchers.'),
        h('form', {class: 'inline-form', 'aria-label': 'Add watcher', onsubmit: (e) => {
          e.preventDefault();
          if (!add.value) { wst.error('Choose a member.'); add.focus(); return; }
          change({add: [add.value]}, 'Adding ' + add.value + '…')();
        }}, field('Add watcher', add), h('button', {type: 'submit'}, 'Add')));
    };
    watchersDialog = () => { const f = document.activeElement; const id = f && f.id; draw(); if (id && document.getElementById(id)) document.getElementById(id).focus(); };
    draw();
    openDialog({key: 'watchers', title: 'Watchers', nodes: [h('p', {class: 'hint'}, 'Watchers get every lifecycle event of this objective and read its thread.'), body, wst.node],
      closeText: 'Close', closed: () => {
        watchersDialog = null;
        const b = actionsBox.querySelector('[data-act="watchers"]');
        (b || head).focus();
      }});
  };

  // Reloads may overlap (an action and its own live message): an answer
  // older than one already shown is dropped.
  let asked = 0;
  let shown = 0;
  async function reload() {
    const mine = ++asked;
    try {
      const r = await api('GET', '/objectives/' + encodeURIComponent(id));
      if (!alive) return null;
      if (mine < shown) return r.objective;
      shown = mine;
      drawObj(r.objective, r.events);
      return r.objective;
    } catch (err) {
      if (alive) { st.error(err); if (!obj) replace(head, 'Objective not available'); }
      return null;
    }
  }

  async function loadThread() {
    try {
      const r = await api('GET', '/history', {query: {thread: 'obj:' + id, limit: 500}});
      if (!alive) return;
      // No resume position is taken from this thread's history: the tab's
      // stream carries every conversation (see sse.js).
      for (const m of Array.isArray(r && r.messages) ? r.messages : []) if (m && typeof m.id === 'string') msgs.set(m.id, m);
      drawThread();
    } catch (err) {
      if (!alive) return;
      if (err.status === 403) { canThread = false; composer.hidden = true; drawThread(); } else threadSt.error(err);
    }
  }

  // The thread's composer.
  const input = h('textarea', {id: 'discuss-body', rows: '2', required: true, maxlength: String(MAX_TEXT)});
  const composer = h('form', {class: 'composer', 'aria-label': 'Post to the thread', onsubmit: async (e) => {
    e.preventDefault();
    if (!input.value.trim()) { input.focus(); return; }
    const btn = composer.querySelector('button');
    btn.disabled = true;
    try {
      const m = await api('POST', '/objectives/' + encodeURIComponent(id) + '/discuss', {body: {body: input.value}});
      input.value = '';
      threadSt.clear();
      if (m && typeof m.id === 'string') { msgs.set(m.id, m); drawThread(); }
    } catch (err) { threadSt.error(err); } finally { btn.disabled = false; input.focus(); }
  }}, h('label', {for: 'discuss-body', class: 'sr-only'}, 'Message'), input, h('button', {type: 'submit'}, 'Post'));

  const off = onMessage((msg) => {
    if (objectiveIdOf(msg) !== id || typeof msg.id !== 'string') return;
    msgs.set(msg.id, msg);
    // A page left open all day holds the newest MAX_THREAD posts.
    if (msgs.size > MAX_THREAD) msgs.delete([...msgs.values()].sort(byDecimalId)[0].id);
    drawThread();
    if (msg.data && msg.data.kind === 'objective_event') reload();
  });
  const offLive = onLiveState((s) => { if (s === 'live' && alive) { reload(); loadThread(); } });
  // A member outside the thread (no lifecycle messages) still sees the
  // objective change live, through the team stream.
  const offTeam = onObjectives(({objective: o}) => { if (alive && o && o.id === id) reload(); });

  main.append(h('section', {class: 'objective'},
    back, head, st.node, summary,
    h('div', {class: 'obj-cols'},
      h('section', {class: 'obj-side', 'aria-label': 'Actions'}, actionsBox),
      h('section', {class: 'obj-log', 'aria-labelledby': 'audit-h'}, h('h2', {id: 'audit-h'}, 'Audit log'), events),
      h('section', {class: 'obj-thread', 'aria-labelledby': 'thread-h'}, h('h2', {id: 'thread-h'}, 'Thread'), thread, threadSt.node, composer))));
  (async () => {
    try { names = await members(); } catch { names = []; }
    if (alive) drawActions();
  })();
  reload();
  loadThread();
  return () => { alive = false; off(); offLive(); offTeam(); };
}

// openDialog shows a modal dialog titled title holding nodes, with a
// close button; Escape closes it too. closed runs after it is gone.
// It answers close().
function openDialog({key, title, nodes, closeText = 'Cancel', closed = () => {}, footer = null}) {
  const tid = uid('dlg');
  const dlg = h('dialog', {class: ['act-dialog', 'act-' + key], 'aria-labelledby': tid});
  let open = true;
  const close = () => {
    if (!open) return;
    open = false;
    dlg.close();
    dlg.remove();
    closed();
  };
  dlg.addEventListener('cancel', (e) => { e.preventDefault(); close(); });
  append(dlg, [h('h2', {id: tid, class: 'dlg-title'}, title), nodes,
    h('div', {class: 'actions'}, h('button', {type: 'button', class: 'quiet dlg-close', onclick: close}, closeText), footer)]);
  document.body.append(dlg);
  dlg.showModal();
  return close;
}

// actionDialog is an action's form in a dialog: fields is {nodes,
// values(), focus}; run(values) does it (throwing shows the error and
// keeps the dialog open). A danger action's submit is styled as such and
// its intro says what cannot be undone.
function actionDialog({key, title, submit, danger, intro, fields, run, closed}) {
  const st = status();
  const btn = h('button', {type: 'submit', class: danger ? 'danger' : null}, submit);
  let close = () => {};
  const f = h('form', {class: 'act-form', novalidate: true, id: uid('actf'), onsubmit: async (e) => {
    e.preventDefault();
    if (btn.disabled) return;
    btn.disabled = true;
    st.busy('Working…');
    try {
      await run(fields.values());
      close();
    } catch (err) {
      st.error(err);
      btn.disabled = false;
    }
  }}, intro ? h('p', {class: danger ? 'dlg-warn' : 'hint'}, intro) : null, fields.nodes, st.node);
  btn.setAttribute('form', f.id);
  close = openDialog({key, title, nodes: [f], closeText: danger ? 'Keep it' : 'Cancel', closed, footer: btn});
  if (fields.focus) fields.focus.focus();
}
