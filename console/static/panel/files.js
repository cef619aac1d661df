// files.js: the panel's Files part: a directory listing (GET .../files),
// a download of any file listed (GET .../files/range in 4 MiB slices, the
// guest's SHA-256 asked with the first and checked over the bytes got),
// and an upload (the resumable routes: POST .../uploads with the size and
// SHA-256, PUT .../uploads/{upload}?offset=N in 4 MiB chunks, re-asking
// where to continue after a failed chunk, then POST .../complete, which
// checks the size and checksum in the guest before the file appears).
import { h, mount, bytes, when } from '../dom.js';
import { sp, errText, section, say, busy, b64bytes, hex } from './common.js';

// Bounds: one slice and one chunk as the API takes them; the largest
// download the page holds in memory and the largest upload the API takes;
// the largest file hashed in the page before an upload (SubtleCrypto has
// no streaming digest; a larger file is checked by size only); retries of
// one chunk; rows listed.
export const SLICE_BYTES = 4 << 20;
export const MAX_DOWNLOAD_BYTES = 256 << 20;
export const MAX_UPLOAD_BYTES = 2 * 1024 ** 3; // not 2 << 30: JavaScript shifts in 32 bits
export const MAX_HASHED_UPLOAD_BYTES = 512 << 20;
const CHUNK_RETRIES = 3;
const MAX_ROWS = 2000;
const MAX_PATH_CHARS = 4096;

