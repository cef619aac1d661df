// The SDK against a real `paddock serve` (its gateway, over TLS): run by
// cmd/paddock's TestTSSDK with PADDOCK_URL, PADDOCK_TOKEN, PADDOCK_CA and
// NODE_EXTRA_CA_CERTS set. Without PADDOCK_URL every test here is skipped,
// and that Go test fails a run with any skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import net from "node:net";
import {
  Paddock, ApprovalRequired, PolicyDenied, BudgetExceeded, NotFound, Conflict, Unauthenticated,
  InvalidArgument, RevisionMismatch,
} from "../dist/index.js";

const live = !!process.env.PADDOCK_URL;
const t = (name, fn) => test(name, { skip: live ? false : "PADDOCK_URL is not set (cmd/paddock TestTSSDK sets it)", timeout: 300_000 }, fn);

let pd;
if (live) pd = new Paddock(); // PADDOCK_URL, PADDOCK_TOKEN and PADDOCK_CA from the environment

// withSession runs fn with a new session and deletes it after, as
// `await using` does (Node 20 has no such syntax; examples/ts uses it).
async function withSession(req, fn) {
  const s = await pd.createSession(req);
  try {
    return await fn(s);
  } finally {
    await s[Symbol.asyncDispose]();
  }
}

t("session: create, exec, get, list, and asyncDispose deletes it", async () => {
  let id;
  await withSession({}, async (s) => {
    id = s.id;
    const r = await s.exec("python3 -c 'print(6 * 7)' 2>/dev/null || echo 42; echo err >&2; exit 3");
    assert.equal(r.exitCode, 3);
    assert.equal(r.stdout, "42\n");
    assert.equal(r.stderr, "err\n");
    assert.equal(r.timedOut, false);
    assert.equal((await pd.session(id)).id, id);
    assert.ok((await pd.sessions()).some((x) => x.id === id));
    assert.equal((await pd.whoami()).kind, "admin");
  });
  assert.ok(!(await pd.sessions()).some((x) => x.id === id), "the session outlived its dispose");
  await assert.rejects(pd.session("ses-does-not-exist"), NotFound);
});

t("exec stream: output as it comes, then the exit", async () => {
  await withSession({}, async (s) => {
    const seen = [];
    let out = "";
    for await (const ev of s.execStream("echo one; echo two >&2; echo three; exit 4")) {
      seen.push(ev.type);
      if (ev.type === "output") out += new TextDecoder().decode(ev.data);
      if (ev.type === "exit") assert.equal(ev.exitCode, 4);
    }
    assert.equal(out, "one\nthree\n");
    assert.ok(seen.includes("stderr") && seen.at(-1) === "exit", seen.join(","));
  });
});

t("jobs: start with stdin, write, close, long-poll read, follow, kill", async () => {
  await withSession({}, async (s) => {
    const j = await s.startJob("cat", { stdin: true });
    await s.writeStdin(j.id, "hello\n");
    await s.closeStdin(j.id);
    let r = await s.readJob(j.id, { waitMs: 5000 });
    for (let i = 0; !r.eof && i < 20; i++) r = await s.readJob(j.id, { offset: 0, waitMs: 1000 });
    assert.equal(r.output, "hello\n");
    assert.equal(r.exit_code, 0);
    const events = [];
    for await (const ev of s.followJob(j.id)) events.push(ev);
    assert.equal(events.at(-1).type, "exit");
    assert.ok((await s.jobs()).some((x) => x.id === j.id));
    const sleeper = await s.startJob("sleep 600");
    const k = await s.killJob(sleeper.id);
    assert.equal(k.id, sleeper.id);
  });
});

t("files: write, read, list, delete; a 6 MiB write goes by upload and comes back by ranges", async () => {
  await withSession({}, async (s) => {
    await s.writeFile("/workspace/a.txt", "alpha\n");
    assert.equal(await s.readText("/workspace/a.txt"), "alpha\n");
    const ls = await s.listFiles("/workspace");
    assert.ok(ls.entries.some((e) => e.name === "a.txt" && e.size === 6));
    await s.deleteFile("/workspace/a.txt");
    await assert.rejects(s.readFile("/workspace/a.txt"), NotFound);

    const big = new Uint8Array(6 << 20);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31 + (i >> 13)) & 0xff;
    const chunks = [];
    await s.upload("/workspace/big.bin", big, { onChunk: (u) => chunks.push(u.received) });
    assert.deepEqual(chunks, [4 << 20, 6 << 20]);
    const sum = (await s.exec("sha256sum /workspace/big.bin")).stdout.split(" ")[0];
    assert.equal(sum, createHash("sha256").update(big).digest("hex"));
    const back = await s.download("/workspace/big.bin");
    assert.equal(back.length, big.length);
    assert.ok(Buffer.from(back).equals(Buffer.from(big)));
    const part = await s.readRange("/workspace/big.bin", 5, 10);
    assert.deepEqual([...part.data], [...big.subarray(5, 15)]);
    // writeFile over 4 MiB uploads as well.
    await s.writeFile("/workspace/big2.bin", big);
    assert.equal((await s.listFiles("/workspace/big2.bin")).self?.size ?? (await s.listFiles("/workspace/big2.bin")).entries[0].size, big.length);
  });
});

