// Team: the roster with live presence (online/offline, streams, last seen),
// live activity (working/blocked/idle) and which members are agents, and
// member admin: create a member with presets, role and instructions,
// delete one, and a member's tokens (list, revoke, rotate with the
// plaintext shown once).
//
// Live: presence, activity (its 30 s lapse included) and agent badges come
// from the tab's team stream (teamlive.js); nothing polls. GET /roster is
// read once for the members' roles and permissions, and again only when
// the stream names a member the page does not list or drops one (a member
// created or deleted elsewhere). Until the stream's first snapshot the
// roster's own presence is shown.
//
// What a member without members.manage sees: the roster (public
// projection: no instructions), their own tokens; no create, delete or
// other members' tokens. The server decides regardless; its refusal is
// shown as it answers.
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {status, form, field, confirmDialog, table, ago} from '../ui.js';
import {memberFields, loadPresets, onceToken, tokensOf, roleTitle, textBlock} from './team-common.js';
import {pendingList, onPendingCount} from '../approvals.js';
import {onPresence, presenceReady} from '../teamlive.js';

const MAX_MEMBERS = 2000; // rows shown at most

const ACTIVITY = {
  working: {label: 'Working', detail: 'in a turn or running a tool'},
  blocked: {label: 'Blocked', detail: 'waiting for a person: input or a permission'},
  idle: {label: 'Idle', detail: ''},
};

