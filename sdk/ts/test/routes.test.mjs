// The SDK against docs/api/openapi.yaml: every operation is offered by a
// method that exists (ROUTES) or listed as not offered with a reason, and
// the checked-in types are what a fresh generation gives.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { ROUTES, NOT_OFFERED, Paddock, Session, Sandboxes } from "../dist/index.js";
import { generate } from "../scripts/gen-types.mjs";

// operations reads "METHOD /path" of every operation under paths:.
function operations() {
  const doc = readFileSync(new URL("../../../docs/api/openapi.yaml", import.meta.url), "utf8");
  const ops = [];
  let inPaths = false;
  let path = "";
  for (const line of doc.split("\n")) {
    if (/^paths:/.test(line)) { inPaths = true; continue; }
    if (inPaths && /^\S/.test(line)) break;
    if (!inPaths) continue;
    const p = line.match(/^  (\/\S*):\s*$/);
    if (p) { path = p[1]; continue; }
    const m = line.match(/^    (get|put|post|delete|patch|head|options):/);
    if (m) ops.push(`${m[1].toUpperCase()} ${path}`);
  }
  return ops;
}

test("every operation of openapi.yaml is offered or listed as not offered", () => {
  const ops = operations();
  assert.ok(ops.length > 60, `read only ${ops.length} operations`);
  const missing = ops.filter((o) => !(o in ROUTES) && !(o in NOT_OFFERED));
  assert.deepEqual(missing, [], "operations the SDK lacks: add a method and a ROUTES row, or a NOT_OFFERED row with the reason");
  const stale = [...Object.keys(ROUTES), ...Object.keys(NOT_OFFERED)].filter((o) => !ops.includes(o));
  assert.deepEqual(stale, [], "ROUTES rows for operations the document no longer has");
  for (const reason of Object.values(NOT_OFFERED)) assert.ok(reason.length > 20);
});

test("each ROUTES method exists on its class", () => {
  const classes = { Paddock, Session, Sandboxes };
  for (const [op, name] of Object.entries(ROUTES)) {
    const [cls, method] = name.split(".");
    assert.equal(typeof classes[cls]?.prototype[method], "function", `${op}: ${name} is not a method`);
  }
});

test("src/openapi.gen.ts is a fresh generation of openapi.yaml", async () => {
  const checkedIn = readFileSync(new URL("../src/openapi.gen.ts", import.meta.url), "utf8");
  assert.ok(checkedIn === (await generate()), "src/openapi.gen.ts is out of date: run npm run gen");
});
