// Offline tests of the SDK's pure parts: errors from answers, the SSE
// reader, the orchestration's winner rule, upload retries against a fake
// fetch, and the CA rule. They run on the compiled dist/.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Paddock, Session, errorFrom, parseSSE, pickWinner, tail, OUTPUT_TAIL,
  ApprovalRequired, BudgetExceeded, PolicyDenied, Conflict, NotFound, Forbidden, PaddockError,
  TooManyRequests, RevisionMismatch, InvalidArgument, Unauthenticated, BadGateway, jobEvent,
} from "../dist/index.js";

test("errors: class from the code first, the status second", () => {
  const held = errorFrom(428, JSON.stringify({ error: "held", code: "approval_required", approval_id: "apr-0123456789abcdef", matched: "process.ask: deploy *" }));
  assert.ok(held instanceof ApprovalRequired);
  assert.equal(held.approvalId, "apr-0123456789abcdef");
  assert.equal(held.matched, "process.ask: deploy *");
  const denied = errorFrom(403, JSON.stringify({ error: "no", code: "policy_refused", rule: "process.deny", pattern: "rm *" }));
  assert.ok(denied instanceof PolicyDenied && denied instanceof Forbidden);
  assert.equal(denied.rule, "process.deny");
  const budget = errorFrom(403, JSON.stringify({ error: "spent", code: "budget_exceeded", budget: "max_execs", limit: 2, used: 2 }));
  assert.ok(budget instanceof BudgetExceeded);
  assert.deepEqual([budget.budget, budget.limit, budget.used], ["max_execs", 2, 2]);
  // A finer code of the conflict kind is a Conflict by its status.
  const disk = errorFrom(409, JSON.stringify({ error: "full", code: "disk_exhausted" }));
  assert.ok(disk instanceof Conflict);
  assert.equal(disk.code, "disk_exhausted");
  assert.ok(errorFrom(404, JSON.stringify({ error: "x", code: "not_found" })) instanceof NotFound);
  assert.ok(errorFrom(412, "{}") instanceof RevisionMismatch);
  assert.ok(errorFrom(400, JSON.stringify({ error: "x", code: "memory_above_host" })) instanceof InvalidArgument);
  assert.ok(errorFrom(401, "") instanceof Unauthenticated);
  const lim = errorFrom(429, JSON.stringify({ error: "cap", code: "job_streams_session", limit: 4 }));
  assert.ok(lim instanceof TooManyRequests);
  assert.equal(lim.limit, 4);
  // A proxy's page: the text is the message, the status picks the class.
  const proxy = errorFrom(502, "<html>bad gateway</html>\n");
  assert.ok(proxy instanceof BadGateway);
  assert.equal(proxy.message, "<html>bad gateway</html>");
  assert.equal(errorFrom(418, "teapot").constructor, PaddockError);
});

