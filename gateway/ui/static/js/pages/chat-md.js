// Markdown in chat messages: marked's Lexer (vendor/marked, a pinned
// release) reads the body into a token tree, and this module turns the
// tokens it knows into DOM nodes with h(). No HTML string is ever made:
// raw HTML in a message is a token shown as its text, a link keeps only an
// http, https or mailto address, images are shown as links, and anything
// this module does not know is shown as its source text.
//
// Bounds keep hostile input cheap: bodies over MD_MAX are not parsed (they
// show as plain text), neither are bodies with long runs of emphasis or
// nesting markers (marked recurses on them), a parse error falls back to
// plain text, and the tree is walked to MAX_DEPTH at most.
import {h} from '../h.js';
import {Lexer} from '../../vendor/marked/marked.esm.js';

const MD_MAX = 8 << 10;
const MAX_DEPTH = 12;
// DEEP is what makes marked recurse deeply: a long run of emphasis
// markers, or a line opening with many quote or list markers.
const DEEP = /[*_~]{48,}|^(?:[ \t]*(?:>|[*+-][ \t])){16,}/m;
const SAFE_HREF = /^(https?:\/\/|mailto:)/i;
// MENTION is @name (member names: docs/API.md); OBJ is an objective
// reference, obj:<id>, linked to its page.
const INLINE_REF = /(^|[^A-Za-z0-9._-])(@[A-Za-z0-9][A-Za-z0-9._-]{0,63}|obj:[A-Za-z0-9-]{1,64})(?![A-Za-z0-9-])/g;

// safeHref is href when it is an absolute http(s) or mailto address, else ''.
export function safeHref(href) {
  if (typeof href !== 'string') return '';
  const t = href.trim();
  if (!SAFE_HREF.test(t)) return '';
  try { new URL(t); } catch { return ''; }
  return t;
}

// refs splits text into text, @mention spans and obj: links.
function refs(text, me) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE_REF)) {
    const at = m.index + m[1].length;
    if (at > last) out.push(text.slice(last, at));
    const ref = m[2];
    if (ref.startsWith('@')) {
      const name = ref.slice(1).replace(/[._-]+$/, '');
      out.push(h('span', {class: ['mention', name === me && 'me'], 'data-member': name}, '@' + name));
      if (name.length + 1 < ref.length) out.push(ref.slice(name.length + 1));
    } else {
      const id = ref.slice(4);
      out.push(h('a', {class: 'objref', href: '/ui/objectives/' + encodeURIComponent(id), 'data-nav': ''}, ref));
    }
    last = at + ref.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function inline(tokens, me, depth, inLink) {
  if (!Array.isArray(tokens)) return [];
  return tokens.map((t) => inlineToken(t, me, depth, inLink));
}

function inlineToken(t, me, depth, inLink) {
  if (!t || typeof t !== 'object') return null;
  if (depth > MAX_DEPTH) return typeof t.raw === 'string' ? t.raw : '';
  const kids = () => Array.isArray(t.tokens) ? inline(t.tokens, me, depth + 1, inLink) : text(t.text, me, inLink);
  switch (t.type) {
    case 'text': case 'escape': return kids();
    case 'strong': return h('strong', {}, kids());
    case 'em': return h('em', {}, kids());
    case 'del': return h('del', {}, kids());
    case 'codespan': return h('code', {}, String(t.text || ''));
    case 'br': return h('br', {});
    case 'link': {
      const href = safeHref(t.href);
      if (!href || inLink) return typeof t.raw === 'string' ? t.raw : '';
      return h('a', {href, rel: 'noopener noreferrer nofollow', target: '_blank'},
        Array.isArray(t.tokens) ? inline(t.tokens, me, depth + 1, true) : String(t.text || ''));
    }
    case 'image': {
      // No image loads from a message: the address is a link to it.
      const href = safeHref(t.href);
      const alt = String(t.text || t.href || 'image');
      return href && !inLink ? h('a', {href, rel: 'noopener noreferrer nofollow', target: '_blank'}, alt) : String(t.raw || alt);
    }
    default: return typeof t.raw === 'string' ? t.raw : ''; // html and anything else: its source, as text
  }
}

function text(s, me, inLink) {
  const str = String(s || '');
  return inLink ? str : refs(str, me);
}

function block(tokens, me, depth) {
  if (!Array.isArray(tokens)) return [];
  return tokens.map((t) => blockToken(t, me, depth));
}

function blockToken(t, me, depth) {
  if (!t || typeof t !== 'object') return null;
  if (depth > MAX_DEPTH) return typeof t.raw === 'string' ? h('p', {}, t.raw) : null;
  switch (t.type) {
    case 'space': case 'def': return null;
    case 'paragraph': return h('p', {}, inline(t.tokens, me, depth + 1));
    // A heading in chat is a bold line, not a page title.
    case 'heading': return h('p', {class: 'md-h'}, h('strong', {}, inline(t.tokens, me, depth + 1)));
    case 'code': return h('pre', {class: 'md-code', tabindex: '0'}, h('code', {}, String(t.text || '')));
    case 'blockquote': return h('blockquote', {}, block(t.tokens, me, depth + 1));
    case 'list': {
      const start = Number(t.start);
      return h(t.ordered ? 'ol' : 'ul', {start: t.ordered && Number.isInteger(start) && start !== 1 ? String(start) : null},
        (Array.isArray(t.items) ? t.items : []).map((it) => h('li', {},
          it && it.task ? (it.checked ? '☑ ' : '☐ ') : null,
          it ? block(it.tokens, me, depth + 1) : null)));
    }
    case 'hr': return h('hr', {});
    case 'text': return Array.isArray(t.tokens) ? inline(t.tokens, me, depth + 1) : text(t.text, me, false);
    default: return typeof t.raw === 'string' ? h('p', {}, t.raw) : null; // html, tables and the rest: source text
  }
}

// plain is a body shown as it was written, with mentions and refs.
function plain(body, me) {
  return h('p', {class: 'md-plain'}, refs(body, me));
}

// renderMarkdown turns body into DOM nodes; me is the reader (their
// mentions stand out).
export function renderMarkdown(body, me) {
  const src = String(body || '');
  if (!src.trim()) return [];
  if (src.length > MD_MAX || DEEP.test(src)) return [plain(src, me)];
  let tokens;
  try {
    tokens = Lexer.lex(src, {gfm: true, breaks: true});
  } catch {
    return [plain(src, me)];
  }
  try {
    return block(tokens, me, 0);
  } catch {
    return [plain(src, me)];
  }
}
