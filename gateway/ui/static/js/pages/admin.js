// Admin: notification endpoints (a sender preset, targets picked by name,
// a write-only secret; verification details, filters, template and policy
// folded) with their delivery receipts and replay; the verification
// profiles endpoints share; tool sources and environment secrets with
// write-only credentials and per-member bindings. Each part shows to the
// holders of its permission; others are told which permission it takes.
// The four are one component, registrySection, over a description of
// each registry.
//
// Secrets are write-only: a password field sets or replaces one, is
// emptied after the call, and nothing the broker answers carries it (it
// says only hasSecret / hasCredential / hasValue). Receipt bodies are what
// an outside sender posted: shown as text, marked untrusted.
import {h, replace, append} from '../h.js';
import {api} from '../api.js';
import {status, field, form, confirmDialog, table, str, stamp, obj as o, input, select, check, secretField, fieldset, button, radios, disclosure, multiPick, uid} from '../ui.js';

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical'];
const MAX_BODY_SHOWN = 256 << 10;
const PAGE = 50; // receipts a page
const MAX_RECEIPTS = 500; // the most one deliveries answer holds

function arr(v) { return Array.isArray(v) ? v : []; }
function enc(s) { return encodeURIComponent(s); }

function yesNo(b) { return b ? 'yes' : 'no'; }
// focusAfter moves focus to el (made focusable): after a save the form the
// user was in is redrawn, and focus would otherwise fall to the body.
function focusAfter(el) {
  if (!el.hasAttribute('tabindex') && !/^(INPUT|SELECT|TEXTAREA|BUTTON|A)$/.test(el.tagName)) el.setAttribute('tabindex', '-1');
  el.focus();
}

// decodeBody turns a receipt's base64 body into text (bytes that are not
// UTF-8 show as U+FFFD), bounded.
function decodeBody(b64) {
  if (typeof b64 !== 'string' || !b64) return '';
  let bin;
  try { bin = atob(b64.replace(/-/g, '+').replace(/_/g, '/')); } catch { return '(the body is not valid base64)'; }
  const bytes = new Uint8Array(Math.min(bin.length, MAX_BODY_SHOWN));
  for (let i = 0; i < bytes.length; i++) bytes[i] = bin.charCodeAt(i);
  const text = new TextDecoder('utf-8', {fatal: false}).decode(bytes);
  return bin.length > MAX_BODY_SHOWN ? text + '\n… (cut)' : text;
}

