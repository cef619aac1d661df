// timeline.js: the panel's live Timeline. It reads GET .../events/stream
// (the ledger's entries, each with its seq as the event id, and the
// machine's events) and shows the newest first. When the stream ends for
// any reason but the session's end (the daemon's one-hour limit, a
// network cut, a proxy timing out) it reconnects with Last-Event-ID set to
// the last seq it got, so nothing is shown twice and nothing is missed.
import { h, when } from '../dom.js';
import { sp, errText, section, say, clip } from './common.js';

// Bounds: rows kept on the page (the oldest go), characters of an
// entry's data shown, and the wait before a reconnect (doubling from the
// first to the last).
export const MAX_ROWS = 500;
const MAX_DATA_CHARS = 300;
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 15000;

function row(kind, source, ev) {
  const d = ev.data === undefined ? '' : JSON.stringify(ev.data);
  return h('li', { class: `tl-row ${source}`, dataset: { kind: ev.kind || '', seq: ev.seq ? String(ev.seq) : '', source } },
    h('span', { class: 'tl-seq' }, ev.seq ? `#${ev.seq}` : 'vm'),
    ' ',
    h('time', { datetime: ev.time || '' }, when(ev.time)),
    ' ',
    h('strong', { class: 'tl-kind' }, ev.kind || kind),
    ev.actor ? h('span', { class: 'tl-actor' }, ` by ${ev.actor}`) : null,
    d && d !== '{}' && d !== 'null' ? h('code', { class: 'tl-data' }, clip(d, MAX_DATA_CHARS)) : null);
}

export function timelinePart(p) {
  const { api, id } = p;
  const list = h('ol', { id: 'timeline', class: 'timeline', reversed: true, 'aria-label': 'Timeline, newest first', dataset: { resumes: '0', last: '' } });
  const { el, status } = section('timeline-part', 'Timeline', list);
  const ctl = new AbortController();
  let lastSeq = 0;
  let lastVM = 0;
  let resumes = 0;
  let stopped = false;

  const add = (li) => {
    list.prepend(li);
    while (list.childElementCount > MAX_ROWS) list.lastElementChild.remove();
  };

  const onEvent = (ev) => {
    const d = ev.json;
    if (!d) return;
    if (ev.type === 'ledger') {
      if (d.seq <= lastSeq) return; // already shown (a resumed stream may overlap)
      lastSeq = d.seq;
      list.dataset.last = String(lastSeq);
      add(row('ledger', 'ledger', d));
      p.emit('ledger', d);
    } else if (ev.type === 'vm') {
      if (d.id && d.id <= lastVM) return; // a resumed stream repeats some
      if (d.id) lastVM = d.id;
      add(row('vm', 'vm', d));
      p.emit('vm', d);
    } else if (ev.type === 'error') {
      list.dataset.ended = d.code || 'error';
      if (d.code === 'session_ended') stopped = true;
      say(status, `${d.error || 'The stream ended'}${d.code ? ` (${d.code})` : ''}`, d.code === 'session_ended' ? '' : 'error');
    }
  };

  (async () => {
    let wait = RETRY_FIRST_MS;
    while (!stopped && !ctl.signal.aborted) {
      const got = lastSeq;
      say(status, resumes ? `Live (resumed after seq ${lastSeq}).` : 'Live.');
      try {
        await api.stream(sp(id, '/events/stream'), { lastEventId: lastSeq ? String(lastSeq) : undefined, onEvent, signal: ctl.signal });
      } catch (err) {
        if (err.name === 'AbortError') return;
        if (err.status === 404 || err.status === 401 || err.status === 403) {
          say(status, `The timeline stopped: ${errText(err)}`, 'error');
          return;
        }
        say(status, `The timeline was cut: ${errText(err)}; reconnecting…`, 'error');
      }
      if (stopped || ctl.signal.aborted) break;
      resumes++;
      list.dataset.resumes = String(resumes);
      wait = lastSeq > got ? RETRY_FIRST_MS : Math.min(wait * 2, RETRY_MAX_MS);
      await new Promise((r) => setTimeout(r, wait));
    }
  })();

  return { el, stop() { ctl.abort(); } };
}
