// The browser terminal: a shell in the session's sandbox, drawn by xterm.js
// (vendored under vendor/xterm/) and carried over the daemon's PTY
// WebSocket (GET /v1/agents/sessions/{id}/pty).
//
// A browser cannot put the bearer token on a WebSocket, so each terminal
// first asks for a single-use ticket (POST .../pty-ticket, an ordinary API
// call with the token, so the daemon checks it like any other) and
// opens the WebSocket with ?ticket= within its 30 seconds. Binary messages
// are the terminal's bytes both ways; a text message {"resize":{...}} tells
// the shell its new size, sent whenever the terminal's box changes size
// (the window, the panel). When the shell ends the daemon closes the
// socket with the reason exit=<code>, which is shown under the terminal.
//
// Several terminals are tabs in one strip: New terminal opens another
// shell (each is its own ticket and WebSocket, and so its own shell), the
// × beside a tab closes it (hanging up its shell). xterm keeps Tab for the
// shell; Shift+Tab moves the focus out of the terminal back to its tab.

import { api } from "./api.js";
import { h } from "./dom.js";

// The most terminals one panel opens; the daemon allows a tenant 8 at once.
export const MAX_TABS = 8;
// The daemon's bound on cols and rows.
const MAX_DIM = 1000;
// The most bytes sent in one WebSocket message: the daemon refuses a
// message over 1 MiB (and ends the terminal), so a large paste goes as
// several.
const MAX_FRAME = 64 << 10;
const EXIT_PREFIX = "exit=";
// The longest link (OSC 8 hyperlink) the terminal offers to open.
export const MAX_LINK_CHARS = 2048;

// openLink is the terminal's handler for the hyperlinks a program prints
// (OSC 8). xterm.js's own handler opens a blank tab of the console's origin
// first, which gets a copy of this tab's sessionStorage (the token) before
// it is sent on. Here only an http or https link of bounded length is
// opened, after the person says yes to its full address, and always with
// noopener and noreferrer: the new tab starts with nothing of this one.
// It returns whether it opened the link.
export function openLink(_event, uri) {
  if (typeof uri !== "string" || uri.length > MAX_LINK_CHARS) return false;
  let u;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return false;
  if (!window.confirm(`Open this link from the terminal in a new tab?\n\n${u.href}`)) return false;
  window.open(u.href, "_blank", "noopener,noreferrer");
  return true;
}

let xterm; // the loaded modules, once

// loadXterm loads xterm.js, its fit addon and their styles on first use,
// so that pages without a terminal never fetch them.
function loadXterm() {
  if (!xterm) {
    xterm = (async () => {
      const { installStyleShim } = await import("./cspstyle.js");
      installStyleShim();
      await Promise.all(["./vendor/xterm/xterm.css", "./terminal.css"].map(loadStyle));
      const [{ Terminal }, { FitAddon }] = await Promise.all([
        import("./vendor/xterm/xterm.esm.js"),
        import("./vendor/xterm/addon-fit.esm.js"),
      ]);
      return { Terminal, FitAddon };
    })();
    xterm.catch(() => { xterm = undefined; }); // let a later terminal retry
  }
  return xterm;
}

// loadStyle adds a stylesheet link (once) and waits for it to load.
function loadStyle(rel) {
  const href = new URL(rel, import.meta.url).href;
  for (const l of document.querySelectorAll('link[rel="stylesheet"]')) {
    if (l.href === href) return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const link = h("link", { rel: "stylesheet", href });
    link.addEventListener("load", () => resolve());
    link.addEventListener("error", () => reject(new Error(`could not load ${rel}`)));
    document.head.append(link);
  });
}

// sessionPath is the API path of session id's route below it.
function sessionPath(id, rest) {
  return `/v1/agents/sessions/${encodeURIComponent(id)}/${rest}`;
}

// closeText says how a terminal's WebSocket ended.
function closeText(ev) {
  if (ev.code === 1000 && ev.reason.startsWith(EXIT_PREFIX)) {
    return { exit: ev.reason.slice(EXIT_PREFIX.length), text: `The shell exited with code ${ev.reason.slice(EXIT_PREFIX.length)}.` };
  }
  if (ev.reason) return { text: `The terminal closed: ${ev.reason} (code ${ev.code}).` };
  return { text: `The connection to the terminal was lost (code ${ev.code}).` };
}

