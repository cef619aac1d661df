// @paddock/sdk: a client for Paddock's sessions API (docs/api/openapi.yaml)
// for Node >= 18 and browsers, on fetch and web streams, with no run-time
// dependencies. Wire types come from src/openapi.gen.ts, generated from the
// OpenAPI document; the classes here give them camelCase methods.
import type { components } from "./openapi.gen.js";

// Node 18 has no Symbol.asyncDispose; `await using` (compiled by tsc) looks it
// up there, so it is given the name Node 20 uses when it is missing.
if (!(Symbol as { asyncDispose?: symbol }).asyncDispose) {
  Object.defineProperty(Symbol, "asyncDispose", { value: Symbol.for("nodejs.asyncDispose") });
}
import { b64decode, b64encode, sha256hex, Transport, type CallOptions, type ClientOptions } from "./client.js";
import { PaddockError, errorFrom } from "./errors.js";
import type { SSEEvent } from "./sse.js";
import { evaluate, rollout, type EvaluateRequest, type EvaluateResult, type RolloutRequest, type RolloutResult } from "./orchestrate.js";

export * from "./errors.js";
export { parseSSE, type SSEEvent } from "./sse.js";
export type { ClientOptions, CallOptions } from "./client.js";
export * from "./orchestrate.js";
export { ROUTES, NOT_OFFERED } from "./routes.js";
export type { components, paths } from "./openapi.gen.js";

type S = components["schemas"];
export type SessionInfo = S["Session"];
export type CreateRequest = Partial<S["CreateRequest"]>;
export type ExecResultWire = S["ExecResult"];
export type Approval = S["Approval"];
export type Upload = S["Upload"];
export type FileInfo = S["FileInfo"];
export type Listing = S["Listing"];
export type Job = S["Job"];
export type JobRead = S["JobRead"];
export type LedgerEntry = S["LedgerEntry"];
export type Events = S["Events"];
export type SessionToken = S["SessionToken"];
export type PromoteResult = S["PromoteResult"];
export type Checkpoint = S["Checkpoint"];
export type Artifacts = S["Artifacts"];

/** Files up to this size go in one PUT; larger ones through a resumable upload. */
export const SINGLE_WRITE_MAX = 4 << 20;
/** An upload's chunk: the API's largest. */
export const UPLOAD_CHUNK = 4 << 20;
/** A ranged read's largest piece. */
export const RANGE_MAX = 4 << 20;
/** The largest file download reads unless told otherwise: 2 GiB, the largest upload. */
export const MAX_DOWNLOAD_BYTES = 2 * 1024 ** 3;
/** How many times an upload chunk or a ranged read is retried after a failure. */
export const MAX_RETRIES = 5;

/** The result of a command run to completion. */
export interface ExecResult {
  exitCode: number;
  signal?: string;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  truncated: boolean;
  durationMs: number;
}

export interface ExecOptions extends CallOptions {
  /** Seconds the command may run (the API's default is 300). */
  timeoutSeconds?: number;
  /** Run a command an operator approved (the id from ApprovalRequired). */
  approvalId?: string;
  /** Hold a command needing approval open this long for the decision. */
  approvalWaitSeconds?: number;
}

/** An event of a streamed command or job. */
export type StreamEvent =
  | { type: "start"; job: string }
  | { type: "output"; data: Uint8Array; text: string; nextOffset: number }
  | { type: "stderr"; text: string; nextOffset: number }
  | { type: "exit"; exitCode: number; state: string; signal: string };

function execResult(w: ExecResultWire): ExecResult {
  return {
    exitCode: w.exit_code,
    signal: w.signal,
    timedOut: w.timed_out,
    stdout: w.stdout,
    stderr: w.stderr,
    truncated: w.truncated,
    durationMs: w.duration_ms,
  };
}

function execBody(command: string, o: ExecOptions = {}): Record<string, unknown> {
  const b: Record<string, unknown> = { command };
  if (o.timeoutSeconds !== undefined) b.timeout_seconds = o.timeoutSeconds;
  if (o.approvalId !== undefined) b.approval_id = o.approvalId;
  if (o.approvalWaitSeconds !== undefined) b.approval_wait_seconds = o.approvalWaitSeconds;
  return b;
}

