// Widgets every page shares: a status line, labelled fields and their
// controls (text, select, checkbox, write-only secret, fieldset), forms that
// call the API and show its error, a confirm dialog, tables and times.
// Everything is built with h(), so data is always text.
import {h, replace} from './h.js';
import {errorText} from './api.js';

let ids = 0;

// uid returns a fresh element id with prefix.
export function uid(prefix) { ids += 1; return `${prefix}-${ids}`; }

// status is a line that shows progress, success or an error:
// s.busy('Saving…'), s.ok('Saved'), s.error(err), s.clear().
export function status() {
  const node = h('p', {class: 'msg', role: 'status', 'aria-live': 'polite'});
  const set = (cls, text) => { node.className = cls; replace(node, text); };
  return {
    node,
    busy: (text) => set('msg', text),
    ok: (text) => set('msg ok', text),
    error: (err) => { set('msg error', typeof err === 'string' ? err : errorText(err)); node.setAttribute('role', 'alert'); },
    clear: () => set('msg', ''),
  };
}

// field is a labelled control: field('Name', h('input', {...}), 'hint').
// The control gets an id when it has none.
export function field(label, control, hint) {
  if (!control.id) control.id = uid('f');
  const hintNode = hint ? h('span', {class: 'hint', id: control.id + '-hint'}, hint) : null;
  if (hintNode) control.setAttribute('aria-describedby', hintNode.id);
  return h('div', {class: 'field'}, h('label', {for: control.id}, label), control, hintNode);
}

// input is a text control (props may make it a number, url…) holding value
// as text; null and undefined show empty.
export function input(name, value, props = {}) {
  return h('input', {name, value: value === undefined || value === null ? '' : String(value), ...props});
}

// select is a <select> of options with value selected. An option is a
// string (its own value and text) or {value, label}.
export function select(name, options, value) {
  return h('select', {name}, options.map((v) => {
    const o = v && typeof v === 'object' ? v : {value: v, label: v};
    return h('option', {value: o.value, selected: o.value === value}, o.label);
  }));
}

// radios is a group of radio buttons under a legend, one per option
// {value, label, hint?}: {node, value() (the checked one or ''), set(v)}.
// onchange(value) runs when the user picks one.
export function radios(legend, name, options, value, onchange) {
  const gid = uid('r');
  const boxes = options.map((o) => {
    const box = h('input', {type: 'radio', name: gid, value: o.value, checked: o.value === value, id: uid('rb'),
      'data-name': name, onchange: () => { if (box.checked && onchange) onchange(o.value); }});
    const hint = o.hint ? h('span', {class: 'hint', id: box.id + '-hint'}, o.hint) : null;
    if (hint) box.setAttribute('aria-describedby', hint.id);
    return {box, node: h('div', {class: 'radio'}, box, h('label', {for: box.id}, o.label), hint)};
  });
  return {
    node: h('fieldset', {class: 'radios'}, h('legend', {}, legend), boxes.map((b) => b.node)),
    value: () => (boxes.find((b) => b.box.checked)?.box.value || ''),
    set: (v) => { for (const b of boxes) b.box.checked = b.box.value === v; },
  };
}

// disclosure folds children under a summary (a <details>), closed unless
// open is set.
export function disclosure(summary, children, {open = false, cls = null} = {}) {
  return h('details', {class: cls, open}, h('summary', {}, summary), children);
}

// multiPick chooses several of options ({value, label}) with a select and
// an Add button, showing each chosen one as a chip with a Remove button:
// {node, values() (in the order chosen), set(values)}. A chosen value that
// is no option (e.g. an archived channel) shows labelOf(value).
export function multiPick({label, name, id, options, values = [], labelOf = (v) => v, hint, empty = 'None chosen.', add = 'Add'}) {
  let chosen = [...new Set(values)];
  const optLabel = (v) => options.find((o) => o.value === v)?.label ?? labelOf(v);
  const pick = h('select', {name, id: id || uid('mp')});
  const chips = h('ul', {class: 'chips', 'aria-label': label + ', chosen', 'aria-live': 'polite'});
  const draw = () => {
    replace(pick, h('option', {value: ''}, 'Choose…'),
      options.filter((o) => !chosen.includes(o.value)).map((o) => h('option', {value: o.value}, o.label)));
    replace(chips, chosen.length ? chosen.map((v) => h('li', {'data-value': v}, h('span', {}, optLabel(v)),
      button('Remove', () => { chosen = chosen.filter((x) => x !== v); draw(); pick.focus(); },
        {class: 'quiet small', 'aria-label': 'Remove ' + optLabel(v)}))) : h('li', {class: 'empty'}, empty));
  };
  const addBtn = button(add, () => {
    if (!pick.value) { pick.focus(); return; }
    chosen.push(pick.value);
    draw();
    pick.focus();
  }, {class: 'quiet', 'aria-label': add + ' to ' + label});
  draw();
  return {
    node: h('div', {class: 'multipick'}, h('div', {class: 'inline'}, field(label, pick, hint), addBtn), chips),
    pick,
    values: () => [...chosen],
    set: (vs) => { chosen = [...new Set(vs)]; draw(); },
  };
}

