// The official TypeScript MCP client (@modelcontextprotocol/sdk 1.x: it opens with
// `initialize`) against a running Docket: negotiation, the session, tools, progress on
// the call's stream, ping, and the end of the session. Exits non-zero on the first
// mismatch.
//
// usage: node ts_legacy.mjs URL     (the /mcp endpoint, e.g. the conformance fixture's)

import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const transport = new StreamableHTTPClientTransport(url);
const client = new Client({ name: "docket-interop", version: "1.0.0" });
await client.connect(transport);

assert.equal(client.getServerVersion().name, "docket");
assert.ok(client.getServerCapabilities().tools, "tools capability");
assert.match(transport.sessionId ?? "", /^[0-9a-f]{32}$/);

await client.ping();

const { tools } = await client.listTools();
const names = new Set(tools.map((tool) => tool.name));
for (const name of ["platform_info", "test_simple_text", "test_tool_with_progress"]) {
  assert.ok(names.has(name), `${name} is listed`);
}

const simple = await client.callTool({ name: "test_simple_text", arguments: {} });
assert.ok(!simple.isError);
assert.equal(simple.content[0].type, "text");
console.log("test_simple_text:", simple.content[0].text);

const seen = [];
const withProgress = await client.callTool(
  { name: "test_tool_with_progress", arguments: {} },
  undefined,
  { onprogress: (progress) => seen.push(progress) },
);
assert.ok(!withProgress.isError);
assert.ok(seen.length > 0, "progress arrived on the call's stream");
console.log("progress notifications:", JSON.stringify(seen));

const failed = await client.callTool({ name: "test_error_handling", arguments: {} });
assert.equal(failed.isError, true);

// Ends the session (DELETE with its id); a request in it afterwards is refused.
await transport.terminateSession();
assert.equal(transport.sessionId, undefined);
await client.close();
console.log("typescript sdk client: ok");