/** jobEvent turns one SSE event of a job or exec stream into a StreamEvent (null: not one of them). */
export function jobEvent(ev: SSEEvent): StreamEvent | null {
  if (ev.event === "error") {
    const d = JSON.parse(ev.data) as { error?: string; code?: string };
    throw errorFrom(0, JSON.stringify({ error: d.error ?? "stream error", code: d.code ?? "" }));
  }
  if (!["start", "output", "stderr", "exit"].includes(ev.event)) return null;
  const d = JSON.parse(ev.data) as Record<string, unknown>;
  switch (ev.event) {
    case "start":
      return { type: "start", job: String(d.job) };
    case "output": {
      const data = b64decode(String(d.output_base64 ?? ""));
      return { type: "output", data, text: String(d.output ?? ""), nextOffset: Number(d.next_offset) };
    }
    case "stderr":
      return { type: "stderr", text: String(d.stderr ?? ""), nextOffset: Number(d.next_offset) };
    default: {
      const code = d.exit_code === null || d.exit_code === undefined ? -1 : Number(d.exit_code);
      const signal = String(d.signal ?? "");
      // As a shell reports it: 128+9 for a job killed by a signal.
      return { type: "exit", exitCode: code >= 0 ? code : 128 + 9, state: String(d.state ?? ""), signal };
    }
  }
}


/** Paddock is a client of one daemon. */
export class Paddock {
  readonly transport: Transport;

  constructor(opts: ClientOptions = {}) {
    this.transport = new Transport(opts);
  }

  /** createSession creates a session and returns it as an object (delete it, or `await using` it). */
  async createSession(req: CreateRequest = {}, o?: CallOptions): Promise<Session> {
    const info = await this.transport.request<SessionInfo>("POST", "/v1/agents/sessions", { body: req, ...o });
    return new Session(this, info);
  }

  /** session returns an existing session. */
  async session(id: string, o?: CallOptions): Promise<Session> {
    return new Session(this, await this.transport.request<SessionInfo>("GET", sp(id), o));
  }

  /** sessions lists the sessions, oldest first. */
  async sessions(opts: { includeDeleted?: boolean } & CallOptions = {}): Promise<Session[]> {
    const out = await this.transport.request<{ sessions: SessionInfo[] }>("GET", "/v1/agents/sessions", {
      query: { include_deleted: opts.includeDeleted ? "true" : undefined },
      ...opts,
    });
    return out.sessions.map((s) => new Session(this, s));
  }

  async whoami(o?: CallOptions): Promise<S["WhoAmI"]> {
    return this.transport.request("GET", "/v1/whoami", o);
  }

  async health(o?: CallOptions): Promise<S["Health"]> {
    return this.transport.request("GET", "/healthz", o);
  }

  async backends(o?: CallOptions): Promise<S["BackendInfo"][]> {
    return (await this.transport.request<S["BackendList"]>("GET", "/v1/backends", o)).backends;
  }

  /** policy is the policy engine's state (admin). */
  async policy(o?: CallOptions): Promise<S["PolicyStatus"]> {
    return this.transport.request("GET", "/v1/admin/policy", o);
  }

  /**
   * compilePolicy says what a create with this policy would record and
   * every reason it would be refused, creating nothing. A refusal is in
   * the answer (ok false), not an error.
   */
  async compilePolicy(req: S["PolicyCompileRequest"] = {}, o?: CallOptions): Promise<S["PolicyCompile"]> {
    return this.transport.request("POST", "/v1/policy/compile", { body: req, ...o });
  }

  /** tenants lists the tenants in force, their limits and session counts (admin). */
  async tenants(o?: CallOptions): Promise<S["TenantInfo"][]> {
    return (await this.transport.request<S["TenantList"]>("GET", "/v1/admin/tenants", o)).tenants;
  }

  /** sandboxes is the lower API: a sandbox with commands, files and a TTL. */
  get sandboxes(): Sandboxes {
    return new Sandboxes(this.transport);
  }
}

/** Sandboxes is the lower API (/v1/sandboxes). */
export class Sandboxes {
  constructor(private readonly t: Transport) {}

  private p(id: string, rest = ""): string {
    return "/v1/sandboxes/" + encodeURIComponent(id) + rest;
  }

  async create(req: Partial<S["SandboxRequest"]> = {}, o?: CallOptions): Promise<S["Sandbox"]> {
    return this.t.request("POST", "/v1/sandboxes", { body: req, ...o });
  }

