// h builds DOM nodes. It is the only way the app makes elements: text is
// always a Text node (textContent), never parsed as HTML, so message
// bodies, names and payloads are inert by construction.
//
//   h('a', {href: '/ui/chat', class: 'nav', onclick: fn}, 'Chat', child)
//
// props: 'class' sets className, on<event> functions become listeners,
// value/checked/disabled/hidden/selected are set as properties, anything
// else is an attribute. HTML sinks and inline styles are refused.

const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'selected']);
const REFUSED = new Set(['innerhtml', 'outerhtml', 'srcdoc', 'style']);

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === null || v === undefined || v === false) continue;
    const lk = k.toLowerCase();
    if (REFUSED.has(lk)) throw new Error(`h: ${k} is not allowed`);
    if (lk.startsWith('on')) {
      if (typeof v !== 'function') throw new Error(`h: ${k} must be a function`);
      el.addEventListener(lk.slice(2), v);
    } else if (k === 'class') {
      el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
    } else if (PROPS.has(k)) {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

// append adds children: nodes as they are, strings and numbers as text,
// arrays flattened, null/undefined/false skipped.
export function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// fmtTime renders an epoch-ms time for a message header.
export function fmtTime(ms) {
  const d = new Date(Number(ms));
  if (Number.isNaN(d.getTime())) return '';
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  return sameDay
    ? d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})
    : d.toLocaleString([], {month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit'});
}
