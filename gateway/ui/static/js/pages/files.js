// Files: browse the virtual filesystem (the member's home, every home it
// may see from /, and the files shared with it), upload by button or by
// dropping files on the listing, download, make folders, move/rename and
// delete. Names are hostile: they are only ever text, and a download link
// encodes each path segment on its own (files-api.js).
import {h, replace} from '../h.js';
import {api, errorText} from '../api.js';
import {status, field, confirmDialog, table, ago, bytes} from '../ui.js';
import {readHref, joinPath, parentOf, upload, readText} from './files-api.js';

const MAX_NAME = 255;
const MAX_PREVIEW_TEXT = 256 << 10; // what of a text file a preview reads

// previewKind is how a file is previewed: 'image', 'pdf', 'audio',
// 'video', 'text' or '' (none). Images, PDFs and media load from /fs/read
// in the browser (served inline only for types that cannot run script:
// gateway/fs.go); text is read as bytes and shown as text, whatever it
// holds (an HTML file shows its source).
const TEXT_EXT = /\.(txt|md|markdown|log|csv|tsv|json|jsonl|ya?ml|toml|ini|cfg|conf|xml|html?|css|js|mjs|ts|tsx|jsx|go|py|rb|rs|java|c|h|cc|cpp|hpp|sh|bash|zsh|sql|proto|diff|patch|env|gitignore|dockerfile|makefile)$/i;
export function previewKind(entry) {
  const mt = String(entry.mimeType || '').split(';')[0].trim().toLowerCase();
  if (/^image\/(png|jpeg|gif|webp|avif|bmp)$/.test(mt)) return 'image';
  if (mt === 'application/pdf') return 'pdf';
  if (/^audio\/(mpeg|ogg|wav)$/.test(mt)) return 'audio';
  if (/^video\/(mp4|webm)$/.test(mt)) return 'video';
  if (mt.startsWith('text/') || /^application\/([a-z0-9.+-]*\+)?(json|xml|yaml|x-yaml|javascript|x-sh|toml)$/.test(mt)) return 'text';
  if ((mt === '' || mt === 'application/octet-stream') && TEXT_EXT.test(String(entry.name || ''))) return 'text';
  return '';
}

// previewDialog shows a file in a modal dialog: the image, the PDF in the
// browser's viewer, the media with controls, or the text; a Download
// link and Close. closed runs when it is gone.
export function previewDialog(entry, closed = () => {}) {
  const kind = previewKind(entry);
  const href = readHref(entry.path);
  const name = String(entry.name || 'file');
  const body = h('div', {class: ['preview-body', 'pv-' + (kind || 'none')]});
  const tid = 'preview-title';
  const dlg = h('dialog', {class: 'preview', 'aria-labelledby': tid, 'data-kind': kind || 'none'});
  let open = true;
  const close = () => { if (!open) return; open = false; dlg.close(); dlg.remove(); closed(); };
  dlg.addEventListener('cancel', (e) => { e.preventDefault(); close(); });
  dlg.addEventListener('click', (e) => { if (e.target === dlg) close(); }); // the backdrop
  if (kind === 'image') body.append(h('img', {src: href, alt: name}));
  else if (kind === 'pdf') body.append(h('iframe', {src: href, title: 'PDF: ' + name, class: 'pdf-frame'}));
  else if (kind === 'audio') body.append(h('audio', {src: href, controls: true, preload: 'metadata', 'aria-label': name}));
  else if (kind === 'video') body.append(h('video', {src: href, controls: true, preload: 'metadata', 'aria-label': name}));
  else if (kind === 'text') {
    body.append(h('p', {class: 'msg', role: 'status'}, 'Loading…'));
    readText(entry.path, MAX_PREVIEW_TEXT).then((r) => {
      if (!open) return;
      if (r.binary) { replace(body, h('p', {class: 'hint'}, 'This file holds binary data: no text preview. Download it to open it.')); return; }
      replace(body, h('pre', {class: 'preview-text', tabindex: '0', 'aria-label': 'Contents of ' + name}, r.text),
        r.cut ? h('p', {class: 'hint'}, `Showing the first ${bytes(MAX_PREVIEW_TEXT)}; download the file for the rest.`) : null);
    }, (err) => { if (open) replace(body, h('p', {class: 'msg error', role: 'alert'}, errorText(err))); });
  } else body.append(h('p', {class: 'hint'}, 'No preview for this type (' + (String(entry.mimeType || '') || 'unknown') + '). Download it to open it.'));
  dlg.append(
    h('div', {class: 'preview-head'},
      h('h2', {id: tid, class: 'preview-name'}, name),
      h('button', {type: 'button', class: 'quiet preview-close', onclick: close, 'aria-label': 'Close the preview'}, 'Close')),
    h('p', {class: 'hint preview-meta'}, `${bytes(entry.size)} · ${String(entry.mimeType || 'unknown type')}`, entry.owner ? ' · ' + String(entry.owner) : ''),
    body,
    h('div', {class: 'actions'}, downloadLink(entry, 'Download'), kind ? h('a', {href, target: '_blank', rel: 'noopener', class: 'open-tab'}, 'Open in a new tab') : null));
  document.body.append(dlg);
  dlg.showModal();
  dlg.querySelector('.preview-close').focus();
  return close;
}

