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
// overwrite or suffix. It answers {entry, renamed} or throws an ApiError.
export async function upload(path, file, collide = 'suffix') {
  const url = '/fs/write?' + new URLSearchParams({path, collide}).toString();
  let res;
  try {
    res = await fetch(url, {
      method: 'POST', body: file, credentials: 'same-origin', cache: 'no-store', redirect: 'error',
      headers: {'X-SVC-Protocol': '1', Accept: 'application/json', 'Content-Type': validType(file.type)},
    });
  } catch {
    throw new ApiError(0, 'network', 'The broker cannot be reached. Check that svc is running.');
  }
  let data = null;
  try { data = await res.json(); } catch { /* not JSON: handled below */ }
  if (!res.ok) {
    const code = data && typeof data.error === 'string' ? data.error.slice(0, 64) : 'http_' + res.status;
    const message = data && typeof data.message === 'string' ? data.message.slice(0, 500) : res.statusText || 'upload failed';
    throw new ApiError(res.status, code, message);
  }
  if (!data || !data.entry || typeof data.entry.path !== 'string') throw new ApiError(res.status, 'bad_response', 'The broker answered something unexpected.');
  return data;
}

// validType is the Content-Type of an upload: the browser's guess when it
// looks like a MIME type, else application/octet-stream.
function validType(t) {
  return typeof t === 'string' && /^[a-z0-9!#$&^_.+-]{1,100}\/[a-z0-9!#$&^_.+-]{1,100}$/i.test(t) ? t : 'application/octet-stream';
}
