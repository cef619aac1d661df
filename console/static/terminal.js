// terminal.js: the browser terminal. This is a stand-in; C3 (branch
// s11-term) replaces it with xterm.js over the PTY WebSocket.
// openTerminal(container, sessionId) returns {close()}.
import { h, mount } from './dom.js';

export function openTerminal(container, sessionId) {
  mount(container, h('p', { class: 'muted' }, `The terminal for ${sessionId} is not built yet.`));
  return { close() { mount(container); } };
}
