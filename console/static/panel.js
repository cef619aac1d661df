// panel.js: the session panel (#/sessions/{id}). The top shows what the
// session is (state, backend, image, parent, expiry, usage) and whether
// its ledger verifies; below, tabs: Exec, Timeline, Approvals,
// Checkpoints (with fork and the children), Promote (on a fork child),
// Files, Artifacts, Previews and Terminal. The parts live in panel/; this
// file wires them: it reads the session's record, hands it to the parts
// that draw from it, and passes messages between them (a ledger entry
// seen by the timeline makes the approvals and the record be read again).
//
// renderPanel(root, sessionId, ctx) draws into root and returns the stop
// function the router calls when the page changes: it ends every stream
// and timer the panel started.
import { api as defaultApi } from './api.js';
import { h, mount, when, bytes } from './dom.js';
import { openTerminal } from './terminal.js';
import { sp, errText, say } from './panel/common.js';
import { execPart } from './panel/exec.js';
import { timelinePart } from './panel/timeline.js';
import { approvalsPart } from './panel/approvals.js';
import { checkpointsPart, forkPart } from './panel/lifecycle.js';
import { promotePart } from './panel/promote.js';
import { filesPart } from './panel/files.js';
import { artifactsPart, previewsPart } from './panel/outputs.js';

// How often the record is read while nothing else asks for it, and the
// least time between two reads asked for by events.
const RECORD_POLL_MS = 15000;
const RECORD_MIN_GAP_MS = 500;
const LEDGER_RECHECK_MS = 1500;

// bus is the parts' message board: on(name, fn) and emit(name, value).
function bus() {
  const subs = new Map();
  return {
    on(name, fn) { if (!subs.has(name)) subs.set(name, []); subs.get(name).push(fn); },
    emit(name, v) { for (const fn of subs.get(name) || []) { try { fn(v); } catch (e) { console.error(e); } } },
  };
}

// tabs builds an accessible tab strip: arrow keys, Home and End move
// between tabs, each tab controls its panel, only the chosen one shows.
function tabs(names, onShow) {
  const strip = h('div', { role: 'tablist', class: 'tabs', 'aria-label': 'Session panel' });
  const panels = {};
  const buttons = {};
  const order = names.map((n) => n.key);
  let current = '';
  function show(key, focus) {
    current = key;
    for (const k of order) {
      const on = k === key;
      buttons[k].setAttribute('aria-selected', on ? 'true' : 'false');
      buttons[k].tabIndex = on ? 0 : -1;
      panels[k].hidden = !on;
    }
    if (focus) buttons[key].focus();
    onShow(key);
  }
  for (const { key, label } of names) {
    buttons[key] = h('button', { type: 'button', role: 'tab', id: `tab-${key}`, 'aria-controls': `tabpanel-${key}`, onclick: () => show(key) }, label);
    panels[key] = h('div', { role: 'tabpanel', id: `tabpanel-${key}`, 'aria-labelledby': `tab-${key}`, tabindex: '0', hidden: true });
    strip.appendChild(buttons[key]);
  }
  strip.addEventListener('keydown', (e) => {
    const i = order.indexOf(current);
    let j = -1;
    if (e.key === 'ArrowRight') j = (i + 1) % order.length;
    else if (e.key === 'ArrowLeft') j = (i - 1 + order.length) % order.length;
    else if (e.key === 'Home') j = 0;
    else if (e.key === 'End') j = order.length - 1;
    if (j >= 0) { e.preventDefault(); show(order[j], true); }
  });
  return { strip, panels, show, current: () => current };
}

