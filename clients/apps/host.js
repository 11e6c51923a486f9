// The minimal MCP Apps host (see host.html). Everything it sees and does is also kept in
// `window.appHost` for the browser check (clients/apps/check.mjs) to read.
"use strict";

const UI_EXTENSION = "io.modelcontextprotocol/ui";
const UI_MIME_TYPE = "text/html;profile=mcp-app";
const PROTOCOL_VERSION = "2026-07-28";
// The host declares the extension on every request, as the current revision carries a client's
// capabilities in each request's _meta.
const CLIENT_CAPABILITIES = { extensions: { [UI_EXTENSION]: { mimeTypes: [UI_MIME_TYPE] } } };
const MAX_VIEW_HEIGHT = 600;

const query = new URLSearchParams(location.search);
const toolName = query.get("tool") || "trino_query";
const toolArguments = JSON.parse(query.get("arguments") || "{}");
const sandboxOrigin = query.get("sandbox");

const status = document.getElementById("status");
document.getElementById("call").textContent = toolName + " " + JSON.stringify(toolArguments);

const appHost = (window.appHost = {
  state: "connecting",
  error: null,
  tool: null,
  view: null,
  result: null,
  fromView: [],
  openedLinks: [],
  forwarded: [],
});

function setState(state, text) {
  appHost.state = state;
  status.textContent = text || state;
}

// --- MCP to Docket ---------------------------------------------------------------------------
let nextRequestId = 1;

async function mcp(method, params) {
  const headers = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL_VERSION,
    "mcp-method": method,
  };
  const name = method === "tools/call" ? params.name : method === "resources/read" ? params.uri : null;
  if (name) headers["mcp-name"] = name;
  const body = {
    jsonrpc: "2.0",
    id: nextRequestId++,
    method,
    params: {
      ...params,
      _meta: {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": CLIENT_CAPABILITIES,
        "io.modelcontextprotocol/clientInfo": { name: "docket-apps-host", version: "1" },
      },
    },
  };
  const response = await fetch("/mcp", { method: "POST", headers, body: JSON.stringify(body) });
  const text = await response.text();
  let message;
  if ((response.headers.get("content-type") || "").startsWith("text/event-stream")) {
    // A streamed answer ends with the response; progress before it is not needed here.
    const messages = text.split("\n").filter((line) => line.startsWith("data:")).map((line) => JSON.parse(line.slice(5)));
    message = messages.reverse().find((candidate) => candidate.id === body.id);
  } else {
    message = JSON.parse(text);
  }
  if (!message) throw new Error(method + ": no answer (HTTP " + response.status + ")");
  if (message.error) {
    const error = new Error(method + ": " + message.error.message);
    error.rpc = message.error;
    throw error;
  }
  return message.result;
}

// --- The view's side ---------------------------------------------------------------------------
let frame = null;
let viewHtml = null;
let viewCsp = {};
let callResult = null;

function toView(message) {
  frame.contentWindow.postMessage(message, sandboxOrigin);
}

function answer(id, result) {
  toView({ jsonrpc: "2.0", id, result });
}

function refuse(id, code, message) {
  toView({ jsonrpc: "2.0", id, error: { code, message } });
}

async function onViewMessage(event) {
  if (!frame || event.source !== frame.contentWindow || event.origin !== sandboxOrigin) return;
  const message = event.data;
  if (!message || message.jsonrpc !== "2.0") return;
  appHost.fromView.push(message.method || "response");
  switch (message.method) {
    case "ui/notifications/sandbox-proxy-ready":
      toView({ jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html: viewHtml, csp: viewCsp } });
      return;
    case "ui/initialize":
      answer(message.id, {
        protocolVersion: "2026-01-26",
        hostInfo: { name: "docket-apps-host", version: "1" },
        hostCapabilities: { openLinks: {}, serverTools: {}, serverResources: {}, logging: {} },
        hostContext: {
          toolInfo: { tool: appHost.tool },
          theme: "light",
          displayMode: "inline",
          availableDisplayModes: ["inline"],
          containerDimensions: { maxHeight: MAX_VIEW_HEIGHT },
          platform: "web",
          locale: "en-US",
        },
      });
      return;
    case "ui/notifications/initialized":
      // Nothing is sent to the view before it says it is initialized.
      toView({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: toolArguments } });
      callResult.then(
        (result) => {
          toView({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: result });
          setState("rendered", "view shown with the result");
        },
        (error) => {
          toView({ jsonrpc: "2.0", method: "ui/notifications/tool-cancelled", params: { reason: error.message } });
          setState("failed", error.message);
        },
      );
      return;
    case "ui/notifications/size-changed": {
      const height = Number(message.params && message.params.height);
      if (height > 0) frame.style.height = Math.min(height, MAX_VIEW_HEIGHT) + "px";
      return;
    }
    case "ui/open-link": {
      const url = message.params && message.params.url;
      appHost.openedLinks.push(url);
      answer(message.id, {});
      return;
    }
    case "tools/call":
    case "resources/read":
      // The view's own MCP requests go to the server that made it, nowhere else.
      appHost.forwarded.push(message.method);
      mcp(message.method, message.params || {}).then(
        (result) => answer(message.id, result),
        (error) => refuse(message.id, (error.rpc && error.rpc.code) || -32603, error.message),
      );
      return;
    case "notifications/message":
      return;
    case "ui/message":
    case "ui/update-model-context":
    case "ping":
      answer(message.id, {});
      return;
    default:
      if (message.id !== undefined && message.method) refuse(message.id, -32601, "method not found");
  }
}

window.addEventListener("message", (event) => {
  onViewMessage(event).catch((error) => setState("failed", error.message));
});

async function main() {
  if (!sandboxOrigin) throw new Error("the sandbox query parameter names the sandbox origin");
  const listed = await mcp("tools/list", {});
  appHost.tool = (listed.tools || []).find((tool) => tool.name === toolName) || null;
  const uri = appHost.tool && appHost.tool._meta && appHost.tool._meta.ui && appHost.tool._meta.ui.resourceUri;
  if (!uri || !uri.startsWith("ui://")) throw new Error(toolName + " names no view");
  // The call runs while the view loads, as hosts do.
  callResult = mcp("tools/call", { name: toolName, arguments: toolArguments });
  callResult.then((result) => (appHost.result = result), () => {});
  const read = await mcp("resources/read", { uri });
  const contents = (read.contents || [])[0];
  if (!contents || contents.mimeType !== UI_MIME_TYPE || typeof contents.text !== "string") {
    throw new Error(uri + " is not an MCP Apps view");
  }
  viewHtml = contents.text;
  viewCsp = (contents._meta && contents._meta.ui && contents._meta.ui.csp) || {};
  appHost.view = { uri, csp: viewCsp };
  setState("loading", "loading the view");
  frame = document.createElement("iframe");
  frame.title = "results view";
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin");
  const sandboxUrl = new URL("/sandbox.html", sandboxOrigin);
  sandboxUrl.searchParams.set("host", location.origin);
  sandboxUrl.searchParams.set("csp", JSON.stringify(viewCsp));
  frame.src = sandboxUrl.href;
  document.getElementById("view-turn").append(frame);
}

main().catch((error) => {
  appHost.error = error.message;
  setState("failed", error.message);
});