// names holds what the page knows to show targets by name: channels by
// id ({id, slug, archived}). Endpoints store a channel target by its id
// (a rename keeps the endpoint pointing at the channel), so the page maps
// it back to the slug it shows; one it cannot see keeps its id.
const names = {channels: new Map()};
function channelLabel(id) {
  const c = names.channels.get(id);
  return c ? '#' + c.slug + (c.archived ? ' (archived)' : '') : '#' + id;
}
// targetsText shows targets as "@member, #channel-slug".
function targetsText(ts) {
  return arr(ts).map((t) => (o(t).member ? '@' + str(t.member) : o(t).channel ? channelLabel(str(t.channel)) : '')).filter(Boolean).join(', ');
}
// Targets are picked as values "m:<name>" and "c:<channel id>".
function targetValues(ts) {
  return arr(ts).map((t) => (o(t).member ? 'm:' + str(t.member) : o(t).channel ? 'c:' + str(t.channel) : '')).filter(Boolean);
}
function targetsOf(values) {
  return values.map((v) => (v.startsWith('c:') ? {channel: v.slice(2)} : {member: v.slice(2)}));
}
function parseJSONList(text, what) {
  if (!text.trim()) return [];
  let v;
  try { v = JSON.parse(text); } catch { throw new Error(`${what} must be a JSON array.`); }
  if (!Array.isArray(v)) throw new Error(`${what} must be a JSON array.`);
  return v;
}
function intOrUndef(v, what) {
  if (v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${what} must be a whole number of 0 or more.`);
  return n;
}

// bindingsEditor lists the members bound to base (a tool source or a
// secret) with a remove button each, and adds one.
function bindingsEditor(base, bound, members, reload) {
  const st = status();
  const names = arr(bound).filter((n) => typeof n === 'string');
  const pick = h('select', {name: 'member'}, h('option', {value: ''}, 'Choose a member…'),
    members.filter((m) => !names.includes(m)).map((m) => h('option', {value: m}, m)));
  return h('div', {class: 'bindings'},
    h('h4', {}, 'Bound members'),
    names.length ? h('ul', {class: 'chips'}, names.map((n) => h('li', {}, h('span', {}, n),
      button('Unbind', async () => {
        try { await api('DELETE', base + '/bindings/' + enc(n)); await reload('Unbound ' + n + '.'); } catch (err) { st.error(err); }
      }, {class: 'quiet small', 'aria-label': 'Unbind ' + n})))) : h('p', {class: 'empty'}, 'No member is bound.'),
    h('div', {class: 'inline'}, field('Bind a member', pick),
      button('Bind', async () => {
        if (!pick.value) { pick.focus(); return; }
        const n = pick.value;
        try { await api('POST', base + '/bindings', {body: {member: n}}); await reload('Bound ' + n + '.'); } catch (err) { st.error(err); }
      })),
    st.node);
}

async function showReceipts(receipts, slug, alive) {
  const st = status();
  const list = h('div', {});
  const bodyBox = h('div', {class: 'receipt-body'});
  let oldest = Infinity;
  let rows = [];
  const more = button('Load older receipts', () => load(true), {class: 'quiet', hidden: true});
  const draw = () => replace(list, table([
    {label: 'Received', cell: (d) => stamp(d.receivedAt)},
    {label: 'Status', cell: (d) => h('span', {class: 'rstatus rs-' + (/^[a-z]{1,16}$/.test(d.status) ? d.status : 'other')}, str(d.status))},
    {label: 'Reason', cell: (d) => str(d.reason) || '—'},
    {label: 'Size', cell: (d) => String(Number(d.size) || 0) + ' B'},
    {label: 'Dedupe key', cell: (d) => (d.dedupeKey ? h('code', {}, str(d.dedupeKey)) : '—')},
    {label: 'Messages', cell: (d) => String(arr(d.messageIds).length)},
    {label: 'Actions', cell: (d) => h('div', {class: 'actions'},
      button('Body', () => showBody(str(d.id)), {class: 'quiet small', 'aria-label': 'Show the body of receipt ' + str(d.id)}),
      button('Replay', (e) => replay(str(d.id), e.currentTarget), {class: 'quiet small', 'aria-label': 'Replay receipt ' + str(d.id), 'data-replay': str(d.id)}))},
  ], rows, {caption: 'Receipts of ' + slug + ', newest first', empty: 'No delivery has reached this endpoint yet.'}));
  // before is exclusive and the route has no id cursor: an older page
  // asks again for the receipts held at the oldest ms, plus a page, so
  // receipts sharing that ms are never skipped (up to the route's 500).
  const load = async (older) => {
    more.disabled = true;
    try {
      const q = {limit: PAGE};
      if (older && Number.isFinite(oldest)) {
        const held = rows.filter((d) => Number(d.receivedAt) === oldest).length;
        q.before = held + PAGE > MAX_RECEIPTS ? oldest : oldest + 1;
        q.limit = Math.min(MAX_RECEIPTS, held + PAGE);
      }
      const res = await api('GET', '/notifications/endpoints/' + enc(slug) + '/deliveries', {query: q});
      if (!alive()) return;
      const got = arr(res && res.deliveries).map(o);
      const seen = new Set(rows.map((d) => d.id));
      rows = older ? rows.concat(got.filter((d) => !seen.has(d.id))) : got;
      if (!older) oldest = Infinity;
      for (const d of got) if (Number(d.receivedAt) < oldest) oldest = Number(d.receivedAt);
      more.hidden = got.length < q.limit;
      draw();
    } catch (err) { st.error(err); } finally { more.disabled = false; }
  };
  const showBody = async (id) => {
    try {
      const d = o(await api('GET', '/notifications/deliveries/' + enc(id)));
      replace(bodyBox,
        h('h4', {}, 'Body of receipt ', h('code', {}, id)),
        h('p', {class: 'ext-label'}, 'External content as the sender posted it — untrusted input, shown as text.'),
        h('pre', {class: 'payload external-payload', tabindex: '0'}, decodeBody(d.body)));
    } catch (err) { st.error(err); }
  };
  // replay runs once per press: a second press while the first is
  // answered would post the delivery to its targets twice.
  const replay = async (id, btn) => {
    if (btn.disabled) return;
    btn.disabled = true;
    try {
      const d = o(await api('POST', '/notifications/deliveries/' + enc(id) + '/replay', {body: {}}));
      await load(false);
      st.ok(`Replayed: the fresh receipt is ${str(d.status)}${d.reason ? ' (' + str(d.reason) + ')' : ''}.`);
    } catch (err) { st.error(err); } finally { btn.disabled = false; }
  };
  replace(receipts, h('section', {class: 'card', 'aria-labelledby': 'rc-h'},
    h('h3', {id: 'rc-h', tabindex: '-1'}, 'Receipts of ', h('code', {}, slug)),
    h('div', {class: 'inline'},
      button('Refresh', () => load(false), {class: 'quiet small'}),
      button('Close', () => { replace(receipts); }, {class: 'quiet small'})),
    st.node, list, more, bodyBox));
  receipts.querySelector('#rc-h').focus();
  await load(false);
}

// registrySection is one admin section over a slug registry: its entries
// as a table with Edit and Delete (and spec.rowActions) on each row, and
// one editor at a time under it, whose form creates or saves an entry,
// then sets or removes its write-only secret. spec describes the registry:
//   id, title, jump (its link's text), perm, what (the denied note's noun),
//   noun ("tool source": headings), short ("source": buttons, errors),
//   path, listKey, columns, caption, empty, intro, rowActions(entry),
//   deleteQuestion(slug), secretWhat ("Credential"), busy, panels (emptied
//   with the editor on a delete), fetch (an entry is read again before it
//   is edited; else the row or the last answer is used), and
//   editor(entry, {edit, load, members, at(slug), path}) -> {slug, fields, secret, after,
//   body(), save(slug, body), putSecret(slug, value), dropSecret(slug)},
//   save and the secret calls answering the entry as it now is.
// env: {can, alive(), members()}.
function registrySection(spec, env) {
  const node = h('section', {class: 'adm-sec', id: spec.id, 'aria-labelledby': spec.id + '-h'}, h('h2', {id: spec.id + '-h'}, spec.title));
  if (!env.can) {
    node.append(h('p', {class: 'notice'}, `Managing ${spec.what} takes the ${spec.perm} permission, which you do not have.`));
    return {node, start: () => {}};
  }
  const list = h('div', {class: 'adm-list'});
  const editor = h('div', {class: 'adm-editor'});
  const panels = spec.panels || [];
  const st = status();
  const at = (slug) => spec.path + '/' + enc(slug);

  const load = async () => {
    if (spec.prepare) await spec.prepare();
    const res = await api('GET', spec.path);
    if (!env.alive()) return;
    replace(list, table([...spec.columns,
      {label: 'Actions', cell: (x) => h('div', {class: 'actions'},
        button('Edit', () => edit(spec.fetch ? str(x.slug) : x), {class: 'quiet small', 'aria-label': 'Edit ' + str(x.slug)}),
        spec.rowActions ? spec.rowActions(x) : null,
        button('Delete', () => remove(str(x.slug)), {class: 'quiet small', 'aria-label': 'Delete ' + str(x.slug)}))},
    ], arr(res && res[spec.listKey]).map(o), {caption: spec.caption, empty: spec.empty}));
  };

  const remove = async (slug) => {
    if (!await confirmDialog(spec.deleteQuestion(slug), {yes: 'Delete', danger: true})) return;
    try {
      await api('DELETE', at(slug));
      replace(editor);
      for (const p of panels) replace(p);
      await load();
      st.ok('Deleted ' + slug + '.');
    } catch (err) { st.error(err); }
  };

  // edit opens the editor on an entry (an answer already held), a slug
  // (read first) or nothing (a new entry); a later call wins over an
  // earlier one still reading.
  let seq = 0;
  const edit = async (which, flash) => {
    const mine = ++seq;
    let entry = which && typeof which === 'object' ? o(which) : null;
    if (which && typeof which === 'string') {
      try { entry = o(await api('GET', at(which))); } catch (err) { if (mine === seq) st.error(err); return; }
    }
    // What the editor offers (channels, members, profiles) may have
    // changed since the list was drawn.
    if (spec.prepare) { try { await spec.prepare(); } catch { /* offered as last read */ } }
    if (!env.alive() || mine !== seq) return;
    const ed = spec.editor(entry, {edit, load, members: env.members(), at, path: spec.path});
    const label = entry ? `Edit ${spec.noun} ${entry.slug}` : `New ${spec.noun}`;
    const flashSt = status();
    const f = form({label, submit: (entry ? 'Save ' : 'Create ') + spec.short, busy: spec.busy, action: async () => {
      const s = entry ? entry.slug : ed.slug.value.trim();
      if (!s) { ed.slug.focus(); throw new Error(`The ${spec.short} needs a slug.`); }
      const body = ed.body();
      const sv = ed.secret.input.value;
      ed.secret.input.value = '';
      let saved = await ed.save(s, body);
      let note = entry ? 'Saved.' : 'Created.';
      if (sv) { saved = await ed.putSecret(s, sv); note += ` ${spec.secretWhat} stored.`; }
      else if (entry && ed.secret.drop.checked) { saved = await ed.dropSecret(s); note += ` ${spec.secretWhat} removed.`; }
      await load();
      await edit(spec.fetch ? s : saved, note);
      return '';
    }},
    h('h3', {}, label),
    ed.fields,
    flashSt.node);
    if (flash) flashSt.ok(flash);
    replace(editor, f, ed.after, button('Close', () => { replace(editor); newButton.focus(); }, {class: 'quiet'}));
    const focusEl = entry ? f.querySelector('h3') : ed.slug;
    focusEl.setAttribute('tabindex', '-1');
    focusAfter(flash ? flashSt.node : focusEl);
  };

  const newButton = button('New ' + spec.noun, () => edit(null));
  append(node, [spec.intro ? h('p', {class: 'hint'}, spec.intro) : null, newButton, st.node, list, editor, panels]);
  return {node, start: () => { load().catch((err) => st.error(err)); }};
}

// PRESETS are the senders the page knows: choosing one fills the
// verification and dedupe fields (under Advanced) as that sender signs
// (docs/HOOKS-PROVIDERS.md). setup says where the sender takes the URL
// and the secret.
const PRESETS = [
  {value: 'github', label: 'GitHub', auth: {kind: 'hmac-sha256', headerName: 'x-hub-signature-256', prefix: 'sha256='}, dedupe: 'x-github-delivery',
    hint: 'X-Hub-Signature-256, deliveries deduplicated by X-GitHub-Delivery.',
    setup: 'In GitHub: Settings → Webhooks → Add webhook. Payload URL: the URL above; content type application/json; secret: the one you type here.'},
  {value: 'stripe', label: 'Stripe', auth: {kind: 'stripe'}, dedupe: '',
    hint: 'Stripe-Signature with its timestamp (5 minutes of tolerance).',
    setup: 'In Stripe: Developers → Webhooks → Add endpoint with the URL above, then paste its signing secret (whsec_…) here.'},
  {value: 'standard-webhooks', label: 'Standard Webhooks', auth: {kind: 'standard-webhooks'}, dedupe: 'webhook-id',
    hint: 'webhook-id, webhook-timestamp and webhook-signature (Svix, Resend, Clerk and others).',
    setup: 'Give the sender the URL above; its secret is whsec_ followed by base64, pasted here whole.'},
  {value: 'hmac', label: 'Generic HMAC', auth: {kind: 'hmac-sha256', headerName: '', prefix: ''}, dedupe: '',
    hint: 'A header holding prefix + hex HMAC-SHA256 of the body; set the header and prefix under Advanced.',
    setup: 'Sign the exact body bytes with HMAC-SHA256 and the secret; send the hex digest after the prefix (default sha256=) in the header (default X-Hub-Signature-256).'},
  {value: 'header-secret', label: 'Shared secret header', auth: {kind: 'header-secret', headerName: ''}, dedupe: '',
    hint: 'The secret itself in a header (default X-Hook-Secret): for your own scripts.',
    setup: 'Send the secret verbatim in the header (default X-Hook-Secret) with each request.'},
];
const KINDS = ['hmac-sha256', 'header-secret', 'stripe', 'standard-webhooks'];

// presetOf names the preset an endpoint's verification matches, or
// 'custom'.
function presetOf(ep) {
  if (!ep) return 'github';
  if (ep.authProfile) return 'custom';
  const a = o(ep.auth);
  const same = (x, y) => str(x).toLowerCase() === str(y).toLowerCase();
  for (const p of PRESETS) {
    if (!same(a.kind, p.auth.kind) || !same(ep.dedupeHeader, p.dedupe)) continue;
    if (p.value === 'github' && !(same(a.headerName, p.auth.headerName) && same(a.prefix, p.auth.prefix))) continue;
    if (p.value === 'hmac' && same(a.headerName, 'x-hub-signature-256') && same(ep.dedupeHeader, 'x-github-delivery')) continue;
    return p.value;
  }
  return 'custom';
}

// endpoints are the notification endpoints: outside senders post to
// /hooks/<slug>; their receipts open in receipts. The common case is a
// sender preset, a slug, targets and a secret; the rest is folded.
function endpoints(receipts, alive) {
  let profiles = [];
  let channels = [];
  let members = [];
  return {
    id: 'adm-notif', title: 'Notification endpoints', jump: 'Endpoints', perm: 'notifications.manage', what: 'notification endpoints',
    noun: 'endpoint', path: '/notifications/endpoints', short: 'endpoint', listKey: 'endpoints', busy: 'Saving…', secretWhat: 'Secret', panels: [receipts],
    intro: 'Outside senders post to /hooks/<slug>; each delivery leaves a receipt, and verified ones reach the targets as external, untrusted messages.',
    caption: 'Endpoints', empty: 'No notification endpoint yet.',
    // prepare reads what targets and profiles are named by, before the
    // list is drawn.
    prepare: async () => {
      const [ch, ms, pr] = await Promise.all([
        api('GET', '/channels').catch(() => null), api('GET', '/members').catch(() => null), api('GET', '/notifications/profiles').catch(() => null)]);
      if (ch) {
        channels = arr(ch.channels).map(o).map((c) => ({id: str(c.id), slug: str(c.slug), archived: !!c.archivedAt})).filter((c) => c.id && c.slug);
        names.channels = new Map(channels.map((c) => [c.id, c]));
      }
      if (ms) members = arr(ms.members).map((m) => str(o(m).name)).filter(Boolean).sort();
      if (pr) profiles = arr(pr.profiles).map((x) => str(o(x).slug)).filter(Boolean).sort();
    },
    columns: [
      {label: 'Endpoint', cell: (e) => h('span', {}, h('code', {}, str(e.slug)), e.displayName ? ' ' + str(e.displayName) : '')},
      {label: 'Ingress', cell: (e) => h('code', {}, str(e.ingressPath))},
      {label: 'Targets', cell: (e) => h('span', {class: 'targets'}, targetsText(e.targets) || '—')},
      {label: 'Verification', cell: (e) => (e.authProfile ? 'profile ' + str(e.authProfile) : (PRESETS.find((p) => p.value === presetOf(e))?.label || str(o(e.auth).kind)))},
      {label: 'Secret', cell: (e) => (e.authProfile ? 'the profile\'s' : e.hasSecret ? 'set' : 'none: rejects all')},
      {label: 'Enabled', cell: (e) => yesNo(e.enabled)},
    ],
    rowActions: (e) => button('Receipts', () => showReceipts(receipts, str(e.slug), alive), {class: 'quiet small', 'aria-label': 'Receipts of ' + str(e.slug)}),
    deleteQuestion: (slug) => `Delete the endpoint ${slug}? Its receipts and queued deliveries go with it, and /hooks/${slug} answers 404.`,
    editor(ep, {at, path}) {
      const auth = o(ep && ep.auth);
      const pol = o(ep && ep.policy);
      const slug = input('slug', ep ? ep.slug : '', {id: 'ep-slug', required: true, disabled: !!ep, autocomplete: 'off', spellcheck: 'false', placeholder: 'github-deploys'});
      const url = h('code', {class: 'ingress-url'});
      const showUrl = () => replace(url, location.origin + '/hooks/' + (slug.value.trim() || '<slug>'));
      slug.addEventListener('input', showUrl);
      showUrl();
      const display = input('displayName', ep && ep.displayName, {id: 'ep-display'});
      const targetOptions = [
        ...channels.filter((c) => !c.archived).map((c) => ({value: 'c:' + c.id, label: '#' + c.slug})),
        ...members.map((m) => ({value: 'm:' + m, label: '@' + m})),
      ];
      const targets = multiPick({label: 'Targets', name: 'targets', id: 'ep-targets', options: targetOptions, values: targetValues(ep && ep.targets),
        labelOf: (v) => (v.startsWith('c:') ? channelLabel(v.slice(2)) : '@' + v.slice(2)), add: 'Add target',
        hint: 'Channels (#) get one post; members (@) each get a direct message.', empty: 'No target: deliveries are received but reach no one.'});
      const kind = select('authKind', KINDS, auth.kind || 'hmac-sha256');
      const headerName = input('headerName', auth.headerName, {id: 'ep-header', placeholder: 'the kind\'s default', autocomplete: 'off'});
      const prefix = input('prefix', auth.prefix, {id: 'ep-prefix', placeholder: 'sha256=', autocomplete: 'off'});
      const profileSel = select('authProfile', [{value: '', label: 'None: the verification above'}, ...profiles.map((p) => ({value: p, label: p}))], str(ep && ep.authProfile));
      if (ep && ep.authProfile && !profiles.includes(ep.authProfile)) profileSel.append(h('option', {value: str(ep.authProfile), selected: true}, str(ep.authProfile)));
      profileSel.id = 'ep-profile';
      const dedupe = input('dedupeHeader', ep && ep.dedupeHeader, {id: 'ep-dedupe', placeholder: 'x-github-delivery', autocomplete: 'off'});
      const level = select('level', LEVELS, str(ep && ep.level) || 'info');
      const enabled = check('Enabled (a disabled endpoint answers 409)', 'enabled', ep ? ep.enabled : true);
      const template = h('textarea', {name: 'template', rows: '3', placeholder: '{{payload.action}} on {{payload.repository.full_name}}'}, str(ep && ep.template));
      const filters = h('textarea', {name: 'filters', rows: '3', class: 'mono', placeholder: '[{"path": "action", "op": "eq", "value": "opened"}]'},
        ep && arr(ep.filters).length ? JSON.stringify(ep.filters, null, 2) : '');
      const ifOffline = select('ifOffline', ['drop', 'queue'], pol.ifOffline || 'drop');
      const ifBusy = select('ifBusy', ['now', 'wait'], pol.ifBusy || 'now');
      const count = (name, value) => input(name, value, {type: 'number', min: '0', inputmode: 'numeric'});
      const debounceMs = count('debounceMs', pol.debounceMs);
      const debounceMax = count('debounceMax', pol.debounceMax);
      const queueTtlMs = count('queueTtlMs', pol.queueTtlMs);
      const maxWaitMs = count('maxWaitMs', pol.maxWaitMs);
      const secret = secretField({name: 'secret', id: 'ep-secret', isSet: ep && ep.hasSecret,
        label: ep && ep.hasSecret ? 'Replace the secret' : 'Secret',
        hint: ep ? (ep.hasSecret ? 'A secret is set. It is write-only and never shown; type a new one to replace it.' : 'No secret is set: every delivery is rejected until one is.')
          : 'The same secret the sender signs with. Write-only: stored encrypted, never shown again. Without one every delivery is rejected.',
        drop: 'Remove the secret (the endpoint then rejects everything)', dropName: 'dropSecret'});
      const setup = h('p', {class: 'hint preset-setup', id: uid('setup')});
      const advanced = disclosure('Advanced: verification details, dedupe, filters, template, delivery policy', [
        fieldset('Verification',
          field('Kind', kind), field('Header', headerName, 'Empty: the kind\'s default header.'), field('Prefix (HMAC)', prefix, 'Empty: sha256=.'),
          field('Profile', profileSel, 'A shared profile\'s kind, header and secret win over the above (Verification profiles, below).')),
        field('Dedupe header', dedupe, 'The sender\'s delivery-id header; empty turns dedupe off.'),
        field('Filters', filters, 'Drop rules on the payload, all must match: path, op (eq, ne, in, exists, contains), value.'),
        field('Template', template, 'Empty: the pretty-printed payload. {{payload.a.b}} substitutes a path.'),
        fieldset('Delivery policy',
          field('Level', level), field('If the member is offline', ifOffline), field('If the member is busy', ifBusy),
          field('Debounce (ms)', debounceMs, '0 is off.'), field('Debounce max', debounceMax),
          field('Queue TTL (ms)', queueTtlMs), field('Max wait (ms)', maxWaitMs)),
      ], {cls: 'advanced'});
      // applyPreset fills the folded fields as the sender signs; Generic
      // HMAC opens them, since its header and prefix are the sender's own.
      const applyPreset = (v) => {
        const p = PRESETS.find((x) => x.value === v);
        if (!p) { replace(setup, 'Custom verification: see Advanced.'); return; }
        kind.value = p.auth.kind;
        headerName.value = p.auth.headerName || '';
        prefix.value = p.auth.prefix || '';
        dedupe.value = p.dedupe;
        profileSel.value = '';
        replace(setup, p.setup);
        if (v === 'hmac') advanced.open = true;
      };
      const current = presetOf(ep);
      const preset = radios('Sender', 'preset', [...PRESETS, ...(current === 'custom' ? [{value: 'custom', label: 'Custom', hint: 'As set under Advanced.'}] : [])], current, applyPreset);
      if (ep) replace(setup, PRESETS.find((x) => x.value === current)?.setup || 'Custom verification: see Advanced.');
      else applyPreset(current);
      return {
        slug, secret,
        fields: [
          preset.node,
          field('Slug', slug, ep ? 'Immutable.' : 'Letters, digits and dashes; the sender posts to the URL below.'),
          h('p', {class: 'hint'}, 'Deliveries post to ', url),
          setup,
          field('Display name', display, 'Shown to the targets above the content.'),
          targets.node,
          secret.nodes,
          enabled.node,
          advanced,
        ],
        body: () => ({
          displayName: display.value,
          targets: targetsOf(targets.values()),
          auth: {kind: kind.value, headerName: headerName.value.trim() || undefined, prefix: kind.value === 'hmac-sha256' ? prefix.value.trim() || undefined : undefined},
          authProfile: profileSel.value,
          filters: parseJSONList(filters.value, 'Filters'),
          template: template.value,
          dedupeHeader: dedupe.value.trim(),
          enabled: enabled.box.checked,
          level: level.value,
          policy: {ifOffline: ifOffline.value, ifBusy: ifBusy.value, debounceMs: intOrUndef(debounceMs.value, 'Debounce'),
            debounceMax: intOrUndef(debounceMax.value, 'Debounce max'), queueTtlMs: intOrUndef(queueTtlMs.value, 'Queue TTL'),
            maxWaitMs: intOrUndef(maxWaitMs.value, 'Max wait')},
        }),
        save: (s, body) => {
          if (ep) return api('PATCH', at(s), {body});
          // A create leaves out what is empty, for the broker's defaults.
          for (const k of ['authProfile', 'dedupeHeader', 'template', 'displayName']) if (!body[k]) delete body[k];
          return api('POST', path, {body: {slug: s, ...body}});
        },
        putSecret: (s, sv) => api('PUT', at(s) + '/secret', {body: {secret: sv}}),
        dropSecret: async (s) => { await api('DELETE', at(s) + '/secret'); return api('GET', at(s)); },
        after: [],
      };
    },
  };
}

// profiles are the shared verification profiles: one secret for several
// endpoints, rotated for all of them in one write. There is no route to
// read one profile, so the editor works from the list's row.
function profiles() {
  return {
    id: 'adm-profiles', title: 'Verification profiles', jump: 'Profiles', perm: 'notifications.manage', what: 'verification profiles',
    noun: 'profile', path: '/notifications/profiles', short: 'profile', listKey: 'profiles', busy: 'Saving…', secretWhat: 'Secret',
    intro: 'A profile is a verification (kind, header, prefix) and a secret that several endpoints share: setting its secret rotates it for every endpoint that names it.',
    caption: 'Verification profiles', empty: 'No profile yet.',
    columns: [
      {label: 'Profile', cell: (x) => h('code', {}, str(x.slug))},
      {label: 'Description', cell: (x) => str(x.description) || '—'},
      {label: 'Verification', cell: (x) => str(o(x.auth).kind) + (o(x.auth).headerName ? ' · ' + str(x.auth.headerName) : '')},
      {label: 'Secret', cell: (x) => (x.hasSecret ? 'set' : 'none: rejects all')},
      {label: 'Endpoints', cell: (x) => String(Number(x.endpointCount) || 0)},
    ],
    deleteQuestion: (slug) => `Delete the profile ${slug}? The broker refuses while an endpoint names it.`,
    editor(x, {at, path}) {
      const auth = o(x && x.auth);
      const slug = input('slug', x ? x.slug : '', {id: 'pr-slug', required: true, disabled: !!x, autocomplete: 'off', spellcheck: 'false'});
      const desc = input('description', x && x.description, {id: 'pr-desc'});
      const kind = select('authKind', KINDS, auth.kind || 'hmac-sha256');
      const headerName = input('headerName', auth.headerName, {placeholder: 'the kind\'s default', autocomplete: 'off'});
      const prefix = input('prefix', auth.prefix, {placeholder: 'sha256=', autocomplete: 'off'});
      const secret = secretField({name: 'secret', id: 'pr-secret', isSet: x && x.hasSecret,
        label: x && x.hasSecret ? 'Rotate the secret' : 'Secret',
        hint: x && x.hasSecret ? `A secret is set, never shown. A new one replaces it for every endpoint that names ${x.slug}.` : 'Write-only: stored encrypted, never shown again. Without one every endpoint naming the profile rejects everything.',
        drop: 'Remove the secret (its endpoints then reject everything)', dropName: 'dropSecret'});
      const find = async (s) => arr(o(await api('GET', path)).profiles).map(o).find((p) => p.slug === s) || null;
      return {
        slug, secret,
        fields: [
          field('Slug', slug, 'Endpoints name it under Advanced → Profile.'),
          field('Description', desc),
          fieldset('Verification', field('Kind', kind), field('Header', headerName, 'Empty: the kind\'s default header.'), field('Prefix (HMAC)', prefix, 'Empty: sha256=.')),
          secret.nodes,
        ],
        body: () => ({description: desc.value, auth: {kind: kind.value, headerName: headerName.value.trim() || undefined,
          prefix: kind.value === 'hmac-sha256' ? prefix.value.trim() || undefined : undefined}}),
        save: (s, body) => (x ? api('PATCH', at(s), {body}) : api('POST', path, {body: {slug: s, ...body, description: body.description || undefined}})),
        putSecret: (s, sv) => api('PUT', at(s) + '/secret', {body: {secret: sv}}),
        dropSecret: async (s) => { await api('DELETE', at(s) + '/secret'); return find(s); },
        after: [],
      };
    },
  };
}

// toolSources are the tool sources with their write-only credential,
// bindings and tools.
function toolSources() {
  return {
    id: 'adm-tools', title: 'Tool sources', jump: 'Tool sources', perm: 'tools.manage', what: 'tool sources',
    noun: 'tool source', path: '/tool-sources', short: 'source', listKey: 'sources', fetch: true, secretWhat: 'Credential',
    caption: 'Tool sources', empty: 'No tool source yet.',
    columns: [
      {label: 'Source', cell: (t) => h('span', {}, h('code', {}, str(t.slug)), t.displayName ? ' ' + str(t.displayName) : '')},
      {label: 'Kind', cell: (t) => str(t.kind)},
      {label: 'Enabled', cell: (t) => yesNo(t.enabled)},
      {label: 'All members', cell: (t) => yesNo(t.allMembers)},
      {label: 'Tools', cell: (t) => String(Number(t.toolCount) || 0)},
      {label: 'Credential', cell: (t) => (t.hasCredential ? 'set (' + str(t.credentialKind) + (t.credentialHeaderName ? ' ' + str(t.credentialHeaderName) : '') + ')' : 'none')},
    ],
    deleteQuestion: (slug) => `Delete the tool source ${slug} with its tools, bindings and credential?`,
    editor(t, {edit, load, members, at, path}) {
      const slug = input('slug', t ? t.slug : '', {id: 'ts-slug', required: true, disabled: !!t, autocomplete: 'off'});
      const kind = select('kind', ['custom', 'mcp'], t ? str(t.kind) : 'mcp');
      if (t) kind.disabled = true;
      const display = input('displayName', t && t.displayName, {id: 'ts-display'});
      const url = input('url', o(t && t.config).url, {id: 'ts-url', type: 'url', placeholder: 'https://mcp.example.com/mcp'});
      const enabled = check('Enabled', 'enabled', t ? t.enabled : true);
      const all = check('Every member may use it (no binding needed)', 'allMembers', t ? t.allMembers : false);
      const credKind = select('credKind', ['bearer', 'header'], str(t && t.credentialKind) || 'bearer');
      const credHeader = input('credHeader', t && t.credentialHeaderName, {placeholder: 'X-Api-Key'});
      const secret = secretField({name: 'credential', id: 'ts-secret', isSet: t && t.hasCredential,
        label: t && t.hasCredential ? 'Replace the credential' : 'Credential',
        hint: t && t.hasCredential ? 'A credential is set. It is never shown; type a new one to replace it.' : 'Stored encrypted, never shown again.',
        drop: 'Remove the credential', dropName: 'dropCredential'});
      const toolsList = t && arr(t.tools).length ? h('div', {}, h('h4', {}, 'Tools'), h('ul', {}, arr(t.tools).slice(0, 500).map((d) => h('li', {}, h('code', {}, str(o(d).name)), o(d).description ? ' — ' + str(d.description).slice(0, 300) : '')))) : null;
      const refreshSt = status();
      const refresh = t && t.kind === 'mcp' ? h('div', {class: 'inline'},
        button('Refresh tools from the server', async () => {
          refreshSt.busy('Asking the MCP server for its tools…');
          try {
            const r = o(await api('POST', at(t.slug) + '/refresh', {body: {}}));
            await load();
            await edit(t.slug, `Refreshed: ${arr(r.tools).length} tools${r.changed ? ', changed' : ', unchanged'}.`);
          } catch (err) { refreshSt.error(err); }
        }, {class: 'quiet'}), refreshSt.node) : null;
      return {
        slug, secret,
        fields: [
          field('Slug', slug, t ? 'Immutable; its tools are named ' + t.slug + '__<tool>.' : 'Its tools will be named <slug>__<tool>.'),
          field('Kind', kind, 'mcp: tools discovered from an MCP server; custom: tools defined here over HTTP.'),
          field('Display name', display),
          field('MCP URL', url, 'Required for mcp.'),
          enabled.node, all.node,
          fieldset('Credential (write-only)',
            field('Sent as', credKind), field('Header name', credHeader, 'For "header" only.'),
            secret.nodes),
        ],
        body: () => {
          const config = {...o(t && t.config)};
          if (url.value.trim()) config.url = url.value.trim(); else delete config.url;
          return {displayName: display.value, config, enabled: enabled.box.checked, allMembers: all.box.checked};
        },
        save: (s, body) => (t ? api('PATCH', at(s), {body}) : api('POST', path, {body: {slug: s, kind: kind.value, ...body}})),
        putSecret: (s, sv) => api('PUT', at(s) + '/credential', {body: {kind: credKind.value, headerName: credKind.value === 'header' ? credHeader.value : undefined, secret: sv}}),
        dropSecret: (s) => api('DELETE', at(s) + '/credential'),
        after: [refresh,
          t ? h('div', {class: 'card'}, bindingsEditor(at(t.slug), arr(t.boundMembers), members, (note) => edit(t.slug, note))) : null,
          toolsList],
      };
    },
  };
}

// secrets are the environment secrets with their write-only value and
// bindings.
function secrets() {
  return {
    id: 'adm-secrets', title: 'Environment secrets', jump: 'Secrets', perm: 'secrets.manage', what: 'environment secrets',
    noun: 'secret', path: '/secrets', short: 'secret', listKey: 'secrets', fetch: true, secretWhat: 'Value',
    caption: 'Environment secrets', empty: 'No secret yet.',
    columns: [
      {label: 'Secret', cell: (x) => h('code', {}, str(x.slug))},
      {label: 'Variable', cell: (x) => h('code', {}, str(x.envName))},
      {label: 'Description', cell: (x) => str(x.description) || '—'},
      {label: 'Enabled', cell: (x) => yesNo(x.enabled)},
      {label: 'All members', cell: (x) => yesNo(x.allMembers)},
      {label: 'Value', cell: (x) => (x.hasValue ? 'set' : 'none')},
    ],
    deleteQuestion: (slug) => `Delete the secret ${slug} with its value and bindings?`,
    editor(x, {edit, members, at, path}) {
      const slug = input('slug', x ? x.slug : '', {id: 'sec-slug', required: true, disabled: !!x, autocomplete: 'off'});
      const envName = input('envName', x && x.envName, {id: 'sec-env', placeholder: 'GITHUB_TOKEN', autocomplete: 'off'});
      const desc = input('description', x && x.description);
      const enabled = check('Enabled', 'enabled', x ? x.enabled : true);
      const all = check('Every member gets it (no binding needed)', 'allMembers', x ? x.allMembers : false);
      const secret = secretField({name: 'value', id: 'sec-value', isSet: x && x.hasValue,
        label: x && x.hasValue ? 'Replace the value' : 'Value',
        hint: x && x.hasValue ? 'A value is set. It is never shown; type a new one to replace it (up to 32 KiB).' : 'Write-only: stored encrypted, never shown again (up to 32 KiB).',
        drop: 'Remove the value', dropName: 'dropValue'});
      return {
        slug, secret,
        fields: [
          field('Slug', slug),
          field('Environment variable', envName, 'The name the runner sets in the agent\'s environment.'),
          field('Description', desc),
          enabled.node, all.node,
          secret.nodes,
          h('p', {class: 'hint'}, 'Changes reach each member at its next runner start.'),
        ],
        body: () => ({envName: envName.value.trim(), description: desc.value, enabled: enabled.box.checked, allMembers: all.box.checked}),
        save: async (s, body) => {
          if (x) return api('PATCH', at(s), {body});
          // A create takes no enabled: a disabled one is created, then turned off.
          await api('POST', path, {body: {slug: s, envName: body.envName, description: body.description || undefined, allMembers: body.allMembers}});
          if (!body.enabled) await api('PATCH', at(s), {body: {enabled: false}});
        },
        putSecret: (s, sv) => api('PUT', at(s) + '/value', {body: {value: sv}}),
        dropSecret: (s) => api('DELETE', at(s) + '/value'),
        after: [x ? h('div', {class: 'card'}, bindingsEditor(at(x.slug), arr(x.boundMembers), members, (note) => edit(x.slug, note))) : null],
      };
    },
  };
}

export const adminPage = {
  title: 'Admin', auth: true,
  render(main, {app}) {
    const perms = new Set(Array.isArray(app.session.permissions) ? app.session.permissions : []);
    let alive = true;
    let members = [];
    const page = h('section', {class: 'page admin'}, h('h1', {}, 'Admin'));
    main.append(page);
    if (!perms.has('notifications.manage') && !perms.has('tools.manage') && !perms.has('secrets.manage')) {
      page.append(h('p', {class: 'notice', id: 'admin-denied'},
        'Admin is for members who manage the team\'s integrations: it takes the notifications.manage, tools.manage or secrets.manage permission, and ',
        app.session.member, ' has none of them. Ask a teammate with members.manage to grant one.'));
      return () => {};
    }
    const env = (spec) => ({can: perms.has(spec.perm), alive: () => alive, members: () => members});
    const receipts = h('div', {class: 'adm-receipts'});
    const specs = [endpoints(receipts, () => alive), profiles(), toolSources(), secrets()];
    page.append(h('nav', {class: 'admin-jump', 'aria-label': 'Admin sections'}, h('ul', {},
      specs.map((spec) => h('li', {}, h('a', {href: '#' + spec.id}, spec.jump))))));
    const sections = specs.map((spec) => registrySection(spec, env(spec)));
    page.append(...sections.map((s) => s.node));

    api('GET', '/members').then((r) => { members = arr(r && r.members).map((m) => str(o(m).name)).filter(Boolean).sort(); }).catch(() => {});
    for (const s of sections) s.start();
    return () => { alive = false; };
  },
};
