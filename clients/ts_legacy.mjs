// The official TypeScript MCP client (@modelcontextprotocol/sdk 1.x: it opens with
// `initialize`) against a running Docket: negotiation, the session, tools, progress on
// the call's stream, a question answered by elicitation, durable tasks, ping, and the
// end of the session. Exits non-zero on the first mismatch.
//
// With a second URL, `docket serve`'s own /mcp (SQLite, a Trino double behind a
// connection that asks before every statement), it also saves a script and runs it
// directly, as a task polled to its result and as one it cancels, and answers a real
// consent prompt through elicitation.
//
// usage: node ts_legacy.mjs FIXTURE_URL [DOCKET_URL]

import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

// The consent prompts answered so far.
const consents = [];

// Answers the server's questions as a person would in the host's form.
async function answerQuestion(request) {
  if (request.params.message.startsWith("Run this statement on warehouse?")) {
    consents.push(request.params.message);
    return { action: "accept", content: { proceed: true } };
  }
  assert.equal(request.params.message, "Who are you?");
  return { action: "accept", content: { username: "grace", email: "grace@example.com" } };
}

const url = new URL(process.argv[2]);
const transport = new StreamableHTTPClientTransport(url);
const client = new Client(
  { name: "docket-interop", version: "1.0.0" },
  { capabilities: { elicitation: {} } },
);
client.setRequestHandler(ElicitRequestSchema, answerQuestion);
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

const me = await client.callTool({ name: "platform_info", arguments: {} });
assert.ok(!me.isError);
console.log("platform_info:", me.content[0].text.slice(0, 80));

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

// A question the call asks arrives as elicitation/create on its stream.
const asked = await client.callTool({ name: "test_elicitation", arguments: { message: "Who are you?" } });
assert.ok(!asked.isError && asked.content[0].text.includes("grace"), JSON.stringify(asked));
console.log("test_elicitation:", asked.content[0].text);

// Durable tasks (2025-11-25): the server advertises them, the client sends `task`, polls
// tasks/get every pollInterval, then takes the result with tasks/result.
assert.ok(client.getServerCapabilities().tasks?.requests?.tools?.call, "tasks for tools/call");
const slow = tools.find((tool) => tool.name === "slow_compute");
assert.equal(slow.execution?.taskSupport, "optional");
let created;
let finished;
for await (const message of client.experimental.tasks.callToolStream(
  { name: "slow_compute", arguments: { seconds: 0.2, label: "ts" } },
  undefined,
  { task: { ttl: 60000 } },
)) {
  if (message.type === "taskCreated") created = message.task;
  if (message.type === "error") throw message.error;
  if (message.type === "result") finished = message.result;
}
assert.match(created?.taskId ?? "", /^task_[0-9a-f]{32}$/);
assert.ok(finished && !finished.isError, "the task's result");
console.log("task", created.taskId, "result:", finished.content[0].text);
const polled = await client.experimental.tasks.getTask(created.taskId);
assert.equal(polled.status, "completed");

// A task cancelled while it works reads cancelled at once.
let longTask;
for await (const message of client.experimental.tasks.callToolStream(
  { name: "slow_compute", arguments: { seconds: 30 } },
  undefined,
  { task: {} },
)) {
  if (message.type === "taskCreated") {
    longTask = message.task;
    break;
  }
}
const cancelled = await client.experimental.tasks.cancelTask(longTask.taskId);
assert.equal(cancelled.status, "cancelled");
console.log("task", longTask.taskId, "cancelled");

// tasks/list: the caller's own tasks, newest first, in this revision's shape.
const { tasks: listed } = await client.experimental.tasks.listTasks();
const byId = new Map(listed.map((task) => [task.taskId, task.status]));
assert.equal(byId.get(created.taskId), "completed", JSON.stringify(listed));
assert.equal(byId.get(longTask.taskId), "cancelled", JSON.stringify(listed));
console.log("tasks/list:", listed.length, "tasks");

// Ends the session (DELETE with its id); a request in it afterwards is refused.
await transport.terminateSession();
assert.equal(transport.sessionId, undefined);
await client.close();
console.log("typescript sdk client: ok");

