// create.js: the create page. The common fields of a create, and a policy
// editor that asks the server what the policy compiles to and why a create
// would refuse it (POST /v1/policy/compile) before anything is made.
import { api, ApiError } from './api.js';
import { h, mount, field } from './dom.js';
import { policySummary } from './sessions.js';

const MAX_POLICY_CHARS = 256 << 10; // the editor's bound; the API's body limit is larger
const CHECK_DELAY_MS = 400;
const BUDGET_FIELDS = [
  ['max_execs', 'Max execs'],
  ['max_exec_seconds', 'Max exec seconds'],
  ['max_jobs', 'Max jobs'],
  ['max_compute_seconds', 'Max compute seconds'],
  ['max_children', 'Max children'],
];
const EXAMPLE_POLICY = `{
  "preset": "offline",
  "process": {
    "ask": ["git push*"]
  }
}`;

function num(input, what, { min, max, int = true }) {
  const v = input.value.trim();
  if (v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || (int && !Number.isInteger(n)) || n < min || n > max) {
    throw new Error(`${what} must be ${int ? 'a whole number' : 'a number'} from ${min} to ${max}`);
  }
  return n;
}

// parsePolicy reads the editor: empty is no policy (offline).
function parsePolicy(text) {
  if (text.length > MAX_POLICY_CHARS) throw new Error(`the policy is longer than ${MAX_POLICY_CHARS} characters`);
  if (!text.trim()) return undefined;
  let p;
  try { p = JSON.parse(text); } catch (e) { throw new Error(`the policy is not JSON: ${e.message}`); }
  if (!p || typeof p !== 'object' || Array.isArray(p)) throw new Error('the policy must be a JSON object');
  return p;
}