// parentOf is the directory above an absolute path.
function parentOf(path) {
  const i = path.replace(/\/+$/, '').lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

function join(dir, name) {
  return `${dir.replace(/\/+$/, '')}/${name}`;
}

export function filesPart(p, start) {
  const { api, id } = p;
  let dir = start || '/workspace';
  const pathInput = h('input', { id: 'files-path', type: 'text', value: dir, maxlength: String(MAX_PATH_CHARS), autocomplete: 'off', spellcheck: 'false' });
  const goForm = h('form', { id: 'files-go', class: 'row-form' },
    h('div', { class: 'field grow' }, h('label', { for: 'files-path' }, 'Directory'), pathInput),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'List'), h('button', { type: 'button', class: 'secondary', id: 'files-up' }, 'Up')));
  const tbody = h('tbody', { id: 'files-body' });
  const table = h('table', { id: 'files', class: 'grid' },
    h('caption', { class: 'sr-only' }, 'Files'),
    h('thead', {}, h('tr', {}, ['Name', 'Size', 'Mode', 'Changed', ''].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const file = h('input', { id: 'upload-file', type: 'file' });
  const dest = h('input', { id: 'upload-dest', type: 'text', maxlength: String(MAX_PATH_CHARS), autocomplete: 'off', spellcheck: 'false', placeholder: 'the listed directory + the file\'s name' });
  const progress = h('progress', { id: 'upload-progress', max: '1', value: '0', 'aria-label': 'Upload progress' });
  const upForm = h('form', { id: 'upload-form', class: 'row-form' },
    h('div', { class: 'field grow' }, h('label', { for: 'upload-file' }, 'File to upload'), file),
    h('div', { class: 'field grow' }, h('label', { for: 'upload-dest' }, 'Save as (optional)'), dest),
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'upload-run' }, 'Upload')));
  const downloads = h('p', { id: 'download' });
  const { el, status } = section('files-part', 'Files', goForm, h('div', { class: 'scroll' }, table), downloads,
    h('h3', {}, 'Upload'), upForm, progress);
  let blobURL = '';

  async function list(path) {
    if (!path.startsWith('/') || path.length > MAX_PATH_CHARS) { say(status, 'Give an absolute path.', 'error'); return; }
    try {
      const l = await api.get(sp(id, `/files?path=${encodeURIComponent(path)}`));
      if (l.kind === 'file') { await download(path, l.self ? l.self.size : 0); return; }
      dir = l.path || path;
      pathInput.value = dir;
      const entries = [...(l.entries || [])].sort((a, b) => (a.type === 'dir' ? 0 : 1) - (b.type === 'dir' ? 0 : 1) || a.name.localeCompare(b.name));
      mount(tbody, entries.slice(0, MAX_ROWS).map((f) => {
        const full = f.path || join(dir, f.name);
        const name = f.type === 'dir'
          ? h('button', { type: 'button', class: 'link', onclick: () => list(full) }, `${f.name}/`)
          : h('span', {}, f.type === 'symlink' ? `${f.name} → ${f.target || ''}` : f.name);
        const act = f.type === 'file'
          ? h('button', { type: 'button', class: 'secondary download', dataset: { path: full }, 'aria-label': `Download ${f.name}`, onclick: (e) => busy(e.currentTarget, () => download(full, f.size)) }, 'Download')
          : null;
        return h('tr', { dataset: { name: f.name, type: f.type } },
          h('td', { 'data-label': 'Name' }, name),
          h('td', { 'data-label': 'Size' }, f.type === 'file' ? bytes(f.size) : ''),
          h('td', { 'data-label': 'Mode' }, f.mode || ''),
          h('td', { 'data-label': 'Changed' }, when(f.mtime)),
          h('td', {}, act));
      }), entries.length ? null : h('tr', {}, h('td', { colspan: '5' }, 'Empty.')));
      const more = l.truncated || entries.length > MAX_ROWS;
      say(status, `${dir}: ${entries.length} entries${more ? ' (not all shown)' : ''}.`);
    } catch (err) {
      say(status, `Cannot list ${path}: ${errText(err)}`, 'error');
    }
  }

  async function download(path, size) {
    if (size > MAX_DOWNLOAD_BYTES) { say(status, `${path} is ${bytes(size)}; the page downloads at most ${bytes(MAX_DOWNLOAD_BYTES)} (use paddock session download).`, 'error'); return; }
    const parts = [];
    let off = 0;
    let sum = '';
    let total = size;
    say(status, `Downloading ${path}…`);
    try {
      for (;;) {
        const q = `?path=${encodeURIComponent(path)}&offset=${off}&length=${SLICE_BYTES}${off === 0 ? '&checksum=true' : ''}`;
        const r = await api.get(sp(id, `/files/range${q}`));
        if (off === 0) { sum = r.sha256 || ''; total = r.size; }
        if (r.size !== total) throw new Error(`${path} changed size while it was read`);
        if (total > MAX_DOWNLOAD_BYTES) throw new Error(`${path} is ${bytes(total)}; the page downloads at most ${bytes(MAX_DOWNLOAD_BYTES)}`);
        const b = b64bytes(r.data_base64);
        parts.push(b);
        off += b.length;
        if (r.eof || off >= total) break;
        if (!b.length) throw new Error('the server sent an empty slice before the end');
      }
      const blob = new Blob(parts, { type: 'application/octet-stream' });
      if (sum) {
        const got = hex(await crypto.subtle.digest('SHA-256', await blob.arrayBuffer()));
        if (got !== sum) throw new Error(`the bytes got hash to ${got}, the file in the sandbox to ${sum}; it changed while it was read`);
      }
      if (blobURL) URL.revokeObjectURL(blobURL);
      blobURL = URL.createObjectURL(blob);
      const name = path.slice(path.lastIndexOf('/') + 1) || 'download';
      const a = h('a', { id: 'download-link', href: blobURL, download: name, dataset: { path, size: String(blob.size), sha256: sum } }, `Save ${name} (${bytes(blob.size)})`);
      mount(downloads, a, sum ? h('small', { class: 'muted' }, ` sha256 ${sum} checked`) : null);
      a.click();
      say(status, `Downloaded ${path} (${bytes(blob.size)}${sum ? ', checksum checked' : ''}).`);
    } catch (err) {
      say(status, `Download of ${path} failed: ${errText(err)}`, 'error');
    }
  }

  async function upload(f, path) {
    if (f.size < 1 || f.size > MAX_UPLOAD_BYTES) { say(status, `A file to upload is 1 byte to ${bytes(MAX_UPLOAD_BYTES)}.`, 'error'); return; }
    const body = { path, size: f.size };
    if (f.size <= MAX_HASHED_UPLOAD_BYTES) {
      say(status, `Hashing ${f.name}…`);
      body.sha256 = hex(await crypto.subtle.digest('SHA-256', await f.arrayBuffer()));
    }
    let up;
    try {
      up = await api.post(sp(id, '/uploads'), body);
    } catch (err) {
      say(status, `Upload refused: ${errText(err)}`, 'error');
      return;
    }
    const base = sp(id, `/uploads/${encodeURIComponent(up.id)}`);
    let off = up.received || 0;
    progress.max = f.size;
    try {
      let fails = 0; // failed chunks in a row, at the same offset
      while (off < f.size) {
        const chunk = f.slice(off, Math.min(off + SLICE_BYTES, f.size));
        const was = off;
        try {
          const r = await api.upload(`${base}?offset=${off}`, chunk);
          off = r && typeof r.received === 'number' ? r.received : off + chunk.size;
        } catch (err) {
          if (++fails > CHUNK_RETRIES || (err.status && err.status !== 409 && err.status < 500)) throw err;
          // The chunk may have landed: ask where the upload stands.
          const st = await api.get(base);
          off = st.received;
        }
        if (off > was) fails = 0;
        progress.value = off;
        say(status, `Uploading ${f.name}: ${bytes(off)} of ${bytes(f.size)}…`);
      }
      const done = await api.post(`${base}/complete`, {});
      if (parentOf(done.path) === dir) await list(dir);
      say(status, `Uploaded ${done.path} (${bytes(done.size)}${done.verified ? ', checksum verified in the sandbox' : ''}).`);
      el.dataset.uploaded = done.path;
    } catch (err) {
      say(status, `Upload of ${f.name} failed at ${bytes(off)}: ${errText(err)}`, 'error');
      api.del(base).catch(() => {});
    }
  }

  goForm.addEventListener('submit', (e) => { e.preventDefault(); list(pathInput.value.trim()); });
  goForm.querySelector('#files-up').addEventListener('click', () => list(parentOf(dir)));
  upForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = file.files && file.files[0];
    if (!f) { say(status, 'Choose a file first.', 'error'); return; }
    const path = dest.value.trim() || join(dir, f.name);
    if (!path.startsWith('/') || path.length > MAX_PATH_CHARS) { say(status, 'Save as an absolute path.', 'error'); return; }
    busy(upForm.querySelector('button'), () => upload(f, path));
  });

  return {
    el,
    show() { if (!tbody.firstChild) list(dir); },
    stop() { if (blobURL) URL.revokeObjectURL(blobURL); },
  };
}
