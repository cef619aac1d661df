// promote.js: the panel's Promote part, shown on a fork child. "Show the
// plan" asks for a dry run (POST .../promote {dry_run: true}) and shows
// it as a diff against the parent: + added, ~ modified, - deleted (the
// child's changes the parent does not have), ! conflicts (both sides
// changed), = already applied, and the count of untouched files.
// "Promote" then applies exactly that plan (plan_id; a plan that changed
// meanwhile is 409 plan_changed), optionally leaving the conflicts.
import { h, mount, bytes } from '../dom.js';
import { sp, errText, section, say, busy, b64bytes, hex } from './common.js';

// The most plan lines drawn (the API's plan holds at most 2000 changes);
// for the per-file changes: how many files offer them, the largest file
// read for them, and the most lines of each side compared (the
// comparison takes time and memory in lines × lines).
const MAX_LINES = 2000;
export const MAX_DIFF_FILES = 50;
export const MAX_DIFF_BYTES = 256 << 10;
export const MAX_DIFF_LINES = 2000;

// lineDiff compares two lists of lines (longest common subsequence) and
// returns [mark, line] pairs: ' ' in both, '-' only in a, '+' only in b.
export function lineDiff(a, b) {
  const n = a.length;
  const m = b.length;
  const w = m + 1;
  const lcs = new Uint16Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([' ', a[i]]); i++; j++; } else if (lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) { out.push(['-', a[i++]]); } else { out.push(['+', b[j++]]); }
  }
  while (i < n) out.push(['-', a[i++]]);
  while (j < m) out.push(['+', b[j++]]);
  return out;
}

// readFile reads a file of a session for the per-file changes: {absent}
// when it is not there, {why} when it cannot be shown, else {lines} and
// {sha}, the SHA-256 (hex) of the bytes read.
async function readFile(api, session, path) {
  let r;
  try {
    r = await api.get(sp(session, `/files/content?path=${encodeURIComponent(path)}`));
  } catch (err) {
    if (err.status === 404) return { absent: true };
    return { why: `cannot read it: ${err.message}` };
  }
  if (r.size > MAX_DIFF_BYTES) return { why: `larger than ${bytes(MAX_DIFF_BYTES)}` };
  const raw = b64bytes(r.content_base64);
  const sha = hex(await crypto.subtle.digest('SHA-256', raw));
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    return { why: 'not text', sha };
  }
  const ls = text.split('\n');
  if (ls.length && ls[ls.length - 1] === '') ls.pop();
  if (ls.length > MAX_DIFF_LINES) return { why: `more than ${MAX_DIFF_LINES} lines`, sha };
  return { lines: ls, sha };
}

// CHANGED is what a file's changes say when the child's file is no longer
// the one the plan was made from.
export const CHANGED = 'changed since the plan — run the dry run again';

const MARK = { added: '+', modified: '~', deleted: '-' };

export function promotePart(p) {
  const { api, id } = p;
  const planBtn = h('button', { type: 'button', id: 'promote-plan' }, 'Show the plan');
  const skip = h('input', { type: 'checkbox', id: 'promote-skip' });
  const applyBtn = h('button', { type: 'button', id: 'promote-apply', disabled: true }, 'Promote');
  const diff = h('pre', { id: 'promote-diff', class: 'diff', tabindex: '0', 'aria-label': 'Promotion plan as a diff' });
  const summary = h('p', { id: 'promote-summary' });
  const result = h('div', { id: 'promote-result' });
  const files = h('div', { id: 'promote-files' });
  const { el, status } = section('promote-part', 'Promote to the parent',
    h('p', { class: 'muted' }, 'Carry this child\'s workspace changes back to the session it was forked from.'),
    h('div', { class: 'actions' }, planBtn),
    summary, diff, files,
    h('div', { class: 'row-form' },
      h('div', { class: 'field check' }, skip, h('label', { for: 'promote-skip' }, 'Leave the conflicts, apply the rest')),
      h('div', { class: 'actions' }, applyBtn)),
    result);
  let planId = '';
  let stale = false; // a file's changes showed the child moved on since the plan

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
    drawFiles(r);
    summary.dataset.apply = String(a);
    summary.dataset.conflicts = String(c);
    summary.dataset.untouched = String(plan.untouched || 0);
  }

  // drawFiles offers, for each added or modified file of the plan, its
  // changes line by line, read from both sessions when opened.
  function drawFiles(r) {
    const changed = ((r.plan && r.plan.apply) || []).filter((c) => c.op !== 'deleted');
    const ws = (r.workspace || '/workspace').replace(/\/+$/, '');
    mount(files, changed.length ? h('h3', {}, 'Changes by file') : null, changed.slice(0, MAX_DIFF_FILES).map((c) => {
      const body = h('pre', { class: 'diff file-diff', tabindex: '0' }, 'Loading…');
      const box = h('details', { class: 'file-diff', dataset: { path: c.path } }, h('summary', {}, `${MARK[c.op]} ${c.path}`), body);
      let loaded = false;
      box.addEventListener('toggle', async () => {
        if (!box.open || loaded) return;
        loaded = true;
        const full = `${ws}/${c.path}`;
        const myPlan = planId;
        const [before, after] = await Promise.all([c.op === 'added' ? { absent: true } : readFile(api, r.parent, full), readFile(api, id, full)]);
        // The child's file is read now, not when the plan was made, and the
        // agent may have rewritten it since: what is shown must be what the
        // plan carries, so its hash must be the plan's. Otherwise Promote
        // waits for a new dry run.
        if (after.absent || (after.sha && after.sha !== c.sha256)) {
          box.dataset.changed = 'true';
          mount(body, h('span', { class: 'diff-line conflict' }, `${c.path}: ${CHANGED}.`));
          if (planId === myPlan) {
            stale = true;
            applyBtn.disabled = true;
            say(status, `${c.path} is ${CHANGED}.`, 'error');
          }
          return;
        }
        for (const [side, v] of [['the parent\'s', before], ['the child\'s', after]]) {
          if (v.why) { mount(body, `Not shown: ${side} file is ${v.why}.`); return; }
        }
        const d = lineDiff(before.lines || [], after.lines || []);
        mount(body, d.map(([m, l]) => h('span', { class: `diff-line ${m === '+' ? 'added' : m === '-' ? 'deleted' : 'same'}` }, `${m} ${l}\n`)));
      });
      return box;
    }), changed.length > MAX_DIFF_FILES ? h('p', { class: 'muted' }, `Changes are offered for the first ${MAX_DIFF_FILES} files.`) : null);
  }

  planBtn.addEventListener('click', () => busy(planBtn, async () => {
    applyBtn.disabled = true;
    mount(result);
    try {
      const r = await api.post(sp(id, '/promote'), { dry_run: true });
      planId = r.plan_id || '';
      stale = false;
      draw(r);
      const a = (r.plan.apply || []).length;
      applyBtn.disabled = !planId || a === 0;
      say(status, `Plan ${planId}: nothing is changed until you promote.`);
    } catch (err) {
      planId = '';
      mount(diff);
      mount(summary);
      mount(files);
      say(status, `No plan: ${errText(err)}`, 'error');
    }
  }));

  applyBtn.addEventListener('click', () => busy(applyBtn, async () => {
    if (!planId || stale) return;
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
