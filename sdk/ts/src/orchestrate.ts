// evaluate and rollout: orchestration over fork, exec and delete done in
// the client, as the Go SDK does it (client/orchestrate.go), with the same
// limits, scores and winner rule. No daemon route holds them: they last as
// long as the slowest command, and each step goes through the daemon's own
// checks (fork's budget, each exec's policy, approvals and budget).
import { InvalidArgument, PaddockError } from "./errors.js";
import type { CallOptions } from "./client.js";
import type { Session } from "./index.js";

/** The most candidates one evaluate takes. */
export const MAX_CANDIDATES = 16;
/** The most children one rollout forks (fork's own limit). */
export const MAX_ROLLOUT_COUNT = 32;
/** The longest timeout of each command, in seconds (exec's bound). */
export const MAX_RUN_TIMEOUT_SECONDS = 3600;
export const DEFAULT_RUN_TIMEOUT_SECONDS = 300;
/** The longest shell line, in bytes. */
export const MAX_COMMAND_BYTES = 64 << 10;
/** How much of the end of each stream a result keeps. */
export const OUTPUT_TAIL = 2 << 10;

export const SCORE_PASSED = 100;
export const SCORE_TEST_FAILS = 10;
export const SCORE_FAILED = 0;

export interface EvaluateRequest {
  candidates: string[];
  /** Run after a candidate exited 0; absent, the candidate's exit decides. */
  test?: string;
  keepAll?: boolean;
  timeoutSeconds?: number;
}

export interface CandidateResult {
  index: number;
  command: string;
  session: string;
  score: number;
  exitCode: number | null;
  testExitCode?: number;
  timedOut: boolean;
  durationMs: number;
  /** Why a command never ran (refused by policy, a budget, an approval). */
  error?: string;
  stdoutTail: string;
  stderrTail: string;
  deleted: boolean;
  deleteError?: string;
}

export interface EvaluateResult {
  parent: string;
  results: CandidateResult[];
  /** The winning candidate's index, -1 when none passed. */
  winner: number;
  /** The winner's child, ready for promote. */
  winnerSession?: Session;
}

export interface RolloutRequest {
  count: number;
  command: string;
  keep?: boolean;
  timeoutSeconds?: number;
}

export interface RolloutRun {
  index: number;
  session: string;
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
  error?: string;
  stdoutTail: string;
  stderrTail: string;
  deleted: boolean;
  deleteError?: string;
}

export interface RolloutResult {
  parent: string;
  command: string;
  runs: RolloutRun[];
  /** The children, when kept. */
  children: Session[];
}

function checkCommand(what: string, cmd: string): void {
  if (!cmd) throw new InvalidArgument(400, "invalid_argument", `${what} is empty`);
  const n = new TextEncoder().encode(cmd).byteLength;
  if (n > MAX_COMMAND_BYTES) throw new InvalidArgument(400, "invalid_argument", `${what} is ${n} bytes; at most ${MAX_COMMAND_BYTES}`);
}

function runTimeout(s: number | undefined): number {
  const v = s ?? DEFAULT_RUN_TIMEOUT_SECONDS;
  if (!(v >= 1 && v <= MAX_RUN_TIMEOUT_SECONDS)) {
    throw new InvalidArgument(400, "invalid_argument", `timeout ${v}s: between 1 and ${MAX_RUN_TIMEOUT_SECONDS} seconds`);
  }
  return Math.ceil(v);
}

/** tail is the end of s, at most OUTPUT_TAIL UTF-8 bytes, cut on a character boundary. */
export function tail(s: string): string {
  const b = new TextEncoder().encode(s);
  if (b.byteLength <= OUTPUT_TAIL) return s;
  let cut = b.subarray(b.byteLength - OUTPUT_TAIL);
  while (cut.length > 0 && (cut[0]! & 0xc0) === 0x80) cut = cut.subarray(1);
  return new TextDecoder().decode(cut);
}

/** pickWinner is the best passing result's index (score, then shortest run, then lowest index), -1 when none passed. */
export function pickWinner(rs: Pick<CandidateResult, "index" | "score" | "durationMs">[]): number {
  const order = [...rs].sort((x, y) => y.score - x.score || x.durationMs - y.durationMs || x.index - y.index);
  return order.length > 0 && order[0]!.score === SCORE_PASSED ? order[0]!.index : -1;
}

// refused records a daemon's refusal as the run's error; any other error
// (the connection, an abort) stops the whole orchestration.
function refused(e: unknown, what: string): string {
  if (e instanceof PaddockError) return `${what} refused: ${e.status} ${e.message}`;
  throw e;
}

async function forkN(parent: Session, n: number, o?: CallOptions): Promise<Session[]> {
  const kids = await parent.fork(n, { signal: o?.signal });
  if (kids.length !== n) {
    await deleteAll(kids);
    throw new Error(`fork of ${parent.id} answered ${kids.length} children, asked for ${n} (deleted them)`);
  }
  return kids;
}

