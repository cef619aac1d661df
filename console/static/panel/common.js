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

// HIDDEN matches the characters that change how text looks without being
// seen: C0 and C1 controls (but tab and newline), bidirectional embeddings,
// overrides, isolates and marks, zero-width characters, the word joiner,
// the byte order mark, the line and paragraph separators, the soft
// hyphen, blank fillers, variation selectors and the tag characters (which
// can carry text no one sees). A command holding one can read differently
// from what runs.
const HIDDEN = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2069\u3164\uFE00-\uFE0F\uFEFF\uFFA0\u{E0000}-\u{E007F}]/gu;

// visible returns s as a list of text and marker elements, each hidden
// character replaced by a marker that reads ⟨U+XXXX⟩, so what a person
// reads is every character there is.
export function visible(s) {
  s = String(s === undefined || s === null ? '' : s);
  const out = [];
  let last = 0;
  for (const m of s.matchAll(HIDDEN)) {
    if (m.index > last) out.push(s.slice(last, m.index));
    const code = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    out.push(h('span', { class: 'hidden-char', title: 'a character that does not show' }, `⟨U+${code}⟩`));
    last = m.index + m[0].length;
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

// utf8Len is the length of s in bytes as UTF-8.
export function utf8Len(s) {
  return new TextEncoder().encode(String(s || '')).length;
}

// commandBox shows a whole command as it will run: every character, the
// hidden ones made visible, spaces and line breaks kept, in a box that
// scrolls when the command is long. kind, when given, is the approval's
// kind; the length is in bytes.
export function commandBox(command, kind, id) {
  const c = String(command || '');
  return h('div', { class: 'command-box' },
    h('pre', { class: 'command', id, tabindex: '0', 'aria-label': 'The whole command' }, visible(c)),
    h('small', { class: 'muted command-facts' }, `${kind ? `${kind}, ` : ''}${utf8Len(c)} bytes`));
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
