// The official TypeScript MCP SDK's client drives `paddock mcp serve` over
// stdio, or with MCP_HTTP_URL set the daemon's /mcp over streamable HTTP
// through the gateway (TLS, trusted through NODE_EXTRA_CA_CERTS), with
// PADDOCK_TOKEN as the bearer token (cmd/paddock's TestMCPTypeScriptClient
// runs both). It walks the
// issue's proof: list the tools, create a session, exec, hit a command held
// for approval and read its id from the error, approve it (admin), run it
// with approval_id, write and read a file, fork and promote, delete. It
// prints one JSON report on stdout and exits 1 with the reason on stderr
// when a step does not go as it should.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const bin = process.env.PADDOCK_BIN;
const httpURL = process.env.MCP_HTTP_URL;
if (!bin && !httpURL) {
  console.error("set PADDOCK_BIN (stdio) or MCP_HTTP_URL (streamable HTTP)");
  process.exit(2);
}

function fail(msg) {
  console.error(msg);
  process.exit(1);
}

const transport = httpURL
  ? new StreamableHTTPClientTransport(new URL(httpURL), {
      requestInit: { headers: { Authorization: `Bearer ${process.env.PADDOCK_TOKEN}` } },
    })
  : new StdioClientTransport({
      command: bin,
      args: ["mcp", "serve", "--allow-write"],
      env: { ...process.env },
      stderr: "inherit",
    });
const client = new Client({ name: "paddock-ts-test", version: "1.0.0" });
await client.connect(transport);

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
  return { ok: !res.isError, out: res.structuredContent, text };
}

async function must(name, args) {
  const r = await call(name, args);
  if (!r.ok) fail(`${name}: ${r.text}`);
  return r.out;
}

const report = { transport: httpURL ? "http" : "stdio" };
const tools = await client.listTools();
report.tools = tools.tools.map((t) => t.name).sort();
for (const t of tools.tools) {
  if (!t.inputSchema || t.inputSchema.type !== "object") fail(`${t.name}: no object input schema`);
}

const ses = await must("session_create", { agent: "ts-client", ask: ["touch *"] });
report.session = ses.id;
const ex = await must("session_exec", { session: ses.id, command: "echo from typescript" });
if (ex.exit_code !== 0 || ex.stdout !== "from typescript\n") fail(`exec: ${JSON.stringify(ex)}`);

const held = await call("session_exec", { session: ses.id, command: "touch /workspace/approved" });
const m = held.text.match(/apr-[0-9a-f]{16}/);
if (held.ok || !m || !held.text.startsWith("approval_required")) fail(`held: ${held.text}`);
report.held = held.text;
const apr = await must("session_approve", { session: ses.id, approval_id: m[0] });
if (apr.state !== "approved") fail(`approve: ${JSON.stringify(apr)}`);
const ran = await must("session_exec", { session: ses.id, command: "touch /workspace/approved", approval_id: m[0] });
if (ran.exit_code !== 0) fail(`approved run: ${JSON.stringify(ran)}`);

await must("session_file_write", { session: ses.id, path: "/workspace/hello.txt", content: "hello from ts\n" });
const rd = await must("session_file_read", { session: ses.id, path: "/workspace/hello.txt" });
if (rd.content !== "hello from ts\n") fail(`read: ${JSON.stringify(rd)}`);

const fk = await must("session_fork", { session: ses.id, count: 1 });
if (fk.children.length !== 1) fail(`fork: ${JSON.stringify(fk)}`);
const child = fk.children[0];
await must("session_file_write", { session: child, path: "/workspace/child.txt", content: "made in the child\n" });
const pr = await must("session_promote", { session: child });
if (pr.applied !== 1) fail(`promote: ${JSON.stringify(pr)}`);
const back = await must("session_file_read", { session: ses.id, path: "/workspace/child.txt" });
if (back.content !== "made in the child\n") fail(`promoted file: ${JSON.stringify(back)}`);
report.promoted = back.content;

await must("session_delete", { session: child });
await must("session_delete", { session: ses.id });
const gone = await must("session_get", { session: ses.id });
report.final_state = gone.state;

await client.close();
console.log(JSON.stringify(report));