// pageHref is the Files page showing path (or the shared list).
function pageHref(path) { return '/ui/files?path=' + encodeURIComponent(path); }

// cleanPath accepts an absolute path of non-empty segments, else ''.
function cleanPath(p) {
  if (typeof p !== 'string' || !p.startsWith('/') || p.length > 4096) return '';
  if (p === '/') return '/';
  const segs = p.split('/').slice(1);
  if (segs[segs.length - 1] === '') segs.pop();
  if (!segs.length || segs.some((s) => s === '' || s === '.' || s === '..')) return '';
  return '/' + segs.join('/');
}

// crumbs is the path as links, one per directory on the way.
function crumbs(path) {
  const segs = path === '/' ? [] : path.split('/').slice(1);
  const items = [h('li', {}, h('a', {href: pageHref('/'), 'data-nav': '', 'aria-current': segs.length ? null : 'page'}, 'All homes'))];
  let at = '';
  segs.forEach((s, i) => {
    at += '/' + s;
    items.push(h('li', {}, h('a', {href: pageHref(at), 'data-nav': '', 'aria-current': i === segs.length - 1 ? 'page' : null}, s)));
  });
  return h('nav', {class: 'crumbs', 'aria-label': 'Folder path'}, h('ol', {}, items));
}

// downloadLink is a link to a file's bytes that saves it under its name.
export function downloadLink(entry, text = 'Download') {
  return h('a', {class: 'download', href: readHref(entry.path), download: String(entry.name || 'file'), 'aria-label': text === 'Download' ? 'Download ' + entry.name : null}, text);
}

// moveDialog asks for a file's new path; resolves the new path or ''.
function moveDialog(entry) {
  return new Promise((resolve) => {
    const input = h('input', {type: 'text', value: entry.path, required: true, maxlength: '4096', autocomplete: 'off', spellcheck: 'false'});
    const dlg = h('dialog', {class: 'confirm', 'aria-label': 'Move or rename ' + entry.name});
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    dlg.addEventListener('cancel', (e) => { e.preventDefault(); done(''); });
    dlg.append(h('form', {class: 'move', onsubmit: (e) => { e.preventDefault(); done(input.value.trim()); }},
      h('p', {}, 'Move or rename ', h('strong', {}, entry.name)),
      field('New path', input, 'A file moves within your own home (the whole path, folders are created).'),
      h('div', {class: 'actions'},
        h('button', {type: 'button', class: 'quiet', onclick: () => done('')}, 'Cancel'),
        h('button', {type: 'submit'}, 'Move'))));
    document.body.append(dlg);
    dlg.showModal();
    input.focus();
    const dot = entry.name.lastIndexOf('.');
    const start = entry.path.length - entry.name.length;
    input.setSelectionRange(start, dot > 0 ? start + dot : entry.path.length);
  });
}

