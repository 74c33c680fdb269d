// Admin: notification endpoints (targets, verification, filters, template,
// policy, a write-only secret) with their delivery receipts and replay;
// tool sources and environment secrets with write-only credentials and
// per-member bindings. Each part shows to the holders of its permission;
// others are told which permission it takes.
//
// Secrets are write-only: a password field sets or replaces one, is
// emptied after the call, and nothing the broker answers carries it (it
// says only hasSecret / hasCredential / hasValue). Receipt bodies are what
// an outside sender posted: shown as text, marked untrusted.
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {status, field, form, confirmDialog, table, uid, str, stamp, obj as o} from '../ui.js';

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical'];
const MAX_BODY_SHOWN = 256 << 10;
const PAGE = 50; // receipts a page
const MAX_RECEIPTS = 500; // the most one deliveries answer holds

function arr(v) { return Array.isArray(v) ? v : []; }
function enc(s) { return encodeURIComponent(s); }

function input(name, value, props = {}) { return h('input', {name, value: value === undefined || value === null ? '' : String(value), ...props}); }
function check(label, name, checked) {
  const box = h('input', {type: 'checkbox', name, checked: !!checked, id: uid('c')});
  return {box, node: h('div', {class: 'check'}, box, h('label', {for: box.id}, label))};
}
function select(name, options, value) {
  return h('select', {name}, options.map((v) => h('option', {value: v, selected: v === value}, v)));
}
// secretInput is a write-only field: never filled from the broker, never
// autocompleted, emptied after use.
function secretInput(name, id) {
  return h('input', {type: 'password', name, id, autocomplete: 'new-password', spellcheck: 'false', value: ''});
}
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

// targetsText shows targets as "@member, #channel-id".
function targetsText(ts) {
  return arr(ts).map((t) => (o(t).member ? '@' + str(t.member) : o(t).channel ? '#' + str(t.channel) : '')).filter(Boolean).join(', ');
}
function parseTargets(text) {
  const out = [];
  for (const part of text.split(/[\s,]+/).filter(Boolean)) {
    if (part.startsWith('#')) out.push({channel: part.slice(1)});
    else out.push({member: part.replace(/^@/, '')});
  }
  return out;
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
      h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Unbind ' + n, onclick: async () => {
        try { await api('DELETE', base + '/bindings/' + enc(n)); await reload('Unbound ' + n + '.'); } catch (err) { st.error(err); }
      }}, 'Unbind')))) : h('p', {class: 'empty'}, 'No member is bound.'),
    h('div', {class: 'inline'}, field('Bind a member', pick),
      h('button', {type: 'button', onclick: async () => {
        if (!pick.value) { pick.focus(); return; }
        const n = pick.value;
        try { await api('POST', base + '/bindings', {body: {member: n}}); await reload('Bound ' + n + '.'); } catch (err) { st.error(err); }
      }}, 'Bind')),
    st.node);
}

