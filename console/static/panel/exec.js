// exec.js: the panel's Exec part. A command runs through POST
// .../exec/stream (Server-Sent Events read by api.stream); its output
// shows as it comes, then the exit code. A stream cut before the exit is
// resumed from where it stopped (GET .../jobs/{job}/stream with
// Last-Event-ID, the stdout:stderr offsets the daemon gave). A command
// the session's policy holds for an operator (428 approval_required)
// shows as pending with its approval id; once that approval is approved
// (here or elsewhere) the panel runs the command again with approval_id,
// exactly once.
import { h, mount } from '../dom.js';
import { sp, errText, section, say, b64bytes, commandBox } from './common.js';

// Bounds: the command as the API takes it, how much output the page
// keeps (older output is dropped first), how many times one run's stream
// is resumed, and how many held commands the page tracks.
export const MAX_COMMAND_CHARS = 65536;
export const MAX_OUTPUT_CHARS = 1 << 20;
export const MAX_RESUMES = 3;
export const MAX_HELD = 32;
const MAX_TIMEOUT_SECONDS = 3600;

// outputBox is a <pre> that appends text and keeps at most
// MAX_OUTPUT_CHARS of it.
function outputBox() {
  const pre = h('pre', { id: 'exec-output', class: 'output', tabindex: '0', 'aria-label': 'Command output' });
  let size = 0;
  let dropped = false;
  return {
    el: pre,
    reset() { mount(pre); size = 0; dropped = false; },
    add(text, cls) {
      if (!text) return;
      pre.appendChild(cls ? h('span', { class: cls }, text) : document.createTextNode(text));
      size += text.length;
      while (size > MAX_OUTPUT_CHARS && pre.firstChild) {
        size -= pre.firstChild.textContent.length;
        pre.removeChild(pre.firstChild);
        dropped = true;
      }
      if (dropped && !pre.dataset.dropped) pre.dataset.dropped = 'true';
      pre.scrollTop = pre.scrollHeight;
    },
  };
}

