// Sign in: member name and the 6-digit TOTP code → session cookie. A 429
// (too many failed codes) is shown with its wait, and the button stays off
// until it has passed.
import {h, replace} from '../h.js';
import {api, errorText, waitText} from '../api.js';

export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const CODE_RE = /^[0-9]{6}$/;

export const signinPage = {
  title: 'Sign in', auth: false, signedOutOnly: true,
  render(main, {app, url}) {
    let timer = 0;
    const msg = h('p', {class: 'msg', role: 'alert', 'aria-live': 'assertive'});
    const name = h('input', {id: 'signin-member', name: 'member', autocomplete: 'username', required: true, maxlength: '64', spellcheck: 'false', autocapitalize: 'none'});
    const code = h('input', {id: 'signin-code', name: 'code', autocomplete: 'one-time-code', inputmode: 'numeric', required: true, maxlength: '6', pattern: '[0-9]{6}'});
    const submit = h('button', {type: 'submit'}, 'Sign in');
    const pre = url.searchParams.get('member');
    if (pre && NAME_RE.test(pre)) name.value = pre;

    const lockout = (seconds) => {
      clearInterval(timer);
      const until = Date.now() + seconds * 1000;
      submit.disabled = true;
      let shown = '';
      const tick = () => {
        const left = Math.ceil((until - Date.now()) / 1000);
        if (left <= 0) {
          clearInterval(timer);
          submit.disabled = false;
          replace(msg, 'You can try again now.');
          msg.className = 'msg';
          return;
        }
        // The time it ends, and the minutes left, as people read a wait;
        // redrawn only when the words change, so a screen reader is not
        // told every second.
        const text = `Too many failed codes. Try again in ${waitText(left, until - left * 1000)}.`;
        if (text !== shown) {
          shown = text;
          replace(msg, text);
          msg.className = 'msg error lockout';
        }
      };
      tick();
      timer = setInterval(tick, 1000);
    };

    const form = h('form', {class: 'card', novalidate: true, onsubmit: async (e) => {
      e.preventDefault();
      const member = name.value.trim();
      const c = code.value.replace(/\s+/g, '');
      if (!NAME_RE.test(member)) { replace(msg, 'Enter your member name (letters, digits, . _ -).'); msg.className = 'msg error'; name.focus(); return; }
      if (!CODE_RE.test(c)) { replace(msg, 'Enter the 6-digit code from your authenticator app.'); msg.className = 'msg error'; code.focus(); return; }
      submit.disabled = true;
      replace(msg, 'Signing in…');
      msg.className = 'msg';
      try {
        const s = await api('POST', '/session/totp', {body: {member, code: c}});
        await app.signedIn(s);
      } catch (err) {
        code.value = '';
        if (err.code === 'rate_limited' && err.retryAfter) { lockout(err.retryAfter); return; }
        submit.disabled = false;
        replace(msg, err.status === 401 ? 'That code did not work for that member. Check the name and try the current code.' : errorText(err));
        msg.className = 'msg error';
        code.focus();
      }
    }},
    h('label', {for: 'signin-member'}, 'Member name'), name,
    h('label', {for: 'signin-code'}, 'Code from your authenticator'), code,
    submit, msg);

    main.append(h('section', {class: 'page narrow'},
      h('h1', {}, 'Sign in to svc'),
      form,
      h('p', {}, 'No authenticator yet? ', h('a', {href: '/ui/welcome', 'data-nav': ''}, 'Set one up with your token'), '.')));
    (name.value ? code : name).focus();
    return () => clearInterval(timer);
  },
};