  async list(o?: CallOptions): Promise<S["Sandbox"][]> {
    return (await this.t.request<S["SandboxList"]>("GET", "/v1/sandboxes", o)).sandboxes;
  }

  async get(id: string, o?: CallOptions): Promise<S["Sandbox"]> {
    return this.t.request("GET", this.p(id), o);
  }

  async delete(id: string, o?: CallOptions): Promise<void> {
    await this.t.request("DELETE", this.p(id), o);
  }

  /** process runs a command in the sandbox to completion. */
  async process(id: string, req: Partial<S["ProcessRequest"]> & { command: string }, o?: CallOptions): Promise<unknown> {
    return this.t.request("POST", this.p(id, "/process"), { body: req, ...o });
  }

  async readFile(id: string, path: string, o?: CallOptions): Promise<S["SandboxFile"]> {
    return this.t.request("POST", this.p(id, "/fs/read"), { body: { path }, ...o });
  }

  async writeFile(id: string, req: S["SandboxWrite"], o?: CallOptions): Promise<S["SandboxWritten"]> {
    return this.t.request("POST", this.p(id, "/fs/write"), { body: req, ...o });
  }

  async speculate(id: string, req: Partial<S["SpeculateRequest"]> & { command: string; paths: string[] }, o?: CallOptions): Promise<S["Changeset"]> {
    return this.t.request("POST", this.p(id, "/speculate"), { body: req, ...o });
  }

  async changesets(id: string, o?: CallOptions): Promise<S["Changeset"][]> {
    return (await this.t.request<S["ChangesetList"]>("GET", this.p(id, "/changesets"), o)).changesets;
  }

  async changeset(id: string, cs: string, o?: CallOptions): Promise<S["Changeset"]> {
    return this.t.request("GET", this.p(id, "/changesets/" + encodeURIComponent(cs)), o);
  }

  async decideChangeset(id: string, cs: string, d: S["ChangesetDecision"], o?: CallOptions): Promise<S["Changeset"]> {
    return this.t.request("POST", this.p(id, "/changesets/" + encodeURIComponent(cs) + "/decide"), { body: d, ...o });
  }

  async applyChangeset(id: string, cs: string, o?: CallOptions): Promise<S["ApplyResult"]> {
    return this.t.request("POST", this.p(id, "/changesets/" + encodeURIComponent(cs) + "/apply"), { body: {}, ...o });
  }
}

function sp(id: string): string {
  return "/v1/agents/sessions/" + encodeURIComponent(id);
}

/** Session is one agent session; its methods act on it. */
export class Session {
  readonly client: Paddock;
  /** The session as last read (create, refresh, restore). */
  info: SessionInfo;

  constructor(client: Paddock, info: SessionInfo) {
    this.client = client;
    this.info = info;
  }

  get id(): string {
    return this.info.id;
  }

  private get t(): Transport {
    return this.client.transport;
  }

  private p(rest = ""): string {
    return sp(this.id) + rest;
  }

  /** refresh reads the session again. */
  async refresh(o?: CallOptions): Promise<SessionInfo> {
    this.info = await this.t.request<SessionInfo>("GET", this.p(), o);
    return this.info;
  }

  /** delete deletes the session (a second delete is fine). */
  async delete(o?: CallOptions): Promise<void> {
    await this.t.request("DELETE", this.p(), o);
  }

  /** For `await using s = await pd.createSession(...)`: the session is deleted at the end of the block. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.delete();
  }

  // --- exec

  /** exec runs a shell line to completion. A command held for approval throws ApprovalRequired. */
  async exec(command: string, o: ExecOptions = {}): Promise<ExecResult> {
    return execResult(await this.t.request<ExecResultWire>("POST", this.p("/exec"), { body: execBody(command, o), ...o }));
  }

  /** execStream runs a shell line and yields its output as it comes, ending with its exit. */
  async *execStream(command: string, o: ExecOptions = {}): AsyncGenerator<StreamEvent> {
    for await (const ev of this.t.stream("POST", this.p("/exec/stream"), { body: execBody(command, o), ...o })) {
      const e = jobEvent(ev);
      if (e) {
        yield e;
        if (e.type === "exit") return;
      }
    }
    throw new PaddockError(0, "stream_ended", "exec stream ended before the command's exit");
  }

