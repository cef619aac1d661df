// create.js: the create page (the form is built in a later commit).
import { h, mount } from './dom.js';

export function renderCreate(root) {
  mount(root, h('h1', {}, 'New session'), h('p', {}, 'Not built yet.'));
}
