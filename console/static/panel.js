// panel.js: the session panel. This is a stand-in that shows the
// session's record; C2 (branch s11-panel) replaces it with the full panel.
// renderPanel(root, sessionId, ctx) draws into root and returns a stop
// function (or nothing).
import { api } from './api.js';
import { h, mount, when } from './dom.js';
import { openTerminal } from './terminal.js';

export function renderPanel(root, sessionId) {
  const ctl = new AbortController();
  mount(root, h('h1', {}, `Session ${sessionId}`), h('p', { class: 'muted' }, 'Loading…'));
  api.get(`/v1/agents/sessions/${encodeURIComponent(sessionId)}`, { signal: ctl.signal }).then((s) => {
    const term = h('div', { class: 'terminal' });
    mount(root,
      h('h1', {}, `Session ${s.id}`),
      h('dl', { id: 'session-facts', class: 'facts' },
        h('dt', {}, 'State'), h('dd', { id: 'session-state' }, s.state),
        h('dt', {}, 'Agent'), h('dd', {}, s.agent || ''),
        h('dt', {}, 'Backend'), h('dd', {}, s.backend || ''),
        h('dt', {}, 'Image'), h('dd', {}, (s.runtime && s.runtime.image) || ''),
        h('dt', {}, 'Expires'), h('dd', {}, when(s.expires_at))),
      h('button', { type: 'button', onclick: () => openTerminal(term, s.id) }, 'Open terminal'),
      term);
  }).catch((err) => {
    if (err.name !== 'AbortError') mount(root, h('h1', {}, `Session ${sessionId}`), h('p', { class: 'error', role: 'alert' }, err.message));
  });
  return () => ctl.abort();
}
