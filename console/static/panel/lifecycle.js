// lifecycle.js: the panel's Checkpoints part (take one, restore one) and
// its Fork part (make children, see the tree of children with links to
// their panels). Restore asks for a second click, since it replaces the
// machine. Every action is one API call: POST .../checkpoint, .../restore,
// .../fork.
import { h, mount, when } from '../dom.js';
import { sp, errText, section, say, busy } from './common.js';

// The checkpoint tag the API takes; the most children one fork makes
// from the page (the API takes 32); how deep and how wide the children
// tree is read.
const TAG = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MAX_FORK = 8;
export const MAX_TREE_DEPTH = 4;
export const MAX_TREE_NODES = 64;

export function checkpointsPart(p) {
  const { api, id } = p;
  const tag = h('input', { id: 'ckpt-tag', name: 'tag', type: 'text', maxlength: '64', pattern: '[A-Za-z0-9][A-Za-z0-9._\\-]{0,63}', autocomplete: 'off' });
  const memory = h('input', { id: 'ckpt-memory', type: 'checkbox' });
  const form = h('form', { id: 'ckpt-form', class: 'row-form' },
    h('div', { class: 'field grow' }, h('label', { for: 'ckpt-tag' }, 'Tag (optional)'), tag),
    h('div', { class: 'field check' }, memory, h('label', { for: 'ckpt-memory' }, 'With memory')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'ckpt-take' }, 'Checkpoint')));
  const tbody = h('tbody', { id: 'checkpoints-body' });
  const table = h('table', { id: 'checkpoints', class: 'grid' },
    h('caption', { class: 'sr-only' }, 'Checkpoints'),
    h('thead', {}, h('tr', {}, ['Tag', 'Memory', 'Taken', ''].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const { el, status } = section('checkpoints-part', 'Checkpoints', form, h('div', { class: 'scroll' }, table));

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const t = tag.value.trim();
    if (t && !TAG.test(t)) { say(status, 'A tag is 1 to 64 letters, digits, dots, dashes or underscores, starting with a letter or digit.', 'error'); return; }
    const body = {};
    if (t) body.tag = t;
    if (!memory.disabled) body.memory = memory.checked;
    await busy(e.submitter || form.querySelector('button'), async () => {
      try {
        const c = await api.post(sp(id, '/checkpoint'), body);
        say(status, `Checkpoint ${c && c.tag ? c.tag : t} taken.`);
        tag.value = '';
        p.emit('session');
      } catch (err) {
        say(status, `No checkpoint: ${errText(err)}`, 'error');
      }
    });
  });

  function restoreButton(c) {
    const b = h('button', { type: 'button', class: 'secondary restore', dataset: { tag: c.tag } }, `Restore ${c.tag}`);
    let armed = false;
    b.addEventListener('click', async () => {
      if (!armed) {
        armed = true;
        b.textContent = `Confirm: replace the machine with ${c.tag}`;
        b.classList.add('armed');
        return;
      }
      armed = false;
      await busy(b, async () => {
        try {
          await api.post(sp(id, '/restore'), { tag: c.tag });
          say(status, `Restored ${c.tag}.`);
          p.emit('session');
        } catch (err) {
          say(status, `Not restored: ${errText(err)}`, 'error');
        }
      });
      b.textContent = `Restore ${c.tag}`;
      b.classList.remove('armed');
    });
    return b;
  }

  function draw(s) {
    const caps = s.capabilities || {};
    memory.disabled = !caps.memory_checkpoint;
    if (memory.disabled) memory.checked = false;
    const running = s.state === 'running';
    form.querySelector('button').disabled = !running || !caps.snapshot;
    const list = [...(s.checkpoints || [])].reverse();
    const sig = JSON.stringify([list.map((c) => c.tag), running]);
    if (sig === tbody.dataset.sig) return;
    tbody.dataset.sig = sig;
    mount(tbody, list.length ? list.map((c) => h('tr', { dataset: { tag: c.tag } },
      h('td', { 'data-label': 'Tag' }, h('code', {}, c.tag)),
      h('td', { 'data-label': 'Memory' }, c.memory ? 'yes' : 'disk only'),
      h('td', { 'data-label': 'Taken' }, when(c.created_at)),
      h('td', {}, running ? restoreButton(c) : null))) : h('tr', {}, h('td', { colspan: '4' }, 'No checkpoints yet.')));
  }
  return { el, draw };
}