function streamOf(chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

test("sse: events split anywhere across chunks, comments and CRLF", async () => {
  const text = ": hello\r\nid: 7\r\nevent: output\r\ndata: {\"a\":1}\r\n\r\nevent: exit\ndata: {\"exit_code\":0}\n\n";
  for (let cut = 1; cut < text.length; cut++) {
    const evs = [];
    for await (const e of parseSSE(streamOf([text.slice(0, cut), text.slice(cut)]))) evs.push(e);
    assert.deepEqual(evs, [
      { id: "7", event: "output", data: "{\"a\":1}" },
      { id: undefined, event: "exit", data: "{\"exit_code\":0}" },
    ], `cut at ${cut}`);
  }
});

test("job events: output bytes, a signal's exit, an error event throws", () => {
  const out = jobEvent({ event: "output", data: JSON.stringify({ offset: 0, next_offset: 3, output: "hi\n", output_base64: "aGkK" }) });
  assert.equal(new TextDecoder().decode(out.data), "hi\n");
  assert.equal(out.nextOffset, 3);
  assert.equal(jobEvent({ event: "exit", data: JSON.stringify({ exit_code: null, state: "signaled", signal: "KILL" }) }).exitCode, 137);
  assert.equal(jobEvent({ event: "exit", data: JSON.stringify({ exit_code: 3, state: "exited", signal: "" }) }).exitCode, 3);
  assert.throws(() => jobEvent({ event: "error", data: JSON.stringify({ error: "gone", code: "session_ended" }) }), (e) => e instanceof PaddockError && e.code === "session_ended");
});

test("orchestration: the winner rule and output tails", () => {
  assert.equal(pickWinner([{ index: 0, score: 10, durationMs: 1 }, { index: 1, score: 100, durationMs: 9 }, { index: 2, score: 100, durationMs: 5 }]), 2);
  assert.equal(pickWinner([{ index: 0, score: 100, durationMs: 5 }, { index: 1, score: 100, durationMs: 5 }]), 0);
  assert.equal(pickWinner([{ index: 0, score: 10, durationMs: 1 }]), -1);
  assert.equal(pickWinner([]), -1);
  const long = "é".repeat(OUTPUT_TAIL); // 2 bytes a character
  const t = tail("x" + long);
  assert.ok(new TextEncoder().encode(t).byteLength <= OUTPUT_TAIL);
  assert.ok(!t.includes("\uFFFD"));
  assert.equal(tail("short"), "short");
});

test("evaluate and rollout refuse bad input before forking", async () => {
  let calls = 0;
  const pd = new Paddock({ url: "https://x", token: "t", fetch: async () => { calls++; throw new Error("no"); } });
  const s = new Session(pd, { id: "s1" });
  await assert.rejects(s.evaluate({ candidates: [] }), InvalidArgument);
  await assert.rejects(s.evaluate({ candidates: Array(17).fill("true") }), InvalidArgument);
  await assert.rejects(s.evaluate({ candidates: ["true"], timeoutSeconds: 3601 }), InvalidArgument);
  await assert.rejects(s.rollout({ count: 33, command: "true" }), InvalidArgument);
  await assert.rejects(s.rollout({ count: 2, command: "x".repeat(65537) }), InvalidArgument);
  assert.equal(calls, 0);
});

test("fetch is called as a plain function, as a browser's fetch requires", async () => {
  // A browser's fetch throws "Illegal invocation" when called as a method
  // of another object; this fake does the same.
  let calls = 0;
  const fetchLikeABrowser = function (input, init) {
    if (this !== undefined && this !== globalThis) throw new TypeError("Illegal invocation");
    calls++;
    return Promise.resolve(new Response(JSON.stringify({ status: "ok" }), { status: 200, headers: { "Content-Type": "application/json" } }));
  };
  const pd = new Paddock({ url: "https://x", token: "t", fetch: fetchLikeABrowser });
  assert.deepEqual(await pd.health(), { status: "ok" });
  assert.equal(calls, 1);
});

test("config: env, and a CA Node's fetch cannot apply is refused", () => {
  const saved = { ...process.env };
  try {
    process.env.PADDOCK_URL = "https://h:1/";
    process.env.PADDOCK_TOKEN = "tok";
    delete process.env.PADDOCK_CA;
    const pd = new Paddock();
    assert.equal(pd.transport.url, "https://h:1");
    process.env.PADDOCK_CA = "/tmp/ca.pem";
    delete process.env.NODE_EXTRA_CA_CERTS;
    assert.throws(() => new Paddock(), /NODE_EXTRA_CA_CERTS=\/tmp\/ca.pem/);
    process.env.NODE_EXTRA_CA_CERTS = "/tmp/ca.pem";
    assert.ok(new Paddock());
    delete process.env.PADDOCK_TOKEN;
    delete process.env.PADDOCK_CA;
    assert.throws(() => new Paddock(), /PADDOCK_TOKEN/);
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
});

// A fake daemon's upload routes that answer one chunk with 409 (a chunk
// the daemon got though its answer was lost) and check what arrives.
test("upload: a chunk refused with 409 goes on from the daemon's offset, sha256 sent", async () => {
  const size = 9 << 20;
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i++) data[i] = (i * 7) & 0xff;
  let received = 0;
  let created;
  let lost = true;
  const got = new Uint8Array(size);
  const fetchFake = async (url, init) => {
    const u = new URL(url);
    const json = (status, v) => new Response(JSON.stringify(v), { status });
    const upload = () => ({ id: "up-1", path: "/w/f", size, received, parts: 0, state: "open", verified: false, created_at: "" });
    if (init.method === "POST" && u.pathname.endsWith("/uploads")) {
      created = JSON.parse(init.body);
      return json(201, upload());
    }
    if (init.method === "PUT") {
      const off = Number(u.searchParams.get("offset"));
      if (off !== received) return json(409, { error: "offset", code: "conflict" });
      got.set(init.body, off);
      received += init.body.byteLength;
      if (lost && received > 4 << 20) {
        lost = false;
        return json(409, { error: "lost answer", code: "conflict" });
      }
      return json(200, upload());
    }
    if (init.method === "GET") return json(200, upload());
    if (u.pathname.endsWith("/complete")) return json(200, { ...upload(), state: "complete", verified: true });
    return json(404, { error: "no", code: "not_found" });
  };
  const pd = new Paddock({ url: "https://x", token: "t", fetch: fetchFake });
  const s = new Session(pd, { id: "s1" });
  const u = await s.upload("/w/f", data);
  assert.equal(u.state, "complete");
  assert.equal(received, size);
  assert.deepEqual(got, data);
  const { createHash } = await import("node:crypto");
  assert.equal(created.sha256, createHash("sha256").update(data).digest("hex"));
});

// A fake ledger stream that drops the connection after two entries: with
// resume, the SDK reopens with Last-Event-ID set to the last seq it saw,
// and the entries go on without a gap or a repeat.
test("eventStream: resume after a dropped connection, from Last-Event-ID", async () => {
  const asked = [];
  const entry = (seq) => `id: ${seq}\nevent: ledger\ndata: ${JSON.stringify({ seq, kind: "exec" })}\n\n`;
  const fetchFake = async (url, init) => {
    const last = init.headers["Last-Event-ID"];
    asked.push(last ?? "");
    const from = last === undefined ? 1 : Number(last) + 1;
    const enc = new TextEncoder();
    let n = 0;
    const body = new ReadableStream({
      pull(c) {
        if (n === 2) {
          c.error(new TypeError("terminated")); // the connection dropped
          return;
        }
        c.enqueue(enc.encode(entry(from + n)));
        n++;
      },
    });
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  const pd = new Paddock({ url: "https://x", token: "t", fetch: fetchFake });
  const s = new Session(pd, { id: "s1" });
  const seqs = [];
  for await (const e of s.eventStream({ resume: true })) {
    seqs.push(e.data.seq);
    if (seqs.length === 5) break;
  }
  assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
  assert.deepEqual(asked, ["", "2", "4"]);
  // Without resume the drop is the caller's error.
  await assert.rejects(async () => {
    for await (const e of s.eventStream()) void e;
  }, /terminated/);
});

// docs/errors.md's two tables: each kind's code gives its class, each
// finer code one of its status's class, and FINER_CODES lists exactly the
// finer codes the document gives a status.
test("errors: every code of docs/errors.md, by its documented status", async () => {
  const { readFileSync } = await import("node:fs");
  const { FINER_CODES, Internal } = await import("../dist/index.js");
  const doc = readFileSync(new URL("../../../docs/errors.md", import.meta.url), "utf8");
  const kinds = doc.slice(doc.indexOf("## Kinds"), doc.indexOf("## Finer codes"));
  const finer = doc.slice(doc.indexOf("## Finer codes"), doc.indexOf("## The CLI"));
  const rows = (section) => [...section.matchAll(/^\| (`[^|]+`) \| (\d{3}|\(SSE\)) \|/gm)].map((m) => ({ codes: [...m[1].matchAll(/`([a-z_]+)`/g)].map((c) => c[1]), status: m[2] }));
  const kindRows = rows(kinds);
  assert.equal(kindRows.length, 14);
  const classOf = {};
  for (const r of kindRows) {
    const e = errorFrom(Number(r.status), JSON.stringify({ error: "x", code: r.codes[0] }));
    assert.notEqual(e.constructor, PaddockError, `${r.codes[0]} has no class of its own`);
    classOf[r.status] = e.constructor;
    // The code alone (an SSE event, status 0) gives the same class.
    assert.equal(errorFrom(0, JSON.stringify({ error: "x", code: r.codes[0] })).constructor, e.constructor);
  }
  const documented = {};
  for (const r of rows(finer)) {
    for (const code of r.codes) {
      if (r.status === "(SSE)") continue;
      documented[code] = Number(r.status);
      for (const status of [Number(r.status), 0]) {
        const e = errorFrom(status, JSON.stringify({ error: "x", code }));
        assert.ok(e instanceof classOf[r.status], `${code} (${status}) is a ${e.constructor.name}, not a ${classOf[r.status].name}`);
        assert.equal(e.code, code);
      }
    }
  }
  assert.deepEqual(Object.fromEntries(Object.entries(FINER_CODES).sort()), Object.fromEntries(Object.entries(documented).sort()));
  assert.ok(errorFrom(0, JSON.stringify({ error: "x", code: "promote_incomplete" })) instanceof BadGateway);
  void Internal;
});

test("compilePolicy posts the policy and returns the answer, refusals included; tenants unwraps the list", async () => {
  const seen = [];
  const fetch = (input, init) => {
    seen.push({ url: String(input), method: init.method, body: init.body ? JSON.parse(init.body) : undefined });
    const body = String(input).endsWith("/v1/policy/compile")
      ? { ok: false, network: "offline", refusals: [{ status: 409, code: "conflict", error: "no egress" }] }
      : { tenants: [{ name: "acme", limits: {}, sessions: 2 }] };
    return Promise.resolve(new Response(JSON.stringify(body), { status: 200, headers: { "Content-Type": "application/json" } }));
  };
  const pd = new Paddock({ url: "https://x", token: "t", fetch });
  const got = await pd.compilePolicy({ policy: { preset: "offline" }, backend: "procbox" });
  assert.equal(got.ok, false);
  assert.equal(got.refusals[0].code, "conflict");
  assert.deepEqual(seen[0], { url: "https://x/v1/policy/compile", method: "POST", body: { policy: { preset: "offline" }, backend: "procbox" } });
  assert.deepEqual((await pd.tenants()).map((t) => t.name), ["acme"]);
  assert.equal(seen[1].method, "GET");
  assert.equal(seen[1].url, "https://x/v1/admin/tenants");
});