t("uploads: an interrupted upload resumes from the daemon's offset; a wrong offset is a Conflict", async () => {
  await withSession({}, async (s) => {
    const data = new Uint8Array(5 << 20).map((_, i) => i & 0xff);
    const t = pd.transport;
    const base = `/v1/agents/sessions/${s.id}/uploads`;
    // Start an upload and send only the first chunk, as a client cut off would.
    const u = await t.request("POST", base, { body: { path: "/workspace/r.bin", size: data.length } });
    await t.request("PUT", `${base}/${u.id}`, { query: { offset: 0 }, raw: data.subarray(0, 1 << 20) });
    await assert.rejects(t.request("PUT", `${base}/${u.id}`, { query: { offset: 7 }, raw: data.subarray(7, 8) }), Conflict);
    const done = await s.upload("/workspace/r.bin", data, { resume: u.id });
    assert.equal(done.state, "complete");
    assert.equal((await s.exec("wc -c < /workspace/r.bin")).stdout.trim(), String(data.length));
  });
});

t("checkpoint, restore, fork and promote", async () => {
  await withSession({}, async (s) => {
    await s.exec("echo v1 > /workspace/state");
    await s.checkpoint("v1");
    await s.exec("echo v2 > /workspace/state");
    await s.restore("v1");
    assert.equal(await s.readText("/workspace/state"), "v1\n");
    await assert.rejects(s.restore("nope"), NotFound);
    await assert.rejects(s.checkpoint("v1b", { ifMatch: 999999 }), RevisionMismatch);
    const [child] = await s.fork(1);
    try {
      await child.exec("echo from-child > /workspace/new");
      const plan = await child.promote({ dryRun: true });
      assert.ok(plan.plan.apply.some((c) => c.path === "new"), JSON.stringify(plan.plan));
      const res = await child.promote({ planId: plan.plan_id });
      assert.ok(res.applied.includes("new"));
      assert.equal(await s.readText("/workspace/new"), "from-child\n");
      assert.ok((await s.artifacts()).added.includes("new"));
    } finally {
      await child.delete();
    }
  });
});

t("evaluate and rollout, in the client", async () => {
  await withSession({}, async (s) => {
    const ev = await s.evaluate({ candidates: ["echo good > /workspace/f", "echo bad > /workspace/f", "exit 3"], test: "grep -q good /workspace/f" });
    assert.equal(ev.winner, 0);
    assert.deepEqual(ev.results.map((r) => r.score), [100, 10, 0]);
    assert.deepEqual(ev.results.map((r) => r.deleted), [false, true, true]);
    assert.equal(await ev.winnerSession.readText("/workspace/f"), "good\n");
    await ev.winnerSession.delete();
    const ro = await s.rollout({ count: 2, command: "echo hi" });
    assert.deepEqual(ro.runs.map((r) => [r.exitCode, r.stdoutTail, r.deleted]), [[0, "hi\n", true], [0, "hi\n", true]]);
  });
});

t("approvals: ApprovalRequired with its id, approve, run with approvalId; deny", async () => {
  await withSession({ policy: { process: { ask: ["deploy*"] } } }, async (s) => {
    let held;
    await assert.rejects(s.exec("deploy-now"), (e) => {
      held = e;
      return e instanceof ApprovalRequired && /^apr-/.test(e.approvalId);
    });
    const pending = await s.approvals();
    assert.ok(pending.some((a) => a.id === held.approvalId && a.state === "pending"));
    await s.approve(held.approvalId, { note: "ok" });
    const r = await s.exec("deploy-now", { approvalId: held.approvalId });
    assert.equal(r.exitCode, 127); // approved and run: no such program in the image
    let again;
    await assert.rejects(s.exec("deploy-later"), (e) => ((again = e), e instanceof ApprovalRequired));
    const d = await s.deny(again.approvalId);
    assert.equal(d.state, "denied");
  });
});

t("refusals: PolicyDenied with its rule, BudgetExceeded with limit and used, InvalidArgument", async () => {
  await withSession({ policy: { process: { deny: ["uname*"] } }, budget: { max_execs: 2 } }, async (s) => {
    await assert.rejects(s.exec("uname -s"), (e) => e instanceof PolicyDenied && e.rule === "process.deny" && e.status === 403);
    await s.exec("true");
    await s.exec("true");
    await assert.rejects(s.exec("true"), (e) => e instanceof BudgetExceeded && e.budget === "max_execs" && e.limit === 2 && e.used === 2);
  });
  await assert.rejects(pd.createSession({ ttl_seconds: -5 }), InvalidArgument);
});

