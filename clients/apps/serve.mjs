// Serves the minimal MCP Apps host on two loopback origins, as the extension requires of a web
// host: the host page (host.html, host.js, and /mcp, passed through to Docket so the page talks
// MCP from its own origin) on one port, and the sandbox proxy (sandbox.html, sandbox.js) on
// another. sandbox.html is sent with the Content-Security-Policy built from the view's
// `_meta.ui.csp` (its `csp` query parameter): only the origins the view declared, none when it
// declared none. Every file is static; nothing here builds a page.
//
// As a module: `startHost(docketMcpUrl)` resolves to `{ hostOrigin, sandboxOrigin, close }`.

import { readFile } from 'node:fs/promises';
import http from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };

// A declared origin may not carry what would end or widen a directive.
function origins(list) {
  return (Array.isArray(list) ? list : []).filter((entry) => typeof entry === 'string' && !/[;\r\n'" ,]/.test(entry));
}

/** The policy of the view's sandbox, from its `_meta.ui.csp`. */
export function sandboxPolicy(csp = {}) {
  const resource = origins(csp.resourceDomains).join(' ');
  const connect = origins(csp.connectDomains).join(' ');
  const frame = origins(csp.frameDomains).join(' ');
  const base = origins(csp.baseUriDomains).join(' ');
  return [
    "default-src 'none'",
    `script-src 'self' 'unsafe-inline' ${resource}`.trim(),
    `style-src 'self' 'unsafe-inline' ${resource}`.trim(),
    `img-src 'self' data: ${resource}`.trim(),
    `font-src 'self' data: ${resource}`.trim(),
    `media-src 'self' data: ${resource}`.trim(),
    `connect-src ${connect || "'none'"}`,
    `frame-src ${frame || "'none'"}`,
    "object-src 'none'",
    `base-uri ${base || "'none'"}`,
    "form-action 'none'",
  ].join('; ');
}

async function sendFile(response, name, headers = {}) {
  const body = await readFile(join(here, name));
  const type = TYPES[name.slice(name.lastIndexOf('.'))];
  response.writeHead(200, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  response.end(body);
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
}

async function passToDocket(request, response, docketMcpUrl) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const headers = {};
  for (const name of ['content-type', 'accept', 'mcp-protocol-version', 'mcp-method', 'mcp-name']) {
    if (request.headers[name]) headers[name] = request.headers[name];
  }
  const answer = await fetch(docketMcpUrl, { method: 'POST', headers, body: Buffer.concat(chunks) });
  response.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') || 'application/json' });
  response.end(Buffer.from(await answer.arrayBuffer()));
}

export async function startHost(docketMcpUrl) {
  const host = http.createServer((request, response) => {
    const path = new URL(request.url, 'http://host').pathname;
    const served =
      path === '/mcp' && request.method === 'POST'
        ? passToDocket(request, response, docketMcpUrl)
        : path === '/' || path === '/host.html'
          ? sendFile(response, 'host.html')
          : path === '/host.js'
            ? sendFile(response, 'host.js')
            : null;
    if (!served) {
      response.writeHead(404).end();
      return;
    }
    served.catch((error) => response.writeHead(502).end(String(error)));
  });
  const sandbox = http.createServer((request, response) => {
    const url = new URL(request.url, 'http://sandbox');
    let served = null;
    if (url.pathname === '/sandbox.html') {
      let csp = {};
      try {
        csp = JSON.parse(url.searchParams.get('csp') || '{}');
      } catch {
        csp = {};
      }
      served = sendFile(response, 'sandbox.html', { 'content-security-policy': sandboxPolicy(csp) });
    } else if (url.pathname === '/sandbox.js') {
      served = sendFile(response, 'sandbox.js');
    }
    if (!served) {
      response.writeHead(404).end();
      return;
    }
    served.catch((error) => response.writeHead(500).end(String(error)));
  });
  const hostOrigin = await listen(host);
  const sandboxOrigin = await listen(sandbox);
  return {
    hostOrigin,
    sandboxOrigin,
    close: () => {
      host.close();
      sandbox.close();
    },
  };
}
