// Fork into 3, test each, promote the winner: a session holds a broken
// script, three children each try a fix, a test picks the one that works,
// and its change is promoted into the parent. The others are deleted.
//
// Run with PADDOCK_URL, PADDOCK_TOKEN and PADDOCK_CA set (and on Node
// NODE_EXTRA_CA_CERTS=$PADDOCK_CA); see sdk/ts/README.md.
import { Paddock } from "@paddock/sdk";

const fixes = [
  `printf 'echo $(($1 * $2))\\n' > /workspace/add.sh`,
  `printf 'echo $(($1 + $2))\\n' > /workspace/add.sh`,
  `true`,
];
const test = `test "$(sh /workspace/add.sh 2 3)" = 5`;

const pd = new Paddock();
// The parent is deleted when this block (the module) ends.
await using parent = await pd.createSession();
await parent.writeFile("/workspace/add.sh", "echo $(($1 - $2))\n");

const children = await parent.fork(fixes.length);
try {
  const results = await Promise.all(
    children.map(async (child, i) => {
      const fix = await child.exec(fixes[i]!);
      const t = fix.exitCode === 0 ? await child.exec(test) : fix;
      return { i, child, passed: t.exitCode === 0, ms: fix.durationMs + (t === fix ? 0 : t.durationMs) };
    }),
  );
  for (const r of results) console.log(`candidate ${r.i}: ${r.passed ? "passed" : "failed"} (${r.child.id})`);
  const winner = results.filter((r) => r.passed).sort((a, b) => a.ms - b.ms)[0];
  if (!winner) throw new Error("no candidate passed");
  const plan = await winner.child.promote({ dryRun: true });
  const done = await winner.child.promote({ planId: plan.plan_id });
  console.log(`promoted candidate ${winner.i}: ${done.applied.join(", ")}`);
  console.log(`parent now says 2+3 = ${(await parent.exec("sh /workspace/add.sh 2 3")).stdout.trim()}`);
} finally {
  await Promise.allSettled(children.map((c) => c.delete()));
}