// ledgerBadge shows GET .../ledger/verify: verified with its entry count
// and head, or where and why the chain breaks. It is checked when the
// panel opens, on Check again, and a few seconds after new entries.
function ledgerBadge(api, id) {
  const text = h('span', { id: 'ledger-verify', 'aria-live': 'polite' }, 'checking…');
  const again = h('button', { type: 'button', class: 'secondary small', id: 'ledger-recheck' }, 'Check again');
  async function check() {
    again.disabled = true;
    try {
      const v = await api.get(sp(id, '/ledger/verify'));
      text.dataset.ok = v.ok ? 'true' : 'false';
      text.className = v.ok ? 'verified' : 'error';
      text.textContent = v.ok
        ? `verified: ${v.entries} entries, head ${String(v.head).slice(0, 12)}…`
        : `NOT verified: ${v.reason} at seq ${v.broken_seq}: ${v.detail} (${v.entries} entries verify before it)`;
    } catch (err) {
      text.dataset.ok = '';
      text.className = 'error';
      text.textContent = `cannot check: ${errText(err)}`;
    } finally {
      again.disabled = false;
    }
  }
  again.addEventListener('click', check);
  check();
  // soon checks again a little after new entries, at most once per
  // LEDGER_RECHECK_MS: verifying reads the whole ledger.
  let timer = null;
  const soon = () => { if (!timer) timer = setTimeout(() => { timer = null; check(); }, LEDGER_RECHECK_MS); };
  return { el: h('span', {}, text, ' ', again), check, soon, stop() { clearTimeout(timer); } };
}

function usage(s) {
  const u = s.usage || {};
  const b = s.budget || {};
  const part = (label, used, max) => (max ? `${label} ${used || 0} / ${max}` : `${label} ${used || 0}`);
  return [part('execs', u.execs, b.max_execs), part('exec s', Math.round((u.exec_ms || 0) / 1000), b.max_exec_seconds),
    part('jobs', u.jobs, b.max_jobs), part('children', u.children, b.max_children),
    u.workspace_bytes ? `workspace ${bytes(u.workspace_bytes)}` : null].filter(Boolean).join(', ');
}

// loadStyle adds panel.css to the page once.
function loadStyle() {
  const href = new URL('./panel.css', import.meta.url).href;
  if ([...document.querySelectorAll('link[rel="stylesheet"]')].some((l) => l.href === href)) return;
  document.head.append(h('link', { rel: 'stylesheet', href }));
}