export function renderCreate(root, ctx) {
  if (ctx.me.kind === 'session') {
    mount(root, h('h1', {}, 'New session'), h('p', {}, 'A session token cannot create sessions.'));
    return undefined;
  }
  const ctl = new AbortController();
  const agent = h('input', { name: 'agent', value: 'agent', maxlength: '64', pattern: '[A-Za-z0-9][A-Za-z0-9._-]{0,63}', required: true });
  const image = h('input', { name: 'image', placeholder: 'the daemon\'s default', maxlength: '128' });
  const backend = h('select', { name: 'backend' }, h('option', { value: '' }, 'the daemon\'s default'));
  const cpus = h('input', { name: 'cpus', type: 'number', min: '0', max: '64', step: '0.5', placeholder: 'default' });
  const memory = h('input', { name: 'memory_mb', type: 'number', min: '0', max: '1048576', step: '1', placeholder: 'default' });
  const ttl = h('input', { name: 'ttl_seconds', type: 'number', min: '1', max: '604800', step: '1', value: '3600', required: true });
  const budget = BUDGET_FIELDS.map(([k, label]) => [k, label, h('input', { name: k, type: 'number', min: '0', step: '1', placeholder: 'no limit' })]);
  const policy = h('textarea', { name: 'policy', rows: '10', spellcheck: 'false', maxlength: String(MAX_POLICY_CHARS) });
  policy.value = EXAMPLE_POLICY;
  const compiled = h('div', { id: 'policy-result', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', id: 'create-submit' }, 'Create session');
  const check = h('button', { type: 'button', class: 'secondary', id: 'policy-check' }, 'Check policy');

  let seq = 0;
  let last = null; // the last compile answer, for the policy text it was for
  const showCompile = (res) => {
    const kids = [];
    if (res.policy) {
      kids.push(h('p', { id: 'policy-summary' }, `Compiles to: ${policySummary(res.policy)}; the sandbox would be ${res.network || 'refused'}.`));
      kids.push(h('pre', { id: 'policy-compiled' }, JSON.stringify(res.policy, null, 2)));
    }
    if (res.refusals && res.refusals.length) {
      kids.push(h('p', { class: 'error' }, 'A create with this policy would be refused:'));
      kids.push(h('ul', { class: 'refusals', id: 'policy-refusals' }, res.refusals.map((r) => h('li', {}, `${r.status} ${r.code || ''}: ${r.error}`))));
    } else {
      kids.push(h('p', { class: 'ok', id: 'policy-ok' }, 'No refusal: a create would accept this policy.'));
    }
    mount(compiled, kids);
  };
  const runCheck = async () => {
    const mine = ++seq;
    let p;
    try {
      p = parsePolicy(policy.value);
    } catch (e) {
      mount(compiled, h('ul', { class: 'refusals', id: 'policy-refusals' }, h('li', {}, e.message)));
      last = null;
      return null;
    }
    try {
      const res = await api.post('/v1/policy/compile', { policy: p, backend: backend.value || undefined }, { signal: ctl.signal });
      if (mine !== seq) return null;
      last = { text: policy.value, backend: backend.value, res };
      showCompile(res);
      return res;
    } catch (err) {
      if (err.name === 'AbortError' || mine !== seq) return null;
      last = null;
      mount(compiled, h('ul', { class: 'refusals', id: 'policy-refusals' }, h('li', {}, `${err.status || ''} ${err.code || ''}: ${err.message}`)));
      return null;
    }
  };
  let timer = null;
  const later = () => { clearTimeout(timer); timer = setTimeout(runCheck, CHECK_DELAY_MS); };
  policy.addEventListener('input', later);
  backend.addEventListener('change', later);
  check.addEventListener('click', runCheck);

  const form = h('form', { id: 'create-form', class: 'card', novalidate: true, onsubmit: async (e) => {
    e.preventDefault();
    let req;
    try {
      req = {
        agent: agent.value.trim() || undefined,
        ttl_seconds: num(ttl, 'TTL', { min: 1, max: 604800 }),
        runtime: {},
      };
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(agent.value.trim())) throw new Error('agent: letters, digits, ".", "_" and "-", at most 64');
      if (image.value.trim()) req.runtime.image = image.value.trim();
      if (backend.value) req.runtime.backend = backend.value;
      const c = num(cpus, 'CPUs', { min: 0, max: 64, int: false });
      if (c) req.runtime.cpus = c;
      const m = num(memory, 'Memory', { min: 0, max: 1048576 });
      if (m) req.runtime.memory_mb = m;
      const b = {};
      for (const [k, label, input] of budget) {
        const v = num(input, label, { min: 0, max: 1e12 });
        if (v !== undefined) b[k] = v;
      }
      if (Object.keys(b).length) req.budget = b;
      req.policy = parsePolicy(policy.value);
    } catch (err) {
      ctx.flash(err.message, 'error');
      return;
    }
    submit.disabled = true;
    try {
      // The policy is checked first, and a refused one is shown, not sent.
      const res = last && last.text === policy.value && last.backend === backend.value ? last.res : await runCheck();
      if (!res) { ctx.flash('Fix the policy first: see its refusals.', 'error'); return; }
      if (!res.ok) { showCompile(res); ctx.flash('The policy would be refused: see below.', 'error'); return; }
      const key = crypto.randomUUID();
      const s = await api.post('/v1/agents/sessions', req, { headers: { 'Idempotency-Key': key }, signal: ctl.signal });
      ctx.flash(`Created ${s.id}.`);
      ctx.go(`#/sessions/${encodeURIComponent(s.id)}`);
    } catch (err) {
      if (err.name !== 'AbortError') ctx.flash(`Create refused: ${err instanceof ApiError ? `${err.status} ${err.code}: ` : ''}${err.message}`, 'error');
    } finally {
      submit.disabled = false;
    }
  } },
  h('div', { class: 'grid-2' },
    field('Agent', agent, 'Letters, digits, ".", "_" and "-".'),
    field('Image', image),
    field('Backend', backend),
    field('CPUs', cpus),
    field('Memory (MiB)', memory),
    field('TTL (seconds)', ttl, 'At most 7 days.')),
  h('fieldset', {}, h('legend', {}, 'Budget'), h('div', { class: 'grid-2' }, budget.map(([, label, input]) => field(label, input)))),
  h('fieldset', {}, h('legend', {}, 'Policy'),
    field('Policy (JSON: preset, network, process)', policy, 'Empty is offline with no process rules. Checked with the server as you type.'),
    h('div', { class: 'bar' }, check),
    compiled),
  h('div', { class: 'bar' }, submit));
  mount(root, h('h1', {}, 'New session'), form);

  api.get('/v1/backends', { signal: ctl.signal }).then((r) => {
    for (const b of r.backends || []) {
      const c = b.capabilities || {};
      const label = `${b.name}${b.default ? ' (default)' : ''}${c.available === false ? ' — unavailable' : ''}`;
      backend.appendChild(h('option', { value: b.name, disabled: c.available === false }, label));
    }
  }).catch(() => { /* the default backend still works */ });
  runCheck();
  return () => { ctl.abort(); clearTimeout(timer); };
}
