// Device enrollment approval, at the broker's verificationUri
// (/ui/enroll, or /ui/enroll?code=XXXX-XXXX from verificationUriComplete).
// A device running `svc login` shows a user code; whoever holds
// members.manage types it here (or arrives with it in the link), sees what
// the device claims to be (label, address, program, times: text only) and
// approves it, binding it to an existing member or creating one, or
// rejects it. The token goes to the device on its next poll, never to
// this page.
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {status, field, confirmDialog, ago} from '../ui.js';
import {memberFields, loadPresets, cut, roleTitle} from './team-common.js';

const NOT_CODE_CHAR = /[^BCDFGHJKLMNPQRSTVWXZ]/;

// normalizeCode turns what a person typed into the XXXX-XXXX form the
// broker shows ('' when it cannot be a user code).
export function normalizeCode(s) {
  const c = String(s || '').toUpperCase().replace(/[\s-]+/g, '');
  if (c.length !== 8 || NOT_CODE_CHAR.test(c)) return '';
  return c.slice(0, 4) + '-' + c.slice(4);
}

const str = (v, n = 256) => cut(typeof v === 'string' ? v : '', n)[0];

function until(ms) {
  const s = Math.round((Number(ms) - Date.now()) / 1000);
  if (!Number.isFinite(s)) return '—';
  if (s <= 0) return 'expired';
  return s < 90 ? `in ${s} s` : `in ${Math.round(s / 60)} min`;
}

