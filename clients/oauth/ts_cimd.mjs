// The official TypeScript MCP client (@modelcontextprotocol/sdk, the version clients/run pins)
// logging in to Docket through Docket's own authorization server, as a host does for a person:
//
// 1. discovery from the 401 of /mcp (its WWW-Authenticate names the protected-resource metadata,
//    which names Docket as the authorization server; then Docket's RFC 8414 metadata);
// 2. no registration: the client's id is the https URL of its Client ID Metadata Document, which
//    this script serves itself on 127.0.0.1 with the certificate the runner made (Docket trusts
//    the runner's CA through `client_metadata_documents.ca_file`), and which Docket must fetch;
// 3. the login in a real headless Chromium (browser.mjs): the provider's login form, Docket's
//    consent page naming the client, the redirect to this script's loopback callback, whose
//    `state` and `iss` (RFC 9207) are checked;
// 4. the code exchanged by the SDK (`finishAuth`), then `tools/list` and `tools/call`
//    (`platform_info` names alice, her role and persona);
// 5. a refresh through the SDK's own path: the stored access token is replaced by one Docket
//    refuses (as an expired one would be), so the next call gets a 401 and the transport
//    refreshes and retries; the new tokens differ from the old, the call succeeds with the new
//    access token, and presenting the old refresh token again is `invalid_grant`, and so is
//    the newest one then (reuse revokes the whole family);
// 6. the SDK's recovery from the revoked family: its refresh refused, it drops its tokens and
//    logs in again, and Docket asks no consent the second time.
//
// usage: node ts_cimd.mjs DOCKET_MCP_URL --tls-cert FILE --tls-key FILE [--account alice]
// Exits non-zero on the first mismatch.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { authorizeInBrowser } from './browser.mjs';

const CLIENT_NAME = 'Docket OAuth check (TypeScript SDK)';

function parseArguments(args) {
  const options = { account: 'alice' };
  for (let i = 1; i < args.length; i += 2) {
    const value = args[i + 1];
    if (value === undefined) throw new Error(`${args[i]} needs a value`);
    if (args[i] === '--tls-cert') options.tlsCert = value;
    else if (args[i] === '--tls-key') options.tlsKey = value;
    else if (args[i] === '--account') options.account = value;
    else throw new Error(`unknown argument ${args[i]}`);
  }
  if (!args[0] || !options.tlsCert || !options.tlsKey) {
    throw new Error('usage: node ts_cimd.mjs DOCKET_MCP_URL --tls-cert FILE --tls-key FILE [--account ID]');
  }
  return { mcpUrl: new URL(args[0]), ...options };
}

const { mcpUrl, tlsCert, tlsKey, account } = parseArguments(process.argv.slice(2));

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address().port));
  });
}

// The loopback redirect URI (RFC 8252 §7.3): `nextCallback()` resolves with the query of the
// next request to /callback.
const arrived = [];
const waiting = [];
const nextCallback = () => (arrived.length > 0
  ? Promise.resolve(arrived.shift())
  : new Promise((resolve) => { waiting.push(resolve); }));
const callbackServer = createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname !== '/callback') {
    res.writeHead(404).end();
    return;
  }
  const waiter = waiting.shift();
  if (waiter) waiter(url.searchParams);
  else arrived.push(url.searchParams);
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><title>Signed in</title><p>Signed in; you may close this window.</p>');
});
const callbackPort = await listen(callbackServer);
const redirectUrl = `http://127.0.0.1:${callbackPort}/callback`;

// The Client ID Metadata Document, served over https; every fetch of it is counted.
const clientMetadata = {
  client_name: CLIENT_NAME,
  redirect_uris: [redirectUrl],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
};
let documentFetches = 0;
let clientMetadataUrl;
const documentServer = createHttpsServer(
  { cert: readFileSync(tlsCert), key: readFileSync(tlsKey) },
  (req, res) => {
    if (new URL(req.url, 'https://127.0.0.1').pathname !== '/oauth/client.json') {
      res.writeHead(404).end();
      return;
    }
    documentFetches += 1;
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' });
    res.end(JSON.stringify({ client_id: clientMetadataUrl, ...clientMetadata }));
  },
);
const documentPort = await listen(documentServer);
clientMetadataUrl = `https://127.0.0.1:${documentPort}/oauth/client.json`;

// Every request the SDK makes (MCP and OAuth alike), with the bearer token it carried.
const requests = [];
async function recordingFetch(input, init) {
  const request = new Request(input, init);
  const bearer = request.headers.get('authorization')?.replace(/^Bearer /, '');
  const response = await fetch(request);
  requests.push({
    method: request.method,
    path: new URL(request.url).pathname,
    status: response.status,
    bearer,
    challenge: response.headers.get('www-authenticate'),
  });
  return response;
}

