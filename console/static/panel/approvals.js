// approvals.js: the panel's Approvals part. It lists the session's
// approval requests (GET .../approvals); a pending one has a note field
// and Approve and Deny buttons (POST .../approvals/{id}/approve or /deny
// with the note; only an admin may decide, and the API says so to anyone
// else). Approving a command this page holds runs it once (exec.js).
// The list is read again when the timeline shows an approval entry, and
// every few seconds while a request is pending. The command is shown whole
// (commandBox): what the approver reads is every character that runs.
import { h, mount, when } from '../dom.js';
import { sp, errText, section, say, busy, clip, commandBox } from './common.js';

// The longest note the API takes, and how often the list is read.
export const MAX_NOTE_CHARS = 512;
const POLL_PENDING_MS = 3000;
const POLL_IDLE_MS = 15000;

export function approvalsPart(p, exec) {
  const { api, id } = p;
  const tbody = h('tbody', { id: 'approvals-body' });
  const table = h('table', { id: 'approvals', class: 'grid' },
    h('caption', { class: 'sr-only' }, 'Approval requests'),
    h('thead', {}, h('tr', {}, ['Request', 'Command', 'State', 'Requested', 'Decision'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  // Only the admin may decide (the approval policy, docs/policy.md); the
  // buttons stay for anyone, and the API's refusal is shown, but another
  // token is told first.
  const who = p.me && p.me.kind !== 'admin'
    ? h('p', { class: 'hint', id: 'approvals-who' }, 'Only the admin decides approvals: with this token, Approve and Deny are refused.')
    : null;
  const { el, status } = section('approvals-part', 'Approvals', who, h('div', { class: 'scroll' }, table));
  let timer = null;
  let stopped = false;
  let loading = null;

  function decideCell(a) {
    if (a.state !== 'pending') {
      return [a.decider ? `by ${a.decider}` : '', a.note ? h('q', {}, clip(a.note, 200)) : null];
    }
    const note = h('input', { type: 'text', id: `note-${a.id}`, maxlength: String(MAX_NOTE_CHARS), autocomplete: 'off' });
    const decide = (verb) => async (e) => {
      const b = e.currentTarget;
      if (note.value.length > MAX_NOTE_CHARS) { say(status, `A note is at most ${MAX_NOTE_CHARS} characters.`, 'error'); return; }
      await busy(b, async () => {
        try {
          const body = note.value ? { note: note.value } : {};
          const r = await api.post(sp(id, `/approvals/${encodeURIComponent(a.id)}/${verb}`), body);
          say(status, `${verb === 'approve' ? 'Approved' : 'Denied'} ${a.id}.`);
          if (verb === 'approve' && exec.holds(a.id)) exec.approved(a.id);
          else if (r) exec.decided([r]);
        } catch (err) {
          say(status, `Could not ${verb} ${a.id}: ${errText(err)}`, 'error');
        }
        await load();
      });
    };
    return h('div', { class: 'decide' },
      h('label', { for: note.id }, `Note for ${a.id}`), note,
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'approve', dataset: { approval: a.id }, onclick: decide('approve') }, 'Approve'),
        h('button', { type: 'button', class: 'deny secondary', dataset: { approval: a.id }, onclick: decide('deny') }, 'Deny')));
  }

  async function load() {
    if (loading) return loading;
    loading = (async () => {
      let list = [];
      try {
        const r = await api.get(sp(id, '/approvals'));
        list = (r && r.approvals) || [];
      } catch (err) {
        say(status, `Cannot read approvals: ${errText(err)}`, 'error');
        return [];
      }
      // Keep a note being typed: redraw only when something changed.
      const sig = JSON.stringify(list.map((a) => [a.id, a.state]));
      if (sig !== tbody.dataset.sig) {
        tbody.dataset.sig = sig;
        const pendingFirst = [...list].sort((a, b) => (a.state === 'pending' ? 0 : 1) - (b.state === 'pending' ? 0 : 1) || (b.created_at || '').localeCompare(a.created_at || ''));
        mount(tbody, pendingFirst.map((a) => h('tr', { id: `approval-${a.id}`, dataset: { state: a.state } },
          h('td', { 'data-label': 'Request' }, h('code', {}, a.id)),
          h('td', { 'data-label': 'Command' }, commandBox(a.command || a.summary, a.kind, `approval-command-${a.id}`), a.matched ? h('small', { class: 'muted' }, ` matched ${a.matched}`) : null),
          h('td', { 'data-label': 'State', class: a.state === 'pending' ? 'pending' : '' }, a.state),
          h('td', { 'data-label': 'Requested' }, `${when(a.created_at)} by ${a.requester || '?'}`),
          h('td', { 'data-label': 'Decision' }, decideCell(a)))));
        if (!list.length) mount(tbody, h('tr', {}, h('td', { colspan: '5' }, 'No approval requests.')));
      }
      const pending = list.filter((a) => a.state === 'pending').length;
      el.dataset.pending = String(pending);
      p.emit('pending', pending);
      exec.decided(list);
      return list;
    })();
    try {
      return await loading;
    } finally {
      loading = null;
    }
  }

  async function poll() {
    if (stopped) return;
    const list = await load();
    if (stopped) return;
    const pending = list.some((a) => a.state === 'pending');
    timer = setTimeout(poll, pending && !document.hidden ? POLL_PENDING_MS : POLL_IDLE_MS);
  }
  poll();
  p.on('approvals', () => load());
  p.on('ledger', (e) => { if (e.kind && e.kind.startsWith('approval')) load(); });

  return { el, load, stop() { stopped = true; clearTimeout(timer); } };
}
