// The filesystem's byte routes, shared by the Files and Objectives pages:
// the URL of a file's bytes and an upload. JSON routes go through api().
import {ApiError} from '../api.js';

// readHref is the URL of a file's bytes: GET /fs/read/<path>, each segment
// percent-encoded on its own, so a name can never add or remove a segment.
export function readHref(path) {
  const segs = String(path).split('/').filter((s) => s !== '');
  return '/fs/read/' + segs.map(encodeURIComponent).join('/');
}

// joinPath is dir + '/' + name.
export function joinPath(dir, name) {
  return (dir === '/' ? '' : dir.replace(/\/+$/, '')) + '/' + name;
}

// parentOf is the directory holding path ('/' for a home).
export function parentOf(path) {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

// upload writes file (a File or Blob) at path: POST /fs/write with the raw
// bytes as the body and the file's type as Content-Type. collide is error,
// overwrite or suffix. onProgress(sent, total) follows the upload (an
// XMLHttpRequest: fetch reports no upload progress). It answers {entry,
// renamed} or throws an ApiError.
export function upload(path, file, collide = 'suffix', onProgress = null) {
  const url = '/fs/write?' + new URLSearchParams({path, collide}).toString();
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', url);
    xhr.withCredentials = true;
    xhr.setRequestHeader('X-SVC-Protocol', '1');
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.setRequestHeader('Content-Type', validType(file.type));
    if (onProgress) xhr.upload.addEventListener('progress', (e) => { if (e.lengthComputable) onProgress(e.loaded, e.total); });
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network', 'The broker cannot be reached. Check that svc is running.')));
    xhr.addEventListener('abort', () => reject(new ApiError(0, 'aborted', 'The upload was stopped.')));
    xhr.addEventListener('load', () => {
      let data = null;
      try { data = JSON.parse(xhr.responseText); } catch { /* not JSON: handled below */ }
      if (xhr.status < 200 || xhr.status > 299) {
        const code = data && typeof data.error === 'string' ? data.error.slice(0, 64) : 'http_' + xhr.status;
        const message = data && typeof data.message === 'string' ? data.message.slice(0, 500) : xhr.statusText || 'upload failed';
        reject(new ApiError(xhr.status, code, message));
        return;
      }
      if (!data || !data.entry || typeof data.entry.path !== 'string') { reject(new ApiError(xhr.status, 'bad_response', 'The broker answered something unexpected.')); return; }
      resolve(data);
    });
    xhr.send(file);
  });
}

// readText reads up to max bytes of a file as text: {text, cut, binary}.
// The rest of a large file is not downloaded.
export async function readText(path, max) {
  const res = await fetch(readHref(path), {credentials: 'same-origin', cache: 'no-store', redirect: 'error'});
  if (!res.ok) {
    let data = null;
    try { data = await res.json(); } catch { /* not JSON */ }
    throw new ApiError(res.status, data && typeof data.error === 'string' ? data.error.slice(0, 64) : 'http_' + res.status,
      data && typeof data.message === 'string' ? data.message.slice(0, 500) : res.statusText || 'read failed');
  }
  const reader = res.body.getReader();
  const chunks = [];
  let n = 0;
  let cut = false;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    chunks.push(value);
    n += value.length;
    if (n > max) { cut = true; reader.cancel().catch(() => {}); break; }
  }
  const all = new Uint8Array(Math.min(n, max));
  let at = 0;
  for (const c of chunks) { const part = c.subarray(0, Math.min(c.length, all.length - at)); all.set(part, at); at += part.length; if (at >= all.length) break; }
  const binary = all.subarray(0, 8192).includes(0);
  return {text: binary ? '' : new TextDecoder('utf-8').decode(all), cut, binary};
}

// validType is the Content-Type of an upload: the browser's guess when it
// looks like a MIME type, else application/octet-stream.
function validType(t) {
  return typeof t === 'string' && /^[a-z0-9!#$&^_.+-]{1,100}\/[a-z0-9!#$&^_.+-]{1,100}$/i.test(t) ? t : 'application/octet-stream';
}
