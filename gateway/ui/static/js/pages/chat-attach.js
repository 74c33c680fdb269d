// Attachments in chat: the composer's picker (upload a file into the
// sender's home, or name a file already in the shared filesystem) and the
// download links a message shows. A path is always shown as text; a link
// points at /fs/read with each segment escaped, and the browser downloads
// it under its base name.
import {h, replace} from '../h.js';
import {api} from '../api.js';
import {readHref, upload} from './files-api.js';

const MAX_ATTACHMENTS = 64;
const MAX_PATH = 1024;

// baseName is the last segment of a path.
export function baseName(path) {
  const parts = path.split('/').filter((s) => s !== '');
  return parts.length ? parts[parts.length - 1] : path;
}

const IMAGE_EXT = /\.(png|jpe?g|gif|webp|avif)$/i;
const TEXT_EXT = /\.(txt|md|log|json|csv|tsv|ya?ml|toml|ini|conf|go|js|ts|py|rb|rs|java|c|h|cc|cpp|sh|sql|diff|patch|xml|html?|css)$/i;
const PREVIEW_BYTES = 4096; // what of a text file its preview shows

// attachmentList renders a message's attachments as chips: each a
// download link under the file's base name; an image shows a thumbnail
// (loaded from /fs/read, which serves stored bytes under their own type,
// nosniff and sandboxed), a text file a preview of its first bytes,
// fetched when opened and shown as text.
export function attachmentList(paths) {
  const ok = (Array.isArray(paths) ? paths : []).filter((p) => typeof p === 'string' && p.startsWith('/') && p.length <= MAX_PATH).slice(0, MAX_ATTACHMENTS);
  if (!ok.length) return null;
  return h('ul', {class: 'attachments', 'aria-label': 'Attachments'}, ok.map((p) => {
    const name = baseName(p);
    const href = readHref(p);
    const link = h('a', {href, download: name, title: p, class: 'attachment'}, name);
    if (IMAGE_EXT.test(name)) {
      return h('li', {class: 'chip image'},
        h('a', {href, target: '_blank', rel: 'noopener', class: 'thumb', 'aria-label': 'Open ' + name},
          h('img', {src: href, alt: '', loading: 'lazy', decoding: 'async'})),
        link);
    }
    if (TEXT_EXT.test(name)) {
      const pre = h('pre', {class: 'preview', tabindex: '0'});
      const d = h('details', {class: 'chip-preview', ontoggle: () => { if (d.open && !pre.dataset.loaded) preview(href, pre); }},
        h('summary', {'aria-label': 'Preview ' + name}, 'Preview'), pre);
      return h('li', {class: 'chip text'}, link, d);
    }
    return h('li', {class: 'chip'}, link);
  }));
}

// preview fills pre with the first bytes of the file at href, as text.
async function preview(href, pre) {
  pre.dataset.loaded = '1';
  replace(pre, 'Loading…');
  try {
    const res = await fetch(href, {credentials: 'same-origin', headers: {Range: 'bytes=0-' + (PREVIEW_BYTES - 1)}});
    if (!res.ok) throw new Error(res.status + ' ' + res.statusText);
    const reader = res.body.getReader();
    const parts = [];
    let n = 0;
    while (n < PREVIEW_BYTES) {
      const {done, value} = await reader.read();
      if (done) break;
      parts.push(value);
      n += value.length;
    }
    reader.cancel().catch(() => {});
    const bytes = new Uint8Array(Math.min(n, PREVIEW_BYTES));
    let at = 0;
    for (const p of parts) { const take = p.subarray(0, bytes.length - at); bytes.set(take, at); at += take.length; if (at >= bytes.length) break; }
    const text = new TextDecoder('utf-8', {fatal: false}).decode(bytes);
    replace(pre, text, n >= PREVIEW_BYTES ? '\n…' : '');
  } catch (err) {
    replace(pre, 'No preview: ' + (err && err.message ? err.message : 'the file could not be read'));
  }
}

// safeFileName makes a browser-given file name one path segment.
export function safeFileName(name) {
  let n = String(name || '').replace(/[\u0000-\u001f\u007f/\\]/g, '_').slice(0, 200);
  if (n === '' || n === '.' || n === '..') n = 'file';
  return n;
}

// attachPicker is the composer's attachment control: {node, paths(),
// clear()}. onError(err) shows a failure; onBusy(bool) while uploading.
export function attachPicker(me, {onError, onBusy = () => {}}) {
  const pending = [];
  const list = h('ul', {class: 'pending', 'aria-label': 'Attached to the next message'});
  const draw = () => {
    replace(list, pending.map((p, i) => h('li', {},
      h('span', {class: 'path'}, p),
      h('button', {type: 'button', class: 'quiet', 'aria-label': 'Remove ' + p, onclick: () => { pending.splice(i, 1); draw(); fileInput.focus(); }}, 'Remove'))));
    summary.textContent = pending.length ? `Attach (${pending.length})` : 'Attach';
  };
  const add = (p) => {
    if (pending.includes(p)) return;
    if (pending.length >= MAX_ATTACHMENTS) throw new Error(`At most ${MAX_ATTACHMENTS} attachments per message.`);
    pending.push(p);
    draw();
  };
  const fileInput = h('input', {type: 'file', id: 'attach-file', multiple: true, onchange: async () => {
    const files = [...fileInput.files];
    fileInput.value = '';
    onBusy(true);
    try {
      for (const f of files) add((await upload(`/${me}/uploads/${safeFileName(f.name)}`, f)).entry.path);
    } catch (err) { onError(err); } finally { onBusy(false); }
  }});
  const pathInput = h('input', {type: 'text', id: 'attach-path', autocomplete: 'off', spellcheck: 'false', placeholder: `/${me}/notes.txt`, maxlength: String(MAX_PATH)});
  const addPath = async () => {
    const p = pathInput.value.trim();
    if (!p) { pathInput.focus(); return; }
    try {
      if (!p.startsWith('/')) throw new Error('A path starts with / (your home is /' + me + '/).');
      const res = await api('GET', '/fs/stat', {query: {path: p}});
      const e = res && (res.entry || res);
      if (e && e.kind === 'dir') throw new Error('That is a folder: attach files one by one.');
      add(e && typeof e.path === 'string' ? e.path : p);
      pathInput.value = '';
    } catch (err) { onError(err); }
  };
  pathInput.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); addPath(); } });
  const summary = h('summary', {}, 'Attach');
  const node = h('details', {class: 'attach'}, summary,
    h('div', {class: 'attach-body'},
      h('div', {class: 'field'}, h('label', {for: 'attach-file'}, 'Upload a file'), fileInput),
      h('div', {class: 'field'}, h('label', {for: 'attach-path'}, 'Or a file already stored (path)'),
        h('div', {class: 'row'}, pathInput, h('button', {type: 'button', class: 'quiet', onclick: addPath}, 'Add')))),
    list);
  return {node, paths: () => pending.slice(), clear: () => { pending.length = 0; draw(); }};
}