async function deleteAll(kids: Session[]): Promise<PromiseSettledResult<void>[]> {
  return Promise.allSettled(kids.map((k) => k.delete()));
}

export async function evaluate(parent: Session, req: EvaluateRequest, o?: CallOptions): Promise<EvaluateResult> {
  const n = req.candidates.length;
  if (n < 1 || n > MAX_CANDIDATES) throw new InvalidArgument(400, "invalid_argument", `${n} candidates: give 1 to ${MAX_CANDIDATES}`);
  req.candidates.forEach((c, i) => checkCommand(`candidate ${i}`, c));
  if (req.test) checkCommand("the test", req.test);
  const secs = runTimeout(req.timeoutSeconds);
  const kids = await forkN(parent, n, o);
  const results: CandidateResult[] = kids.map((k, i) => ({
    index: i, command: req.candidates[i]!, session: k.id, score: SCORE_FAILED, exitCode: null,
    timedOut: false, durationMs: 0, stdoutTail: "", stderrTail: "", deleted: false,
  }));
  const run = async (r: CandidateResult, kid: Session): Promise<void> => {
    let out;
    try {
      out = await kid.exec(r.command, { timeoutSeconds: secs, signal: o?.signal });
    } catch (e) {
      r.error = refused(e, "candidate");
      return;
    }
    Object.assign(r, { exitCode: out.exitCode, timedOut: out.timedOut, durationMs: out.durationMs, stdoutTail: tail(out.stdout), stderrTail: tail(out.stderr) });
    if (out.exitCode !== 0 || out.timedOut) return;
    if (!req.test) {
      r.score = SCORE_PASSED;
      return;
    }
    r.score = SCORE_TEST_FAILS;
    let tr;
    try {
      tr = await kid.exec(req.test, { timeoutSeconds: secs, signal: o?.signal });
    } catch (e) {
      r.error = refused(e, "test");
      return;
    }
    Object.assign(r, { testExitCode: tr.exitCode, durationMs: r.durationMs + tr.durationMs, timedOut: tr.timedOut, stdoutTail: tail(tr.stdout), stderrTail: tail(tr.stderr) });
    if (tr.exitCode === 0 && !tr.timedOut) r.score = SCORE_PASSED;
  };
  const settled = await Promise.allSettled(results.map((r, i) => run(r, kids[i]!)));
  const failed = settled.find((s) => s.status === "rejected") as PromiseRejectedResult | undefined;
  if (failed) {
    await deleteAll(kids);
    throw new Error(`evaluate stopped, its children deleted: ${String(failed.reason)}`, { cause: failed.reason });
  }
  const winner = pickWinner(results);
  if (!req.keepAll) {
    const losers = results.filter((r) => r.index !== winner);
    const outs = await Promise.allSettled(losers.map((r) => kids[r.index]!.delete()));
    outs.forEach((s, i) => {
      losers[i]!.deleted = s.status === "fulfilled";
      if (s.status === "rejected") losers[i]!.deleteError = String(s.reason);
    });
  }
  return { parent: parent.id, results, winner, winnerSession: winner >= 0 ? kids[winner] : undefined };
}

export async function rollout(parent: Session, req: RolloutRequest, o?: CallOptions): Promise<RolloutResult> {
  if (!(req.count >= 1 && req.count <= MAX_ROLLOUT_COUNT)) {
    throw new InvalidArgument(400, "invalid_argument", `count ${req.count}: give 1 to ${MAX_ROLLOUT_COUNT}`);
  }
  checkCommand("the command", req.command);
  const secs = runTimeout(req.timeoutSeconds);
  const kids = await forkN(parent, req.count, o);
  const runs: RolloutRun[] = kids.map((k, i) => ({
    index: i, session: k.id, exitCode: null, timedOut: false, durationMs: 0, stdoutTail: "", stderrTail: "", deleted: false,
  }));
  const settled = await Promise.allSettled(runs.map(async (r, i) => {
    try {
      const out = await kids[i]!.exec(req.command, { timeoutSeconds: secs, signal: o?.signal });
      Object.assign(r, { exitCode: out.exitCode, timedOut: out.timedOut, durationMs: out.durationMs, stdoutTail: tail(out.stdout), stderrTail: tail(out.stderr) });
    } catch (e) {
      r.error = refused(e, "command");
    }
  }));
  const failed = settled.find((s) => s.status === "rejected") as PromiseRejectedResult | undefined;
  if (failed) {
    await deleteAll(kids);
    throw new Error(`rollout stopped, its children deleted: ${String(failed.reason)}`, { cause: failed.reason });
  }
  if (!req.keep) {
    const outs = await deleteAll(kids);
    outs.forEach((s, i) => {
      runs[i]!.deleted = s.status === "fulfilled";
      if (s.status === "rejected") runs[i]!.deleteError = String(s.reason);
    });
  }
  return { parent: parent.id, command: req.command, runs, children: req.keep ? kids : [] };
}