export const teamPage = {
  title: 'Team', auth: true,
  render(main, {app}) {
    const me = app.session.member;
    const admin = Array.isArray(app.session.permissions) && app.session.permissions.includes('members.manage');
    let alive = true;
    let live = false; // presence comes from the team stream
    let reloading = null; // a roster reload in flight
    let presets = {};
    let teammates = [];
    let signature = '';
    const details = new Map(); // name → Member from GET /members (instructions for managers)
    const presence = new Map(); // name → {connected, state, agent, lastSeen}
    const rows = new Map(); // name → {li, pres, act, seen, badge}
    let open = ''; // member whose tokens panel is open
    let openedBy = ''; // the row action that opened the panel: 'tokens' or 'edit'
    let once = null; // the plaintext box on screen

    const st = status();
    const list = h('ul', {class: 'roster', id: 'roster', 'aria-label': 'Members'});
    const panel = h('section', {class: 'tokens-panel', id: 'tokens-panel', 'aria-labelledby': 'tokens-title', hidden: true});
    const createSlot = h('div', {class: 'create-slot'});
    const rosterTitle = h('h2', {id: 'roster-title', tabindex: '-1'}, 'Members');

    // --- Roster -------------------------------------------------------

    const presenceText = (name) => {
      const p = presence.get(name);
      const n = p && Number.isFinite(Number(p.connected)) ? Number(p.connected) : 0;
      return n > 0 ? {state: 'online', text: n === 1 ? 'Online' : `Online · ${n} streams`} : {state: 'offline', text: 'Offline'};
    };
    const activityOf = (name) => {
      const p = presence.get(name);
      const a = p && typeof p.state === 'string' ? p.state : 'idle';
      return ACTIVITY[a] ? a : 'idle';
    };
    const agentOf = (name) => {
      const p = presence.get(name);
      if (p && typeof p.agent === 'boolean') return p.agent;
      const m = teammates.find((x) => x.name === name);
      return !!(m && m.agent === true);
    };

    const updateRow = (name) => {
      const r = rows.get(name);
      if (!r) return;
      const pr = presenceText(name);
      r.pres.dataset.state = pr.state;
      r.pres.textContent = pr.text;
      const a = activityOf(name);
      r.act.dataset.state = a;
      replace(r.act, ACTIVITY[a].label, ACTIVITY[a].detail ? h('span', {class: 'detail'}, ' — ' + ACTIVITY[a].detail) : null);
      const p = presence.get(name);
      replace(r.seen, p && Number(p.lastSeen) > 0 ? ['last seen ', ago(p.lastSeen)] : 'not seen since the broker started');
      const agent = agentOf(name);
      r.badge.hidden = !agent;
      r.li.dataset.kind = agent ? 'agent' : 'person';
    };

    const buildRow = (m) => {
      const name = m.name;
      const pres = h('span', {class: 'presence'});
      const act = h('span', {class: 'activity'});
      const seen = h('span', {class: 'seen'});
      const badge = h('span', {class: 'tag agent', title: 'A runner has connected for this member'}, 'Agent');
      const d = details.get(name);
      const perms = Array.isArray(m.permissions) ? m.permissions.filter((x) => typeof x === 'string') : [];
      const mine = name === me;
      const actions = [];
      if (admin || mine) {
        actions.push(h('button', {type: 'button', class: 'quiet', 'data-action': 'tokens', 'aria-controls': 'tokens-panel',
          'aria-label': mine ? null : `Tokens of ${name}`, onclick: () => openTokens(name)}, mine ? 'My tokens' : 'Tokens'));
      }
      if (admin) {
        actions.push(h('button', {type: 'button', class: 'quiet', 'data-action': 'edit', 'aria-controls': 'tokens-panel', 'aria-label': `Edit ${name}`, onclick: () => openEdit(name)}, 'Edit'));
      }
      if (admin && !mine) {
        actions.push(h('button', {type: 'button', class: 'quiet danger-text', 'data-action': 'delete', 'aria-label': `Delete ${name}`, onclick: () => removeMember(name)}, 'Delete'));
      }
      const li = h('li', {class: 'member', 'data-member': name},
        h('div', {class: 'who'},
          h('span', {class: 'name'}, name),
          mine ? h('span', {class: 'tag'}, 'you') : null,
          badge,
          roleTitle(m) ? h('span', {class: 'role'}, roleTitle(m)) : null),
        h('div', {class: 'state'}, pres, act, seen),
        m.role && m.role.description ? textBlock('role-desc', m.role.description) : null,
        h('p', {class: 'perms'}, perms.length ? 'Permissions: ' + perms.join(', ') : 'No extra permissions'),
        d && d.instructions ? h('div', {class: 'instructions'}, h('span', {class: 'label'}, 'Instructions'), textBlock('text', d.instructions)) : null,
        actions.length ? h('div', {class: 'actions'}, actions) : null);
      rows.set(name, {li, pres, act, seen, badge});
      updateRow(name);
      return li;
    };

    // rebuild redraws the roster; a button that had focus keeps it (the
    // same member's same action), so a change made elsewhere does not
    // throw a keyboard user back to the top of the page.
    const rebuild = () => {
      const a = document.activeElement;
      const had = a && list.contains(a) ? {member: a.closest('li.member')?.dataset.member, action: a.dataset.action} : null;
      rows.clear();
      const shown = teammates.slice(0, MAX_MEMBERS);
      replace(list, shown.map(buildRow));
      if (!shown.length) list.append(h('li', {class: 'empty'}, 'No members.'));
      if (had) {
        const r = rows.get(had.member);
        const b = r && had.action ? r.li.querySelector(`[data-action="${had.action}"]`) : null;
        (b || rosterTitle).focus();
      }
    };

    const loadDetails = async () => {
      const r = await api('GET', '/members');
      details.clear();
      for (const m of Array.isArray(r && r.members) ? r.members : []) if (m && typeof m.name === 'string') details.set(m.name, m);
    };

    const loadRoster = async ({force = false} = {}) => {
      const r = await api('GET', '/roster');
      if (!alive) return;
      const tm = (Array.isArray(r && r.teammates) ? r.teammates : []).filter((m) => m && typeof m.name === 'string');
      tm.sort((a, b) => (a.name === me ? -1 : b.name === me ? 1 : a.name.localeCompare(b.name)));
      // The roster's presence until the stream's snapshot; after it, only
      // when last seen (which the stream does not carry).
      for (const p of Array.isArray(r && r.connected) ? r.connected : []) {
        if (!p || typeof p.name !== 'string') continue;
        const had = presence.get(p.name);
        if (live && had) had.lastSeen = p.lastSeen;
        else if (!live) presence.set(p.name, {connected: Number(p.connected) || 0, state: typeof p.activity === 'string' ? p.activity : 'idle', lastSeen: p.lastSeen});
      }
      const sig = JSON.stringify(tm);
      if (force || sig !== signature) {
        // The team changed (a member added, removed or edited elsewhere):
        // the private details are read again for managers.
        if (admin) await loadDetails();
        if (!alive) return;
        signature = sig;
        teammates = tm;
        rebuild();
      } else {
        for (const m of teammates) updateRow(m.name);
      }
      list.dataset.loaded = 'true';
    };

    // reload reads the roster again (a member created or deleted
    // elsewhere); one at a time.
    const reload = () => {
      if (reloading) return reloading;
      reloading = loadRoster({force: true}).catch((err) => { if (alive) st.error(err); }).finally(() => { reloading = null; });
      return reloading;
    };

    // The team stream: every change of presence, activity or agency, and
    // a whole snapshot on each (re)connection.
    const offPresence = onPresence((map, changed) => {
      if (!alive || !presenceReady()) return;
      live = true;
      const names = changed ? [changed] : [...map.keys()];
      if (!changed) {
        for (const name of [...presence.keys()]) if (!map.has(name)) presence.delete(name);
      }
      for (const name of names) {
        const p = map.get(name);
        const had = presence.get(name);
        if (!p) { presence.delete(name); continue; }
        // The stream does not carry last seen: a change of connections is
        // a sighting now.
        let lastSeen = had ? had.lastSeen : undefined;
        if ((had && had.connected !== p.connected) || (!had && p.connected > 0)) lastSeen = Date.now();
        presence.set(name, {connected: p.connected, state: p.state, agent: p.agent, lastSeen});
      }
      if (!list.dataset.loaded) return; // the first roster load draws them
      const listed = new Set(teammates.map((m) => m.name));
      if (names.some((n) => map.has(n) !== listed.has(n)) || (!changed && map.size !== listed.size)) {
        reload();
        return;
      }
      for (const name of names) updateRow(name);
    });

    // --- Member admin -------------------------------------------------

    const showOnce = (member, token, slot, intro) => {
      if (once) once.drop();
      once = onceToken(member, token, {intro, onDone: () => { once = null; const f = main.querySelector('h1'); if (f) f.focus(); }});
      slot.prepend(once.node);
      once.focus();
    };

    const buildCreate = () => {
      const fields = memberFields(presets, {idPrefix: 'nm'});
      const result = h('div', {class: 'once-slot'});
      const f = form({label: 'New member', submit: 'Create member', busy: 'Creating…', cls: 'card create-member', action: async () => {
        const body = fields.value();
        const r = await api('POST', '/members', {body});
        fields.reset();
        await loadRoster({force: true});
        showOnce(body.name, r && r.token, result, `Member ${body.name} created. Its first token is shown only now: copy it and give it to the member (or the agent's runner).`);
        return `Created ${body.name}.`;
      }}, fields.node);
      replace(createSlot,
        h('details', {class: 'create', id: 'create-member'}, h('summary', {}, 'Add a member'), f),
        result);
    };

    const removeMember = async (name) => {
      if (!await confirmDialog(`Delete ${name}? Its tokens, sessions, streams and files go, and this cannot be undone.`, {yes: 'Delete member', danger: true})) return;
      st.busy(`Deleting ${name}…`);
      try {
        await api('DELETE', '/members/' + encodeURIComponent(name));
        if (open === name) closeTokens();
        await loadRoster({force: true});
        st.ok(`Deleted ${name}.`);
        rosterTitle.focus();
      } catch (err) {
        st.error(err);
      }
    };

    const closeTokens = () => {
      const was = open;
      open = '';
      if (once && panel.contains(once.node)) { once.drop(); once = null; }
      panel.hidden = true;
      replace(panel);
      const back = rows.get(was);
      if (back) { const b = back.li.querySelector(`[data-action="${openedBy}"]`) || back.li.querySelector('[data-action]'); if (b) b.focus(); }
    };

    // openEdit shows the edit form of a member in the panel: role,
    // instructions, permissions (presets and leaves, as POST /members
    // takes them). The server's refusal (the last members.manage holder
    // losing it) is shown as it answers.
    const openEdit = (name) => {
      if (once && panel.contains(once.node)) { once.drop(); once = null; }
      const m = teammates.find((x) => x.name === name) || {};
      const d = details.get(name) || {};
      open = name;
      openedBy = 'edit';
      panel.hidden = false;
      const title = h('h2', {id: 'tokens-title', tabindex: '-1'}, `Edit ${name}`);
      const rt = h('input', {id: 'ed-role-title', maxlength: '200', autocomplete: 'off', value: roleTitle(m)});
      const rd = h('input', {id: 'ed-role-desc', maxlength: '1000', autocomplete: 'off', value: m.role && typeof m.role.description === 'string' ? m.role.description : ''});
      const ins = h('textarea', {id: 'ed-instructions', rows: '4', maxlength: '16000'});
      ins.value = typeof d.instructions === 'string' ? d.instructions : '';
      const perms = h('input', {id: 'ed-permissions', autocomplete: 'off', spellcheck: 'false',
        value: (Array.isArray(m.permissions) ? m.permissions.filter((x) => typeof x === 'string') : []).join(', ')});
      const f = form({label: `Edit ${name}`, submit: 'Save changes', busy: 'Saving…', cls: 'card edit-member', action: async () => {
        const body = {
          role: {title: rt.value.trim(), description: rd.value.trim()},
          instructions: ins.value,
          permissions: perms.value.split(/[\s,]+/).filter(Boolean),
        };
        await api('PATCH', '/members/' + encodeURIComponent(name), {body});
        await loadRoster({force: true});
        return `Saved ${name}.`;
      }},
      field('Role title', rt), field('Role description', rd),
      field('Instructions', ins, 'Private directive; only members.manage holders see it.'),
      field('Permissions', perms, 'Preset names and leaves, separated by commas' + (Object.keys(presets).length ? ' (presets: ' + Object.keys(presets).sort().join(', ') + ')' : '') + '.'));
      replace(panel,
        h('div', {class: 'panel-head'}, title, h('button', {type: 'button', class: 'quiet', onclick: closeTokens}, 'Close')),
        f);
      title.focus();
    };

    const openTokens = async (name) => {
      if (once && panel.contains(once.node)) { once.drop(); once = null; }
      open = name;
      openedBy = 'tokens';
      panel.hidden = false;
      const pst = status();
      const listSlot = h('div', {class: 'tokens-list'}, h('p', {class: 'hint'}, 'Loading tokens…'));
      const onceSlot = h('div', {class: 'once-slot'});
      const title = h('h2', {id: 'tokens-title', tabindex: '-1'}, name === me ? 'My tokens' : `Tokens of ${name}`);
      const load = async () => {
        const toks = await tokensOf(name);
        if (open !== name) return;
        replace(listSlot, table([
          {label: 'Label', cell: (t) => String(t.label || '—')},
          {label: 'Origin', cell: (t) => String(t.origin || '—')},
          {label: 'Created', cell: (t) => ago(t.createdAt)},
          {label: 'Last used', cell: (t) => ago(t.lastUsedAt)},
          {label: 'Expires', cell: (t) => (t.expiresAt ? ago(t.expiresAt) : 'never')},
          {label: 'Created by', cell: (t) => String(t.createdBy || '—')},
          {label: 'Actions', cell: (t) => h('button', {type: 'button', class: 'quiet', 'data-token-id': String(t.id || ''), onclick: () => revoke(t)}, 'Revoke')},
        ], toks, {caption: `Active tokens of ${name}`, empty: `${name} holds no active token.`}));
      };
      const revoke = async (t) => {
        if (!await confirmDialog(`Revoke the token "${String(t.label || t.id)}" of ${name}? Whatever uses it stops working at once.`, {yes: 'Revoke', danger: true})) return;
        pst.busy('Revoking…');
        try {
          await api('DELETE', '/members/' + encodeURIComponent(name) + '/tokens/' + encodeURIComponent(String(t.id || '')));
          await load();
          pst.ok('Token revoked.');
          title.focus();
        } catch (err) { pst.error(err); }
      };
      const rotate = async () => {
        if (!await confirmDialog(`Rotate the tokens of ${name}? Every active token is revoked and one new token is made.`, {yes: 'Rotate', danger: true})) return;
        pst.busy('Rotating…');
        try {
          const r = await api('POST', '/members/' + encodeURIComponent(name) + '/rotate-token');
          if (open !== name) return;
          showOnce(name, r && r.token, onceSlot);
          await load();
          pst.ok('Every earlier token is revoked.');
        } catch (err) { pst.error(err); }
      };
      replace(panel,
        h('div', {class: 'panel-head'}, title,
          h('button', {type: 'button', class: 'quiet', onclick: closeTokens}, 'Close')),
        h('p', {class: 'hint'}, 'The broker keeps only a hash of each token: a lost token cannot be shown again, only replaced.'),
        onceSlot,
        listSlot,
        h('div', {class: 'actions'}, h('button', {type: 'button', id: 'rotate-token', onclick: rotate}, 'Rotate: revoke all, make a new token')),
        pst.node);
      title.focus();
      try { await load(); } catch (err) { if (open === name) { replace(listSlot); pst.error(err); } }
    };

    // Approvals waiting for me: decided here or in the DM with the agent.
    const approvalsSlot = h('div', {class: 'approvals-slot'});
    let shownCount = -1;
    const shownApprovals = new Set();
    const drawApprovals = async () => {
      try {
        const node = await pendingList(me, shownApprovals);
        if (!alive) return;
        replace(approvalsSlot, node);
        // What the list was drawn for (tests wait on it).
        approvalsSlot.dataset.waiting = String(node.querySelectorAll('.approval-card[data-status="pending"]').length);
      } catch (err) { if (alive) st.error(err); }
    };
    const offApprovals = onPendingCount((n) => {
      if (n === shownCount) return;
      shownCount = n;
      drawApprovals();
    });

    main.append(h('section', {class: 'page team'},
      h('h1', {tabindex: '-1'}, 'Team'),
      st.node,
      h('h2', {id: 'approvals-title'}, 'Approvals waiting for you'),
      approvalsSlot,
      admin ? createSlot : h('p', {class: 'hint', id: 'not-admin'}, 'Adding and removing members and managing their tokens needs the members.manage permission. You can manage your own tokens.'),
      admin ? h('p', {}, h('a', {href: '/ui/enroll', 'data-nav': ''}, 'Approve a device'), ' that runs ', h('code', {}, 'svc login'), '.') : null,
      panel,
      rosterTitle,
      h('p', {class: 'hint'}, 'Presence and activity update live.'),
      list));

    (async () => {
      try {
        if (admin) {
          try { presets = await loadPresets(); } catch { presets = {}; }
          if (!alive) return;
          buildCreate();
        }
        await loadRoster({force: true});
      } catch (err) {
        if (alive) st.error(err);
      }
    })();

    return () => {
      alive = false;
      offApprovals();
      offPresence();
      if (once) once.drop();
      once = null;
    };
  },
};