// openShell runs one terminal in screen, reporting through status.
function openShell(sessionId, screen, setStatus) {
  let closed = false;
  let ws;
  let term;
  let addon;
  let observer;
  let frame = 0;

  const sendSize = () => {
    if (ws && ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ resize: { cols: term.cols, rows: term.rows } }));
    }
  };

  // fit sizes the terminal to its box, within the daemon's bounds. A box
  // that is not shown (a hidden tab) has no size and is left alone.
  const fit = () => {
    const d = addon.proposeDimensions();
    if (!d || !Number.isFinite(d.cols) || !Number.isFinite(d.rows)) return;
    const cols = Math.min(Math.max(d.cols, 2), MAX_DIM);
    const rows = Math.min(Math.max(d.rows, 1), MAX_DIM);
    if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows);
  };

  const refit = () => {
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => { if (!closed && addon) fit(); });
  };

  const start = async () => {
    const { Terminal, FitAddon } = await loadXterm();
    if (closed) return;
    term = new Terminal({
      cursorBlink: true,
      scrollback: 5000,
      fontFamily: "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace",
      fontSize: 14,
      theme: { background: "#111418", foreground: "#e6e6e6", cursor: "#e6e6e6" },
      linkHandler: { activate: openLink, allowNonHttpProtocols: false },
    });
    addon = new FitAddon();
    term.loadAddon(addon);
    term.open(screen);
    fit();
    term.attachCustomKeyEventHandler((e) => {
      if (e.key === "Tab" && e.shiftKey && !e.ctrlKey && !e.altKey && !e.metaKey) {
        if (e.type === "keydown") {
          e.preventDefault(); // the focus goes to the tab, not past it
          screen.dispatchEvent(new CustomEvent("terminal-leave", { bubbles: true }));
        }
        return false;
      }
      return true;
    });
    observer = new ResizeObserver(refit);
    observer.observe(screen);
    term.onResize(({ cols, rows }) => {
      screen.dataset.cols = cols;
      screen.dataset.rows = rows;
      sendSize();
      if (ws && ws.readyState === WebSocket.OPEN) setStatus("open", `Connected: ${cols}×${rows}.`);
    });
    screen.dataset.cols = term.cols;
    screen.dataset.rows = term.rows;

    setStatus("connecting", "Asking for a terminal ticket…");
    const tk = await api.post(sessionPath(sessionId, "pty-ticket"), {});
    if (closed) return;
    const url = new URL(sessionPath(sessionId, "pty"), location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    const asked = { cols: term.cols, rows: term.rows };
    url.search = new URLSearchParams({ ticket: tk.ticket, ...asked }).toString();
    setStatus("connecting", "Connecting…");
    ws = new WebSocket(url.href);
    ws.binaryType = "arraybuffer";
    const encoder = new TextEncoder();
    let opened = false;
    const sendBytes = (b) => {
      for (let i = 0; i < b.length && ws.readyState === WebSocket.OPEN; i += MAX_FRAME) {
        ws.send(b.subarray(i, i + MAX_FRAME));
      }
    };
    ws.addEventListener("open", () => {
      opened = true;
      // The window may have changed size while the socket opened.
      if (asked.cols !== term.cols || asked.rows !== term.rows) sendSize();
      setStatus("open", `Connected: ${term.cols}×${term.rows}.`);
      term.focus();
    });
    ws.addEventListener("message", (e) => {
      if (e.data instanceof ArrayBuffer) term.write(new Uint8Array(e.data));
    });
    ws.addEventListener("close", (e) => {
      if (closed) return; // closed here: the terminal is gone already
      // Before the upgrade the daemon answers a refusal in JSON, which a
      // browser does not show to the page: say what it can be.
      const how = opened ? closeText(e) : { text: "Could not open a terminal: the daemon refused the connection (too many terminals open, a checkpoint, restore or fork under way, or the session stopped)." };
      term.options.disableStdin = true;
      term.options.cursorBlink = false;
      term.write("\x1b[?25l"); // no cursor: nothing can be typed any more
      if (how.exit !== undefined) screen.dataset.exitCode = how.exit;
      setStatus(how.exit !== undefined ? "exited" : opened ? "closed" : "failed", how.text);
    });
    term.onData((d) => sendBytes(encoder.encode(d)));
    term.onBinary((d) => sendBytes(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)));
  };

  start().catch((err) => {
    if (closed) return;
    const msg = err && err.message ? err.message : String(err);
    setStatus("failed", `Could not open a terminal: ${msg}`);
  });

  return {
    focus() { if (term) term.focus(); },
    // refit sizes the terminal again (its tab was shown).
    refit,
    close() {
      if (closed) return;
      closed = true;
      cancelAnimationFrame(frame);
      if (observer) observer.disconnect();
      if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, "closed in the console");
      if (term) term.dispose();
    },
  };
}

