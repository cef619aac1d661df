// app.js: the console's router and its pages but the session panel
// (panel.js) and the terminal (terminal.js). A hash route names the page:
// #/signin, #/sessions, #/sessions/{id}, #/create, #/admin.
import { api, token, whoami, validToken, ApiError } from './api.js';
import { h, mount, field } from './dom.js';
import { renderPanel } from './panel.js';
import { renderSessions } from './sessions.js';
import { renderCreate } from './create.js';
import { renderAdmin } from './admin.js';

// me is who the signed-in token is (GET /v1/whoami), null when signed out.
export const state = { me: null };

const main = () => document.getElementById('main');
let cleanup = null; // the current page's stop function (timers, streams)
let flashMsg = '';

// flash shows a message in the status line (read out by screen readers).
export function flash(msg, kind = 'info') {
  const el = document.getElementById('flash');
  if (!el) return;
  mount(el, msg ? h('p', { class: `flash ${kind}` }, msg) : null);
}

export function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// A 401 from any call: the token is gone or revoked.
window.addEventListener('paddock:unauthorized', (e) => {
  signOut(`Signed out: ${e.detail && e.detail.message ? e.detail.message : 'the token was refused'}.`);
});

export function signOut(msg) {
  token.clear();
  state.me = null;
  flashMsg = msg || 'Signed out.';
  go('#/signin');
}

// home is where a token lands after sign-in: a session token on its own
// session's panel, any other on the sessions list.
function home() {
  if (state.me && state.me.kind === 'session' && state.me.session) return `#/sessions/${encodeURIComponent(state.me.session)}`;
  return '#/sessions';
}

function nav() {
  const me = state.me;
  const links = [];
  if (me) {
    if (me.kind === 'session') {
      links.push(h('a', { href: home() }, 'My session'));
    } else {
      links.push(h('a', { href: '#/sessions' }, 'Sessions'), h('a', { href: '#/create' }, 'Create'));
      links.push(h('a', { href: '#/admin' }, 'Admin'));
    }
    const who = me.kind === 'tenant' ? `tenant ${me.tenant}` : me.kind === 'session' ? `session ${me.session}` : me.kind;
    links.push(h('span', { class: 'who', id: 'who' }, `Signed in as ${who}`));
    links.push(h('button', { type: 'button', id: 'signout', onclick: () => signOut('Signed out.') }, 'Sign out'));
  }
  mount(document.getElementById('nav'), links);
}

function renderSignIn(root) {
  // The token is a credential but not a password: a password field makes
  // browsers and password managers offer to save it (autocomplete="off"
  // does not stop them on a password field). So it is a text field they
  // leave alone, its characters masked by CSS (-webkit-text-security)
  // unless "Show the token" is ticked.
  const input = h('input', { type: 'text', name: 'token', class: 'masked', autocomplete: 'off', autocapitalize: 'off', autocorrect: 'off', 'data-1p-ignore': 'true', 'data-lpignore': 'true', required: true, spellcheck: 'false', maxlength: '4096' });
  const show = h('input', { type: 'checkbox', id: 'signin-show' });
  show.addEventListener('change', () => input.classList.toggle('masked', !show.checked));
  const msg = flashMsg;
  flashMsg = '';
  const form = h('form', { id: 'signin-form', class: 'card narrow', onsubmit: async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (!validToken(t)) { flash('That is not a token: paste the whole pdk_… value.', 'error'); return; }
    try {
      const me = await whoami(t);
      token.set(t);
      state.me = me;
      flash('');
      go(home());
    } catch (err) {
      flash(err instanceof ApiError && err.status === 401 ? 'The server refused that token.' : `Cannot sign in: ${err.message}`, 'error');
    }
  } },
  h('h1', {}, 'Sign in'),
  h('p', {}, 'Paste an admin, tenant or session token. The console shows what that token may see through the API, and keeps the token in this tab only.'),
  field('Token', input),
  h('div', { class: 'field check' }, show, h('label', { for: 'signin-show' }, 'Show the token')),
  h('button', { type: 'submit' }, 'Sign in'));
  mount(root, form);
  if (msg) flash(msg, 'error');
  input.focus();
}

// SESSION_ID is the shape of a session id: "ses-" and 16 lowercase hex
// digits for a session made by create, and for a fork child its parent's
// id (cut to 32 characters), "-f" and 12 more hex digits
// (hypervisor.ChildSpec). So: "ses-", then hex digits and dashes, 64
// characters at most; no dot, slash or percent sign can get through.
export const SESSION_ID = /^ses-[0-9a-f][0-9a-f-]{0,59}$/;
// The longest hash route looked at.
const MAX_ROUTE_CHARS = 512;

// routeParts splits a hash route into its decoded parts, or returns null
// for one that cannot be read (too long, or a malformed % escape, on
// which decodeURIComponent throws).
export function routeParts(hash) {
  if (hash.length > MAX_ROUTE_CHARS) return null;
  try {
    return hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  } catch {
    return null;
  }
}

// notFound is the page for a route that names nothing.
function notFound(root, why) {
  mount(root, h('section', { id: 'not-found', class: 'card narrow' },
    h('h1', {}, 'Not found'),
    h('p', {}, why),
    h('p', {}, h('a', { href: home() }, 'Back to the start'))));
  root.focus({ preventScroll: true });
}

async function route() {
  if (cleanup) { try { cleanup(); } catch { /* ignore */ } cleanup = null; }
  const root = main();
  const hash = location.hash || '#/';
  const parts = routeParts(hash);
  if (!state.me && token.get()) {
    try {
      state.me = await whoami(token.get());
    } catch (err) {
      token.clear();
      flashMsg = err.status === 401 ? 'Your token was refused; sign in again.' : `Cannot reach the server: ${err.message}`;
    }
  }
  nav();
  if (!state.me) {
    renderSignIn(root);
    if (!parts || parts[0] !== 'signin') history.replaceState(null, '', '#/signin');
    return;
  }
  if (!parts) { notFound(root, 'That address is not one the console knows.'); return; }
  const ctx = { api, me: state.me, flash, go };
  switch (parts[0]) {
    case 'sessions':
      if (parts.length > 2 || (parts[1] && !SESSION_ID.test(parts[1]))) {
        notFound(root, 'That is not a session id: ids are "ses-" and hex digits and dashes.');
      } else if (parts[1]) {
        cleanup = renderPanel(root, parts[1], ctx) || null;
      } else if (state.me.kind === 'session') {
        go(home());
      } else {
        cleanup = renderSessions(root, ctx) || null;
      }
      break;
    case 'create':
      cleanup = renderCreate(root, ctx) || null;
      break;
    case 'admin':
      cleanup = renderAdmin(root, ctx) || null;
      break;
    case 'signin':
    default:
      go(home());
      return;
  }
  root.focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
route();
