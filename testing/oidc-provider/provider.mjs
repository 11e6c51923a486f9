// A real OpenID provider for Docket's tests: panva's oidc-provider, configured from JSON, with
//
// - access tokens as RS256 JWTs (resource indicators, `accessTokenFormat: 'jwt'`) that carry the
//   account's claims, signed with a key generated at startup and published at the jwks_uri;
// - RFC 8693 token exchange, added through `provider.registerGrantType`, with a policy of which
//   client may exchange for which audience and which accounts are refused;
// - a minimal interaction (login and consent) that a test can drive without a browser, and the
//   test-only routes under /test/ (see README.md).
//
// Usage: node provider.mjs --config FILE | --config-stdin   (or OIDC_PROVIDER_CONFIG=FILE)
// It prints one line `listening on http://127.0.0.1:<port>` to stdout when ready. With
// --config-stdin the first line of standard input is the configuration, and the provider exits
// when standard input closes (so it does not outlive the process that started it).
//
// Nothing here logs a secret: neither the configuration, nor tokens, nor client secrets.

import { createHash, generateKeyPairSync, randomBytes, randomUUID, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';

import Provider, { errors } from 'oidc-provider';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
const DEFAULT_REDIRECT_URI = 'http://127.0.0.1/oidc-provider-test/callback';
const ROUTES = {
  authorization: '/auth',
  token: '/token',
  jwks: '/jwks',
  userinfo: '/me',
  introspection: '/token/introspection',
  revocation: '/token/revocation',
  end_session: '/session/end',
};
// Claims each OpenID scope releases at the userinfo endpoint and in ID tokens. Access tokens
// carry every claim of the account, whatever the scope (extraTokenClaims).
const DEFAULT_CLAIMS = {
  openid: ['sub'],
  email: ['email', 'email_verified'],
  profile: [
    'name', 'preferred_username', 'given_name', 'family_name', 'nickname', 'picture', 'locale',
    'zoneinfo', 'updated_at',
  ],
  roles: ['roles'],
  groups: ['groups'],
};
// Claims that the token itself sets; an account's claim of the same name is not copied.
const RESERVED_CLAIMS = new Set([
  'iss', 'sub', 'aud', 'exp', 'iat', 'nbf', 'jti', 'client_id', 'scope', 'act', 'cnf',
  'authorization_details',
]);

class ConfigError extends Error {}

function fail(message) {
  process.stderr.write(`oidc-provider: ${message}\n`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// Configuration

async function readConfigText() {
  const args = process.argv.slice(2);
  let file = process.env.OIDC_PROVIDER_CONFIG;
  let stdin = false;
  for (let i = 0; i < args.length; i += 1) {
    if (args[i] === '--config' && i + 1 < args.length) {
      file = args[i + 1];
      i += 1;
    } else if (args[i] === '--config-stdin') {
      stdin = true;
    } else {
      throw new ConfigError(`unknown argument ${JSON.stringify(args[i])}; usage: node provider.mjs --config FILE | --config-stdin`);
    }
  }
  if (stdin) {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    return new Promise((resolve, reject) => {
      let received = false;
      lines.on('line', (line) => {
        if (!received) {
          received = true;
          resolve(line);
        }
      });
      // The launcher keeps standard input open; its end means the launcher is gone.
      lines.on('close', () => {
        if (received) process.exit(0);
        reject(new ConfigError('--config-stdin: standard input closed before a configuration line'));
      });
    });
  }
  if (!file) {
    throw new ConfigError('no configuration: pass --config FILE or --config-stdin, or set OIDC_PROVIDER_CONFIG=FILE');
  }
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read the configuration file ${JSON.stringify(file)}: ${error.code ?? error.message}`);
  }
}

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

function stringList(value, path) {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
    throw new ConfigError(`${path} must be a list of strings`);
  }
  return value;
}

function positive(value, path, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new ConfigError(`${path} must be a positive integer (seconds)`);
  }
  return value;
}

function parseExchangePolicy(raw, path) {
  if (raw === undefined) raw = {};
  if (!isObject(raw)) throw new ConfigError(`${path} must be an object`);
  const allowed = raw.allowed ?? {};
  if (!isObject(allowed)) throw new ConfigError(`${path}.allowed must be an object: client_id -> list of audiences`);
  const allowedMap = new Map();
  for (const [clientId, audiences] of Object.entries(allowed)) {
    allowedMap.set(clientId, new Set(stringList(audiences, `${path}.allowed.${clientId}`)));
  }
  return {
    expiresIn: positive(raw.expires_in, `${path}.expires_in`, 300),
    allowed: allowedMap,
    refusedAccounts: new Set(stringList(raw.refused_accounts, `${path}.refused_accounts`)),
  };
}

function parseConfig(text) {
  let raw;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`the configuration is not JSON: ${error.message}`);
  }
  if (!isObject(raw)) throw new ConfigError('the configuration must be a JSON object');
  const known = new Set(['host', 'port', 'accounts', 'clients', 'resources', 'token_exchange', 'claims', 'auto_login']);
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) throw new ConfigError(`unknown configuration key ${JSON.stringify(key)} (known: ${[...known].join(', ')})`);
  }

  const host = raw.host ?? '127.0.0.1';
  if (typeof host !== 'string') throw new ConfigError('host must be a string');
  const port = raw.port ?? 0;
  if (!Number.isSafeInteger(port) || port < 0 || port > 65535) throw new ConfigError('port must be an integer in 0..65535');

  const accounts = new Map();
  const rawAccounts = raw.accounts ?? {};
  if (!isObject(rawAccounts)) throw new ConfigError('accounts must be an object: account id -> claims');
  for (const [id, claims] of Object.entries(rawAccounts)) {
    if (id.length === 0) throw new ConfigError('an account id must not be empty');
    if (!isObject(claims)) throw new ConfigError(`accounts.${id} must be an object of claims`);
    accounts.set(id, claims);
  }

  const resources = new Map();
  const rawResources = raw.resources ?? {};
  if (!isObject(rawResources)) throw new ConfigError('resources must be an object: resource indicator (audience URL) -> settings');
  for (const [indicator, settings] of Object.entries(rawResources)) {
    if (!URL.canParse(indicator)) throw new ConfigError(`resources: ${JSON.stringify(indicator)} is not an absolute URL`);
    if (indicator.includes('#')) throw new ConfigError(`resources: ${JSON.stringify(indicator)} must not have a fragment`);
    const entry = settings ?? {};
    if (!isObject(entry)) throw new ConfigError(`resources.${indicator} must be an object`);
    resources.set(indicator, {
      scopes: stringList(entry.scopes, `resources.${indicator}.scopes`),
      accessTokenTTL: positive(entry.access_token_ttl, `resources.${indicator}.access_token_ttl`, 3600),
    });
  }

  const clients = [];
  const rawClients = raw.clients ?? [];
  if (!Array.isArray(rawClients)) throw new ConfigError('clients must be a list of client metadata objects');
  const seen = new Set();
  for (const [index, client] of rawClients.entries()) {
    if (!isObject(client)) throw new ConfigError(`clients[${index}] must be an object`);
    if (typeof client.client_id !== 'string' || client.client_id.length === 0) {
      throw new ConfigError(`clients[${index}].client_id must be a non-empty string`);
    }
    if (seen.has(client.client_id)) throw new ConfigError(`clients: ${JSON.stringify(client.client_id)} appears twice`);
    seen.add(client.client_id);
    const grantTypes = stringList(client.grant_types ?? ['authorization_code'], `clients[${index}].grant_types`);
    const code = grantTypes.includes('authorization_code');
    const metadata = {
      ...client,
      grant_types: grantTypes,
      response_types: client.response_types ?? (code ? ['code'] : []),
      redirect_uris: client.redirect_uris ?? (code ? [DEFAULT_REDIRECT_URI] : []),
    };
    clients.push(metadata);
  }

  const autoLogin = raw.auto_login ?? null;
  if (autoLogin !== null && (typeof autoLogin !== 'string' || !accounts.has(autoLogin))) {
    throw new ConfigError('auto_login must be null or the id of a configured account');
  }

  const claims = raw.claims ?? DEFAULT_CLAIMS;
  if (!isObject(claims)) throw new ConfigError('claims must be an object: scope -> list of claim names');

  return {
    host,
    port,
    accounts,
    resources,
    clients,
    claims,
    autoLogin,
    exchange: parseExchangePolicy(raw.token_exchange, 'token_exchange'),
  };
}

// ---------------------------------------------------------------------------------------------
// Small helpers

const b64url = (buffer) => Buffer.from(buffer).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

function accountClaims(config, accountId) {
  const claims = config.accounts.get(accountId);
  if (!claims) return undefined;
  const copy = {};
  for (const [name, value] of Object.entries(claims)) {
    if (!RESERVED_CLAIMS.has(name)) copy[name] = value;
  }
  return copy;
}

async function readBody(req, limit = 1 << 20) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw new Error('request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

function sendHtml(res, status, html) {
  res.statusCode = status;
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('Content-Length', Buffer.byteLength(html));
  res.end(html);
}

const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// ---------------------------------------------------------------------------------------------
// Token exchange (RFC 8693)

// oidc-provider's InvalidGrant hides its detail behind a fixed description; a test wants to read
// why it was refused.
const invalidGrant = (description) => new errors.CustomOIDCProviderError('invalid_grant', description);

// The subject token's claims, when it is an access token this provider issued: a JWT signed
// with the provider's key (its signature, `iss` and `exp` checked here), or an opaque access
// token found in the provider's own store.
async function verifySubjectToken(provider, signing, token) {
  const parts = token.split('.');
  if (parts.length === 3) {
    let header;
    let payload;
    try {
      header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8'));
      payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
    } catch {
      throw invalidGrant('subject_token is not a well-formed JWT');
    }
    if (!isObject(header) || !isObject(payload)) throw invalidGrant('subject_token is not a well-formed JWT');
    if (header.alg !== 'RS256' || header.kid !== signing.kid) {
      throw invalidGrant('subject_token was not signed by this provider');
    }
    let signed = false;
    try {
      signed = verify(
        'RSA-SHA256',
        Buffer.from(`${parts[0]}.${parts[1]}`),
        signing.publicKey,
        Buffer.from(parts[2], 'base64url'),
      );
    } catch {
      signed = false;
    }
    if (!signed) throw invalidGrant('subject_token signature is invalid');
    if (payload.iss !== provider.issuer) throw invalidGrant('subject_token was issued by another issuer');
    if (typeof payload.exp !== 'number' || payload.exp <= now()) throw invalidGrant('subject_token is expired');
    if (typeof payload.sub !== 'string' || payload.sub.length === 0) throw invalidGrant('subject_token has no subject');
    return payload;
  }
  const stored = await provider.AccessToken.find(token);
  if (!stored || stored.isExpired) throw invalidGrant('subject_token is invalid or expired');
  if (!stored.accountId) throw invalidGrant('subject_token has no subject');
  return {
    sub: stored.accountId, scope: stored.scope, client_id: stored.clientId, act: stored.extra?.act,
  };
}

function single(value, name) {
  if (value === undefined) return undefined;
  if (Array.isArray(value)) {
    const distinct = [...new Set(value)];
    if (distinct.length > 1) {
      throw new errors.InvalidTarget(`only one ${name} value is supported per token exchange`);
    }
    return distinct[0];
  }
  return value;
}

function tokenExchangeHandler(config, signing, counts) {
  const count = (subject, outcome) => {
    const entry = counts.get(subject) ?? { issued: 0, refused: 0 };
    entry[outcome] += 1;
    counts.set(subject, entry);
  };

  return async function tokenExchange(ctx) {
    const { provider } = ctx.oidc;
    const { client, params } = ctx.oidc;
    const policy = config.exchange;

    if (!params.subject_token) throw new errors.InvalidRequest("missing required parameter 'subject_token'");
    if (!params.subject_token_type) throw new errors.InvalidRequest("missing required parameter 'subject_token_type'");
    if (![ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE].includes(params.subject_token_type)) {
      throw new errors.InvalidRequest(`unsupported subject_token_type; supported: ${ACCESS_TOKEN_TYPE}, ${JWT_TOKEN_TYPE}`);
    }
    if (params.actor_token !== undefined || params.actor_token_type !== undefined) {
      throw new errors.InvalidRequest('actor_token is not supported');
    }
    if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
      throw new errors.InvalidRequest(`unsupported requested_token_type; supported: ${ACCESS_TOKEN_TYPE}`);
    }

    const subject = await verifySubjectToken(provider, signing, params.subject_token);
    if (!config.accounts.has(subject.sub)) throw invalidGrant('subject_token names an unknown account');

    // From here on the subject is known: every answer counts as one exchange of its.
    try {
      if (policy.refusedAccounts.has(subject.sub)) {
        throw invalidGrant('token exchange is refused for this subject by policy');
      }
      const allowedAudiences = policy.allowed.get(client.clientId);
      if (!allowedAudiences) {
        throw new errors.UnauthorizedClient('this client may not exchange tokens');
      }
      const audience = single(params.audience, 'audience');
      const resource = single(params.resource, 'resource');
      if (audience !== undefined && resource !== undefined && audience !== resource) {
        throw new errors.InvalidTarget('audience and resource name different targets');
      }
      const target = audience ?? resource;
      if (target === undefined) throw new errors.InvalidTarget('audience or resource is required');
      const targetServer = config.resources.get(target);
      if (!targetServer) throw new errors.InvalidTarget('the requested audience is not a resource of this provider');
      if (!allowedAudiences.has(target)) {
        throw new errors.InvalidTarget('this client may not exchange tokens for the requested audience');
      }

      const targetScopes = new Set(targetServer.scopes);
      let scope;
      if (params.scope !== undefined) {
        const requested = params.scope.split(' ').filter(Boolean);
        const unknown = requested.filter((s) => !targetScopes.has(s));
        if (unknown.length > 0) throw new errors.InvalidScope('requested scope is not offered by the requested audience', unknown.join(' '));
        scope = requested.join(' ') || undefined;
      } else {
        scope = (subject.scope ?? '').split(' ').filter((s) => targetScopes.has(s)).join(' ') || undefined;
      }

      const resourceServer = new provider.ResourceServer(target, {
        scope: targetServer.scopes.join(' '),
        audience: target,
        accessTokenTTL: policy.expiresIn,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      });
      // RFC 8693 §4.1: the acting party, with any earlier actor nested inside.
      const act = { sub: client.clientId, ...(isObject(subject.act) ? { act: subject.act } : {}) };
      const token = new provider.AccessToken({
        accountId: subject.sub,
        client,
        scope,
        gty: 'token_exchange',
        expiresIn: policy.expiresIn,
        resourceServer,
        extra: { act },
      });
      const value = await token.save();
      count(subject.sub, 'issued');
      ctx.body = {
        access_token: value,
        issued_token_type: ACCESS_TOKEN_TYPE,
        token_type: 'Bearer',
        expires_in: token.expiration,
        ...(scope ? { scope } : {}),
      };
    } catch (error) {
      count(subject.sub, 'refused');
      throw error;
    }
  };
}

// ---------------------------------------------------------------------------------------------
// Interactions: login and consent without a person

function loginForm(uid, config, message) {
  const options = [...config.accounts.keys()]
    .map((id) => `<option value="${escapeHtml(id)}">${escapeHtml(id)}</option>`).join('');
  return `<!doctype html><html><head><meta charset="utf-8"><title>Sign in</title></head><body>
<h1>Sign in (test provider)</h1>${message ? `<p role="alert">${escapeHtml(message)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}/login">
<label>Account <select name="account">${options}</select></label>
<button type="submit">Sign in</button></form>
<form method="post" action="/interaction/${escapeHtml(uid)}/abort"><button type="submit">Cancel</button></form>
</body></html>`;
}

async function finishConsent(provider, req, res, details) {
  const { prompt: { details: missing }, grantId, session, params } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  if (missing.missingResourceScopes) {
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, {
    mergeWithLastSubmission: true,
  });
}

// GET /interaction/:uid — login: done at once as the account login_hint names, else as the
// auto_login account when one is set, else a form;
// consent: everything requested is granted (a test provider has no one to ask).
// POST /interaction/:uid/login (form: account) and POST /interaction/:uid/abort.
async function handleInteraction(provider, config, req, res, path) {
  const match = /^\/interaction\/([^/]+)(\/login|\/abort)?$/.exec(path);
  if (!match) return sendHtml(res, 404, '<p>not found</p>');
  const [, uid, action] = match;
  let details;
  try {
    details = await provider.interactionDetails(req, res);
  } catch (error) {
    return sendHtml(res, 400, `<p>${escapeHtml(error.error_description ?? error.message)}</p>`);
  }
  if (details.uid !== uid) return sendHtml(res, 400, '<p>interaction mismatch</p>');
  const prompt = details.prompt.name;

  if (req.method === 'GET' && !action) {
    if (prompt === 'login') {
      const hint = details.params.login_hint;
      const account = typeof hint === 'string' && config.accounts.has(hint) ? hint : config.autoLogin;
      if (account) {
        return provider.interactionFinished(req, res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
      }
      return sendHtml(res, 200, loginForm(uid, config));
    }
    if (prompt === 'consent') return finishConsent(provider, req, res, details);
    return sendHtml(res, 501, `<p>prompt ${escapeHtml(prompt)} is not implemented</p>`);
  }
  if (req.method === 'POST' && action === '/login') {
    const form = new URLSearchParams(await readBody(req));
    const account = form.get('account');
    if (prompt !== 'login') return sendHtml(res, 400, '<p>this interaction is not a login</p>');
    if (!account || !config.accounts.has(account)) return sendHtml(res, 400, loginForm(uid, config, 'unknown account'));
    return provider.interactionFinished(req, res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
  }
  if (req.method === 'POST' && action === '/abort') {
    return provider.interactionFinished(req, res, {
      error: 'access_denied', error_description: 'End-User aborted interaction',
    }, { mergeWithLastSubmission: false });
  }
  return sendHtml(res, 405, '<p>method not allowed</p>');
}

// ---------------------------------------------------------------------------------------------
// Test routes

class Jar {
  #cookies = new Map();

  take(response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq > 0) {
        const name = pair.slice(0, eq).trim();
        const value = pair.slice(eq + 1).trim();
        if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.#cookies.delete(name);
        else this.#cookies.set(name, value);
      }
    }
  }

  header() {
    return [...this.#cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

function clientAuthentication(client, form, headers) {
  const method = client.token_endpoint_auth_method ?? 'client_secret_basic';
  if (method === 'client_secret_basic') {
    const id = encodeURIComponent(client.client_id);
    const secret = encodeURIComponent(client.client_secret ?? '');
    headers.authorization = `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
  } else if (method === 'client_secret_post') {
    form.set('client_id', client.client_id);
    form.set('client_secret', client.client_secret ?? '');
  } else if (method === 'none') {
    form.set('client_id', client.client_id);
  } else {
    throw new Error(`the test login cannot authenticate a client with token_endpoint_auth_method ${method}`);
  }
}

// POST /test/login {account, client_id, resource?, scope?, redirect_uri?}: the authorization
// code flow with PKCE S256, driven over HTTP against this provider's own endpoints (GET /auth,
// the interaction, the resume, then POST /token). Answers the token endpoint's response.
async function testLogin(config, issuer, body) {
  if (!isObject(body)) return [400, { error: 'invalid_request', error_description: 'the body must be a JSON object' }];
  const { account, client_id: clientId, resource } = body;
  if (typeof account !== 'string' || !config.accounts.has(account)) {
    return [400, { error: 'invalid_request', error_description: 'account must name a configured account' }];
  }
  const client = config.clients.find((c) => c.client_id === clientId);
  if (!client) return [400, { error: 'invalid_request', error_description: 'client_id must name a configured client' }];
  if (resource !== undefined && typeof resource !== 'string') {
    return [400, { error: 'invalid_request', error_description: 'resource must be a string' }];
  }
  const redirectUri = body.redirect_uri ?? client.redirect_uris[0];
  if (typeof redirectUri !== 'string') {
    return [400, { error: 'invalid_request', error_description: 'the client has no redirect_uri' }];
  }
  let scope = body.scope;
  if (scope === undefined) {
    const resourceScopes = resource ? config.resources.get(resource)?.scopes ?? [] : [];
    scope = ['openid', 'email', 'profile', ...resourceScopes].join(' ');
  }
  if (typeof scope !== 'string') return [400, { error: 'invalid_request', error_description: 'scope must be a string' }];

  const verifier = b64url(randomBytes(32));
  const challenge = b64url(createHash('sha256').update(verifier).digest());
  const state = b64url(randomBytes(16));
  const authorize = new URL(ROUTES.authorization, issuer);
  const query = {
    client_id: client.client_id,
    response_type: 'code',
    redirect_uri: redirectUri,
    scope,
    state,
    nonce: b64url(randomBytes(16)),
    code_challenge: challenge,
    code_challenge_method: 'S256',
    login_hint: account,
    ...(resource ? { resource } : {}),
    // oidc-provider keeps offline_access (a refresh token) only when consent is prompted.
    ...(scope.split(' ').includes('offline_access') ? { prompt: 'consent' } : {}),
  };
  for (const [name, value] of Object.entries(query)) authorize.searchParams.set(name, value);

  const jar = new Jar();
  const callback = new URL(redirectUri);
  let url = authorize;
  let code;
  for (let hop = 0; ; hop += 1) {
    if (hop >= 10) return [502, { error: 'server_error', error_description: 'the login took more than 10 redirects' }];
    // eslint-disable-next-line no-await-in-loop
    const response = await fetch(url, { redirect: 'manual', headers: { cookie: jar.header() } });
    jar.take(response);
    const location = response.headers.get('location');
    if (response.status < 300 || response.status >= 400 || !location) {
      // eslint-disable-next-line no-await-in-loop
      const text = (await response.text()).slice(0, 500);
      return [502, { error: 'server_error', error_description: `the login stopped at ${url.pathname} with HTTP ${response.status}: ${text}` }];
    }
    // Drain the body so that the connection can be reused.
    // eslint-disable-next-line no-await-in-loop
    await response.arrayBuffer();
    url = new URL(location, url);
    if (url.origin === callback.origin && url.pathname === callback.pathname) {
      const error = url.searchParams.get('error');
      if (error) return [400, { error, error_description: url.searchParams.get('error_description') ?? undefined }];
      if (url.searchParams.get('state') !== state) return [502, { error: 'server_error', error_description: 'state mismatch' }];
      code = url.searchParams.get('code');
      break;
    }
  }
  if (!code) return [502, { error: 'server_error', error_description: 'no code at the redirect_uri' }];

  const form = new URLSearchParams({
    grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier,
  });
  if (resource) form.set('resource', resource);
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  clientAuthentication(client, form, headers);
  const response = await fetch(new URL(ROUTES.token, issuer), { method: 'POST', headers, body: form });
  const text = await response.text();
  let answer;
  try {
    answer = JSON.parse(text);
  } catch {
    return [502, { error: 'server_error', error_description: `the token endpoint answered HTTP ${response.status} without JSON` }];
  }
  return [response.status, answer];
}

async function handleTest(config, issuer, counts, req, res, path) {
  try {
    if (path === '/test/login' && req.method === 'POST') {
      let body;
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        return sendJson(res, 400, { error: 'invalid_request', error_description: 'the body must be JSON' });
      }
      const [status, answer] = await testLogin(config, issuer, body);
      return sendJson(res, status, answer);
    }
    if (path === '/test/auto-login' && req.method === 'PUT') {
      let account;
      try {
        ({ account } = JSON.parse(await readBody(req)));
      } catch {
        return sendJson(res, 400, { error: 'invalid_request', error_description: 'the body must be JSON: {"account": id or null}' });
      }
      if (account !== null && (typeof account !== 'string' || !config.accounts.has(account))) {
        return sendJson(res, 400, { error: 'invalid_request', error_description: 'account must be null or the id of a configured account' });
      }
      config.autoLogin = account;
      res.statusCode = 204;
      return res.end();
    }
    if (path === '/test/exchanges' && req.method === 'GET') {
      return sendJson(res, 200, Object.fromEntries(counts));
    }
    if (path === '/test/token-exchange-policy' && req.method === 'PUT') {
      let body;
      try {
        body = JSON.parse(await readBody(req));
        config.exchange = parseExchangePolicy(body, 'token_exchange');
      } catch (error) {
        return sendJson(res, 400, { error: 'invalid_request', error_description: error.message });
      }
      res.statusCode = 204;
      return res.end();
    }
    return sendJson(res, 404, { error: 'not_found', error_description: `no test route ${req.method} ${path}` });
  } catch (error) {
    process.stderr.write(`oidc-provider: test route ${path} failed: ${error.message}\n`);
    return sendJson(res, 500, { error: 'server_error', error_description: error.message });
  }
}

// ---------------------------------------------------------------------------------------------
// Start

async function main() {
  let config;
  try {
    config = parseConfig(await readConfigText());
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    throw error;
  }

  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = randomUUID();
  const signing = { kid, publicKey };
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  const counts = new Map();

  let ready = async (_req, res) => sendJson(res, 503, { error: 'temporarily_unavailable' });
  const server = createServer((req, res) => {
    ready(req, res).catch((error) => {
      process.stderr.write(`oidc-provider: request failed: ${error.message}\n`);
      if (!res.headersSent) sendJson(res, 500, { error: 'server_error' });
      else res.destroy();
    });
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, resolve);
  });
  const { port } = server.address();
  const hostInUrl = config.host.includes(':') ? `[${config.host}]` : config.host;
  const issuer = `http://${hostInUrl}:${port}`;

  const resourceServerInfo = (indicator) => {
    const resource = config.resources.get(indicator);
    if (!resource) throw new errors.InvalidTarget('unknown resource indicator');
    return {
      scope: resource.scopes.join(' '),
      audience: indicator,
      accessTokenTTL: resource.accessTokenTTL,
      accessTokenFormat: 'jwt',
      jwt: { sign: { alg: 'RS256' } },
    };
  };

  const provider = new Provider(issuer, {
    clients: config.clients,
    jwks: { keys: [jwk] },
    cookies: { keys: [b64url(randomBytes(32))] },
    routes: ROUTES,
    claims: config.claims,
    scopes: ['openid', 'offline_access', ...Object.keys(config.claims).filter((s) => s !== 'openid')],
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, indicator) => resourceServerInfo(indicator),
      },
    },
    interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: async (_ctx, id) => {
      const claims = accountClaims(config, id);
      if (!claims) return undefined;
      return { accountId: id, claims: async () => ({ ...claims, sub: id }) };
    },
    extraTokenClaims: async (_ctx, token) => {
      const claims = token.accountId ? accountClaims(config, token.accountId) ?? {} : {};
      if (isObject(token.extra?.act)) claims.act = token.extra.act;
      return Object.keys(claims).length > 0 ? claims : undefined;
    },
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 3600,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 600,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 24 * 3600,
      Interaction: 3600,
      Session: 24 * 3600,
      Grant: 24 * 3600,
      DeviceCode: 600,
      BackchannelAuthenticationRequest: 600,
      PreAuthorizedCode: 600,
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      ctx.body = `<!doctype html><p>${escapeHtml(out.error)}: ${escapeHtml(out.error_description ?? '')}</p>`;
    },
  });
  provider.registerGrantType(
    TOKEN_EXCHANGE,
    tokenExchangeHandler(config, signing, counts),
    ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'requested_token_type', 'audience', 'resource', 'scope'],
    ['audience', 'resource'],
  );
  provider.on('server_error', (_ctx, error) => {
    process.stderr.write(`oidc-provider: server_error: ${error.message}\n`);
  });

  // Every configured client is checked now, so bad metadata fails the start, not a test.
  for (const client of config.clients) {
    try {
      // eslint-disable-next-line no-await-in-loop
      await provider.Client.find(client.client_id);
    } catch (error) {
      fail(`clients: ${JSON.stringify(client.client_id)}: ${error.error_description ?? error.message}`);
    }
  }

  const callback = provider.callback();
  ready = async (req, res) => {
    const path = new URL(req.url, issuer).pathname;
    if (path.startsWith('/test/')) return handleTest(config, issuer, counts, req, res, path);
    if (path.startsWith('/interaction/')) return handleInteraction(provider, config, req, res, path);
    return callback(req, res);
  };
  process.stdout.write(`listening on ${issuer}\n`);
}

main().catch((error) => {
  process.stderr.write(`oidc-provider: ${error.stack ?? error.message}\n`);
  process.exit(1);
});