// check is a labelled checkbox: box is the control, node the row to place.
export function check(label, name, checked) {
  const box = h('input', {type: 'checkbox', name, checked: !!checked, id: uid('c')});
  return {box, node: h('div', {class: 'check'}, box, h('label', {for: box.id}, label))};
}

// secretInput is a write-only field: never filled from the broker, never
// autocompleted; the caller empties it after use.
export function secretInput(name, id) {
  return h('input', {type: 'password', name, id, autocomplete: 'new-password', spellcheck: 'false', value: ''});
}

// secretField is a write-only secret's field and, when one is set (isSet),
// the box that removes it: {input, drop (the box), nodes (to place)}.
export function secretField({name, id, label, hint, isSet, drop, dropName}) {
  const input = secretInput(name, id);
  const remove = check(drop, dropName, false);
  return {input, drop: remove.box, nodes: [field(label, input, hint), isSet ? remove.node : null]};
}

// fieldset groups controls under a legend.
export function fieldset(legend, ...children) {
  return h('fieldset', {}, h('legend', {}, legend), children);
}

// button is a plain button (not a submit): button('Close', fn, {class: 'quiet'}).
export function button(text, onclick, props = {}) {
  return h('button', {type: 'button', ...props, onclick}, text);
}

// form builds a form whose submit runs action(form) with the submit button
// disabled and its status line showing the outcome: action returns the
// success text (or nothing), or throws an ApiError that is shown.
export function form({label, submit = 'Save', action, busy = 'Working…', cls = 'card'}, ...children) {
  const st = status();
  const button = h('button', {type: 'submit'}, submit);
  const f = h('form', {class: cls, novalidate: true, 'aria-label': label || null, onsubmit: async (e) => {
    e.preventDefault();
    if (button.disabled) return;
    button.disabled = true;
    st.busy(busy);
    try {
      const done = await action(f);
      if (done) st.ok(done); else st.clear();
    } catch (err) {
      st.error(err);
    } finally {
      button.disabled = false;
    }
  }}, children, button, st.node);
  return f;
}

// confirmDialog asks a yes/no question in a modal <dialog> and resolves
// true when confirmed. Escape and Cancel resolve false.
export function confirmDialog(question, {yes = 'Confirm', danger = false} = {}) {
  return new Promise((resolve) => {
    const dlg = h('dialog', {class: 'confirm', 'aria-label': question});
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    dlg.addEventListener('cancel', (e) => { e.preventDefault(); done(false); });
    dlg.append(
      h('p', {}, question),
      h('div', {class: 'actions'},
        h('button', {type: 'button', class: 'quiet', onclick: () => done(false)}, 'Cancel'),
        h('button', {type: 'button', class: danger ? 'danger' : null, onclick: () => done(true)}, yes)));
    document.body.append(dlg);
    dlg.showModal();
    dlg.querySelector('button.quiet').focus();
  });
}

// table renders rows as a table: cols is [{label, cell: (row) => node|text}].
export function table(cols, rows, {caption, empty = 'Nothing yet.'} = {}) {
  if (!rows.length) return h('p', {class: 'empty'}, empty);
  return h('div', {class: 'table-wrap'}, h('table', {},
    caption ? h('caption', {}, caption) : null,
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, cols.map((c) => h('td', {'data-label': c.label}, c.cell(r))))))));
}

// ago renders an epoch-ms time as "5 min ago", with the full time as its
// title.
export function ago(ms) {
  const t = Number(ms);
  if (!Number.isFinite(t) || t <= 0) return h('span', {}, '—');
  const s = Math.round((Date.now() - t) / 1000);
  let text;
  if (s < 45) text = 'just now';
  else if (s < 3600) text = `${Math.round(s / 60)} min ago`;
  else if (s < 86400) text = `${Math.round(s / 3600)} h ago`;
  else text = `${Math.round(s / 86400)} d ago`;
  return h('time', {datetime: new Date(t).toISOString(), title: new Date(t).toLocaleString()}, text);
}

// bytes renders a size for people.
export function bytes(n) {
  const v = Number(n);
  if (!Number.isFinite(v) || v < 0) return '—';
  if (v < 1024) return `${v} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let x = v / 1024;
  let i = 0;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
  return `${x < 10 ? x.toFixed(1) : Math.round(x)} ${units[i]}`;
}

// str is v when it is a string, else '': a field of a broker answer read
// as text whatever the answer holds.
export function str(v) { return typeof v === 'string' ? v : ''; }

// obj is v when it is a plain object, else {}.
export function obj(v) { return v && typeof v === 'object' && !Array.isArray(v) ? v : {}; }

// stamp renders an epoch-ms time to the second, as a <time>.
export function stamp(ms) {
  const t = Number(ms);
  if (!Number.isFinite(t) || t <= 0) return h('span', {}, '—');
  const d = new Date(t);
  return h('time', {datetime: d.toISOString()}, d.toLocaleString([], {month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit'}));
}
