// The broker's REST API, same origin. Signed-in pages ride the session
// cookie (the browser sends it; the broker's Origin check passes for our
// own origin); the enrollment page passes a bearer token it holds only in
// memory. Every failure is an ApiError carrying the spec's {error,
// message}, for the page to show.

export class ApiError extends Error {
  constructor(status, code, message, retryAfter = 0) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter; // seconds, from Retry-After (429)
  }
}

let unauthenticated = () => {};

// onUnauthenticated sets what happens when a cookie request answers 401:
// the session ended (expired, logged out elsewhere, authenticator
// re-enrolled).
export function onUnauthenticated(fn) { unauthenticated = fn; }

// MAX_ERROR_TEXT bounds what of an error body is shown.
const MAX_ERROR_TEXT = 500;

async function request(method, path, {body, token, query, accept = 'application/json'} = {}) {
  let url = path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    const s = q.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  }
  const headers = {'X-SVC-Protocol': '1', Accept: accept};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = 'Bearer ' + token;
  let res;
  try {
    res = await fetch(url, {
      method, headers, credentials: 'same-origin', cache: 'no-store', redirect: 'error',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'network', 'The broker cannot be reached. Check that svc is running.');
  }
  if (res.ok) return res;
  let data = null;
  try { data = await res.json(); } catch { /* not JSON: fall back below */ }
  const code = data && typeof data.error === 'string' ? data.error.slice(0, 64) : 'http_' + res.status;
  const message = data && typeof data.message === 'string' ? data.message.slice(0, MAX_ERROR_TEXT) : res.statusText || 'request failed';
  const ra = Number.parseInt(res.headers.get('Retry-After') || '', 10);
  const err = new ApiError(res.status, code, message, Number.isFinite(ra) && ra > 0 ? ra : 0);
  if (res.status === 401 && !token && path !== '/session/totp') unauthenticated(err);
  throw err;
}

// api calls a JSON route and returns its decoded answer (null for 204).
export async function api(method, path, opts = {}) {
  const res = await request(method, path, opts);
  if (res.status === 204) return null;
  const text = await res.text();
  if (!text) return null;
  try { return JSON.parse(text); } catch { throw new ApiError(res.status, 'bad_response', 'The broker answered something that is not JSON.'); }
}

// apiBlob calls a route that answers bytes (an image).
export async function apiBlob(method, path, opts = {}) {
  const res = await request(method, path, {...opts, accept: '*/*'});
  return res.blob();
}

// waitText says when a wait of seconds ends, for people: "4 min, at
// 12:05", "less than a minute, at 12:05"; never a raw count of seconds.
export function waitText(seconds, now = Date.now()) {
  const s = Math.max(0, Math.ceil(Number(seconds) || 0));
  const at = new Date(now + s * 1000).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'});
  const span = s < 60 ? 'less than a minute' : s < 5400 ? `${Math.ceil(s / 60)} min` : `${Math.round(s / 3600)} h`;
  return `${span}, at ${at}`;
}

// errorText is what a page shows for an error.
export function errorText(err) {
  if (err instanceof ApiError) {
    if (err.code === 'rate_limited' && err.retryAfter) return `${err.message} (try again in ${waitText(err.retryAfter)})`;
    return err.status ? `${err.message} (${err.code})` : err.message;
  }
  return String(err && err.message || err);
}
