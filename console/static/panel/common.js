// common.js: small helpers the session panel's parts share.
import { h } from '../dom.js';

// sp is the API path of session id, plus rest.
export function sp(id, rest = '') {
  return `/v1/agents/sessions/${encodeURIComponent(id)}${rest}`;
}

// errText is what the page says about a failed call: the API's message
// and its stable code, or the browser's own error.
export function errText(err) {
  if (!err) return '';
  const code = err.code ? ` (${err.code})` : '';
  return `${err.message || String(err)}${code}`;
}

// clip shortens s to n characters, marking the cut.
export function clip(s, n) {
  s = String(s === undefined || s === null ? '' : s);
  return s.length > n ? `${s.slice(0, n)}…` : s;
}

// b64bytes decodes base64 to bytes.
export function b64bytes(b64) {
  const bin = atob(b64 || '');
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// bytesB64 encodes bytes as base64.
export function bytesB64(u8) {
  let s = '';
  for (let i = 0; i < u8.length; i += 0x8000) s += String.fromCharCode(...u8.subarray(i, i + 0x8000));
  return btoa(s);
}

// hex is the lowercase hex of bytes (a digest).
export function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
}

// section is a titled part of a tab, with a status line that screen
// readers announce (role status) and where errors go.
export function section(id, title, ...children) {
  const status = h('p', { class: 'muted status', id: `${id}-status`, role: 'status', 'aria-live': 'polite' });
  const el = h('section', { id, class: 'card panel-part', 'aria-labelledby': `${id}-title` },
    h('h2', { id: `${id}-title` }, title), ...children, status);
  return { el, status };
}

// say writes msg into a status line; kind "error" marks it as one.
export function say(statusEl, msg, kind) {
  statusEl.textContent = msg || '';
  statusEl.classList.toggle('error', kind === 'error');
  statusEl.classList.toggle('muted', kind !== 'error');
}

// busy disables a button while fn runs and gives it back after.
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } finally {
    button.disabled = false;
  }
}
