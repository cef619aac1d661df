// dom.js: build elements without ever parsing HTML. Text always goes in
// as text nodes (textContent), so data from the API cannot become markup
// or script, whatever it holds.

// URL_ATTRS are the attributes that hold a URL the browser may load or
// follow. h takes only an allowed one (safeURL) in them.
const URL_ATTRS = new Set(['href', 'src', 'action', 'formaction', 'poster', 'data', 'xlink:href', 'background', 'cite']);
const SAFE_SCHEMES = new Set(['http:', 'https:', 'blob:']);

// safeURL says whether v may go in a URL attribute: a link relative to
// the page (a path or a #fragment), or an absolute http, https or blob
// URL. It reads v with the browser's own URL parser against the page's
// address, so a scheme hidden by case, spaces, tabs or control
// characters ("JaVa\tscript:") is seen as the browser would see it.
export function safeURL(v) {
  let u;
  try {
    u = new URL(v, document.baseURI);
  } catch {
    return false;
  }
  return SAFE_SCHEMES.has(u.protocol);
}

// h(tag, attrs, ...children) makes an element. attrs: "class" (string),
// "for", event handlers as functions under on<name> (onclick, onsubmit…),
// "dataset" (an object), booleans (true sets the attribute, false leaves
// it out), anything else as a string attribute. Children: nodes, strings
// and numbers (as text), arrays (flattened); null, undefined and false
// are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2).toLowerCase(), v);
    } else if (k === 'dataset') {
      Object.assign(el.dataset, v);
    } else if (k === 'value' && 'value' in el) {
      el.value = String(v);
    } else if (v === true) {
      el.setAttribute(k, '');
    } else if (typeof v === 'function' || (typeof v === 'string' && /^javascript:/i.test(v.trim()))) {
      throw new Error(`dom: refusing attribute ${k}`);
    } else if (URL_ATTRS.has(k.toLowerCase()) && !safeURL(String(v))) {
      throw new Error(`dom: refusing ${k} ${JSON.stringify(String(v).slice(0, 80))}: only http, https, blob and relative links`);
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// clear removes every child of el.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// mount replaces el's children with children.
export function mount(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

// field is a labelled control: a label tied to the control by id, and an
// optional hint tied by aria-describedby.
let fieldSeq = 0;
export function field(label, control, hint) {
  if (!control.id) control.id = `f${++fieldSeq}`;
  const kids = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hid = `${control.id}-hint`;
    control.setAttribute('aria-describedby', hid);
    kids.push(h('small', { id: hid, class: 'hint' }, hint));
  }
  return h('div', { class: 'field' }, kids);
}

// when formats an ISO time as local date and time, or "" for none.
export function when(iso) {
  if (!iso || iso.startsWith('0001-')) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// bytes formats a byte count for people.
export function bytes(n) {
  if (n === null || n === undefined) return '';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(1) : v} ${u[i]}`;
}