// The host's OAuth state, in memory: what a desktop host keeps per server.
class HostProvider {
  constructor() {
    this.stored = {};
    this.browserSteps = undefined;
    this.expectedState = undefined;
  }

  get redirectUrl() {
    return redirectUrl;
  }

  get clientMetadataUrl() {
    return clientMetadataUrl;
  }

  get clientMetadata() {
    return clientMetadata;
  }

  state() {
    this.expectedState = randomBytes(24).toString('base64url');
    return this.expectedState;
  }

  clientInformation() {
    return this.stored.client;
  }

  saveClientInformation(information) {
    this.stored.client = information;
  }

  tokens() {
    return this.stored.tokens;
  }

  saveTokens(tokens) {
    this.stored.tokens = tokens;
  }

  // The SDK calls this when the server refuses what it holds (a refresh token of a revoked
  // family: 'tokens'), before it starts a new login.
  invalidateCredentials(scope) {
    this.invalidated = [...(this.invalidated ?? []), scope];
    if (scope === 'all' || scope === 'tokens') delete this.stored.tokens;
    if (scope === 'all') delete this.stored.client;
    if (scope === 'all' || scope === 'verifier') delete this.stored.verifier;
  }

  saveCodeVerifier(verifier) {
    this.stored.verifier = verifier;
  }

  codeVerifier() {
    return this.stored.verifier;
  }

  async redirectToAuthorization(authorizationUrl) {
    const { steps } = await authorizeInBrowser(authorizationUrl.href, {
      account, redirectUri: redirectUrl, consentMustName: CLIENT_NAME,
    });
    this.browserSteps = steps;
  }
}

async function connect(provider) {
  const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider, fetch: recordingFetch });
  const client = new Client({ name: 'docket-oauth-ts', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

function failWith(message) {
  throw new Error(`${message}\nrequests so far:\n${requests.map((r) => `  ${r.method} ${r.path} -> ${r.status}`).join('\n')}`);
}

async function tokenRequest(form) {
  const response = await fetch(new URL('/oauth/token', mcpUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form),
  });
  return { status: response.status, body: await response.json() };
}

async function checkPlatformInfo(client) {
  const info = await client.callTool({ name: 'platform_info', arguments: {} });
  assert.ok(!info.isError, JSON.stringify(info));
  const { identity, persona } = info.structuredContent;
  assert.equal(identity.email, `${account}@example.com`, JSON.stringify(identity));
  assert.deepEqual(identity.roles, ['analyst'], JSON.stringify(identity));
  assert.equal(persona, 'analyst');
  return identity;
}

async function getJson(url) {
  const response = await fetch(url);
  assert.equal(response.status, 200, `GET ${url}`);
  return response.json();
}

// What the SDK will discover, read here too so that the checks below can name it.
const resourceMetadata = await getJson(new URL('/.well-known/oauth-protected-resource/mcp', mcpUrl).href);
const serverMetadata = await getJson(new URL('/.well-known/oauth-authorization-server', mcpUrl));
const { issuer } = serverMetadata;
assert.deepEqual(resourceMetadata.authorization_servers, [issuer], 'the resource names Docket as its authorization server');
assert.equal(serverMetadata.client_id_metadata_document_supported, true, 'Docket accepts Client ID Metadata Documents');
const { resource } = resourceMetadata;

const provider = new HostProvider();

// 1-3. The first connection is refused with a 401; the SDK discovers, takes the metadata URL
// as the client id, and sends the browser to Docket's authorization endpoint.
try {
  await connect(provider);
  failWith('the first connection succeeded without a login');
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
}
const [first] = requests;
assert.equal(first.status, 401, 'the first request to /mcp is a 401');
const resourceMetadataUrl = new URL('/.well-known/oauth-protected-resource/mcp', mcpUrl).href;
assert.match(first.challenge ?? '', /^Bearer /, 'the 401 is a Bearer challenge');
assert.ok(first.challenge.includes(`resource_metadata="${resourceMetadataUrl}"`), `the 401 names the resource metadata: ${first.challenge}`);
const paths = requests.map((r) => r.path);
for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-authorization-server']) {
  if (!paths.includes(path)) failWith(`the SDK did not fetch ${path}`);
}
if (paths.includes('/oauth/register')) failWith('the SDK registered instead of using its metadata document');
assert.equal(provider.clientInformation()?.client_id, clientMetadataUrl, 'the client id is the metadata document URL');
assert.deepEqual(provider.browserSteps, ['login', 'consent', 'redirected to the client'], 'the browser signed in and approved');
if (documentFetches === 0) failWith('Docket never fetched the Client ID Metadata Document');
console.log(`discovery from the 401, client id ${clientMetadataUrl} (fetched by Docket ${documentFetches}x), browser: ${provider.browserSteps.join(' -> ')}`);