export const enrollPage = {
  title: 'Device enrollment', auth: true,
  render(main, {app, url}) {
    const admin = Array.isArray(app.session.permissions) && app.session.permissions.includes('members.manage');
    let alive = true;
    let pending = [];
    let members = [];
    let presets = {};

    const st = status();
    const codeInput = h('input', {id: 'enroll-code', name: 'code', autocomplete: 'off', spellcheck: 'false', autocapitalize: 'characters', maxlength: '16', placeholder: 'XXXX-XXXX'});
    const pre = url.searchParams.get('code');
    if (pre) codeInput.value = str(pre, 16);
    const detail = h('div', {class: 'enroll-detail', id: 'enroll-detail', 'aria-live': 'polite'});
    const pendingList = h('div', {class: 'pending-list'});

    const loadPending = async () => {
      const r = await api('GET', '/enroll/pending');
      pending = (Array.isArray(r && r.pending) ? r.pending : []).filter((p) => p && typeof p.userCode === 'string');
    };

    const findCode = () => {
      const c = normalizeCode(codeInput.value);
      return c ? pending.find((p) => p.userCode === c) || {userCode: c, unknown: true} : null;
    };

    const whatIsAsking = (p) => h('dl', {class: 'asking'},
      h('dt', {}, 'Code'), h('dd', {}, h('code', {class: 'user-code'}, str(p.userCode, 16))),
      h('dt', {}, 'Device label'), h('dd', {class: 'label-hint'}, p.labelHint ? str(p.labelHint) : '(none given)'),
      h('dt', {}, 'From address'), h('dd', {class: 'source-ip'}, str(p.sourceIp) || '—'),
      h('dt', {}, 'Program'), h('dd', {class: 'user-agent'}, str(p.userAgent) || '—'),
      h('dt', {}, 'Asked'), h('dd', {}, ago(p.createdAt)),
      h('dt', {}, 'Expires'), h('dd', {}, until(p.expiresAt)),
      h('dt', {}, 'Status'), h('dd', {class: 'enroll-status'}, str(p.status, 32) || 'pending'));

    const decided = (text) => {
      replace(detail, h('p', {class: 'msg ok', id: 'enroll-done', role: 'status', tabindex: '-1'}, text));
      detail.querySelector('#enroll-done').focus();
      refreshList();
    };

    // isAdmin tells whether permissions (presets and leaves) grant
    // members.manage, through a preset of the team or directly.
    const isAdmin = (perms) => (Array.isArray(perms) ? perms : []).some((x) => x === 'members.manage' || (Array.isArray(presets[x]) && presets[x].includes('members.manage')));

    const decisionForm = (p) => {
      const dst = status();
      // A new member is the default and no member is preselected: binding
      // to an existing member (an admin is often the first in the list)
      // must be a choice, never one click (docs/WEBAPP.md, Pages).
      const bind = h('input', {type: 'radio', name: 'how', id: 'how-bind', value: 'bind'});
      const create = h('input', {type: 'radio', name: 'how', id: 'how-create', value: 'create', checked: true});
      const memberSel = h('select', {id: 'enroll-member', name: 'member'},
        h('option', {value: '', selected: true}, 'Choose a member…'),
        members.map((m) => h('option', {value: m.name}, (roleTitle(m) ? `${m.name} (${roleTitle(m)})` : m.name) + (isAdmin(m.permissions) ? ' — admin' : ''))));
      const fields = memberFields(presets, {idPrefix: 'en'});
      const label = h('input', {id: 'enroll-label', name: 'label', maxlength: '128', autocomplete: 'off', placeholder: p.labelHint ? str(p.labelHint, 128) : 'enrolled device'});
      const bindBox = h('div', {class: 'bind-box', hidden: true}, field('Member', memberSel, 'The device gets a new token of this member; its other tokens stay.'));
      const createBox = h('div', {class: 'create-box'}, fields.node);
      const sync = () => { bindBox.hidden = !bind.checked; createBox.hidden = !create.checked; };
      bind.addEventListener('change', sync);
      create.addEventListener('change', sync);
      const reason = h('input', {id: 'enroll-reason', name: 'reason', maxlength: '512', autocomplete: 'off'});
      const approveBtn = h('button', {type: 'submit', id: 'enroll-approve'}, 'Approve');
      const rejectBtn = h('button', {type: 'button', id: 'enroll-reject', class: 'danger'}, 'Reject');
      const busy = (on) => { approveBtn.disabled = on; rejectBtn.disabled = on; };

      rejectBtn.addEventListener('click', async () => {
        if (!await confirmDialog(`Reject the device with code ${p.userCode}? Its svc login fails.`, {yes: 'Reject', danger: true})) return;
        busy(true);
        dst.busy('Rejecting…');
        try {
          const body = {userCode: p.userCode};
          if (reason.value.trim()) body.reason = reason.value.trim();
          await api('POST', '/enroll/reject', {body});
          if (alive) decided(`Rejected ${p.userCode}. The device is told on its next poll.`);
        } catch (err) {
          busy(false);
          dst.error(err);
        }
      });

      const f = h('form', {class: 'card decide', novalidate: true, 'aria-label': 'Approve or reject', onsubmit: async (e) => {
        e.preventDefault();
        if (approveBtn.disabled) return;
        const body = {userCode: p.userCode};
        try {
          if (bind.checked) {
            if (!memberSel.value) throw new Error('Choose the member this device acts as.');
            body.member = memberSel.value;
          } else {
            body.newMember = fields.value();
          }
        } catch (err) { dst.error(err.message); return; }
        if (label.value.trim()) body.label = label.value.trim();
        // Admin power is confirmed by name: whoever holds the device
        // afterwards can manage every member and token.
        const target = body.member || body.newMember.name;
        const power = body.member ? isAdmin((members.find((m) => m.name === body.member) || {}).permissions) : isAdmin(body.newMember.permissions);
        if (power && !await confirmDialog(`${target} holds members.manage: the device ${str(p.labelHint, 128) ? `"${str(p.labelHint, 128)}" ` : ''}gets a token with full admin power over the team (every member, token and setting). Approve it as ${target}?`,
          {yes: 'Approve with admin power', danger: true})) return;
        busy(true);
        dst.busy('Approving…');
        try {
          const r = await api('POST', '/enroll/approve', {body});
          const who = r && r.member && typeof r.member.name === 'string' ? r.member.name : (body.member || body.newMember.name);
          const tl = r && r.tokenInfo && typeof r.tokenInfo.label === 'string' ? r.tokenInfo.label : '';
          if (alive) decided(`Approved ${p.userCode} as ${who}${tl ? ` (token "${tl}")` : ''}. The device picks up its token on its next poll; this page never sees it.`);
        } catch (err) {
          busy(false);
          dst.error(err);
        }
      }},
      h('fieldset', {class: 'checks'}, h('legend', {}, 'The device acts as'),
        h('div', {class: 'check-row'}, create, h('label', {for: 'how-create', class: 'check'}, 'A new member')),
        h('div', {class: 'check-row'}, bind, h('label', {for: 'how-bind', class: 'check'}, 'An existing member'))),
      bindBox, createBox,
      field('Token label', label, 'Optional; default: the device label, else "enrolled device".'),
      approveBtn,
      h('hr', {}),
      field('Reason for a rejection', reason, 'Optional; the device shows it.'),
      h('div', {}, rejectBtn),
      dst.node);
      return f;
    };

    const show = () => {
      const p = findCode();
      if (!p) {
        replace(detail, codeInput.value.trim() ? h('p', {class: 'msg error', role: 'alert'}, 'A code is 8 letters, shown by svc login as XXXX-XXXX.') : null);
        return;
      }
      if (p.unknown) {
        replace(detail, h('p', {class: 'msg error', role: 'alert', id: 'enroll-unknown'},
          `No pending device with the code ${p.userCode}. It may have expired (codes last 5 minutes) or been decided already; start svc login again for a new one.`));
        return;
      }
      if (p.status && p.status !== 'pending') {
        replace(detail, h('h2', {tabindex: '-1'}, 'What is asking'), whatIsAsking(p),
          h('p', {class: 'msg'}, p.status === 'approved' ? 'Already approved: the token waits for the device.' : 'Already rejected.'));
        return;
      }
      replace(detail,
        h('h2', {id: 'asking-title', tabindex: '-1'}, 'What is asking'),
        h('p', {class: 'hint'}, 'The device reports its label and program itself: approve only a login you started or expected, and check that the code matches the one it shows.'),
        whatIsAsking(p),
        decisionForm(p));
    };

    const renderList = () => {
      if (!pending.length) { replace(pendingList, h('p', {class: 'empty'}, 'No device is waiting.')); return; }
      replace(pendingList, h('ul', {class: 'pending'}, pending.map((p) => h('li', {'data-code': p.userCode},
        h('code', {}, str(p.userCode, 16)), ' ',
        h('span', {class: 'label-hint'}, p.labelHint ? str(p.labelHint, 128) : '(no label)'), ' · ',
        h('span', {}, str(p.status, 32) || 'pending'), ' · expires ', until(p.expiresAt), ' ',
        h('button', {type: 'button', class: 'quiet', 'aria-label': 'Review ' + str(p.userCode, 16), onclick: () => {
          codeInput.value = p.userCode;
          history.replaceState(null, '', '/ui/enroll?code=' + encodeURIComponent(p.userCode));
          show();
          const t = detail.querySelector('h2');
          if (t) t.focus();
        }}, 'Review')))));
    };

    async function refreshList() {
      try {
        await loadPending();
        if (alive) renderList();
      } catch (err) {
        if (alive) st.error(err);
      }
    }

    // ready is the page's first load (members, presets, pending); a
    // look-up waits for it, so its form lists the members and is not
    // replaced by the first load's own rendering while someone fills it.
    let ready = Promise.resolve();
    let looked = false;
    const lookup = h('form', {class: 'card lookup', novalidate: true, 'aria-label': 'Find a device by its code', onsubmit: async (e) => {
      e.preventDefault();
      looked = true;
      await ready;
      if (!alive) return;
      const c = normalizeCode(codeInput.value);
      if (c) {
        codeInput.value = c;
        history.replaceState(null, '', '/ui/enroll?code=' + encodeURIComponent(c));
      }
      try { await loadPending(); } catch (err) { st.error(err); return; }
      if (!alive) return;
      renderList();
      show();
    }},
    field('Code shown by the device', codeInput, 'svc login prints it as XXXX-XXXX; case and the dash do not matter.'),
    h('button', {type: 'submit'}, 'Look up'));

    const section = h('section', {class: 'page enroll'},
      h('h1', {}, 'Approve a device'),
      h('p', {}, 'A device running ', h('code', {}, 'svc login'), ' waits for someone to approve it here. Approving gives it a token of the member you choose.'),
      st.node);
    main.append(section);

    if (!admin) {
      section.append(h('p', {class: 'notice', id: 'enroll-not-admin'},
        'Approving or rejecting a device needs the members.manage permission, which you do not have. Ask an admin to open this page',
        pre ? [' with the code ', h('code', {}, str(pre, 16))] : null, '.'));
      // The server is the authority: show what it answers.
      api('GET', '/enroll/pending').catch((err) => { if (alive && err.status !== 401) st.error(err); });
      return () => { alive = false; };
    }

    section.append(lookup, detail, h('h2', {}, 'Waiting devices'), pendingList,
      h('button', {type: 'button', class: 'quiet', onclick: refreshList}, 'Refresh the list'));

    ready = (async () => {
      try {
        const [, m, ps] = await Promise.all([loadPending(), api('GET', '/members'), loadPresets().catch(() => ({}))]);
        if (!alive) return;
        members = (Array.isArray(m && m.members) ? m.members : []).filter((x) => x && typeof x.name === 'string');
        presets = ps;
        renderList();
        if (looked) return; // the look-up under way shows the code
        if (codeInput.value) show();
        (codeInput.value && detail.querySelector('h2') ? detail.querySelector('h2') : codeInput).focus();
      } catch (err) {
        if (alive) st.error(err);
      }
    })();
    return () => { alive = false; };
  },
};
