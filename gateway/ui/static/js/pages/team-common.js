// What the Team and device enrollment pages share: the fields of a new
// member (name, role, presets and leaves, instructions), the box that
// shows a token's plaintext once, and the presets of the team.
//
// A plaintext token lives only in the DOM of the box that shows it (and
// in the closure of its Copy button) until the box is dismissed or the
// page is left; it is never written to storage, the URL or the console.
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {field, uid} from '../ui.js';
import {NAME_RE} from './signin.js';

export {NAME_RE};

// LEAVES are the permission leaves, offered one by one besides the
// presets: the spec's ten, then svc's metrics.read (GET /metrics).
export const LEAVES = [
  'team.manage', 'members.manage', 'objectives.create', 'objectives.cancel', 'objectives.reassign',
  'objectives.watch', 'activity.read', 'tools.manage', 'secrets.manage', 'notifications.manage',
  'metrics.read',
];

// MAX_SHOWN bounds what of a member's free text (instructions, role
// description) a page shows; the rest is marked as cut.
export const MAX_SHOWN = 4000;

// cut returns s bounded to n characters, and whether it was cut.
export function cut(s, n = MAX_SHOWN) {
  const t = typeof s === 'string' ? s : '';
  return t.length > n ? [t.slice(0, n), true] : [t, false];
}

// textBlock shows free text from the broker as text, cut visibly.
export function textBlock(cls, s) {
  const [t, wasCut] = cut(s);
  return h('p', {class: cls}, t, wasCut ? h('span', {class: 'cut'}, ' … (cut)') : null);
}

// loadPresets returns the team's permission presets {name: [leaves]}
// from the briefing (empty when the briefing has none).
export async function loadPresets() {
  const b = await api('GET', '/briefing');
  const p = b && b.team && b.team.permissionPresets;
  const out = {};
  if (p && typeof p === 'object') {
    for (const [k, v] of Object.entries(p)) if (typeof k === 'string' && k.length <= 64) out[k] = Array.isArray(v) ? v.filter((x) => typeof x === 'string') : [];
  }
  return out;
}

// memberFields builds the inputs of a new member. value() returns the
// request body of POST /members (and of an enrollment's newMember), or
// throws an Error naming what to fix; focusFirst() focuses the name.
export function memberFields(presets, {idPrefix = 'nm'} = {}) {
  const name = h('input', {id: idPrefix + '-name', name: 'name', required: true, maxlength: '64', autocomplete: 'off', spellcheck: 'false', autocapitalize: 'none'});
  const title = h('input', {id: idPrefix + '-role-title', name: 'roleTitle', maxlength: '200', autocomplete: 'off'});
  const desc = h('input', {id: idPrefix + '-role-desc', name: 'roleDescription', maxlength: '1000', autocomplete: 'off'});
  const instructions = h('textarea', {id: idPrefix + '-instructions', name: 'instructions', rows: '3', maxlength: '16000'});
  const presetBoxes = Object.keys(presets).sort().map((p) => {
    const id = uid(idPrefix + '-preset');
    const leaves = presets[p];
    return {p, box: h('input', {type: 'checkbox', id, value: p, checked: p === 'member'}), label: h('label', {for: id, class: 'check'}, p),
      hint: h('span', {class: 'hint'}, leaves.length ? leaves.join(', ') : 'no extra permissions')};
  });
  const leafBoxes = LEAVES.map((l) => {
    const id = uid(idPrefix + '-leaf');
    return {l, box: h('input', {type: 'checkbox', id, value: l}), label: h('label', {for: id, class: 'check'}, l)};
  });
  const node = h('div', {class: 'member-fields'},
    field('Name', name, 'Letters, digits, . _ - (up to 64); it cannot be changed later.'),
    field('Role title', title, 'Optional, e.g. "Backend agent".'),
    field('Role description', desc),
    h('fieldset', {class: 'checks'}, h('legend', {}, 'Permission presets'),
      presetBoxes.length ? presetBoxes.map((b) => h('div', {class: 'check-row'}, b.box, b.label, b.hint)) : h('p', {class: 'hint'}, 'The team defines no presets.')),
    h('details', {class: 'leaves'}, h('summary', {}, 'Individual permissions'),
      h('fieldset', {class: 'checks'}, h('legend', {class: 'sr-only'}, 'Individual permissions'),
        leafBoxes.map((b) => h('div', {class: 'check-row'}, b.box, b.label)))),
    field('Instructions', instructions, 'Private directive for this member; only members.manage holders see it.'));
  return {
    node,
    focusFirst: () => name.focus(),
    reset() {
      name.value = ''; title.value = ''; desc.value = ''; instructions.value = '';
      for (const b of presetBoxes) b.box.checked = b.p === 'member';
      for (const b of leafBoxes) b.box.checked = false;
    },
    value() {
      const n = name.value.trim();
      if (!NAME_RE.test(n)) { name.focus(); throw new Error('Enter a member name: letters, digits, . _ - (up to 64), starting with a letter or digit.'); }
      const body = {name: n, permissions: [
        ...presetBoxes.filter((b) => b.box.checked).map((b) => b.p),
        ...leafBoxes.filter((b) => b.box.checked).map((b) => b.l)]};
      const t = title.value.trim();
      const d = desc.value.trim();
      if (t || d) body.role = {title: t, description: d};
      if (instructions.value.trim()) body.instructions = instructions.value;
      return body;
    },
  };
}

// copyText puts text on the clipboard: the async Clipboard API where the
// page is a secure context (localhost, HTTPS), else a selection copy.
async function copyText(text, fallbackNode) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const range = document.createRange();
  range.selectNodeContents(fallbackNode);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
  const ok = document.execCommand('copy');
  sel.removeAllRanges();
  if (!ok) throw new Error('copy refused');
}

// onceToken shows a token's plaintext once, with a Copy button and a
// button that drops it. onDone runs after it is dropped (to move focus).
export function onceToken(member, token, {onDone = () => {}, intro} = {}) {
  let plain = String(token || '');
  const code = h('code', {class: 'token-plain', id: uid('token-plain')}, plain);
  const copied = h('p', {class: 'msg', role: 'status', 'aria-live': 'polite'});
  const copy = h('button', {type: 'button', class: 'copy', onclick: async () => {
    try {
      await copyText(plain, code);
      copied.className = 'msg ok';
      replace(copied, 'Copied to the clipboard.');
    } catch {
      copied.className = 'msg error';
      replace(copied, 'The browser refused to copy: select the token and copy it by hand.');
    }
  }}, 'Copy');
  const box = h('div', {class: 'once', role: 'group', 'aria-label': 'New token for ' + member},
    h('p', {class: 'once-title'}, intro || `New token for ${member}. It is shown only now: copy it and keep it somewhere safe.`),
    h('p', {}, code),
    h('div', {class: 'actions'}, copy,
      h('button', {type: 'button', class: 'quiet', onclick: () => {
        plain = '';
        box.remove();
        onDone();
      }}, 'Done, hide it')),
    copied);
  return {node: box, focus: () => copy.focus(), drop: () => { plain = ''; box.remove(); }};
}

// tokensOf is GET /members/:name/tokens as a list.
export async function tokensOf(member) {
  const r = await api('GET', '/members/' + encodeURIComponent(member) + '/tokens');
  return Array.isArray(r && r.tokens) ? r.tokens : [];
}

// roleTitle is a member's role title, '' when none.
export function roleTitle(m) {
  return m && m.role && typeof m.role.title === 'string' ? m.role.title : '';
}