if (process.argv[3]) {
  await checkDocket(new URL(process.argv[3]));
}

// Runs a task-augmented call to its creation; its task.
async function startTask(session, name, args) {
  for await (const message of session.experimental.tasks.callToolStream(
    { name, arguments: args },
    undefined,
    { task: {} },
  )) {
    if (message.type === "taskCreated") return message.task;
    if (message.type === "error") throw message.error;
  }
  throw new Error(`${name} did not become a task`);
}

// Docket's own tools on `docket serve`.
async function checkDocket(docketUrl) {
  const session = new Client(
    { name: "docket-interop", version: "1.0.0" },
    { capabilities: { elicitation: {} } },
  );
  session.setRequestHandler(ElicitRequestSchema, answerQuestion);
  const docketTransport = new StreamableHTTPClientTransport(docketUrl);
  await session.connect(docketTransport);
  const { tools: docketTools } = await session.listTools();
  const run = docketTools.find((tool) => tool.name === "run_script");
  assert.equal(run?.execution?.taskSupport, "optional", JSON.stringify(run));
  assert.ok(!(await session.callTool({ name: "platform_info", arguments: {} })).isError);

  const source = "total = 0\nfor i in range(1000):\n    total += i\nprint('total', total)\n";
  const busy = "total = 0\nfor i in range(100000000):\n    total += i\n";
  for (const [name, text] of [["ts-count", source], ["ts-busy", busy]]) {
    const saved = await session.callTool({
      name: "manage_script",
      arguments: { command: "create", name, source: text },
    });
    assert.ok(!saved.isError, JSON.stringify(saved));
  }

  // Directly: the call waits for the run and answers with it.
  const direct = await session.callTool({ name: "run_script", arguments: { name: "ts-count" } });
  assert.ok(!direct.isError, JSON.stringify(direct));
  assert.equal(direct.structuredContent.status, "succeeded");
  assert.ok(JSON.stringify(direct.structuredContent).includes("total 499500"));
  console.log("run_script directly:", direct.structuredContent.run_id);

  // As a task, polled to its result: the task id is the run id.
  let created;
  let finished;
  for await (const message of session.experimental.tasks.callToolStream(
    { name: "run_script", arguments: { name: "ts-count" } },
    undefined,
    { task: {} },
  )) {
    if (message.type === "taskCreated") created = message.task;
    if (message.type === "error") throw message.error;
    if (message.type === "result") finished = message.result;
  }
  assert.ok(finished && !finished.isError, JSON.stringify(finished));
  assert.equal(finished.structuredContent.run_id, created.taskId);
  assert.equal(finished.structuredContent.status, "succeeded");
  console.log("run_script as a task:", created.taskId, finished.structuredContent.status);

  // As a task cancelled while it runs.
  const long = await startTask(session, "run_script", { name: "ts-busy" });
  const stopped = await session.experimental.tasks.cancelTask(long.taskId);
  assert.equal(stopped.status, "cancelled", JSON.stringify(stopped));
  console.log("run_script task cancelled:", long.taskId);

  const { tasks: mine } = await session.experimental.tasks.listTasks();
  const statuses = new Map(mine.map((task) => [task.taskId, task.status]));
  assert.equal(statuses.get(created.taskId), "completed", JSON.stringify(mine));
  assert.equal(statuses.get(long.taskId), "cancelled", JSON.stringify(mine));

  // A consent prompt: the connection asks before every statement.
  const askedBefore = consents.length;
  const counted = await session.callTool({
    name: "trino_query",
    arguments: { sql: "SELECT count(*) AS n FROM memory.default.orders" },
  });
  assert.ok(!counted.isError, JSON.stringify(counted));
  assert.ok(counted.content[0].text.includes("50"), counted.content[0].text);
  assert.equal(consents.length, askedBefore + 1, "the consent prompt was asked once");
  console.log("trino_query after consent:", counted.content[0].text.slice(0, 80));

  await docketTransport.terminateSession();
  await session.close();
  console.log("typescript sdk client on docket serve: ok");
}
