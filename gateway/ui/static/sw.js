// The web app's service worker: it only shows browser pushes (DMs and
// objective events the broker sends while the member has no open tab) as
// notifications, and opens the right page when one is clicked. It caches
// nothing and intercepts no requests.
//
// The payload is the broker's JSON {id, from, title, body, thread}
// (docs/DECISIONS.md, Browser push). Everything in it is text: the
// notification shows it as plain text, and the page it opens is built from
// its fields only after they are checked.
'use strict';

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

function str(v, max) { return typeof v === 'string' ? v.slice(0, max) : ''; }

// target is what a push shows and opens.
function target(p) {
  const from = str(p.from, 200);
  const thread = str(p.thread, 200);
  const title = str(p.title, 200);
  if (thread.startsWith('obj:') && ID_RE.test(thread.slice(4))) {
    return {heading: 'Objective' + (title ? ': ' + title : '') + (from ? ' (' + from + ')' : ''), url: '/ui/objectives?id=' + encodeURIComponent(thread.slice(4)), tag: thread};
  }
  if (NAME_RE.test(from)) {
    return {heading: from + (title ? ': ' + title : ''), url: '/ui/chat?c=' + encodeURIComponent('dm:' + from), tag: 'dm:' + from};
  }
  return {heading: title || 'svc', url: '/ui/chat', tag: 'svc'};
}

self.addEventListener('install', () => { self.skipWaiting(); });
self.addEventListener('activate', (e) => { e.waitUntil(self.clients.claim()); });

self.addEventListener('push', (e) => {
  let p = null;
  try { p = e.data ? e.data.json() : null; } catch { p = null; }
  if (!p || typeof p !== 'object' || Array.isArray(p)) p = {};
  const t = target(p);
  e.waitUntil(self.registration.showNotification(t.heading, {
    body: str(p.body, 1000),
    tag: t.tag,
    renotify: true,
    data: {url: t.url, id: str(p.id, 20)},
  }));
});

self.addEventListener('notificationclick', (e) => {
  e.notification.close();
  const raw = e.notification.data && typeof e.notification.data.url === 'string' ? e.notification.data.url : '/ui/chat';
  const url = new URL(raw, self.location.origin);
  if (url.origin !== self.location.origin || !url.pathname.startsWith('/ui/')) return;
  e.waitUntil((async () => {
    const wins = await self.clients.matchAll({type: 'window', includeUncontrolled: true});
    for (const w of wins) {
      if (new URL(w.url).pathname.startsWith('/ui/')) {
        // navigate() is refused for a tab this worker does not control
        // (opened before it was installed): a new tab then.
        try {
          await w.focus();
          if ('navigate' in w && await w.navigate(url.href)) return;
        } catch { /* fall through to a new window */ }
        break;
      }
    }
    await self.clients.openWindow(url.href);
  })());
});