export function renderPanel(root, sessionId, ctx = {}) {
  loadStyle();
  const api = ctx.api || defaultApi;
  const id = sessionId;
  const stops = [];
  let stopped = false;
  const p = { api, id, me: ctx.me || null, ...bus() };
  const title = h('h1', { id: 'panel-title' }, `Session ${id}`);
  const pageStatus = h('p', { id: 'panel-status', class: 'muted', role: 'status' }, 'Loading…');
  mount(root, title, pageStatus);

  (async () => {
    let s;
    try {
      s = await api.get(sp(id));
    } catch (err) {
      if (!stopped) say(pageStatus, `Cannot open session ${id}: ${errText(err)}`, 'error');
      return;
    }
    if (stopped) return;

    const facts = h('dl', { id: 'session-facts', class: 'facts' });
    const badge = ledgerBadge(api, id);
    p.on('ledger', () => badge.soon());
    stops.push(() => badge.stop());
    const exec = execPart(p);
    const timeline = timelinePart(p);
    stops.push(() => timeline.stop(), () => exec.stop());
    const approvals = approvalsPart(p, exec);
    stops.push(() => approvals.stop());
    const ckpts = checkpointsPart(p);
    const fork = forkPart(p);
    const files = filesPart(p, (s.workspace && s.workspace.path) || '/workspace');
    stops.push(() => files.stop());
    const artifacts = artifactsPart(p);
    const previews = previewsPart(p);
    const promote = s.parent ? promotePart(p) : null;
    // The terminal opens (a shell, through a ticket) the first time its
    // tab is shown, not before: a panel opened to read it starts no shell.
    const termBox = h('div', { id: 'panel-terminal', class: 'terminal' });
    let term = null;
    const openTerm = () => {
      if (term) return;
      try {
        term = openTerminal(termBox, id);
      } catch (err) {
        mount(termBox, h('p', { class: 'error' }, `No terminal: ${errText(err)}`));
      }
    };
    stops.push(() => { if (term && term.close) term.close(); });

    const names = [
      { key: 'exec', label: 'Exec' },
      { key: 'timeline', label: 'Timeline' },
      { key: 'approvals', label: 'Approvals' },
      { key: 'checkpoints', label: 'Checkpoints & fork' },
      promote ? { key: 'promote', label: 'Promote' } : null,
      { key: 'files', label: 'Files' },
      { key: 'artifacts', label: 'Artifacts' },
      { key: 'previews', label: 'Previews' },
      { key: 'terminal', label: 'Terminal' },
    ].filter(Boolean);
    const t = tabs(names, (key) => {
      if (key === 'files') files.show();
      if (key === 'artifacts') artifacts.show();
      if (key === 'previews') previews.show();
      if (key === 'terminal') openTerm();
    });
    t.panels.exec.append(exec.el);
    t.panels.timeline.append(timeline.el);
    t.panels.approvals.append(approvals.el);
    t.panels.checkpoints.append(ckpts.el, fork.el);
    if (promote) t.panels.promote.append(promote.el);
    t.panels.files.append(files.el);
    t.panels.artifacts.append(artifacts.el);
    t.panels.previews.append(previews.el);
    t.panels.terminal.append(h('section', { class: 'card panel-part', 'aria-label': 'Terminal' },
      h('p', { class: 'muted' }, 'A shell in the sandbox; the server refuses it for a session with process rules.'), termBox));

    const pendingTab = h('span', { id: 'pending-count', class: 'badge' });
    t.strip.querySelector('#tab-approvals').append(' ', pendingTab);
    p.on('pending', (n) => { pendingTab.textContent = n ? String(n) : ''; });

    function drawFacts(rec) {
      const dd = (label, value, attrs = {}) => [h('dt', {}, label), h('dd', attrs, value)];
      mount(facts,
        dd('State', rec.state, { id: 'session-state', class: `state ${rec.state}` }),
        rec.note ? dd('Note', rec.note) : null,
        dd('Agent', rec.agent || ''),
        dd('Tenant', rec.tenant || '(admin)'),
        dd('Backend', rec.backend || ''),
        dd('Image', (rec.runtime && rec.runtime.image) || ''),
        rec.parent ? dd('Parent', h('a', { href: `#/sessions/${encodeURIComponent(rec.parent)}` }, rec.parent)) : null,
        dd('Children', String((rec.children || []).length)),
        dd('Expires', when(rec.expires_at)),
        dd('Usage', usage(rec)),
        dd('Ledger', badge.el));
    }
    function draw(rec) {
      s = rec;
      drawFacts(rec);
      ckpts.draw(rec);
      fork.draw(rec);
    }

    // reload reads the record again, at most once per RECORD_MIN_GAP_MS;
    // one asked for while a read is under way makes one more read after it.
    let reloading = null;
    let again = false;
    let lastRead = 0;
    async function reload() {
      if (stopped) return null;
      if (reloading) { again = true; return reloading; }
      reloading = (async () => {
        const gap = RECORD_MIN_GAP_MS - (Date.now() - lastRead);
        if (gap > 0) await new Promise((r) => setTimeout(r, gap));
        lastRead = Date.now();
        try {
          const rec = await api.get(sp(id));
          if (!stopped) draw(rec);
        } catch (err) {
          if (!stopped) say(pageStatus, `Cannot read the session: ${errText(err)}`, 'error');
        }
      })();
      try { await reloading; } finally { reloading = null; }
      if (again) { again = false; reload(); }
      return null;
    }
    p.on('session', reload);
    // Any new entry may change the record (state, usage, checkpoints,
    // children); reads are coalesced (RECORD_MIN_GAP_MS).
    p.on('ledger', reload);
    p.on('vm', reload);
    const poll = setInterval(() => { if (!document.hidden) reload(); }, RECORD_POLL_MS);
    stops.push(() => clearInterval(poll));

    mount(root, title, h('section', { class: 'card', 'aria-label': 'About this session' }, facts), t.strip, Object.values(t.panels), pageStatus);
    say(pageStatus, '');
    draw(s);
    t.show('exec');
  })();

  return () => {
    stopped = true;
    for (const f of stops) { try { f(); } catch { /* already stopped */ } }
  };
}
