// admin.js: the admin page (built in a later commit).
import { h, mount } from './dom.js';

export function renderAdmin(root, ctx) {
  if (ctx.me.kind !== 'admin') {
    mount(root, h('h1', {}, 'Admin'), h('p', { id: 'admin-only' }, 'Admin only: sign in with the admin token to see this page.'));
    return;
  }
  mount(root, h('h1', {}, 'Admin'), h('p', {}, 'Not built yet.'));
}
