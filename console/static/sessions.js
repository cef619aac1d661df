// sessions.js: the sessions page. A table of the sessions the token may
// see, refreshed by polling (see docs/console.md for why not streams),
// with each live session's pending approvals counted.
import { api } from './api.js';
import { h, mount, when, bytes } from './dom.js';

// Polling bounds: one refresh at a time, every REFRESH_MS while the tab is
// visible; at most MAX_ROWS rows shown, and approvals asked for the first
// MAX_APPROVAL_LOOKUPS running sessions, APPROVAL_CONCURRENCY at a time.
export const REFRESH_MS = 5000;
export const MAX_ROWS = 200;
const MAX_APPROVAL_LOOKUPS = 50;
const APPROVAL_CONCURRENCY = 4;

function budgetCell(s) {
  const u = s.usage || {};
  const b = s.budget || {};
  const parts = [];
  const pair = (label, used, max, fmt = String) => {
    if (max === undefined || max === null) {
      if (used) parts.push(`${label} ${fmt(used)}`);
      return;
    }
    parts.push(`${label} ${fmt(used || 0)} / ${fmt(max)}`);
  };
  pair('execs', u.execs, b.max_execs);
  pair('exec s', Math.round((u.exec_ms || 0) / 1000), b.max_exec_seconds);
  pair('compute s', Math.round((u.compute_ms || 0) / 1000), b.max_compute_seconds);
  pair('jobs', u.jobs, b.max_jobs);
  pair('children', u.children, b.max_children);
  pair('workspace', u.workspace_bytes, b.max_workspace_bytes, bytes);
  return parts.length ? parts.join(', ') : 'none yet';
}

export function policySummary(p) {
  if (!p) return '';
  const out = [];
  const mode = p.preset ? `${p.mode} (${p.preset})` : p.mode;
  out.push(`network ${mode || 'offline'}`);
  if (p.allow_hosts && p.allow_hosts.length) out.push(`${p.allow_hosts.length} host${p.allow_hosts.length > 1 ? 's' : ''}`);
  if (p.process) {
    const pr = p.process;
    const n = (a) => (a ? a.length : 0);
    out.push(`process allow ${n(pr.allow)} / ask ${n(pr.ask)} / deny ${n(pr.deny)}`);
  }
  if (p.unenforced && p.unenforced.length) out.push(`unenforced: ${p.unenforced.join(', ')}`);
  return out.join('; ');
}

async function pendingCounts(list, signal) {
  const live = list.filter((s) => s.state === 'running').slice(0, MAX_APPROVAL_LOOKUPS);
  const counts = new Map();
  let i = 0;
  const worker = async () => {
    while (i < live.length && !signal.aborted) {
      const s = live[i++];
      try {
        const r = await api.get(`/v1/agents/sessions/${encodeURIComponent(s.id)}/approvals`, { signal });
        counts.set(s.id, (r.approvals || []).filter((a) => a.state === 'pending').length);
      } catch {
        counts.set(s.id, null);
      }
    }
  };
  await Promise.all(Array.from({ length: APPROVAL_CONCURRENCY }, worker));
  return counts;
}

export function renderSessions(root, ctx) {
  const ctl = new AbortController();
  const status = h('p', { class: 'muted', id: 'sessions-status', 'aria-live': 'polite' }, 'Loading…');
  const tbody = h('tbody', { id: 'sessions-body' });
  const table = h('table', { id: 'sessions', class: 'grid' },
    h('caption', { class: 'sr-only' }, 'Sessions'),
    h('thead', {}, h('tr', {}, ['Session', 'State', 'Backend', 'Image', 'Policy', 'Usage / budget', 'Expires', 'Pending approvals'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  mount(root,
    h('div', { class: 'bar' }, h('h1', {}, 'Sessions'), h('a', { class: 'button', href: '#/create' }, 'New session')),
    status,
    h('div', { class: 'scroll' }, table));
  let timer = null;
  let busy = false;

  const refresh = async () => {
    if (busy || ctl.signal.aborted) return;
    busy = true;
    try {
      const r = await api.get('/v1/agents/sessions', { signal: ctl.signal });
      const all = (r.sessions || []).sort((a, b) => (b.created_at || '').localeCompare(a.created_at || ''));
      const list = all.slice(0, MAX_ROWS);
      const counts = await pendingCounts(list, ctl.signal);
      if (ctl.signal.aborted) return;
      mount(tbody, list.map((s) => {
        const n = counts.get(s.id);
        return h('tr', { dataset: { id: s.id, state: s.state } },
          h('td', { 'data-label': 'Session' }, h('a', { href: `#/sessions/${encodeURIComponent(s.id)}` }, s.id), h('div', { class: 'muted' }, s.agent || '', s.tenant ? ` · ${s.tenant}` : '')),
          h('td', { class: `state ${s.state}`, 'data-label': 'State' }, s.state),
          h('td', { 'data-label': 'Backend' }, s.backend || (s.runtime && s.runtime.backend) || ''),
          h('td', { 'data-label': 'Image' }, (s.runtime && s.runtime.image) || ''),
          h('td', { 'data-label': 'Policy' }, policySummary(s.policy)),
          h('td', { 'data-label': 'Usage' }, budgetCell(s)),
          h('td', { 'data-label': 'Expires' }, when(s.expires_at)),
          h('td', { class: n ? 'pending' : '', 'data-label': 'Pending approvals', dataset: { pending: n === undefined || n === null ? '' : String(n) } }, n === undefined ? '' : n === null ? '?' : String(n)));
      }));
      const more = all.length > list.length ? ` (showing the newest ${list.length})` : '';
      mount(status, list.length ? `${all.length} session${all.length === 1 ? '' : 's'}${more}; updated ${new Date().toLocaleTimeString()}` : 'No sessions yet.');
    } catch (err) {
      if (err.name !== 'AbortError') mount(status, `Cannot list sessions: ${err.message}`);
    } finally {
      busy = false;
    }
  };
  const tick = () => {
    if (!document.hidden) refresh();
    timer = setTimeout(tick, REFRESH_MS);
  };
  const onVisible = () => { if (!document.hidden) refresh(); };
  document.addEventListener('visibilitychange', onVisible);
  tick();
  return () => {
    ctl.abort();
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisible);
  };
}