export function forkPart(p) {
  const { api, id } = p;
  const count = h('input', { id: 'fork-count', type: 'number', min: '1', max: String(MAX_FORK), value: '1', inputmode: 'numeric' });
  const from = h('select', { id: 'fork-from' }, h('option', { value: '' }, 'the state now'));
  const form = h('form', { id: 'fork-form', class: 'row-form' },
    h('div', { class: 'field' }, h('label', { for: 'fork-count' }, 'Children'), count),
    h('div', { class: 'field grow' }, h('label', { for: 'fork-from' }, 'From'), from),
    h('div', { class: 'actions' }, h('button', { type: 'submit', id: 'fork-run' }, 'Fork')));
  const tree = h('div', { id: 'children-tree', class: 'tree' });
  const parent = h('p', { id: 'fork-parent' });
  const { el, status } = section('fork-part', 'Fork and children', parent, form, h('h3', {}, 'Children'), tree);
  let drawn = '';

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const n = Number(count.value);
    if (!Number.isInteger(n) || n < 1 || n > MAX_FORK) { say(status, `Fork makes 1 to ${MAX_FORK} children here.`, 'error'); return; }
    const body = { count: n };
    if (from.value) body.from = from.value;
    await busy(form.querySelector('button'), async () => {
      try {
        say(status, 'Forking…');
        const r = await api.post(sp(id, '/fork'), body);
        const kids = (r && r.children) || [];
        say(status, `Forked ${kids.length} ${kids.length === 1 ? 'child' : 'children'}: ${kids.map((k) => k.id).join(', ')}.`);
        p.emit('session');
      } catch (err) {
        say(status, `No fork: ${errText(err)}`, 'error');
      }
    });
  });

  // children reads the tree below s, breadth first, within the bounds.
  async function children(s) {
    const root = { id: s.id, state: s.state, kids: [] };
    const queue = [[root, s.children || [], 1]];
    let nodes = 0;
    let cut = false;
    while (queue.length) {
      const [node, ids, depth] = queue.shift();
      for (const cid of ids) {
        if (nodes >= MAX_TREE_NODES) { cut = true; break; }
        nodes++;
        const kid = { id: cid, state: '', kids: [] };
        node.kids.push(kid);
        try {
          const c = await api.get(sp(cid));
          kid.state = c.state;
          if (depth < MAX_TREE_DEPTH) queue.push([kid, c.children || [], depth + 1]);
          else if ((c.children || []).length) cut = true;
        } catch (err) {
          kid.state = err.status === 404 ? 'not visible' : errText(err);
        }
      }
    }
    return { root, cut };
  }

  function list(node) {
    if (!node.kids.length) return null;
    return h('ul', {}, node.kids.map((k) => h('li', { dataset: { child: k.id } },
      h('a', { href: `#/sessions/${encodeURIComponent(k.id)}` }, k.id),
      k.state ? h('span', { class: `state ${k.state}` }, ` ${k.state}`) : null,
      list(k))));
  }

  async function draw(s) {
    const caps = s.capabilities || {};
    form.querySelector('button').disabled = s.state !== 'running' || !caps.fork;
    if (!caps.fork) say(status, `The ${s.backend} backend cannot fork.`);
    mount(parent, s.parent ? ['Forked from ', h('a', { id: 'parent-link', href: `#/sessions/${encodeURIComponent(s.parent)}` }, s.parent), '.'] : null);
    const tags = (s.checkpoints || []).map((c) => c.tag);
    const keep = from.value;
    mount(from, h('option', { value: '' }, 'the state now'), tags.map((t) => h('option', { value: t }, `checkpoint ${t}`)));
    if (tags.includes(keep)) from.value = keep;
    const sig = JSON.stringify(s.children || []);
    if (sig === drawn) return;
    drawn = sig;
    if (!(s.children || []).length) { mount(tree, h('p', { class: 'muted' }, 'No children.')); return; }
    const { root, cut } = await children(s);
    mount(tree, list(root), cut ? h('p', { class: 'muted' }, `Only the first ${MAX_TREE_NODES} children, ${MAX_TREE_DEPTH} levels deep, are shown.`) : null);
  }
  return { el, draw };
}