// The code at the redirect URI, exchanged by the SDK.
async function finishLogin() {
  const answer = await nextCallback();
  if (answer.get('error')) failWith(`the authorization ended with ${answer.get('error')}: ${answer.get('error_description')}`);
  assert.equal(answer.get('state'), provider.expectedState, 'state comes back unchanged');
  assert.equal(answer.get('iss'), issuer, 'the redirect names Docket as the issuer (RFC 9207)');
  const code = answer.get('code');
  assert.ok(code, 'a code at the redirect URI');
  const transport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider, fetch: recordingFetch });
  await transport.finishAuth(code);
}

// 4. The SDK exchanges the code; a new connection is authorized.
await finishLogin();
const firstTokens = { ...provider.tokens() };
assert.ok(firstTokens.access_token && firstTokens.refresh_token, 'an access token and a refresh token');
assert.equal(firstTokens.token_type.toLowerCase(), 'bearer');
const { client } = await connect(provider);
const { tools } = await client.listTools();
assert.ok(tools.some((tool) => tool.name === 'platform_info'), 'platform_info is listed');
const identity = await checkPlatformInfo(client);
console.log(`tools/list: ${tools.length} tools; tools/call platform_info: ${identity.email} ${JSON.stringify(identity.roles)} (${identity.auth_type})`);

// 5. The access token stops working; the transport gets a 401 and refreshes through the SDK.
const before = requests.length;
provider.saveTokens({ ...firstTokens, access_token: `${firstTokens.access_token}x` });
await checkPlatformInfo(client);
const refreshed = { ...provider.tokens() };
const since = requests.slice(before);
if (!since.some((r) => r.path === '/oauth/token' && r.status === 200)) failWith('no refresh at /oauth/token after the 401');
assert.ok(since.some((r) => r.path === mcpUrl.pathname && r.status === 401), 'the stale token was refused with a 401');
assert.notEqual(refreshed.access_token, firstTokens.access_token, 'a new access token');
assert.notEqual(refreshed.refresh_token, firstTokens.refresh_token, 'the refresh token rotated');
const lastCall = since.filter((r) => r.path === mcpUrl.pathname).at(-1);
assert.equal(lastCall.status, 200);
assert.equal(lastCall.bearer, refreshed.access_token, 'the retried call carried the refreshed access token');
await checkPlatformInfo(client);
console.log('refresh: the SDK refreshed after a 401, the tokens rotated, and calls work with the new access token');

// The old refresh token again: refused, and the family is revoked with it.
const reuse = await tokenRequest({
  grant_type: 'refresh_token', refresh_token: firstTokens.refresh_token, client_id: clientMetadataUrl, resource,
});
assert.equal(reuse.status, 400, JSON.stringify(reuse));
assert.equal(reuse.body.error, 'invalid_grant', JSON.stringify(reuse));
const afterReuse = await tokenRequest({
  grant_type: 'refresh_token', refresh_token: refreshed.refresh_token, client_id: clientMetadataUrl, resource,
});
assert.equal(afterReuse.body.error, 'invalid_grant', `the newest refresh token after a reuse: ${JSON.stringify(afterReuse)}`);
console.log('reuse: the old refresh token is invalid_grant, and the whole family with it');
await client.close();

// 6. The host still holds the newest refresh token of the revoked family. Its access token stops
// working too: the SDK's refresh is refused (invalid_grant), it drops its tokens and starts a
// new login, in a new browser: the provider's login again, but no consent page, since alice
// approved this client already.
provider.browserSteps = undefined;
provider.saveTokens({ ...provider.tokens(), access_token: `${provider.tokens().access_token}x` });
try {
  await connect(provider);
  failWith('a connection succeeded with the tokens of a revoked family');
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
}
assert.deepEqual(provider.invalidated, ['tokens'], 'the SDK dropped its tokens after the refused refresh');
assert.deepEqual(provider.browserSteps, ['login', 'redirected to the client'], 'the second login asks no consent');
await finishLogin();
const again = await connect(provider);
await checkPlatformInfo(again.client);
await again.client.close();
console.log(`a new login after the revocation: ${provider.browserSteps.join(' -> ')} (the consent is remembered), and calls work again`);

callbackServer.close();
documentServer.close();
console.log('TypeScript SDK: CIMD login, tool calls and refresh against Docket: ok');