t("tokens: mint, use, list, revoke", async () => {
  await withSession({}, async (s) => {
    const tok = await s.createToken(["read", "exec"], { ttlSeconds: 600, label: "sdk test" });
    assert.ok(tok.token);
    const as = new Paddock({ url: pd.transport.url, token: tok.token });
    const mine = await as.session(s.id);
    assert.equal((await as.whoami()).kind, "session");
    assert.equal((await mine.exec("echo via-token")).stdout, "via-token\n");
    assert.ok((await s.tokens()).some((x) => x.id === tok.id));
    await s.revokeToken(tok.id);
    await assert.rejects(as.session(s.id), Unauthenticated);
  });
});

t("events: the ledger, and a live stream resumed with Last-Event-ID", async () => {
  await withSession({}, async (s) => {
    await s.exec("echo a");
    await s.exec("echo b");
    const ev = await s.events();
    assert.ok(ev.ledger.some((e) => e.kind === "exec"));
    const first = [];
    for await (const e of s.eventStream()) {
      if (e.id) first.push(e);
      if (first.length === 2) break;
    }
    const resumed = [];
    for await (const e of s.eventStream({ lastEventId: first[0].id })) {
      if (e.id) resumed.push(e);
      if (resumed.length === 1) break;
    }
    assert.equal(Number(resumed[0].id), Number(first[0].id) + 1);
    assert.equal(resumed[0].data.seq, first[1].data.seq);
  });
});

t("uploads: 20 MiB cut off mid-way by an abort, then resumed from the daemon's offset", async () => {
  await withSession({}, async (s) => {
    const data = new Uint8Array(20 << 20);
    for (let i = 0; i < data.length; i++) data[i] = (i ^ (i >> 11)) & 0xff;
    const ctl = new AbortController();
    let id;
    await assert.rejects(
      s.upload("/workspace/twenty.bin", data, {
        signal: ctl.signal,
        onChunk: (u) => {
          id = u.id;
          if (u.received >= 8 << 20) setTimeout(() => ctl.abort(), 1); // cut the next chunk in flight
        },
      }),
    );
    const st = await s.uploadStatus(id);
    assert.equal(st.state, "open");
    assert.ok(st.received >= 8 << 20 && st.received < data.length, `received ${st.received}`);
    const offsets = [];
    const done = await s.upload("/workspace/twenty.bin", data, { resume: id, onChunk: (u) => offsets.push(u.received) });
    assert.equal(done.state, "complete");
    assert.equal(done.verified, true);
    assert.ok(offsets[0] > st.received && offsets[0] <= st.received + (4 << 20), `resumed at ${offsets[0]} after ${st.received}`);
    const sum = (await s.exec("sha256sum /workspace/twenty.bin")).stdout.split(" ")[0];
    assert.equal(sum, createHash("sha256").update(data).digest("hex"));
  });
});

// cutProxy forwards TCP to the daemon's gateway (TLS passes through) and
// can drop every connection it carries, as a network failure would.
async function cutProxy(target) {
  const u = new URL(target);
  const socks = new Set();
  const srv = net.createServer((c) => {
    const up = net.connect(Number(u.port), u.hostname);
    for (const x of [c, up]) {
      socks.add(x);
      x.on("error", () => {});
      x.on("close", () => socks.delete(x));
    }
    c.pipe(up);
    up.pipe(c);
    c.on("close", () => up.destroy());
    up.on("close", () => c.destroy());
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  return {
    url: `https://127.0.0.1:${srv.address().port}`,
    cut() {
      for (const x of socks) x.destroy();
    },
    close() {
      this.cut();
      srv.close();
    },
  };
}

t("events: a live stream resumed after its connection dropped, without a gap or a repeat", async () => {
  await withSession({}, async (s) => {
    const px = await cutProxy(pd.transport.url);
    try {
      const via = await new Paddock({ url: px.url, token: pd.transport.token }).session(s.id);
      await s.exec("echo one");
      const seqs = [];
      let cut = false;
      for await (const e of via.eventStream({ resume: true })) {
        if (!e.id) continue;
        seqs.push(Number(e.id));
        if (!cut && seqs.length === 2) {
          px.cut();
          cut = true;
          await s.exec("echo two"); // ledgered while no stream is open
          await s.exec("echo three");
        }
        if (cut && seqs.length >= 4) break; // session.create and three execs at least
      }
      for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1, `seqs ${seqs}`);
      const last = (await s.events()).ledger.at(-1).seq;
      assert.ok(seqs.at(-1) <= last);
    } finally {
      px.close();
    }
  });
});