export const adminPage = {
  title: 'Admin', auth: true,
  render(main, {app}) {
    const perms = new Set(Array.isArray(app.session.permissions) ? app.session.permissions : []);
    const can = {notif: perms.has('notifications.manage'), tools: perms.has('tools.manage'), secrets: perms.has('secrets.manage')};
    let alive = true;
    let members = [];
    const page = h('section', {class: 'page admin'}, h('h1', {}, 'Admin'));
    main.append(page);
    if (!can.notif && !can.tools && !can.secrets) {
      page.append(h('p', {class: 'notice', id: 'admin-denied'},
        'Admin is for members who manage the team\'s integrations: it takes the notifications.manage, tools.manage or secrets.manage permission, and ',
        app.session.member, ' has none of them. Ask a teammate with members.manage to grant one.'));
      return () => {};
    }
    const denied = (what, perm) => h('p', {class: 'notice'}, `Managing ${what} takes the ${perm} permission, which you do not have.`);
    const jump = h('nav', {class: 'admin-jump', 'aria-label': 'Admin sections'}, h('ul', {},
      h('li', {}, h('a', {href: '#adm-notif'}, 'Notification endpoints')),
      h('li', {}, h('a', {href: '#adm-tools'}, 'Tool sources')),
      h('li', {}, h('a', {href: '#adm-secrets'}, 'Secrets'))));
    page.append(jump);

    // ===== Notification endpoints =====
    const notif = h('section', {class: 'adm-sec', id: 'adm-notif', 'aria-labelledby': 'adm-notif-h'}, h('h2', {id: 'adm-notif-h'}, 'Notification endpoints'));
    page.append(notif);
    const epList = h('div', {class: 'adm-list'});
    const epEditor = h('div', {class: 'adm-editor'});
    const receipts = h('div', {class: 'adm-receipts'});
    const epStatus = status();

    const loadEndpoints = async () => {
      const res = await api('GET', '/notifications/endpoints');
      if (!alive) return;
      const eps = arr(res && res.endpoints);
      replace(epList, table([
        {label: 'Endpoint', cell: (e) => h('span', {}, h('code', {}, str(e.slug)), e.displayName ? ' ' + str(e.displayName) : '')},
        {label: 'Ingress', cell: (e) => h('code', {}, str(e.ingressPath))},
        {label: 'Targets', cell: (e) => targetsText(e.targets) || '—'},
        {label: 'Verification', cell: (e) => (e.authProfile ? 'profile ' + str(e.authProfile) : str(o(e.auth).kind))},
        {label: 'Secret', cell: (e) => (e.hasSecret ? 'set' : 'none: rejects all')},
        {label: 'Enabled', cell: (e) => yesNo(e.enabled)},
        {label: 'Actions', cell: (e) => h('div', {class: 'actions'},
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Edit ' + str(e.slug), onclick: () => editEndpoint(e)}, 'Edit'),
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Receipts of ' + str(e.slug), onclick: () => showReceipts(str(e.slug))}, 'Receipts'),
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Delete ' + str(e.slug), onclick: () => deleteEndpoint(str(e.slug))}, 'Delete'))},
      ], eps, {caption: 'Endpoints', empty: 'No notification endpoint yet.'}));
    };

    const deleteEndpoint = async (slug) => {
      if (!await confirmDialog(`Delete the endpoint ${slug}? Its receipts and queued deliveries go with it, and /hooks/${slug} answers 404.`, {yes: 'Delete', danger: true})) return;
      try {
        await api('DELETE', '/notifications/endpoints/' + enc(slug));
        replace(epEditor); replace(receipts);
        await loadEndpoints();
        epStatus.ok('Deleted ' + slug + '.');
      } catch (err) { epStatus.error(err); }
    };

    const editEndpoint = (e, flash) => {
      const ep = e ? o(e) : null;
      const auth = o(ep && ep.auth);
      const pol = o(ep && ep.policy);
      const slug = input('slug', ep ? ep.slug : '', {id: 'ep-slug', required: true, disabled: !!ep, autocomplete: 'off'});
      const display = input('displayName', ep && ep.displayName, {id: 'ep-display'});
      const targets = input('targets', ep ? targetsText(ep.targets) : '', {id: 'ep-targets', placeholder: '@alice, #ops'});
      const kind = select('authKind', ['hmac-sha256', 'header-secret'], auth.kind || 'hmac-sha256');
      const headerName = input('headerName', auth.headerName, {placeholder: 'x-hub-signature-256 / x-hook-secret'});
      const prefix = input('prefix', auth.prefix, {placeholder: 'sha256='});
      const profile = input('authProfile', ep && ep.authProfile, {placeholder: 'none: the inline verification above'});
      const dedupe = input('dedupeHeader', ep && ep.dedupeHeader, {placeholder: 'x-github-delivery'});
      const level = select('level', LEVELS, str(ep && ep.level) || 'info');
      const enabled = check('Enabled (a disabled endpoint answers 409)', 'enabled', ep ? ep.enabled : true);
      const template = h('textarea', {name: 'template', rows: '3', placeholder: '{{payload.action}} on {{payload.repository.full_name}}'}, str(ep && ep.template));
      const filters = h('textarea', {name: 'filters', rows: '3', class: 'mono', placeholder: '[{"path": "action", "op": "eq", "value": "opened"}]'},
        ep && arr(ep.filters).length ? JSON.stringify(ep.filters, null, 2) : '');
      const ifOffline = select('ifOffline', ['drop', 'queue'], pol.ifOffline || 'drop');
      const ifBusy = select('ifBusy', ['now', 'wait'], pol.ifBusy || 'now');
      const debounceMs = input('debounceMs', pol.debounceMs, {type: 'number', min: '0', inputmode: 'numeric'});
      const debounceMax = input('debounceMax', pol.debounceMax, {type: 'number', min: '0', inputmode: 'numeric'});
      const queueTtlMs = input('queueTtlMs', pol.queueTtlMs, {type: 'number', min: '0', inputmode: 'numeric'});
      const maxWaitMs = input('maxWaitMs', pol.maxWaitMs, {type: 'number', min: '0', inputmode: 'numeric'});
      const secret = secretInput('secret', 'ep-secret');
      const dropSecret = check('Remove the secret (the endpoint then rejects everything)', 'dropSecret', false);
      const flashSt = status();
      const f = form({label: ep ? 'Edit endpoint ' + ep.slug : 'New endpoint', submit: ep ? 'Save endpoint' : 'Create endpoint', busy: 'Saving…', action: async () => {
        const s = ep ? ep.slug : slug.value.trim();
        if (!s) { slug.focus(); throw new Error('The endpoint needs a slug.'); }
        const body = {
          displayName: display.value,
          targets: parseTargets(targets.value),
          auth: {kind: kind.value, headerName: headerName.value || undefined, prefix: prefix.value || undefined},
          authProfile: profile.value.trim(),
          filters: parseJSONList(filters.value, 'Filters'),
          template: template.value,
          dedupeHeader: dedupe.value.trim(),
          enabled: enabled.box.checked,
          level: level.value,
          policy: {ifOffline: ifOffline.value, ifBusy: ifBusy.value, debounceMs: intOrUndef(debounceMs.value, 'Debounce'),
            debounceMax: intOrUndef(debounceMax.value, 'Debounce max'), queueTtlMs: intOrUndef(queueTtlMs.value, 'Queue TTL'),
            maxWaitMs: intOrUndef(maxWaitMs.value, 'Max wait')},
        };
        const sv = secret.value;
        secret.value = '';
        let saved;
        if (ep) saved = await api('PATCH', '/notifications/endpoints/' + enc(s), {body});
        else {
          if (!body.authProfile) delete body.authProfile;
          if (!body.dedupeHeader) delete body.dedupeHeader;
          if (!body.template) delete body.template;
          if (!body.displayName) delete body.displayName;
          saved = await api('POST', '/notifications/endpoints', {body: {slug: s, ...body}});
        }
        let note = ep ? 'Saved.' : 'Created.';
        if (sv) { saved = await api('PUT', '/notifications/endpoints/' + enc(s) + '/secret', {body: {secret: sv}}); note += ' Secret stored.'; }
        else if (ep && dropSecret.box.checked) { await api('DELETE', '/notifications/endpoints/' + enc(s) + '/secret'); saved = await api('GET', '/notifications/endpoints/' + enc(s)); note += ' Secret removed.'; }
        await loadEndpoints();
        editEndpoint(saved, note);
        return '';
      }},
      h('h3', {}, ep ? 'Edit endpoint ' + ep.slug : 'New endpoint'),
      field('Slug', slug, ep ? 'Immutable: deliveries post to ' + str(ep.ingressPath) : 'Deliveries will post to /hooks/<slug>.'),
      field('Display name', display),
      field('Targets', targets, 'Members as @name and channels as #slug or #id, separated by commas.'),
      h('fieldset', {}, h('legend', {}, 'Verification'),
        field('Kind', kind), field('Header', headerName, 'Empty: the kind\'s default header.'), field('Prefix (HMAC)', prefix),
        field('Profile', profile, 'A profile\'s kind, header and secret win over the above.'),
        field(ep && ep.hasSecret ? 'Replace the secret' : 'Secret', secret,
          ep ? (ep.hasSecret ? 'A secret is set. It is write-only and never shown; type a new one to replace it.' : 'No secret is set: every delivery is rejected until one is.')
            : 'Write-only: stored encrypted, never shown again. Without one every delivery is rejected.'),
        ep && ep.hasSecret ? dropSecret.node : null),
      field('Dedupe header', dedupe, 'The sender\'s delivery-id header; empty turns dedupe off.'),
      field('Filters', filters, 'Drop rules on the payload, all must match: path, op (eq, ne, in, exists, contains), value.'),
      field('Template', template, 'Empty: the pretty-printed payload. {{payload.a.b}} substitutes a path.'),
      h('fieldset', {}, h('legend', {}, 'Delivery policy'),
        field('Level', level), field('If the member is offline', ifOffline), field('If the member is busy', ifBusy),
        field('Debounce (ms)', debounceMs, '0 is off.'), field('Debounce max', debounceMax),
        field('Queue TTL (ms)', queueTtlMs), field('Max wait (ms)', maxWaitMs)),
      enabled.node,
      flashSt.node);
      if (flash) flashSt.ok(flash);
      replace(epEditor, f,
        h('button', {type: 'button', class: 'quiet', onclick: () => { replace(epEditor); newEp.focus(); }}, 'Close'));
      (ep ? f.querySelector('h3') : slug).setAttribute('tabindex', '-1');
      focusAfter(flash ? flashSt.node : (ep ? f.querySelector('h3') : slug));
    };

    const showReceipts = async (slug, flash) => {
      const st = status();
      const list = h('div', {});
      const bodyBox = h('div', {class: 'receipt-body'});
      let oldest = Infinity;
      let rows = [];
      const more = h('button', {type: 'button', class: 'quiet', hidden: true, onclick: () => load(true)}, 'Load older receipts');
      const draw = () => replace(list, table([
        {label: 'Received', cell: (d) => stamp(d.receivedAt)},
        {label: 'Status', cell: (d) => h('span', {class: 'rstatus rs-' + (/^[a-z]{1,16}$/.test(d.status) ? d.status : 'other')}, str(d.status))},
        {label: 'Reason', cell: (d) => str(d.reason) || '—'},
        {label: 'Size', cell: (d) => String(Number(d.size) || 0) + ' B'},
        {label: 'Dedupe key', cell: (d) => (d.dedupeKey ? h('code', {}, str(d.dedupeKey)) : '—')},
        {label: 'Messages', cell: (d) => String(arr(d.messageIds).length)},
        {label: 'Actions', cell: (d) => h('div', {class: 'actions'},
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Show the body of receipt ' + str(d.id), onclick: () => showBody(str(d.id))}, 'Body'),
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Replay receipt ' + str(d.id), 'data-replay': str(d.id), onclick: (e) => replay(str(d.id), e.currentTarget)}, 'Replay'))},
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
          if (!alive) return;
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
          h('button', {type: 'button', class: 'quiet small', onclick: () => load(false)}, 'Refresh'),
          h('button', {type: 'button', class: 'quiet small', onclick: () => { replace(receipts); }}, 'Close')),
        st.node, list, more, bodyBox));
      if (flash) st.ok(flash);
      receipts.querySelector('#rc-h').focus();
      await load(false);
    };

    const newEp = h('button', {type: 'button', onclick: () => editEndpoint(null)}, 'New endpoint');
    if (can.notif) {
      notif.append(h('p', {class: 'hint'}, 'Outside senders post to /hooks/<slug>; each delivery leaves a receipt, and verified ones reach the targets as external, untrusted messages.'),
        newEp, epStatus.node, epList, epEditor, receipts);
    } else notif.append(denied('notification endpoints', 'notifications.manage'));

    // ===== Tool sources =====
    const tools = h('section', {class: 'adm-sec', id: 'adm-tools', 'aria-labelledby': 'adm-tools-h'}, h('h2', {id: 'adm-tools-h'}, 'Tool sources'));
    page.append(tools);
    const tsList = h('div', {class: 'adm-list'});
    const tsEditor = h('div', {class: 'adm-editor'});
    const tsStatus = status();
    const loadSources = async () => {
      const res = await api('GET', '/tool-sources');
      if (!alive) return;
      replace(tsList, table([
        {label: 'Source', cell: (t) => h('span', {}, h('code', {}, str(t.slug)), t.displayName ? ' ' + str(t.displayName) : '')},
        {label: 'Kind', cell: (t) => str(t.kind)},
        {label: 'Enabled', cell: (t) => yesNo(t.enabled)},
        {label: 'All members', cell: (t) => yesNo(t.allMembers)},
        {label: 'Tools', cell: (t) => String(Number(t.toolCount) || 0)},
        {label: 'Credential', cell: (t) => (t.hasCredential ? 'set (' + str(t.credentialKind) + (t.credentialHeaderName ? ' ' + str(t.credentialHeaderName) : '') + ')' : 'none')},
        {label: 'Actions', cell: (t) => h('div', {class: 'actions'},
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Edit ' + str(t.slug), onclick: () => editSource(str(t.slug))}, 'Edit'),
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Delete ' + str(t.slug), onclick: () => deleteSource(str(t.slug))}, 'Delete'))},
      ], arr(res && res.sources).map(o), {caption: 'Tool sources', empty: 'No tool source yet.'}));
    };
    const deleteSource = async (slug) => {
      if (!await confirmDialog(`Delete the tool source ${slug} with its tools, bindings and credential?`, {yes: 'Delete', danger: true})) return;
      try { await api('DELETE', '/tool-sources/' + enc(slug)); replace(tsEditor); await loadSources(); tsStatus.ok('Deleted ' + slug + '.'); } catch (err) { tsStatus.error(err); }
    };
    let tsSeq = 0; // the latest editSource call; an earlier answer is dropped
    const editSource = async (slugOrNull, flash) => {
      const seq = ++tsSeq;
      let t = null;
      if (slugOrNull) {
        try { t = o(await api('GET', '/tool-sources/' + enc(slugOrNull))); } catch (err) { if (seq === tsSeq) tsStatus.error(err); return; }
      }
      if (!alive || seq !== tsSeq) return;
      const slug = input('slug', t ? t.slug : '', {id: 'ts-slug', required: true, disabled: !!t, autocomplete: 'off'});
      const kind = select('kind', ['custom', 'mcp'], t ? str(t.kind) : 'mcp');
      if (t) kind.disabled = true;
      const display = input('displayName', t && t.displayName, {id: 'ts-display'});
      const url = input('url', o(t && t.config).url, {id: 'ts-url', type: 'url', placeholder: 'https://mcp.example.com/mcp'});
      const enabled = check('Enabled', 'enabled', t ? t.enabled : true);
      const all = check('Every member may use it (no binding needed)', 'allMembers', t ? t.allMembers : false);
      const credKind = select('credKind', ['bearer', 'header'], str(t && t.credentialKind) || 'bearer');
      const credHeader = input('credHeader', t && t.credentialHeaderName, {placeholder: 'X-Api-Key'});
      const secret = secretInput('credential', 'ts-secret');
      const drop = check('Remove the credential', 'dropCredential', false);
      const flashSt = status();
      const f = form({label: t ? 'Edit tool source ' + t.slug : 'New tool source', submit: t ? 'Save source' : 'Create source', action: async () => {
        const s = t ? t.slug : slug.value.trim();
        if (!s) { slug.focus(); throw new Error('The source needs a slug.'); }
        const config = {...o(t && t.config)};
        if (url.value.trim()) config.url = url.value.trim(); else delete config.url;
        const body = {displayName: display.value, config, enabled: enabled.box.checked, allMembers: all.box.checked};
        const sv = secret.value;
        secret.value = '';
        if (t) await api('PATCH', '/tool-sources/' + enc(s), {body});
        else await api('POST', '/tool-sources', {body: {slug: s, kind: kind.value, ...body}});
        let note = t ? 'Saved.' : 'Created.';
        if (sv) {
          await api('PUT', '/tool-sources/' + enc(s) + '/credential', {body: {kind: credKind.value, headerName: credKind.value === 'header' ? credHeader.value : undefined, secret: sv}});
          note += ' Credential stored.';
        } else if (t && drop.box.checked) { await api('DELETE', '/tool-sources/' + enc(s) + '/credential'); note += ' Credential removed.'; }
        await loadSources();
        await editSource(s, note);
        return '';
      }},
      h('h3', {}, t ? 'Edit tool source ' + t.slug : 'New tool source'),
      field('Slug', slug, t ? 'Immutable; its tools are named ' + t.slug + '__<tool>.' : 'Its tools will be named <slug>__<tool>.'),
      field('Kind', kind, 'mcp: tools discovered from an MCP server; custom: tools defined here over HTTP.'),
      field('Display name', display),
      field('MCP URL', url, 'Required for mcp.'),
      enabled.node, all.node,
      h('fieldset', {}, h('legend', {}, 'Credential (write-only)'),
        field('Sent as', credKind), field('Header name', credHeader, 'For "header" only.'),
        field(t && t.hasCredential ? 'Replace the credential' : 'Credential', secret,
          t && t.hasCredential ? 'A credential is set. It is never shown; type a new one to replace it.' : 'Stored encrypted, never shown again.'),
        t && t.hasCredential ? drop.node : null),
      flashSt.node);
      if (flash) flashSt.ok(flash);
      const toolsList = t && arr(t.tools).length ? h('div', {}, h('h4', {}, 'Tools'), h('ul', {}, arr(t.tools).slice(0, 500).map((d) => h('li', {}, h('code', {}, str(o(d).name)), o(d).description ? ' — ' + str(d.description).slice(0, 300) : '')))) : null;
      const refreshSt = status();
      const refresh = t && t.kind === 'mcp' ? h('div', {class: 'inline'},
        h('button', {type: 'button', class: 'quiet', onclick: async () => {
          refreshSt.busy('Asking the MCP server for its tools…');
          try {
            const r = o(await api('POST', '/tool-sources/' + enc(t.slug) + '/refresh', {body: {}}));
            await loadSources();
            await editSource(t.slug, `Refreshed: ${arr(r.tools).length} tools${r.changed ? ', changed' : ', unchanged'}.`);
          } catch (err) { refreshSt.error(err); }
        }}, 'Refresh tools from the server'), refreshSt.node) : null;
      replace(tsEditor, f, refresh,
        t ? h('div', {class: 'card'}, bindingsEditor('/tool-sources/' + enc(t.slug), arr(t.boundMembers), members, (note) => editSource(t.slug, note))) : null,
        toolsList,
        h('button', {type: 'button', class: 'quiet', onclick: () => { replace(tsEditor); newTs.focus(); }}, 'Close'));
      const focusEl = t ? f.querySelector('h3') : slug;
      focusEl.setAttribute('tabindex', '-1');
      focusAfter(flash ? flashSt.node : focusEl);
    };
    const newTs = h('button', {type: 'button', onclick: () => editSource(null)}, 'New tool source');
    if (can.tools) tools.append(newTs, tsStatus.node, tsList, tsEditor);
    else tools.append(denied('tool sources', 'tools.manage'));

    // ===== Secrets =====
    const secrets = h('section', {class: 'adm-sec', id: 'adm-secrets', 'aria-labelledby': 'adm-secrets-h'}, h('h2', {id: 'adm-secrets-h'}, 'Environment secrets'));
    page.append(secrets);
    const secList = h('div', {class: 'adm-list'});
    const secEditor = h('div', {class: 'adm-editor'});
    const secStatus = status();
    const loadSecrets = async () => {
      const res = await api('GET', '/secrets');
      if (!alive) return;
      replace(secList, table([
        {label: 'Secret', cell: (x) => h('code', {}, str(x.slug))},
        {label: 'Variable', cell: (x) => h('code', {}, str(x.envName))},
        {label: 'Description', cell: (x) => str(x.description) || '—'},
        {label: 'Enabled', cell: (x) => yesNo(x.enabled)},
        {label: 'All members', cell: (x) => yesNo(x.allMembers)},
        {label: 'Value', cell: (x) => (x.hasValue ? 'set' : 'none')},
        {label: 'Actions', cell: (x) => h('div', {class: 'actions'},
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Edit ' + str(x.slug), onclick: () => editSecret(str(x.slug))}, 'Edit'),
          h('button', {type: 'button', class: 'quiet small', 'aria-label': 'Delete ' + str(x.slug), onclick: () => deleteSecret(str(x.slug))}, 'Delete'))},
      ], arr(res && res.secrets).map(o), {caption: 'Environment secrets', empty: 'No secret yet.'}));
    };
    const deleteSecret = async (slug) => {
      if (!await confirmDialog(`Delete the secret ${slug} with its value and bindings?`, {yes: 'Delete', danger: true})) return;
      try { await api('DELETE', '/secrets/' + enc(slug)); replace(secEditor); await loadSecrets(); secStatus.ok('Deleted ' + slug + '.'); } catch (err) { secStatus.error(err); }
    };
    let secSeq = 0; // the latest editSecret call; an earlier answer is dropped
    const editSecret = async (slugOrNull, flash) => {
      const seq = ++secSeq;
      let x = null;
      if (slugOrNull) {
        try { x = o(await api('GET', '/secrets/' + enc(slugOrNull))); } catch (err) { if (seq === secSeq) secStatus.error(err); return; }
      }
      if (!alive || seq !== secSeq) return;
      const slug = input('slug', x ? x.slug : '', {id: 'sec-slug', required: true, disabled: !!x, autocomplete: 'off'});
      const envName = input('envName', x && x.envName, {id: 'sec-env', placeholder: 'GITHUB_TOKEN', autocomplete: 'off'});
      const desc = input('description', x && x.description);
      const enabled = check('Enabled', 'enabled', x ? x.enabled : true);
      const all = check('Every member gets it (no binding needed)', 'allMembers', x ? x.allMembers : false);
      const value = secretInput('value', 'sec-value');
      const drop = check('Remove the value', 'dropValue', false);
      const flashSt = status();
      const f = form({label: x ? 'Edit secret ' + x.slug : 'New secret', submit: x ? 'Save secret' : 'Create secret', action: async () => {
        const s = x ? x.slug : slug.value.trim();
        if (!s) { slug.focus(); throw new Error('The secret needs a slug.'); }
        const sv = value.value;
        value.value = '';
        if (x) await api('PATCH', '/secrets/' + enc(s), {body: {envName: envName.value.trim(), description: desc.value, enabled: enabled.box.checked, allMembers: all.box.checked}});
        else {
          await api('POST', '/secrets', {body: {slug: s, envName: envName.value.trim(), description: desc.value || undefined, allMembers: all.box.checked}});
          if (!enabled.box.checked) await api('PATCH', '/secrets/' + enc(s), {body: {enabled: false}});
        }
        let note = x ? 'Saved.' : 'Created.';
        if (sv) { await api('PUT', '/secrets/' + enc(s) + '/value', {body: {value: sv}}); note += ' Value stored.'; }
        else if (x && drop.box.checked) { await api('DELETE', '/secrets/' + enc(s) + '/value'); note += ' Value removed.'; }
        await loadSecrets();
        await editSecret(s, note);
        return '';
      }},
      h('h3', {}, x ? 'Edit secret ' + x.slug : 'New secret'),
      field('Slug', slug),
      field('Environment variable', envName, 'The name the runner sets in the agent\'s environment.'),
      field('Description', desc),
      enabled.node, all.node,
      field(x && x.hasValue ? 'Replace the value' : 'Value', value,
        x && x.hasValue ? 'A value is set. It is never shown; type a new one to replace it (up to 32 KiB).' : 'Write-only: stored encrypted, never shown again (up to 32 KiB).'),
      x && x.hasValue ? drop.node : null,
      h('p', {class: 'hint'}, 'Changes reach each member at its next runner start.'),
      flashSt.node);
      if (flash) flashSt.ok(flash);
      replace(secEditor, f,
        x ? h('div', {class: 'card'}, bindingsEditor('/secrets/' + enc(x.slug), arr(x.boundMembers), members, (note) => editSecret(x.slug, note))) : null,
        h('button', {type: 'button', class: 'quiet', onclick: () => { replace(secEditor); newSec.focus(); }}, 'Close'));
      const focusEl = x ? f.querySelector('h3') : slug;
      focusEl.setAttribute('tabindex', '-1');
      focusAfter(flash ? flashSt.node : focusEl);
    };
    const newSec = h('button', {type: 'button', onclick: () => editSecret(null)}, 'New secret');
    if (can.secrets) secrets.append(newSec, secStatus.node, secList, secEditor);
    else secrets.append(denied('environment secrets', 'secrets.manage'));

    api('GET', '/members').then((r) => { members = arr(r && r.members).map((m) => str(o(m).name)).filter(Boolean).sort(); }).catch(() => {});
    if (can.notif) loadEndpoints().catch((err) => epStatus.error(err));
    if (can.tools) loadSources().catch((err) => tsStatus.error(err));
    if (can.secrets) loadSecrets().catch((err) => secStatus.error(err));
    return () => { alive = false; };
  },
};
