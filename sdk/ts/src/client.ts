// The client: one daemon, a token, and the HTTP it takes to talk to it.
import { errorFrom, PaddockError } from "./errors.js";
import { parseSSE, type SSEEvent } from "./sse.js";

/** The most of a JSON answer read (a listing, a file read of 8 MiB in base64). */
export const MAX_RESPONSE_BYTES = 64 << 20;
/** The default time one request may take, streams excluded: as the Go SDK, above exec's longest timeout (1 h). */
export const DEFAULT_TIMEOUT_MS = 2 * 60 * 60 * 1000;

export interface ClientOptions {
  /** The daemon's URL, e.g. https://127.0.0.1:7788; PADDOCK_URL on Node when absent. */
  url?: string;
  /** A bearer token; PADDOCK_TOKEN on Node when absent. */
  token?: string;
  /**
   * A PEM file of the gateway's CA (PADDOCK_CA on Node when absent). Node's
   * fetch has no per-request CA, so on Node this must be the file that
   * NODE_EXTRA_CA_CERTS names (Node reads that at start): the constructor
   * refuses a CA it cannot apply rather than fail later with a TLS error.
   * Browsers trust what the system trusts.
   */
  ca?: string;
  /** A fetch to use instead of the global one (e.g. with an undici Agent). */
  fetch?: typeof fetch;
  /** How long one request may take (ms); streams are not limited by it. */
  timeoutMs?: number;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
  /** An Idempotency-Key: a retry with the same key replays the first answer. */
  idempotencyKey?: string;
  /** The session's revision for If-Match (checkpoint, restore, fork). */
  ifMatch?: number;
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env?.[name] || undefined;
}

function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof p?.versions?.node === "string";
}

export type Query = Record<string, string | number | boolean | undefined>;

export class Transport {
  readonly url: string;
  readonly token: string;
  private readonly fetchFn: typeof fetch;
  private readonly timeoutMs: number;

  constructor(opts: ClientOptions = {}) {
    const url = opts.url ?? env("PADDOCK_URL");
    if (!url) throw new Error("paddock: no daemon URL (pass url or set PADDOCK_URL)");
    const token = opts.token ?? env("PADDOCK_TOKEN");
    if (!token) throw new Error("paddock: no token (pass token or set PADDOCK_TOKEN)");
    const ca = opts.ca ?? env("PADDOCK_CA");
    if (ca && isNode() && !opts.fetch && env("NODE_EXTRA_CA_CERTS") !== ca) {
      throw new Error(
        `paddock: Node's fetch cannot take a CA per request: start node with NODE_EXTRA_CA_CERTS=${ca} ` +
          "(or pass a fetch that trusts it)",
      );
    }
    this.url = url.replace(/\/+$/, "");
    this.token = token;
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new Error("paddock: no fetch in this runtime (Node >= 18 has one)");
    // Called as a plain function: a browser's fetch throws "Illegal
    // invocation" when its this is anything but the window (as it would be
    // as this.fetchFn(...)).
    this.fetchFn = (input, init) => f(input, init);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  private headers(o: CallOptions | undefined, extra: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { Authorization: `Bearer ${this.token}`, ...extra };
    if (o?.idempotencyKey) h["Idempotency-Key"] = o.idempotencyKey;
    if (o?.ifMatch !== undefined) h["If-Match"] = String(o.ifMatch);
    return h;
  }

  private signal(o: CallOptions | undefined, stream: boolean): AbortSignal | undefined {
    const sigs: AbortSignal[] = [];
    if (o?.signal) sigs.push(o.signal);
    if (!stream) sigs.push(AbortSignal.timeout(this.timeoutMs));
    if (sigs.length <= 1) return sigs[0];
    const ctl = new AbortController();
    for (const s of sigs) {
      if (s.aborted) ctl.abort(s.reason);
      else s.addEventListener("abort", () => ctl.abort(s.reason), { once: true });
    }
    return ctl.signal;
  }

  path(p: string, q?: Query): string {
    let out = this.url + p;
    if (q) {
      const sp = new URLSearchParams();
      for (const [k, v] of Object.entries(q)) if (v !== undefined) sp.set(k, String(v));
      const s = sp.toString();
      if (s) out += "?" + s;
    }
    return out;
  }

  /** request sends one request and returns the 2xx answer's JSON (undefined when empty). */
  async request<T>(method: string, p: string, opts: { query?: Query; body?: unknown; raw?: Uint8Array } & CallOptions = {}): Promise<T> {
    const extra: Record<string, string> = {};
    let body: BodyInit | undefined;
    if (opts.raw !== undefined) {
      extra["Content-Type"] = "application/octet-stream";
      body = opts.raw as unknown as BodyInit;
    } else if (opts.body !== undefined) {
      extra["Content-Type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    const resp = await this.fetchFn(this.path(p, opts.query), {
      method,
      headers: this.headers(opts, extra),
      body,
      signal: this.signal(opts, false),
    });
    const text = await readCapped(resp, MAX_RESPONSE_BYTES);
    if (!resp.ok) throw errorFrom(resp.status, text);
    return (text === "" ? undefined : JSON.parse(text)) as T;
  }

  /** stream opens an SSE stream and yields its events; a non-200 answer is the API's error. */
  async *stream(method: string, p: string, opts: { query?: Query; body?: unknown; lastEventId?: string } & CallOptions = {}): AsyncGenerator<SSEEvent> {
    const extra: Record<string, string> = { Accept: "text/event-stream" };
    if (opts.body !== undefined) extra["Content-Type"] = "application/json";
    if (opts.lastEventId !== undefined) extra["Last-Event-ID"] = opts.lastEventId;
    const resp = await this.fetchFn(this.path(p, opts.query), {
      method,
      headers: this.headers(opts, extra),
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: this.signal(opts, true),
    });
    if (resp.status !== 200 || !resp.body) {
      throw errorFrom(resp.status, await readCapped(resp, 1 << 20));
    }
    yield* parseSSE(resp.body);
  }
}

/** readCapped reads an answer's text, refusing one longer than max bytes. */
async function readCapped(resp: Response, max: number): Promise<string> {
  if (!resp.body) return "";
  const reader = resp.body.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > max) {
      await reader.cancel();
      throw new PaddockError(resp.status, "too_large", `paddock: answer longer than ${max} bytes`);
    }
    parts.push(value);
  }
  const all = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    all.set(p, off);
    off += p.byteLength;
  }
  return new TextDecoder().decode(all);
}

export function b64encode(data: Uint8Array): string {
  let s = "";
  for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(s);
}

export function b64decode(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** sha256hex is the hex SHA-256 of data, by Web Crypto (global on Node >= 19, node:crypto's on 18). */
export async function sha256hex(data: Uint8Array): Promise<string> {
  let subtle = (globalThis as { crypto?: Crypto }).crypto?.subtle;
  if (!subtle) {
    const nc = (await import("node:crypto" as string)) as { webcrypto: Crypto };
    subtle = nc.webcrypto.subtle;
  }
  const d = new Uint8Array(await subtle.digest("SHA-256", data as unknown as ArrayBuffer));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}