export const filesPage = {
  title: 'Files', auth: true,
  render(main, {app, url}) {
    const me = app.session.member;
    const perms = Array.isArray(app.session.permissions) ? app.session.permissions : [];
    const manager = perms.includes('members.manage');
    const shared = url.searchParams.get('view') === 'shared';
    const path = shared ? '' : (cleanPath(url.searchParams.get('path') || '/' + me) || '/' + me);
    const writable = !shared && path !== '/' && (manager || path === '/' + me || path.startsWith('/' + me + '/'));
    let alive = true;
    let entries = [];
    let next = '';

    const st = status();
    const listing = h('div', {class: 'listing', 'aria-live': 'polite', 'aria-busy': 'true'});
    const more = h('button', {type: 'button', class: 'quiet', hidden: true, onclick: () => load(true)}, 'Show more');

    const tabs = h('nav', {class: 'tabs', 'aria-label': 'Files views'}, h('ul', {},
      h('li', {}, h('a', {href: pageHref('/' + me), 'data-nav': '', 'aria-current': !shared && (path === '/' + me || path.startsWith('/' + me + '/')) ? 'page' : null}, 'My files')),
      h('li', {}, h('a', {href: pageHref('/'), 'data-nav': '', 'aria-current': !shared && path === '/' ? 'page' : null}, 'All homes')),
      h('li', {}, h('a', {href: '/ui/files?view=shared', 'data-nav': '', 'aria-current': shared ? 'page' : null}, 'Shared with me'))));

    // A file's name opens its preview; a modified click (new tab) follows
    // the link to the bytes, as any link.
    const fileLink = (e, text) => h('a', {class: 'fname file', href: readHref(e.path), onclick: (ev) => {
      if (ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
      ev.preventDefault();
      const back = ev.currentTarget;
      previewDialog(e, () => { if (back.isConnected) back.focus(); });
    }}, text);
    const nameCell = (e) => {
      if (e.kind === 'dir') return h('a', {class: 'fname dir', href: pageHref(e.path), 'data-nav': ''}, e.name);
      return fileLink(e, e.name);
    };
    const actions = (e) => {
      const mine = manager || e.path.startsWith('/' + me + '/');
      const home = e.path.split('/').length === 2;
      return h('div', {class: 'row-actions'},
        e.kind === 'file' ? downloadLink(e) : null,
        e.kind === 'file' && mine ? h('button', {type: 'button', class: 'quiet', 'aria-label': 'Move or rename ' + e.name, onclick: () => move(e)}, 'Move') : null,
        mine && !home ? h('button', {type: 'button', class: 'quiet danger-text', 'aria-label': 'Delete ' + e.name, onclick: () => remove(e)}, 'Delete') : null);
    };
    const cols = shared
      ? [{label: 'Path', cell: (e) => fileLink(e, e.path)}, {label: 'Size', cell: (e) => bytes(e.size)},
        {label: 'Type', cell: (e) => h('code', {}, e.mimeType || '')}, {label: 'Owner', cell: (e) => e.owner || ''},
        {label: 'Modified', cell: (e) => ago(e.updatedAt)}, {label: 'Actions', cell: actions}]
      : [{label: 'Name', cell: nameCell}, {label: 'Size', cell: (e) => (e.kind === 'dir' ? '—' : bytes(e.size))},
        {label: 'Type', cell: (e) => (e.kind === 'dir' ? 'folder' : h('code', {}, e.mimeType || ''))}, {label: 'Owner', cell: (e) => e.owner || ''},
        {label: 'Modified', cell: (e) => ago(e.updatedAt)}, {label: 'Actions', cell: actions}];

    const draw = () => {
      listing.setAttribute('aria-busy', 'false');
      replace(listing, table(cols, entries, {
        caption: shared ? 'Files shared with you' : (path === '/' ? 'Homes you can see' : 'Contents of ' + path),
        empty: shared ? 'Nothing is shared with you yet.' : 'This folder is empty.'}));
      more.hidden = !next;
    };

    async function load(append) {
      more.disabled = true;
      try {
        const q = {after: append ? next : undefined};
        const res = shared ? await api('GET', '/fs/shared', {query: q}) : await api('GET', '/fs/ls', {query: {path, ...q}});
        if (!alive) return;
        const got = Array.isArray(res && res.entries) ? res.entries.filter((e) => e && typeof e.path === 'string' && typeof e.name === 'string') : [];
        entries = append ? entries.concat(got) : got;
        next = res && typeof res.next === 'string' ? res.next : '';
        draw();
      } catch (err) {
        if (!alive) return;
        listing.setAttribute('aria-busy', 'false');
        replace(listing, h('p', {class: 'msg error', role: 'alert'}, errorText(err)));
      } finally {
        more.disabled = false;
      }
    }

    // After a row goes away its button has no place to keep focus: the
    // outcome line takes it.
    const focusStatus = () => { st.node.setAttribute('tabindex', '-1'); st.node.focus(); };

    // Uploads run one after another, each with its row: a progress bar,
    // then its outcome. A failure is shown on its row and the rest go on.
    const uploads = h('ul', {class: 'uploads', 'aria-label': 'Uploads', hidden: true});
    async function uploadAll(files) {
      const list = [...files];
      if (!list.length || !writable) return;
      uploads.hidden = false;
      const rows = list.map((f) => {
        const bar = h('progress', {max: String(Math.max(1, f.size)), value: '0', 'aria-label': 'Uploading ' + f.name});
        const line = h('span', {class: 'up-state'}, 'Waiting…');
        const li = h('li', {class: 'upload', 'data-state': 'waiting'}, h('span', {class: 'up-name'}, f.name), bar, line);
        uploads.prepend(li);
        return {f, li, bar, line};
      });
      while (uploads.children.length > 50) uploads.lastChild.remove();
      let ok = 0;
      let failed = 0;
      for (const r of rows) {
        const set = (state, text) => { r.li.dataset.state = state; replace(r.line, text); };
        if (!r.f.name || r.f.name.length > MAX_NAME) { set('error', 'A file name must be 1 to 255 characters.'); failed += 1; continue; }
        set('uploading', 'Uploading…');
        st.busy(`Uploading ${r.f.name}…`);
        try {
          const res = await upload(joinPath(path, r.f.name), r.f, 'suffix', (sent, total) => { r.bar.max = Math.max(1, total); r.bar.value = sent; });
          r.bar.value = r.bar.max;
          set('done', res.renamed ? `Saved as ${res.entry.name} (the name was taken)` : 'Uploaded');
          ok += 1;
        } catch (err) {
          set('error', errorText(err));
          failed += 1;
        }
      }
      if (!alive) return;
      if (failed) st.error(`${failed} of ${rows.length} upload${rows.length > 1 ? 's' : ''} failed; see the list below.`);
      else st.ok(`Uploaded ${ok} file${ok > 1 ? 's' : ''}.`);
      await load(false);
    }

    async function move(e) {
      const to = cleanPath(await moveDialog(e));
      if (!to || to === e.path) return;
      st.busy('Moving…');
      try {
        const res = await api('POST', '/fs/mv', {body: {from: e.path, to}});
        st.ok(`Moved ${e.name} to ${res && res.path ? res.path : to}`);
        await load(false);
        focusStatus();
      } catch (err) { st.error(err); }
    }

    async function remove(e) {
      const q = e.kind === 'dir' ? `Delete the folder ${e.name} and everything in it?` : `Delete ${e.name}?`;
      if (!(await confirmDialog(q, {yes: 'Delete', danger: true}))) return;
      st.busy('Deleting…');
      try {
        await api('DELETE', '/fs/rm', {query: {path: e.path, recursive: e.kind === 'dir' ? 'true' : undefined}});
        st.ok('Deleted ' + e.name);
        await load(false);
        focusStatus();
      } catch (err) { st.error(err); }
    }

    const fileInput = h('input', {type: 'file', multiple: true, id: 'upload-input', onchange: () => { const fs = [...fileInput.files]; fileInput.value = ''; uploadAll(fs); }});
    const folderName = h('input', {type: 'text', id: 'mkdir-name', maxlength: String(MAX_NAME), autocomplete: 'off', required: true});
    const mkdirForm = h('form', {class: 'inline-form', 'aria-label': 'New folder', onsubmit: async (e) => {
      e.preventDefault();
      const name = folderName.value.trim();
      if (!name || name.includes('/') || name === '.' || name === '..') { st.error('A folder name is one path segment: no "/", not "." or "..".'); folderName.focus(); return; }
      st.busy('Creating folder…');
      try {
        await api('POST', '/fs/mkdir', {body: {path: joinPath(path, name)}});
        folderName.value = '';
        st.ok('Created folder ' + name);
        await load(false);
      } catch (err) { st.error(err); }
    }}, field('New folder', folderName), h('button', {type: 'submit'}, 'Create folder'));

    const dropHint = h('p', {class: 'hint drop-hint'}, 'Or drop files anywhere on the listing to upload them here.');
    const zone = h('section', {class: ['dropzone', writable ? 'can-drop' : null], 'aria-label': shared ? 'Shared files' : 'Folder contents'}, listing, more);
    if (writable) {
      let depth = 0;
      zone.addEventListener('dragenter', (e) => { if (hasFiles(e)) { e.preventDefault(); depth += 1; zone.classList.add('over'); } });
      zone.addEventListener('dragover', (e) => { if (hasFiles(e)) { e.preventDefault(); e.dataTransfer.dropEffect = 'copy'; } });
      zone.addEventListener('dragleave', () => { depth = Math.max(0, depth - 1); if (!depth) zone.classList.remove('over'); });
      zone.addEventListener('drop', (e) => {
        e.preventDefault();
        depth = 0;
        zone.classList.remove('over');
        uploadAll(e.dataTransfer ? e.dataTransfer.files : []);
      });
    }

    const up = path === '/' || shared ? null : h('a', {href: pageHref(parentOf(path)), 'data-nav': '', class: 'up'}, '↑ Up one folder');
    main.append(h('section', {class: 'files'},
      h('h1', {}, 'Files'),
      tabs,
      shared ? h('p', {class: 'hint'}, 'Files others attached to messages or objectives you received. They are read-only for you.') : crumbs(path),
      writable ? h('div', {class: 'file-tools'}, field('Upload files', fileInput, 'Files keep their names; a name already taken gets a suffix (a-1.txt).'), mkdirForm, dropHint) : null,
      !writable && !shared && path !== '/' ? h('p', {class: 'hint'}, 'You can read what is shared with you here, not change it.') : null,
      st.node,
      uploads,
      up,
      zone));
    // A file dropped anywhere else on the page would make the browser
    // leave the app to show it: such a drop does nothing.
    const guard = (e) => {
      if (!hasFiles(e) || (writable && zone.contains(e.target))) return;
      e.preventDefault();
      if (e.type === 'dragover') e.dataTransfer.dropEffect = 'none';
    };
    document.addEventListener('dragover', guard);
    document.addEventListener('drop', guard);
    load(false);
    return () => {
      alive = false;
      document.removeEventListener('dragover', guard);
      document.removeEventListener('drop', guard);
    };
  },
};

function hasFiles(e) {
  return !!(e.dataTransfer && [...e.dataTransfer.types].includes('Files'));
}