// openTerminal puts a strip of terminal tabs into container and opens the
// first terminal on session sessionId. close() hangs up every shell and
// empties container.
export function openTerminal(container, sessionId) {
  const tabs = []; // {n, tab, item, panel, shell}
  let counter = 0;
  let active = null;

  const list = h("div", { class: "term-tabs", role: "tablist", "aria-label": "Terminals" });
  const add = h("button", { type: "button", class: "term-new" }, "New terminal");
  const limit = h("p", { class: "term-limit", role: "status", "aria-live": "polite" });
  const panels = h("div", { class: "term-panels" });
  const root = h("section", { class: "terminals", "aria-label": "Terminals" },
    h("div", { class: "term-bar" }, list, add), limit, panels);
  container.replaceChildren(root);

  const select = (t, focus) => {
    active = t;
    for (const o of tabs) {
      const on = o === t;
      o.tab.setAttribute("aria-selected", String(on));
      o.tab.tabIndex = on ? 0 : -1;
      o.panel.hidden = !on;
    }
    t.shell.refit();
    if (focus === "tab") t.tab.focus();
    if (focus === "terminal") t.shell.focus();
  };

  const updateLimit = () => {
    add.disabled = tabs.length >= MAX_TABS;
    limit.textContent = add.disabled ? `At most ${MAX_TABS} terminals at once: close one to open another.` : "";
  };

  const remove = (t) => {
    const i = tabs.indexOf(t);
    if (i < 0) return;
    t.shell.close();
    tabs.splice(i, 1);
    t.item.remove();
    t.panel.remove();
    updateLimit();
    if (active === t) {
      active = null;
      const next = tabs[Math.min(i, tabs.length - 1)];
      if (next) select(next, "tab");
      else add.focus();
    }
  };

  const open = () => {
    if (tabs.length >= MAX_TABS) return null;
    const n = ++counter;
    const id = `term-${sessionId}-${n}`.replace(/[^A-Za-z0-9_-]/g, "_");
    const name = `Terminal ${n}`;
    const tab = h("button", {
      type: "button", role: "tab", class: "term-tab", id: `${id}-tab`,
      "aria-controls": `${id}-panel`, "aria-selected": "false",
    }, name);
    const shut = h("button", { type: "button", class: "term-close", "aria-label": `Close ${name}`, title: `Close ${name}` }, "×");
    const item = h("span", { class: "term-tab-item" }, tab, shut);
    const status = h("p", { class: "term-status", role: "status", "aria-live": "polite" });
    const screen = h("div", { class: "term-screen", role: "group", "aria-label": `${name}: a shell in the session's sandbox` });
    const panel = h("div", { class: "term-panel", role: "tabpanel", id: `${id}-panel`, "aria-labelledby": `${id}-tab` }, screen, status);
    const setStatus = (state, text) => {
      panel.dataset.state = state;
      status.textContent = text;
    };
    const t = { n, tab, item, panel };
    list.append(item);
    panels.append(panel);
    tabs.push(t);
    updateLimit();
    t.shell = openShell(sessionId, screen, setStatus);
    screen.addEventListener("terminal-leave", () => t.tab.focus());
    tab.addEventListener("click", () => select(t, "terminal"));
    shut.addEventListener("click", () => remove(t));
    tab.addEventListener("keydown", (e) => {
      const i = tabs.indexOf(t);
      let to = null;
      if (e.key === "ArrowRight") to = tabs[(i + 1) % tabs.length];
      else if (e.key === "ArrowLeft") to = tabs[(i - 1 + tabs.length) % tabs.length];
      else if (e.key === "Home") to = tabs[0];
      else if (e.key === "End") to = tabs[tabs.length - 1];
      else if (e.key === "Delete") { e.preventDefault(); remove(t); return; }
      if (to) { e.preventDefault(); select(to, "tab"); }
    });
    select(t);
    return t;
  };

  add.addEventListener("click", () => open());
  open();

  let closed = false;
  let watcher;
  const close = () => {
    if (closed) return;
    closed = true;
    if (watcher) watcher.disconnect();
    for (const t of [...tabs]) t.shell.close();
    tabs.length = 0;
    root.remove();
  };
  // A page that replaces the panel without calling close() (another
  // route) still hangs up its shells: the strip watches the elements above
  // it, and closes once it is no longer in the document. (It starts
  // watching once it is in the document; it waits about ten seconds for
  // that.)
  let frames = 0;
  const watch = () => {
    if (closed) return;
    if (!root.isConnected) {
      if (++frames < 600) requestAnimationFrame(watch);
      return;
    }
    watcher = new MutationObserver(() => { if (!root.isConnected) close(); });
    for (let n = root.parentNode; n && n !== document; n = n.parentNode) watcher.observe(n, { childList: true });
  };
  watch();

  return { close };
}
