// api.js: the console's only way to the server. Every call carries the
// signed-in token as a bearer header; no cookie is ever used, so another
// site cannot make the browser act with it (no CSRF), and the API checks,
// scopes and ledgers every call like any other client's.
//
// The token lives in sessionStorage of the console's origin: it survives a
// reload of the tab, is gone when the tab closes, and is not shared with
// other tabs. docs/console.md says why (and why a preview page cannot
// read it).

const KEY = 'paddock.console.token';

// Bounds on what the page reads from the server.
export const MAX_JSON_BYTES = 16 << 20; // one JSON answer
export const MAX_EVENT_BYTES = 1 << 20; // one server-sent event
const MAX_TOKEN_BYTES = 4096;

export const token = {
  get() { try { return sessionStorage.getItem(KEY) || ''; } catch { return ''; } },
  set(t) { sessionStorage.setItem(KEY, t); },
  clear() { try { sessionStorage.removeItem(KEY); } catch { /* storage off */ } },
};

// ApiError is what every failed call throws: the HTTP status, the API's
// stable code, its message, and the whole decoded body (an approval's id
// sits there when a command waits for one).
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.code = code || '';
    this.body = body || {};
    this.approvalId = (body && (body.approval_id || (body.approval && body.approval.id))) || '';
  }
}

// A 401 means the token is no longer good: the app listens for this and
// sends the user back to sign-in with the message.
function unauthorized(err) {
  window.dispatchEvent(new CustomEvent('paddock:unauthorized', { detail: err }));
}

function headers(extra) {
  const h = new Headers(extra || {});
  const t = token.get();
  if (t) h.set('Authorization', `Bearer ${t}`);
  return h;
}

async function fail(res) {
  let body = {};
  const text = await readText(res, 64 << 10).catch(() => '');
  try { body = JSON.parse(text); } catch { body = { error: text.trim() }; }
  const err = new ApiError(res.status, body.code, body.error || res.statusText, body);
  if (res.status === 401) unauthorized(err);
  return err;
}

// readText reads a body of at most max bytes (more is an error).
async function readText(res, max) {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > max) {
      reader.cancel();
      throw new ApiError(0, 'console_too_large', `the answer is larger than ${max} bytes`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) { all.set(c, off); off += c.length; }
  return new TextDecoder().decode(all);
}

async function request(method, path, body, opts = {}) {
  const init = { method, headers: headers(opts.headers), signal: opts.signal, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    if (body instanceof Blob || body instanceof ArrayBuffer || body instanceof Uint8Array) {
      init.body = body;
      if (!init.headers.has('Content-Type')) init.headers.set('Content-Type', 'application/octet-stream');
    } else {
      init.body = JSON.stringify(body);
      init.headers.set('Content-Type', 'application/json');
    }
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'console_network', `cannot reach the server: ${e.message}`);
  }
  if (!res.ok) throw await fail(res);
  if (opts.raw) return res;
  if (res.status === 204) return null;
  const text = await readText(res, MAX_JSON_BYTES);
  if (!text) return null;
  const ct = res.headers.get('Content-Type') || '';
  return ct.includes('json') ? JSON.parse(text) : text;
}

export const api = {
  get: (path, opts) => request('GET', path, undefined, opts),
  post: (path, body, opts) => request('POST', path, body === undefined ? {} : body, opts),
  put: (path, body, opts) => request('PUT', path, body, opts),
  del: (path, opts) => request('DELETE', path, undefined, opts),
  // upload sends raw bytes (a File or Blob) as the body.
  upload: (path, blob, opts = {}) => request(opts.method || 'PUT', path, blob, opts),
  // raw returns the fetch Response (for downloads); the caller reads it.
  raw: (path, opts = {}) => request(opts.method || 'GET', path, opts.body, { ...opts, raw: true }),
  stream,
};

// stream reads a Server-Sent Events answer with fetch, since EventSource
// cannot send the Authorization header. onEvent gets {type, id, data,
// json} per event (json: data parsed, or undefined when it is not JSON).
// It resolves with the last event id when the server ends the stream, and
// rejects with an ApiError for an error answer (or AbortError when signal
// aborts). lastEventId resumes a stream where an earlier one stopped.
async function stream(path, { method = 'GET', body, lastEventId, onEvent, signal } = {}) {
  const h = headers({ Accept: 'text/event-stream' });
  if (lastEventId) h.set('Last-Event-ID', String(lastEventId));
  const init = { method, headers: h, signal, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    h.set('Content-Type', 'application/json');
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'console_network', `cannot reach the server: ${e.message}`);
  }
  if (!res.ok) throw await fail(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { type: 'message', id: '', data: [] };
  let last = lastEventId || '';
  let size = 0;
  const dispatch = () => {
    if (ev.data.length) {
      const data = ev.data.join('\n');
      let json;
      try { json = JSON.parse(data); } catch { json = undefined; }
      if (ev.id) last = ev.id;
      if (onEvent) onEvent({ type: ev.type, id: ev.id || last, data, json });
    }
    ev = { type: 'message', id: '', data: [] };
    size = 0;
  };
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(buf[nl] === '\r' && buf[nl + 1] === '\n' ? nl + 2 : nl + 1);
      size += line.length;
      if (size > MAX_EVENT_BYTES) {
        reader.cancel();
        throw new ApiError(0, 'console_event_too_large', `an event is larger than ${MAX_EVENT_BYTES} bytes`);
      }
      if (line === '') { dispatch(); continue; }
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const name = c < 0 ? line : line.slice(0, c);
      let val = c < 0 ? '' : line.slice(c + 1);
      if (val.startsWith(' ')) val = val.slice(1);
      if (name === 'event') ev.type = val;
      else if (name === 'data') ev.data.push(val);
      else if (name === 'id') ev.id = val;
    }
    if (buf.length > MAX_EVENT_BYTES) {
      reader.cancel();
      throw new ApiError(0, 'console_event_too_large', `an event is larger than ${MAX_EVENT_BYTES} bytes`);
    }
  }
  return last;
}

// whoami asks who the signed-in token is.
export function whoami(t, signal) {
  const h = new Headers({ Authorization: `Bearer ${t}` });
  return fetch('/v1/whoami', { headers: h, cache: 'no-store', credentials: 'omit', signal }).then(async (res) => {
    if (!res.ok) {
      const text = await readText(res, 64 << 10).catch(() => '');
      let body = {};
      try { body = JSON.parse(text); } catch { body = { error: text }; }
      throw new ApiError(res.status, body.code, body.error || res.statusText, body);
    }
    return JSON.parse(await readText(res, 64 << 10));
  });
}

export function validToken(t) {
  return typeof t === 'string' && t.length > 0 && t.length <= MAX_TOKEN_BYTES && /^[\x21-\x7e]+$/.test(t);
}
