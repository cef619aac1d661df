// promote.js: the panel's Promote part, shown on a fork child. "Show the
// plan" asks for a dry run (POST .../promote {dry_run: true}) and shows
// it as a diff against the parent: + added, ~ modified, - deleted (the
// child's changes the parent does not have), ! conflicts (both sides
// changed), = already applied, and the count of untouched files.
// "Promote" then applies exactly that plan (plan_id; a plan that changed
// meanwhile is 409 plan_changed), optionally leaving the conflicts.
import { h, mount, bytes } from '../dom.js';
import { sp, errText, section, say, busy } from './common.js';

// The most plan lines drawn (the API's plan holds at most 2000 changes).
const MAX_LINES = 2000;

const MARK = { added: '+', modified: '~', deleted: '-' };

export function promotePart(p) {
  const { api, id } = p;
  const planBtn = h('button', { type: 'button', id: 'promote-plan' }, 'Show the plan');
  const skip = h('input', { type: 'checkbox', id: 'promote-skip' });
  const applyBtn = h('button', { type: 'button', id: 'promote-apply', disabled: true }, 'Promote');
  const diff = h('pre', { id: 'promote-diff', class: 'diff', tabindex: '0', 'aria-label': 'Promotion plan as a diff' });
  const summary = h('p', { id: 'promote-summary' });
  const result = h('div', { id: 'promote-result' });
  const { el, status } = section('promote-part', 'Promote to the parent',
    h('p', { class: 'muted' }, 'Carry this child\'s workspace changes back to the session it was forked from.'),
    h('div', { class: 'actions' }, planBtn),
    summary, diff,
    h('div', { class: 'row-form' },
      h('div', { class: 'field check' }, skip, h('label', { for: 'promote-skip' }, 'Leave the conflicts, apply the rest')),
      h('div', { class: 'actions' }, applyBtn)),
    result);
  let planId = '';

  function line(cls, mark, text) {
    return h('span', { class: `diff-line ${cls}` }, `${mark} ${text}\n`);
  }

  function draw(r) {
    const plan = r.plan || {};
    const lines = [];
    for (const c of plan.apply || []) lines.push(line(c.op, MARK[c.op] || '?', `${c.path}${c.op !== 'deleted' ? `  (${bytes(c.size)}${c.mode ? `, ${c.mode}` : ''})` : ''}`));
    for (const c of plan.conflicts || []) lines.push(line('conflict', '!', `${c.path}  (${c.op} here; ${c.reason})`));
    for (const c of plan.already_applied || []) lines.push(line('same', '=', `${c.path}  (${c.op}, the parent has it already)`));
    for (const n of r.not_carried || []) lines.push(line('note', '#', `${n.what}${n.path ? ` ${n.path}` : ''}: ${n.note}`));
    const shown = lines.slice(0, MAX_LINES);
    if (lines.length > MAX_LINES) shown.push(line('note', '#', `…and ${lines.length - MAX_LINES} more lines`));
    mount(diff, shown.length ? shown : line('note', '#', 'nothing to carry'));
    const a = (plan.apply || []).length;
    const c = (plan.conflicts || []).length;
    mount(summary, `To apply: ${a} (${bytes(plan.bytes || 0)}); conflicts: ${c}; already applied: ${(plan.already_applied || []).length}; untouched: ${plan.untouched || 0}. Workspace ${r.workspace || ''}, parent `,
      h('a', { href: `#/sessions/${encodeURIComponent(r.parent)}` }, r.parent), '.');
    summary.dataset.apply = String(a);
    summary.dataset.conflicts = String(c);
    summary.dataset.untouched = String(plan.untouched || 0);
  }

  planBtn.addEventListener('click', () => busy(planBtn, async () => {
    applyBtn.disabled = true;
    mount(result);
    try {
      const r = await api.post(sp(id, '/promote'), { dry_run: true });
      planId = r.plan_id || '';
      draw(r);
      const a = (r.plan.apply || []).length;
      applyBtn.disabled = !planId || a === 0;
      say(status, `Plan ${planId}: nothing is changed until you promote.`);
    } catch (err) {
      planId = '';
      mount(diff);
      mount(summary);
      say(status, `No plan: ${errText(err)}`, 'error');
    }
  }));

  applyBtn.addEventListener('click', () => busy(applyBtn, async () => {
    if (!planId) return;
    try {
      const r = await api.post(sp(id, '/promote'), { plan_id: planId, skip_conflicts: skip.checked });
      mount(result, h('p', { id: 'promote-done' }, `Applied ${(r.applied || []).length} paths to `,
        h('a', { href: `#/sessions/${encodeURIComponent(r.parent)}` }, r.parent),
        (r.skipped || []).length ? `, left ${(r.skipped || []).length} conflicts` : '',
        r.checkpoint ? `; the parent's checkpoint ${r.checkpoint} undoes it.` : '.'));
      say(status, 'Promoted.');
      planId = '';
    } catch (err) {
      say(status, `Not promoted: ${errText(err)}`, 'error');
    }
    applyBtn.disabled = true;
  }));

  return { el };
}
