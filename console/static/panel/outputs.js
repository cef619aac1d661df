// outputs.js: the panel's Artifacts part (the workspace's changes since
// its baseline, GET .../artifacts) and its Previews part (the session's
// live preview URLs, GET .../previews, and a form that makes one, POST
// .../preview). A preview's URL is its credential and the API gives it
// only once, in the answer to the create; the page keeps the URLs it made
// in memory for this tab (never in storage) to show their Open links.
// Listed previews made elsewhere show without a link. A preview opens in
// a new tab with no opener and no referrer; the gateway serves it under
// a CSP sandbox, so its page has an opaque origin and cannot read the
// console's storage (docs/console.md).
import { h, mount, when } from '../dom.js';
import { sp, errText, section, say, busy } from './common.js';

const MAX_LISTED = 500;
const MAX_TTL_SECONDS = 86400;

export function artifactsPart(p) {
  const { api, id } = p;
  const body = h('div', { id: 'artifacts' });
  const refresh = h('button', { type: 'button', class: 'secondary', id: 'artifacts-refresh' }, 'Refresh');
  const { el, status } = section('artifacts-part', 'Artifacts', h('div', { class: 'actions' }, refresh), body);
  const group = (title, cls, paths) => (paths && paths.length ? [
    h('h3', {}, `${title} (${paths.length})`),
    h('ul', { class: `paths ${cls}` }, paths.slice(0, MAX_LISTED).map((x) => h('li', {}, h('code', {}, x)))),
    paths.length > MAX_LISTED ? h('p', { class: 'muted' }, `…and ${paths.length - MAX_LISTED} more.`) : null,
  ] : null);
  async function load() {
    try {
      const a = await api.get(sp(id, '/artifacts'));
      const n = (a.added || []).length + (a.modified || []).length + (a.deleted || []).length;
      mount(body, h('p', {}, `Changes in ${a.workspace} since its baseline: ${n}.`),
        group('Added', 'added', a.added), group('Modified', 'modified', a.modified), group('Deleted', 'deleted', a.deleted));
      say(status, '');
    } catch (err) {
      say(status, `Cannot read artifacts: ${errText(err)}`, 'error');
    }
  }
  refresh.addEventListener('click', () => busy(refresh, load));
  return { el, show: load };
}

// made holds the URLs of previews this tab made, by preview id.
const made = new Map();

export function previewsPart(p) {
  const { api, id } = p;
  const port = h('input', { id: 'preview-port', type: 'number', min: '1', max: '65535', required: true, inputmode: 'numeric' });
  const ttl = h('input', { id: 'preview-ttl', type: 'number', min: '1', max: String(MAX_TTL_SECONDS), inputmode: 'numeric', placeholder: '3600' });
  const form = h('form', { id: 'preview-form', class: 'row-form' },
    h('div', { class: 'field' }, h('label', { for: 'preview-port' }, 'Port in the sandbox'), port),
    h('div', { class: 'field' }, h('label', { for: 'preview-ttl' }, 'Lasts (s)'), ttl),
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'preview-create' }, 'Make a preview')));
  const tbody = h('tbody', { id: 'previews-body' });
  const table = h('table', { id: 'previews', class: 'grid' },
    h('caption', { class: 'sr-only' }, 'Previews'),
    h('thead', {}, h('tr', {}, ['Preview', 'Port', 'Expires', 'Open', ''].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const { el, status } = section('previews-part', 'Previews', form, h('div', { class: 'scroll' }, table));

  async function load() {
    try {
      const r = await api.get(sp(id, '/previews'));
      const list = (r && r.previews) || [];
      mount(tbody, list.length ? list.map((v) => {
        const url = made.get(v.id);
        const del = h('button', { type: 'button', class: 'secondary', 'aria-label': `Delete preview ${v.id}` }, 'Delete');
        del.addEventListener('click', () => busy(del, async () => {
          try {
            await api.del(sp(id, `/preview/${encodeURIComponent(v.id)}`));
            made.delete(v.id);
            say(status, `Deleted ${v.id}.`);
          } catch (err) {
            say(status, `Not deleted: ${errText(err)}`, 'error');
          }
          await load();
        }));
        return h('tr', { dataset: { preview: v.id } },
          h('td', { 'data-label': 'Preview' }, h('code', {}, v.id)),
          h('td', { 'data-label': 'Port' }, String(v.port)),
          h('td', { 'data-label': 'Expires' }, when(v.expires_at)),
          h('td', { 'data-label': 'Open' }, url
            ? h('a', { class: 'preview-open', href: url, target: '_blank', rel: 'noopener noreferrer' }, `Open port ${v.port}`)
            : h('span', { class: 'muted' }, 'made elsewhere: its URL was shown only to its maker')),
          h('td', {}, del));
      }) : h('tr', {}, h('td', { colspan: '5' }, 'No live previews.')));
    } catch (err) {
      say(status, `Cannot list previews: ${errText(err)}`, 'error');
    }
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const n = Number(port.value);
    if (!Number.isInteger(n) || n < 1 || n > 65535) { say(status, 'A port is a whole number from 1 to 65535.', 'error'); return; }
    const body = { port: n };
    if (ttl.value !== '') {
      const t = Number(ttl.value);
      if (!Number.isInteger(t) || t < 1 || t > MAX_TTL_SECONDS) { say(status, `A preview lasts 1 to ${MAX_TTL_SECONDS} seconds.`, 'error'); return; }
      body.ttl_seconds = t;
    }
    await busy(form.querySelector('button'), async () => {
      try {
        const v = await api.post(sp(id, '/preview'), body);
        // The URL is relative to the daemon's address; resolve it here.
        const u = new URL(v.url, location.origin);
        if (u.protocol === 'https:' || u.protocol === 'http:') made.set(v.id, u.href);
        say(status, `Preview ${v.id} of port ${v.port} made; it lasts until ${when(v.expires_at)}.`);
      } catch (err) {
        say(status, `No preview: ${errText(err)}`, 'error');
      }
      await load();
    });
  });
  p.on('ledger', (e) => { if (e.kind && e.kind.startsWith('preview')) load(); });
  return { el, show: load };
}