  // --- jobs

  async startJob(command: string, o: ExecOptions & { stdin?: boolean; maxOutputBytes?: number } = {}): Promise<Job> {
    const b = execBody(command, o);
    if (o.stdin) b.stdin = true;
    if (o.maxOutputBytes !== undefined) b.max_output_bytes = o.maxOutputBytes;
    return this.t.request("POST", this.p("/jobs"), { body: b, ...o });
  }

  async jobs(o?: CallOptions): Promise<Job[]> {
    return (await this.t.request<S["JobList"]>("GET", this.p("/jobs"), o)).jobs;
  }

  /** readJob reads a job and its output from the offsets; waitMs long-polls for more. */
  async readJob(job: string, opts: { offset?: number; stderrOffset?: number; waitMs?: number } & CallOptions = {}): Promise<JobRead> {
    return this.t.request("GET", this.p("/jobs/" + encodeURIComponent(job)), {
      query: { offset: opts.offset, stderr_offset: opts.stderrOffset, wait_ms: opts.waitMs },
      ...opts,
    });
  }

  /** writeStdin sends text (or bytes) to a job's stdin; close closes it after. */
  async writeStdin(job: string, data: string | Uint8Array, opts: { close?: boolean } & CallOptions = {}): Promise<Job> {
    const b: Record<string, unknown> = typeof data === "string" ? { text: data } : { data_base64: b64encode(data) };
    if (opts.close) b.close = true;
    return this.t.request("POST", this.p("/jobs/" + encodeURIComponent(job) + "/stdin"), { body: b, ...opts });
  }

  async closeStdin(job: string, o?: CallOptions): Promise<Job> {
    return this.writeStdin(job, "", { ...o, close: true });
  }

  /** killJob signals a job (the daemon's default signal when none is given). */
  async killJob(job: string, opts: { signal?: string } & CallOptions = {}): Promise<Job> {
    return this.t.request("DELETE", this.p("/jobs/" + encodeURIComponent(job)), { query: { signal: opts.signal }, ...opts });
  }

  /** followJob streams a job's output from lastEventId (an offset cursor the stream sent) to its exit. */
  async *followJob(job: string, opts: { lastEventId?: string } & CallOptions = {}): AsyncGenerator<StreamEvent & { id?: string }> {
    for await (const ev of this.t.stream("GET", this.p("/jobs/" + encodeURIComponent(job) + "/stream"), opts)) {
      const e = jobEvent(ev);
      if (e) {
        yield { ...e, id: ev.id };
        if (e.type === "exit") return;
      }
    }
  }

  // --- files

  /** readFile reads a whole file (at most 8 MiB; download reads any size). */
  async readFile(path: string, o?: CallOptions): Promise<Uint8Array> {
    const r = await this.t.request<S["FileRead"]>("GET", this.p("/files/content"), { query: { path }, ...o });
    return b64decode(r.content_base64);
  }

  async readText(path: string, o?: CallOptions): Promise<string> {
    return new TextDecoder().decode(await this.readFile(path, o));
  }

