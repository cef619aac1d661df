// admin.js: the admin page (admin token only; the API refuses others
// anyway). The policy modules in force and the last refused load, the
// tenants, the backends and what each can do on this host.
import { api } from './api.js';
import { h, mount, when } from './dom.js';

function section(title, id, body) {
  return h('section', { id, 'aria-labelledby': `${id}-h` }, h('h2', { id: `${id}-h` }, title), body);
}

function table(caption, cols, rows) {
  return h('div', { class: 'scroll' }, h('table', { class: 'grid' },
    h('caption', { class: 'sr-only' }, caption),
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((cell, i) => h('td', { 'data-label': cols[i] }, cell)))))));
}

const yes = (v) => (v ? 'yes' : 'no');

export function renderAdmin(root, ctx) {
  if (ctx.me.kind !== 'admin') {
    mount(root, h('h1', {}, 'Admin'), h('p', { id: 'admin-only' }, 'Admin only: sign in with the admin token to see this page.'));
    return undefined;
  }
  const ctl = new AbortController();
  const policy = h('div', {}, 'Loading…');
  const tenants = h('div', {}, 'Loading…');
  const backends = h('div', {}, 'Loading…');
  mount(root, h('h1', {}, 'Admin'),
    section('Policy modules', 'admin-policy', policy),
    section('Tenants', 'admin-tenants', tenants),
    section('Backends', 'admin-backends', backends));
  const fail = (el) => (err) => { if (err.name !== 'AbortError') mount(el, h('p', { class: 'error', role: 'alert' }, err.message)); };
  const opts = { signal: ctl.signal };

  api.get('/v1/admin/policy', opts).then((st) => {
    mount(policy,
      h('dl', { class: 'facts' },
        h('dt', {}, 'Revision'), h('dd', {}, String(st.revision)),
        h('dt', {}, 'Loaded'), h('dd', {}, when(st.loaded_at)),
        h('dt', {}, 'Built-in'), h('dd', { id: 'policy-builtin' }, (st.builtin || []).join(', ') || 'none'),
        h('dt', {}, 'Operator\'s'), h('dd', { id: 'policy-operator' }, (st.operator || []).join(', ') || 'none'),
        st.source ? [h('dt', {}, 'Source'), h('dd', {}, st.source)] : null),
      st.last_error
        ? h('div', { class: 'card', id: 'policy-last-error', role: 'alert' },
          h('p', { class: 'error' }, `The last load was refused ${when(st.failed_at)}; the set above stays in force:`),
          h('pre', {}, st.last_error))
        : h('p', { class: 'muted', id: 'policy-last-error' }, 'No refused load.'));
  }).catch(fail(policy));

  api.get('/v1/admin/tenants', opts).then((r) => {
    const list = r.tenants || [];
    if (!list.length) { mount(tenants, h('p', { class: 'muted' }, 'No tenants file: only the admin token.')); return; }
    const lim = (v, unit = '') => (v ? `${v}${unit}` : 'default');
    mount(tenants, table('Tenants', ['Tenant', 'Sessions', 'Disk', 'Memory', 'CPUs'],
      list.map((t) => [t.name, String(t.sessions), lim(t.limits.disk_mb, ' MiB'), lim(t.limits.memory_mb, ' MiB'), lim(t.limits.cpus)])));
  }).catch(fail(tenants));

  api.get('/v1/backends', opts).then((r) => {
    mount(backends, table('Backends', ['Backend', 'Available', 'Isolation', 'Snapshot', 'Memory checkpoint', 'Fork', 'Terminal', 'Confinement', 'Note'],
      (r.backends || []).map((b) => {
        const c = b.capabilities || {};
        return [`${b.name}${b.default ? ' (default)' : ''}`, yes(c.available), c.isolation || '', yes(c.snapshot), yes(c.memory_checkpoint), yes(c.fork), yes(c.pty), yes(c.confinement),
          c.reason || c.memory_checkpoint_reason || ''];
      })));
  }).catch(fail(backends));
  return () => ctl.abort();
}
