// Writes src/openapi.gen.ts from docs/api/openapi.yaml with
// openapi-typescript (a dev dependency). With --check it writes nothing and
// exits 1 when the checked-in file differs from a fresh generation.
import openapiTS, { astToString } from "openapi-typescript";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const spec = new URL("../../../docs/api/openapi.yaml", import.meta.url);
const out = fileURLToPath(new URL("../src/openapi.gen.ts", import.meta.url));

export async function generate() {
  const ast = await openapiTS(spec);
  return "// Generated from docs/api/openapi.yaml by scripts/gen-types.mjs; do not edit.\n" + astToString(ast);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const fresh = await generate();
  if (process.argv.includes("--check")) {
    const old = readFileSync(out, "utf8");
    if (old !== fresh) {
      console.error("src/openapi.gen.ts is out of date with docs/api/openapi.yaml: run npm run gen");
      process.exit(1);
    }
  } else {
    writeFileSync(out, fresh);
  }
}