  /** writeFile writes a file: in one request up to 4 MiB, through a resumable upload with a sha256 check above. */
  async writeFile(path: string, data: string | Uint8Array, opts: { mode?: string } & CallOptions = {}): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    if (bytes.byteLength > SINGLE_WRITE_MAX) {
      await this.upload(path, bytes, opts);
      return;
    }
    const b: Record<string, unknown> = { path, content_base64: b64encode(bytes) };
    if (opts.mode) b.mode = opts.mode;
    await this.t.request("PUT", this.p("/files/content"), { body: b, ...opts });
  }

  /** listFiles lists a directory (or stats a file). */
  async listFiles(path: string, o?: CallOptions): Promise<Listing> {
    return this.t.request("GET", this.p("/files"), { query: { path }, ...o });
  }

  async deleteFile(path: string, opts: { recursive?: boolean } & CallOptions = {}): Promise<void> {
    await this.t.request("DELETE", this.p("/files"), { query: { path, recursive: opts.recursive ? "true" : undefined }, ...opts });
  }

  /** readRange reads up to length bytes (at most 4 MiB) from offset; checksum asks for the whole file's sha256. */
  async readRange(path: string, offset: number, length: number, opts: { checksum?: boolean } & CallOptions = {}): Promise<S["FileRange"] & { data: Uint8Array }> {
    const r = await this.t.request<S["FileRange"]>("GET", this.p("/files/range"), {
      query: { path, offset, length: Math.min(length, RANGE_MAX), checksum: opts.checksum ? "true" : undefined },
      ...opts,
    });
    return { ...r, data: b64decode(r.data_base64) };
  }

  /**
   * download reads a file of any size by ranges, retrying a failed range
   * from where it stopped, and checks the bytes against the file's sha256.
   */
  async download(path: string, opts: { maxBytes?: number } & CallOptions = {}): Promise<Uint8Array> {
    const max = opts.maxBytes ?? MAX_DOWNLOAD_BYTES;
    const parts: Uint8Array[] = [];
    let offset = 0;
    let sum = "";
    let size = -1;
    for (let tries = 0; ; ) {
      let r;
      try {
        r = await this.readRange(path, offset, RANGE_MAX, { checksum: offset === 0, signal: opts.signal });
      } catch (e) {
        if (opts.signal?.aborted || (e instanceof PaddockError && e.status > 0 && e.status < 500)) throw e;
        if (++tries > MAX_RETRIES) throw e;
        continue;
      }
      if (offset === 0) {
        sum = r.sha256 ?? "";
        size = r.size;
        if (size > max) throw new PaddockError(413, "too_large", `${path} is ${size} bytes, over maxBytes ${max}`);
      }
      parts.push(r.data);
      offset += r.length;
      if (r.eof || r.length === 0) break;
    }
    const out = new Uint8Array(offset);
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.byteLength;
    }
    if (offset !== size || (sum && (await sha256hex(out)) !== sum)) {
      throw new PaddockError(409, "conflict", `${path} changed while it was read`);
    }
    return out;
  }

  /**
   * upload writes a file through a resumable upload: 4 MiB chunks, each
   * retried from the offset the daemon holds after a failure or a
   * conflict, and a sha256 check before the file appears. An upload that
   * cannot finish is aborted. resume continues an upload started before
   * (by its id) instead of opening a new one.
   */
  async upload(path: string, data: Uint8Array, opts: { mode?: string; resume?: string; onChunk?: (u: Upload) => void } & CallOptions = {}): Promise<Upload> {
    const sha256 = await sha256hex(data);
    let u: Upload;
    if (opts.resume) {
      u = await this.t.request<Upload>("GET", this.p("/uploads/" + encodeURIComponent(opts.resume)), opts);
    } else {
      const b: Record<string, unknown> = { path, size: data.byteLength, sha256 };
      if (opts.mode) b.mode = opts.mode;
      u = await this.t.request<Upload>("POST", this.p("/uploads"), { body: b, signal: opts.signal });
    }
    const up = this.p("/uploads/" + encodeURIComponent(u.id));
    try {
      let tries = 0;
      while (u.received < data.byteLength) {
        const end = Math.min(u.received + UPLOAD_CHUNK, data.byteLength);
        try {
          u = await this.t.request<Upload>("PUT", up, { query: { offset: u.received }, raw: data.subarray(u.received, end), signal: opts.signal });
          opts.onChunk?.(u);
          tries = 0;
        } catch (e) {
          if (opts.signal?.aborted) throw e;
          if (e instanceof PaddockError && e.status !== 409 && e.status > 0 && e.status < 500) throw e;
          if (++tries > MAX_RETRIES) throw e;
          await new Promise((r) => setTimeout(r, 100 * tries));
          u = await this.t.request<Upload>("GET", up, { signal: opts.signal });
        }
      }
      return await this.t.request<Upload>("POST", up + "/complete", { signal: opts.signal });
    } catch (e) {
      if (!opts.resume && !(opts.signal?.aborted)) await this.t.request("DELETE", up).catch(() => {});
      throw e;
    }
  }

  async uploads(o?: CallOptions): Promise<Upload[]> {
    return (await this.t.request<S["UploadList"]>("GET", this.p("/uploads"), o)).uploads;
  }

  // --- lifecycle

  async checkpoint(tag?: string, opts: { memory?: boolean } & CallOptions = {}): Promise<Checkpoint> {
    const b: Record<string, unknown> = {};
    if (tag) b.tag = tag;
    if (opts.memory !== undefined) b.memory = opts.memory;
    return this.t.request("POST", this.p("/checkpoint"), { body: b, ...opts });
  }

  async restore(tag: string, o?: CallOptions): Promise<SessionInfo> {
    this.info = await this.t.request<SessionInfo>("POST", this.p("/restore"), { body: { tag }, ...o });
    return this.info;
  }

  /** fork starts count children from this session's state (or a checkpoint, from) and returns them as sessions. */
  async fork(count: number, opts: { identity?: "best-effort" | "unique" | "preserve"; from?: string } & CallOptions = {}): Promise<Session[]> {
    return (await this.forkWith(count, opts)).children;
  }

  /** forkWith is fork with the whole answer (memory, not carried jobs, identities). */
  async forkWith(count: number, opts: { identity?: "best-effort" | "unique" | "preserve"; from?: string } & CallOptions = {}): Promise<Omit<S["ForkResult"], "children"> & { children: Session[] }> {
    const b: Record<string, unknown> = { count };
    if (opts.identity) b.identity = opts.identity;
    if (opts.from) b.from = opts.from;
    const r = await this.t.request<S["ForkResult"]>("POST", this.p("/fork"), { body: b, ...opts });
    return { ...r, children: r.children.map((c) => new Session(this.client, c)) };
  }

  /** promote merges this fork child's workspace changes into its parent (dryRun: the plan only). */
  async promote(opts: { dryRun?: boolean; planId?: string; skipConflicts?: boolean; paths?: string[] } & CallOptions = {}): Promise<PromoteResult> {
    const b: Record<string, unknown> = {};
    if (opts.dryRun) b.dry_run = true;
    if (opts.planId) b.plan_id = opts.planId;
    if (opts.skipConflicts) b.skip_conflicts = true;
    if (opts.paths) b.paths = opts.paths;
    return this.t.request("POST", this.p("/promote"), { body: b, ...opts });
  }

  async artifacts(o?: CallOptions): Promise<Artifacts> {
    return this.t.request("GET", this.p("/artifacts"), o);
  }

  async trajectory(o?: CallOptions): Promise<S["Trajectory"]> {
    return this.t.request("GET", this.p("/trajectory"), o);
  }

  async probe(o?: CallOptions): Promise<S["Probe"]> {
    return this.t.request("GET", this.p("/probe"), o);
  }


  // --- rewind, replay, speculate and changesets (bodies are the API's, snake_case)

  async rewind(o?: CallOptions): Promise<S["Rewind"]> {
    return this.t.request("GET", this.p("/rewind"), o);
  }

  async rewindConfig(req: Partial<S["RewindConfigRequest"]>, o?: CallOptions): Promise<S["Rewind"]> {
    return this.t.request("POST", this.p("/rewind/config"), { body: req, ...o });
  }

  async rewindUndo(req: Partial<S["RewindUndoRequest"]> = {}, o?: CallOptions): Promise<S["RewindUndo"]> {
    return this.t.request("POST", this.p("/rewind/undo"), { body: req, ...o });
  }

  async rewindPin(tag: string, pinned = true, o?: CallOptions): Promise<S["RewindPoint"]> {
    return this.t.request("POST", this.p("/rewind/pin"), { body: { tag, pinned }, ...o });
  }

  async rewindBisect(req: Partial<S["RewindBisectRequest"]>, o?: CallOptions): Promise<S["RewindBisect"]> {
    return this.t.request("POST", this.p("/rewind/bisect"), { body: req, ...o });
  }

  async rewindBranch(req: Partial<S["RewindBranchRequest"]>, o?: CallOptions): Promise<unknown> {
    return this.t.request("POST", this.p("/rewind/branch"), { body: req, ...o });
  }

  /** replay runs the session's recorded commands again (the API's ReplayRequest). */
  async replay(req: Partial<S["ReplayRequest"]> = {}, o?: CallOptions): Promise<S["ReplayResult"]> {
    return this.t.request("POST", this.p("/replay"), { body: req, ...o });
  }

  /** speculate runs a command in an isolated copy and returns what it changed under paths, as a changeset. */
  async speculate(command: string, paths: string[], opts: { cwd?: string; timeoutSeconds?: number } & CallOptions = {}): Promise<S["Changeset"]> {
    const b: Record<string, unknown> = { command, paths };
    if (opts.cwd) b.cwd = opts.cwd;
    if (opts.timeoutSeconds !== undefined) b.timeout_seconds = opts.timeoutSeconds;
    return this.t.request("POST", this.p("/speculate"), { body: b, ...opts });
  }

  async changesets(o?: CallOptions): Promise<S["Changeset"][]> {
    return (await this.t.request<S["ChangesetList"]>("GET", this.p("/changesets"), o)).changesets;
  }

  async changeset(id: string, o?: CallOptions): Promise<S["Changeset"]> {
    return this.t.request("GET", this.p("/changesets/" + encodeURIComponent(id)), o);
  }

  async decideChangeset(id: string, decision: S["ChangesetDecision"], o?: CallOptions): Promise<S["Changeset"]> {
    return this.t.request("POST", this.p("/changesets/" + encodeURIComponent(id) + "/decide"), { body: decision, ...o });
  }

  async applyChangeset(id: string, o?: CallOptions): Promise<S["ApplyResult"]> {
    return this.t.request("POST", this.p("/changesets/" + encodeURIComponent(id) + "/apply"), { body: {}, ...o });
  }

  // --- evaluate and rollout: client-side orchestration over fork, exec and delete

  /** evaluate forks one child per candidate, tests and scores each and keeps the winner (see orchestrate.ts). */
  async evaluate(req: EvaluateRequest, o?: CallOptions): Promise<EvaluateResult> {
    return evaluate(this, req, o);
  }

  /** rollout forks count children, runs one command in each and returns the runs. */
  async rollout(req: RolloutRequest, o?: CallOptions): Promise<RolloutResult> {
    return rollout(this, req, o);
  }


  // --- git, previews, grants

  async gitStatus(opts: { repo?: string } & CallOptions = {}): Promise<S["GitResult"]> {
    return this.t.request("GET", this.p("/git/status"), { query: { repo: opts.repo }, ...opts });
  }

  async gitDiff(opts: { repo?: string } & CallOptions = {}): Promise<S["GitResult"]> {
    return this.t.request("GET", this.p("/git/diff"), { query: { repo: opts.repo }, ...opts });
  }

  async gitLog(opts: { repo?: string; n?: number } & CallOptions = {}): Promise<unknown> {
    return this.t.request("GET", this.p("/git/log"), { query: { repo: opts.repo, n: opts.n }, ...opts });
  }

  async gitCommit(req: Partial<S["GitRequest"]>, o?: CallOptions): Promise<S["GitResult"]> {
    return this.t.request("POST", this.p("/git/commit"), { body: req, ...o });
  }

  async gitBranch(req: Partial<S["GitRequest"]>, o?: CallOptions): Promise<S["GitResult"]> {
    return this.t.request("POST", this.p("/git/branch"), { body: req, ...o });
  }

  /** expose asks for an expiring preview URL of a guest port; the URL is the credential. */
  async expose(port: number, opts: { ttlSeconds?: number } & CallOptions = {}): Promise<S["Preview"]> {
    const b: Record<string, unknown> = { port };
    if (opts.ttlSeconds !== undefined) b.ttl_seconds = opts.ttlSeconds;
    return this.t.request("POST", this.p("/preview"), { body: b, ...opts });
  }

  async previews(o?: CallOptions): Promise<S["Preview"][]> {
    return (await this.t.request<S["PreviewList"]>("GET", this.p("/previews"), o)).previews;
  }

  async closePreview(id: string, o?: CallOptions): Promise<void> {
    await this.t.request("DELETE", this.p("/preview/" + encodeURIComponent(id)), o);
  }

  /** grant has the egress proxy add a credential header to the session's requests to hosts (admin or tenant). */
  async grant(req: Partial<S["GrantRequest"]> & { hosts: string[] }, o?: CallOptions): Promise<S["Grant"]> {
    return this.t.request("POST", this.p("/grants"), { body: req, ...o });
  }

  async grants(o?: CallOptions): Promise<S["Grant"][]> {
    return (await this.t.request<S["GrantList"]>("GET", this.p("/grants"), o)).grants;
  }

  /** revokeGrant revokes one grant, or all of them when id is absent. */
  async revokeGrant(id?: string, o?: CallOptions): Promise<void> {
    await this.t.request("DELETE", this.p(id ? "/grants/" + encodeURIComponent(id) : "/grants"), o);
  }

  /** terminalTicket returns a short-lived ticket for the terminal WebSocket (GET .../pty). */
  async terminalTicket(o?: CallOptions): Promise<S["TerminalTicket"]> {
    return this.t.request("POST", this.p("/pty-ticket"), { body: {}, ...o });
  }

  /** abortUpload drops an unfinished upload. */
  async abortUpload(id: string, o?: CallOptions): Promise<void> {
    await this.t.request("DELETE", this.p("/uploads/" + encodeURIComponent(id)), o);
  }

  async uploadStatus(id: string, o?: CallOptions): Promise<Upload> {
    return this.t.request("GET", this.p("/uploads/" + encodeURIComponent(id)), o);
  }

  // --- events

  /** events reads the ledger and VM events (newer than since, an RFC 3339 time, when given). */
  async events(opts: { since?: string } & CallOptions = {}): Promise<Events> {
    return this.t.request("GET", this.p("/events"), { query: { since: opts.since }, ...opts });
  }

  /**
   * eventStream follows the ledger live. Each entry carries id, its ledger
   * seq: pass the last one seen as lastEventId to resume after it. With
   * resume set, the stream is reopened from the last id after it ends
   * (the daemon ends a stream after an hour) or drops.
   */
  async *eventStream(opts: { lastEventId?: string; since?: string; resume?: boolean } & CallOptions = {}): AsyncGenerator<{ id?: string; event: string; data: unknown }> {
    let last = opts.lastEventId;
    for (let drops = 0; ; ) {
      try {
        for await (const ev of this.t.stream("GET", this.p("/events/stream"), { query: { since: last === undefined ? opts.since : undefined }, lastEventId: last, signal: opts.signal })) {
          if (ev.event === "error") {
            const d = JSON.parse(ev.data) as { code?: string };
            if (opts.resume && d.code === "stream_max_age") break;
            jobEvent(ev);
          }
          if (ev.id) last = ev.id;
          drops = 0;
          yield { id: ev.id, event: ev.event, data: ev.data ? JSON.parse(ev.data) : null };
        }
      } catch (e) {
        if (!opts.resume || e instanceof PaddockError || opts.signal?.aborted || ++drops > MAX_RETRIES) throw e;
      }
      if (!opts.resume) return;
      // A short pause before reopening, longer after each drop in a row.
      await new Promise((r) => setTimeout(r, 100 * 2 ** Math.min(drops, 5)));
    }
  }

  // --- approvals

  async approvals(o?: CallOptions): Promise<Approval[]> {
    return (await this.t.request<S["ApprovalList"]>("GET", this.p("/approvals"), o)).approvals;
  }

  async approve(approvalId: string, opts: { note?: string } & CallOptions = {}): Promise<Approval> {
    return this.t.request("POST", this.p("/approvals/" + encodeURIComponent(approvalId) + "/approve"), { body: opts.note ? { note: opts.note } : {}, ...opts });
  }

  async deny(approvalId: string, opts: { note?: string } & CallOptions = {}): Promise<Approval> {
    return this.t.request("POST", this.p("/approvals/" + encodeURIComponent(approvalId) + "/deny"), { body: opts.note ? { note: opts.note } : {}, ...opts });
  }

  // --- tokens

  /** createToken mints a session token for ops; its secret (token) is in this answer only. */
  async createToken(ops: S["TokenRequest"]["ops"], opts: { ttlSeconds?: number; label?: string } & CallOptions = {}): Promise<SessionToken> {
    const b: Record<string, unknown> = { ops };
    if (opts.ttlSeconds !== undefined) b.ttl_seconds = opts.ttlSeconds;
    if (opts.label) b.label = opts.label;
    return this.t.request("POST", this.p("/tokens"), { body: b, ...opts });
  }

  async tokens(o?: CallOptions): Promise<SessionToken[]> {
    return (await this.t.request<S["TokenList"]>("GET", this.p("/tokens"), o)).tokens;
  }

  async revokeToken(tokenId: string, o?: CallOptions): Promise<void> {
    await this.t.request("DELETE", this.p("/tokens/" + encodeURIComponent(tokenId)), o);
  }
}

export { Transport };
