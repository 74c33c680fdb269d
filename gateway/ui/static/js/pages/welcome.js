// First sign-in: a newcomer holding a bearer token (the admin token that
// `make run` printed, or a member token) enrolls an authenticator app. The
// page asks the broker whose token it is, calls enroll-totp for that
// member, shows the otpauth:// URI as a QR code (drawn by the broker:
// POST /ui/qr) and as text, then signs in with the first code — which also
// confirms the enrollment. The token lives in this page's memory only and
// is dropped once enrolled; it is never stored.
import {h, replace} from '../h.js';
import {api, apiBlob, errorText} from '../api.js';
import {CODE_RE} from './signin.js';

const TOKEN_RE = /^svc_[A-Za-z0-9_-]{16,200}$/;

export const welcomePage = {
  title: 'Set up your authenticator', auth: false, signedOutOnly: true,
  render(main, {app}) {
    let qrURL = '';
    const section = h('section', {class: 'page narrow'});
    main.append(section);

    const step1 = () => {
      const msg = h('p', {class: 'msg', role: 'alert'});
      const input = h('input', {id: 'welcome-token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', maxlength: '220'});
      const submit = h('button', {type: 'submit'}, 'Set up authenticator');
      const form = h('form', {class: 'card', novalidate: true, onsubmit: async (e) => {
        e.preventDefault();
        const t = input.value.trim();
        if (!TOKEN_RE.test(t)) { replace(msg, 'A token looks like svc_… (printed once by svc serve on its first run, or returned once when an admin creates your member).'); msg.className = 'msg error'; input.focus(); return; }
        submit.disabled = true;
        replace(msg, 'Enrolling…');
        msg.className = 'msg';
        try {
          const s = await api('GET', '/session', {token: t});
          const en = await api('POST', '/members/' + encodeURIComponent(s.member) + '/enroll-totp', {token: t});
          const blob = await apiBlob('POST', '/ui/qr', {token: t, body: {uri: en.totpUri}});
          input.value = '';
          step2(s.member, en, blob);
        } catch (err) {
          submit.disabled = false;
          replace(msg, err.status === 401 ? 'The broker does not know that token.' : errorText(err));
          msg.className = 'msg error';
        }
      }},
      h('label', {for: 'welcome-token'}, 'Your token'), input,
      h('p', {class: 'hint'}, 'Enrolling replaces any authenticator already bound to this member and ends the browser sessions it opened.'),
      submit, msg);
      replace(section,
        h('h1', {}, 'Set up your authenticator'),
        h('p', {}, 'You need an authenticator app (any TOTP app) and your svc token. The admin token is printed once by ', h('code', {}, 'svc serve'), ' (or ', h('code', {}, 'make run'), ') on its first run.'),
        form,
        h('p', {}, 'Already set up? ', h('a', {href: '/ui/signin', 'data-nav': ''}, 'Sign in'), '.'));
      input.focus();
    };

    const step2 = (member, en, blob) => {
      qrURL = URL.createObjectURL(blob);
      const secret = String(en.totpSecret || '');
      const msg = h('p', {class: 'msg', role: 'alert'});
      const code = h('input', {id: 'welcome-code', name: 'code', autocomplete: 'one-time-code', inputmode: 'numeric', required: true, maxlength: '6', pattern: '[0-9]{6}'});
      const submit = h('button', {type: 'submit'}, 'Confirm and sign in');
      const form = h('form', {class: 'card', novalidate: true, onsubmit: async (e) => {
        e.preventDefault();
        const c = code.value.replace(/\s+/g, '');
        if (!CODE_RE.test(c)) { replace(msg, 'Enter the 6-digit code your app shows for svc.'); msg.className = 'msg error'; code.focus(); return; }
        submit.disabled = true;
        try {
          const s = await api('POST', '/session/totp', {body: {member, code: c}});
          await app.signedIn(s);
        } catch (err) {
          submit.disabled = false;
          code.value = '';
          replace(msg, err.status === 401 ? 'That code did not match. Wait for the next code and try again.' : errorText(err));
          msg.className = err.code === 'rate_limited' ? 'msg error lockout' : 'msg error';
          code.focus();
        }
      }},
      h('label', {for: 'welcome-code'}, 'Code from your authenticator'), code, submit, msg);
      replace(section,
        h('h1', {}, 'Scan this code, ' + member),
        h('div', {class: 'qr'}, h('img', {src: qrURL, alt: 'QR code of your authenticator key for ' + member, width: '256', height: '256'})),
        h('p', {}, 'Or type this key into your app:'),
        h('p', {}, h('code', {class: 'secret', id: 'welcome-secret'}, secret.replace(/(.{4})/g, '$1 ').trim())),
        h('details', {}, h('summary', {}, 'Show the otpauth:// link'), h('p', {}, h('code', {class: 'uri'}, String(en.totpUri || '')))),
        form);
      code.focus();
    };

    step1();
    return () => { if (qrURL) URL.revokeObjectURL(qrURL); };
  },
};