// execPart builds the Exec tab. held is the registry of commands waiting
// for an approval, shared with the Approvals part.
export function execPart(p) {
  const { api, id } = p;
  const cmd = h('input', { id: 'exec-command', name: 'command', type: 'text', required: true, maxlength: String(MAX_COMMAND_CHARS), autocomplete: 'off', spellcheck: 'false' });
  const timeout = h('input', { id: 'exec-timeout', name: 'timeout', type: 'number', min: '1', max: String(MAX_TIMEOUT_SECONDS), inputmode: 'numeric' });
  const runBtn = h('button', { type: 'submit', id: 'exec-run' }, 'Run');
  const stopBtn = h('button', { type: 'button', id: 'exec-stop', class: 'secondary', disabled: true }, 'Stop');
  const out = outputBox();
  const exit = h('p', { id: 'exec-exit', class: 'exit', 'aria-live': 'polite' });
  const heldList = h('ul', { id: 'exec-held', class: 'held' });
  const form = h('form', { id: 'exec-form', class: 'row-form' },
    h('div', { class: 'field grow' }, h('label', { for: 'exec-command' }, 'Command'), cmd),
    h('div', { class: 'field' }, h('label', { for: 'exec-timeout' }, 'Timeout (s)'), timeout),
    h('div', { class: 'actions' }, runBtn, stopBtn));
  const heldTitle = h('h3', { hidden: true }, 'Held for approval');
  const { el, status } = section('exec', 'Run a command', form, exit, out.el, heldTitle, heldList);

  let running = null; // {ctl, job} of the run in progress

  // held maps an approval id to {command, timeout, state, li}; state is
  // pending, running, ran, denied or expired. A command runs once.
  const held = new Map();

  function drawHeld(entry) {
    const msg = {
      pending: `pending approval ${entry.approvalId}`,
      running: `approved: running (approval ${entry.approvalId})`,
      ran: `approved and run once (approval ${entry.approvalId})`,
      denied: `denied (approval ${entry.approvalId})`,
      expired: `expired (approval ${entry.approvalId})`,
      failed: `approved, but it did not run: ${entry.error} (approval ${entry.approvalId})`,
    }[entry.state];
    mount(entry.li, commandBox(entry.command, '', `held-command-${entry.approvalId}`),
      h('span', { class: `held-state ${entry.state}`, dataset: { approval: entry.approvalId, state: entry.state } }, msg));
  }

  function hold(command, t, err) {
    const approvalId = err.approvalId || (err.body && err.body.approval_id) || '';
    if (!approvalId) return false;
    if (held.size >= MAX_HELD) {
      const oldest = held.keys().next().value;
      held.get(oldest).li.remove();
      held.delete(oldest);
    }
    const entry = { approvalId, command, timeout: t, state: 'pending', li: h('li', { id: `held-${approvalId}` }) };
    held.set(approvalId, entry);
    drawHeld(entry);
    heldList.prepend(entry.li);
    heldTitle.hidden = false;
    const b = err.body || {};
    say(status, `Held: ${b.summary || command} matched ${b.matched || 'an ask rule'}; pending approval ${approvalId}, until ${b.expires_at || 'it expires'}.`);
    exit.textContent = `pending approval ${approvalId}`;
    p.emit('approvals');
    return true;
  }

  async function run(command, t, approvalId) {
    if (running) return;
    const ctl = new AbortController();
    running = { ctl, job: '' };
    runBtn.disabled = true;
    stopBtn.disabled = false;
    out.reset();
    exit.textContent = '';
    say(status, approvalId ? `Running the approved command (approval ${approvalId})…` : 'Running…');
    const dec = new TextDecoder();
    let last = '';
    let ended = false;
    let streamErr = null;
    const onEvent = (ev) => {
      const d = ev.json || {};
      switch (ev.type) {
        case 'start':
          running.job = d.job || '';
          last = ev.id || last;
          break;
        case 'output':
          out.add(dec.decode(b64bytes(d.output_base64), { stream: true }));
          last = ev.id || last;
          break;
        case 'stderr':
          out.add(d.stderr, 'stderr');
          last = ev.id || last;
          break;
        case 'exit':
          ended = true;
          out.add(dec.decode());
          exit.textContent = d.signal ? `exit ${d.exit_code} (signal ${d.signal})` : `exit ${d.exit_code}`;
          exit.dataset.code = String(d.exit_code);
          say(status, `Finished: exit code ${d.exit_code}.`);
          break;
        case 'error':
          streamErr = d;
          break;
        default:
      }
    };
    const body = { command };
    if (t) body.timeout_seconds = t;
    if (approvalId) body.approval_id = approvalId;
    try {
      try {
        await api.stream(sp(id, '/exec/stream'), { method: 'POST', body, onEvent, signal: ctl.signal });
      } catch (err) {
        if (err.name === 'AbortError') throw err;
        if (err.status === 428 && !approvalId && hold(command, t, err)) return 'held';
        if (!running.job) throw err;
        streamErr = { error: errText(err) };
      }
      // Cut before the exit: follow the job from the last offsets.
      for (let tries = 0; !ended && running.job && tries < MAX_RESUMES; tries++) {
        if (streamErr && streamErr.code && streamErr.code !== 'stream_max_age') break;
        say(status, 'The stream stopped before the command ended; resuming…');
        streamErr = null;
        try {
          await api.stream(sp(id, `/jobs/${encodeURIComponent(running.job)}/stream`), { lastEventId: last, onEvent, signal: ctl.signal });
        } catch (err) {
          if (err.name === 'AbortError') throw err;
          streamErr = { error: errText(err) };
        }
      }
      if (!ended) {
        const why = streamErr ? `${streamErr.error || ''}${streamErr.code ? ` (${streamErr.code})` : ''}` : 'the stream ended before the command did';
        say(status, `No exit code: ${why}.`, 'error');
        return 'failed';
      }
      return 'ran';
    } catch (err) {
      if (err.name === 'AbortError') {
        say(status, 'Stopped.');
        return 'stopped';
      }
      say(status, `Not run: ${errText(err)}`, 'error');
      if (approvalId) throw err;
      return 'failed';
    } finally {
      running = null;
      runBtn.disabled = false;
      stopBtn.disabled = true;
      p.emit('session');
    }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const command = cmd.value;
    if (!command.trim()) { say(status, 'Type a command first.', 'error'); return; }
    if (command.length > MAX_COMMAND_CHARS) { say(status, `A command is at most ${MAX_COMMAND_CHARS} characters.`, 'error'); return; }
    let t = 0;
    if (timeout.value !== '') {
      t = Number(timeout.value);
      if (!Number.isInteger(t) || t < 1 || t > MAX_TIMEOUT_SECONDS) { say(status, `The timeout is a whole number of seconds from 1 to ${MAX_TIMEOUT_SECONDS}.`, 'error'); return; }
    }
    run(command, t);
  });
  stopBtn.addEventListener('click', () => {
    if (!running) return;
    const { ctl, job } = running;
    ctl.abort();
    if (job) api.del(sp(id, `/jobs/${encodeURIComponent(job)}`)).catch(() => {});
  });

  // approved runs a held command whose approval is now approved, once.
  async function approved(approvalId) {
    const entry = held.get(approvalId);
    if (!entry || entry.state !== 'pending') return;
    entry.state = 'running';
    drawHeld(entry);
    // Wait for a run in progress to end rather than drop the approval.
    for (let i = 0; running && i < 600; i++) await new Promise((r) => setTimeout(r, 500));
    try {
      const r = await run(entry.command, entry.timeout, approvalId);
      entry.state = r === 'ran' ? 'ran' : 'failed';
      entry.error = r;
    } catch (err) {
      entry.state = 'failed';
      entry.error = errText(err);
    }
    drawHeld(entry);
  }

  // decided tells the part what became of approvals it may hold.
  function decided(approvals) {
    for (const a of approvals) {
      const entry = held.get(a.id);
      if (!entry || entry.state !== 'pending') continue;
      if (a.state === 'approved') approved(a.id);
      else if (a.state === 'denied' || a.state === 'expired') { entry.state = a.state; drawHeld(entry); }
    }
  }

  return {
    el,
    decided,
    approved,
    holds: (approvalId) => held.has(approvalId),
    stop() { if (running) running.ctl.abort(); },
  };
}
