// The portal (/portal) in a real browser: Debian's Chromium (/usr/bin/chromium), headless, driven
// by playwright-core (no browser of Playwright's own is downloaded). A person opens /portal, is
// sent through Docket's authorization server to the team's OpenID provider (the real npm
// oidc-provider of testing/oidc-provider), signs in with its login form, approves Docket's consent
// page for the portal, and lands on the portal signed in. Then: the session cookie is HttpOnly
// (no script sees it) and SameSite=Lax; a form another site posts to /portal/logout is refused
// and changes nothing; the portal's own logout button ends the session, and /portal asks for a login again.
// Screenshots of each step go to the artefacts folder.
//
//   node check.mjs DOCKET_BASE_URL ARTEFACTS_DIR

import { createHash, randomBytes } from 'node:crypto';

import { chromium } from 'playwright-core';

const [base, artefacts] = process.argv.slice(2);
if (!base || !artefacts) {
  throw new Error('usage: node check.mjs DOCKET_BASE_URL ARTEFACTS_DIR');
}

// A hang guard for each page, far above what a page of the loopback servers takes.
const PAGE_TIMEOUT_MS = 30_000;

const LAUNCH = {
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
};

function log(message) {
  process.stderr.write(`portal: ${message}\n`);
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function describe(page) {
  const text = await page.locator('body').innerText({ timeout: 1_000 }).catch(() => '(no text)');
  return `${page.url()}: ${text.replace(/\s+/g, ' ').slice(0, 600)}`;
}

async function shot(page, name) {
  await page.screenshot({ path: `${artefacts}/${name}.png`, fullPage: true });
}

// From wherever the browser is, through the provider's login and Docket's consent page (each at
// most once) until the portal's page shows who is signed in.
async function logIn(page, account) {
  const loginForm = page.locator('form[action$="/login"]:has(select[name="account"])');
  const approve = page.locator('button[type="submit"][name="decision"][value="approve"]');
  const who = page.locator('#who');
  const seen = [];
  for (;;) {
    const waits = {
      portal: who.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }),
      login: loginForm.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }),
      consent: approve.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }),
    };
    const entries = Object.entries(waits).map(([name, promise]) => promise.then(() => name));
    for (const entry of entries) entry.catch(() => {});
    let found;
    try {
      found = await Promise.any(entries);
    } catch {
      throw new Error(`neither the provider's login, Docket's consent nor the portal: ${await describe(page)}`);
    }
    if (found === 'portal') return seen;
    check(!seen.includes(found), `the ${found} page came a second time: ${await describe(page)}`);
    seen.push(found);
    const before = page.url();
    if (found === 'login') {
      log(`signing in at the provider as ${account}`);
      await shot(page, '1-provider-login');
      await loginForm.locator('select[name="account"]').selectOption(account);
      await Promise.all([
        page.waitForURL((address) => address.href !== before, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS }),
        loginForm.getByRole('button', { name: 'Sign in' }).click(),
      ]);
    } else {
      const text = await page.locator('body').innerText();
      check(text.includes('Docket portal'), `the consent page does not name the portal: ${await describe(page)}`);
      log('approving Docket\'s consent page for the portal');
      await shot(page, '2-consent');
      await Promise.all([
        page.waitForURL((address) => address.href !== before, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS }),
        approve.click(),
      ]);
    }
  }
}

// --- Work of alice's own, made through MCP with a token Docket's authorization server gave her ---

const PROTOCOL_VERSION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
// A loopback redirect nothing listens on: the browser's request to it is caught by the page.
const REDIRECT_URI = 'http://127.0.0.1:9/callback';

function base64url(bytes) {
  return Buffer.from(bytes).toString('base64url');
}

// A public client registered at Docket (RFC 7591), authorized in `context` (whose browser is signed
// in at the provider already): Docket's consent page is approved, the code caught at the redirect
// and exchanged. Alice's access token for Docket's /mcp.
async function accessToken(context) {
  const registered = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Portal check',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  check(registered.status === 201, `registration answered ${registered.status}`);
  const { client_id: clientId } = await registered.json();
  const verifier = base64url(randomBytes(32));
  const challenge = base64url(createHash('sha256').update(verifier).digest());
  const authorize = new URL(`${base}/oauth/authorize`);
  for (const [key, value] of Object.entries({
    response_type: 'code', client_id: clientId, redirect_uri: REDIRECT_URI, state: 'portal-check',
    code_challenge: challenge, code_challenge_method: 'S256', resource: `${base}/mcp`,
  })) authorize.searchParams.set(key, value);
  const page = await context.newPage();
  let code = null;
  await page.route(`${REDIRECT_URI}**`, async (route) => {
    code = new URL(route.request().url()).searchParams.get('code');
    await route.fulfill({ status: 200, contentType: 'text/plain', body: 'done' });
  });
  await page.goto(authorize.href, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS });
  const approve = page.locator('button[type="submit"][name="decision"][value="approve"]');
  const loginForm = page.locator('form[action$="/login"]:has(select[name="account"])');
  for (let round = 0; code === null && round < 4; round++) {
    const found = await Promise.any([
      approve.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }).then(() => 'consent'),
      loginForm.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }).then(() => 'login'),
      page.waitForURL((address) => address.href.startsWith(REDIRECT_URI), { timeout: PAGE_TIMEOUT_MS }).then(() => 'done'),
    ]).catch(async () => { throw new Error(`no code: ${await describe(page)}`); });
    if (found === 'done') break;
    if (found === 'login') {
      await loginForm.locator('select[name="account"]').selectOption('alice');
      await loginForm.getByRole('button', { name: 'Sign in' }).click();
    } else {
      await approve.click();
    }
    await page.waitForLoadState('load', { timeout: PAGE_TIMEOUT_MS }).catch(() => {});
  }
  check(code, `the authorization gave no code: ${await describe(page)}`);
  await page.close();
  const token = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, client_id: clientId,
      code_verifier: verifier, resource: `${base}/mcp`,
    }),
  });
  const tokenText = await token.text();
  check(token.status === 200, `the token endpoint answered ${token.status}: ${tokenText}`);
  return JSON.parse(tokenText).access_token;
}

let nextId = 1;
// One MCP request as alice; the JSON-RPC result. `tasks` declares the tasks extension.
async function mcp(token, method, params, { tasks = false } = {}) {
  const id = nextId++;
  const headers = {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
  };
  if (method === 'tools/call') headers['mcp-name'] = params.name;
  const capabilities = tasks ? { extensions: { [TASKS]: {} } } : {};
  const body = {
    jsonrpc: '2.0', id, method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': capabilities,
        'io.modelcontextprotocol/clientInfo': { name: 'docket-portal-check', version: '1' },
      },
    },
  };
  const answer = await fetch(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await answer.text();
  const message = (answer.headers.get('content-type') || '').startsWith('text/event-stream')
    ? text.split('\n').filter((line) => line.startsWith('data:')).map((line) => JSON.parse(line.slice(5)))
      .reverse().find((candidate) => candidate.id === id)
    : JSON.parse(text);
  check(message && !message.error, `${method} ${params.name || ''}: ${text.slice(0, 500)}`);
  check(!message.result.isError, `${params.name}: ${JSON.stringify(message.result).slice(0, 500)}`);
  return message.result;
}

// The pages: a million-row export paged in the viewer, its download and a public share opened
// logged out, a task turning completed with no reload, a run cancelled, bob refused alice's pages.
async function checkPages(browser, context, page) {
  const token = await accessToken(context);
  log('alice has an access token for /mcp');

  const exported = await mcp(token, 'tools/call', {
    name: 'trino_export',
    arguments: { sql: 'SELECT * FROM synthetic.big.rows_1m', format: 'csv', name: 'million' },
  });
  const assetId = exported.structuredContent.asset_id;
  check(exported.structuredContent.row_count === 1000000, `the export: ${JSON.stringify(exported.structuredContent)}`);
  log(`exported 1 000 000 rows as ${assetId}`);

  // My exports: find it by name, open the viewer, page on and jump to the end.
  await page.goto(`${base}/portal/exports?search=milli`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  await page.locator(`tr[data-asset-id="${assetId}"] a`, { hasText: 'million' }).click();
  await page.waitForURL((address) => address.pathname === `/portal/exports/${assetId}`, { timeout: PAGE_TIMEOUT_MS });
  check((await page.locator('#showing').innerText()).includes('Rows 1–100'), await describe(page));
  await shot(page, '5-viewer-first-page');
  await page.locator('#next').click();
  await page.waitForURL((address) => address.search === '?row=101', { timeout: PAGE_TIMEOUT_MS });
  check((await page.locator('#showing').innerText()).includes('Rows 101–200'), await describe(page));
  const firstCell = await page.locator('#rows tbody tr').first().locator('td').nth(1).innerText();
  await page.locator('input[name="row"]').fill('999901');
  await page.locator('input[name="row"]').press('Enter');
  await page.waitForURL((address) => address.search === '?row=999901', { timeout: PAGE_TIMEOUT_MS });
  check((await page.locator('#showing').innerText()).includes('Rows 999901–1000000'), await describe(page));
  check(await page.locator('#next').count() === 0, 'the last page offers a next page');
  check(await page.locator('#rows tbody tr').count() === 100, 'the last page does not hold 100 rows');
  await shot(page, '6-viewer-last-page');
  log(`paged the viewer: rows 101– start with ${firstCell}; the last page ends the million`);

  // Its signed download link, clicked.
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: PAGE_TIMEOUT_MS }),
    page.locator('#download').click(),
  ]);
  check(download.suggestedFilename().endsWith('.csv'), `downloaded ${download.suggestedFilename()}`);
  await download.cancel();
  log('the download link opened with no header');

  // A public share, opened by a browser that is signed in nowhere.
  await page.locator('select[name="audience"]').selectOption('public');
  await page.locator('#share button[type="submit"]').click();
  await page.locator('#share-url').waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS });
  const shareUrl = await page.locator('#share-url').getAttribute('href');
  await shot(page, '7-shared');
  const stranger = await browser.newContext({ acceptDownloads: true });
  const outside = await stranger.newPage();
  const [opened] = await Promise.all([
    outside.waitForEvent('download', { timeout: PAGE_TIMEOUT_MS }),
    outside.goto(shareUrl, { timeout: PAGE_TIMEOUT_MS }).catch(() => null),
  ]);
  const path = await opened.path();
  check(path, 'the public share gave nothing');
  await stranger.close();
  log('a public share opened in a browser signed in nowhere');

  // A share for bob alone: he opens it signed in to the portal; carol, signed in too, may not.
  await page.locator('select[name="audience"]').selectOption('people');
  await page.locator('input[name="people"]').fill('oidc:bob');
  await page.locator('#share button[type="submit"]').click();
  await page.waitForFunction(
    (previous) => { const link = document.querySelector('#share-url'); return link && link.href !== previous; },
    shareUrl, { timeout: PAGE_TIMEOUT_MS },
  );
  const bobsShare = await page.locator('#share-url').getAttribute('href');

  // A task that is still running when the page loads turns completed on the page, with no reload.
  const slow = await mcp(token, 'tools/call', { name: 'diagnostics_sleep', arguments: { seconds: 5 } }, { tasks: true });
  check(slow.resultType === 'task' && slow.taskId, `diagnostics_sleep did not become a task: ${JSON.stringify(slow)}`);
  await page.goto(`${base}/portal/work`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  await page.evaluate(() => { window.portalCheckMarker = 'same page'; });
  const row = page.locator(`tr[data-task-id="${slow.taskId}"]`);
  check((await row.locator('.status').innerText()) === 'working', `the task reads ${await row.locator('.status').innerText()}`);
  await shot(page, '8-task-working');
  await page.waitForFunction(
    (id) => document.querySelector(`tr[data-task-id="${id}"] .status`).textContent === 'completed',
    slow.taskId, { timeout: PAGE_TIMEOUT_MS },
  );
  check(await page.evaluate(() => window.portalCheckMarker) === 'same page', 'the page was reloaded');
  await shot(page, '9-task-completed');
  log('a running task turned completed on the page without a reload');

  // A run, cancelled from the page.
  await mcp(token, 'tools/call', {
    name: 'manage_script',
    arguments: { command: 'create', name: 'slow', source: 'platform.call("diagnostics_sleep", {"seconds": 120})\n' },
  });
  // As a task, the call answers at once with the run's id (a run is its own task).
  const run = await mcp(token, 'tools/call', { name: 'run_script', arguments: { name: 'slow' } }, { tasks: true });
  check(run.resultType === 'task' && run.taskId, `run_script did not become a task: ${JSON.stringify(run)}`);
  const runId = run.taskId;
  await page.goto(`${base}/portal/work`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  const runRow = page.locator(`tr[data-run-id="${runId}"]`);
  await runRow.locator('button', { hasText: 'Cancel' }).click();
  await page.waitForURL((address) => address.pathname === '/portal/work', { timeout: PAGE_TIMEOUT_MS });
  await page.waitForFunction(
    (id) => document.querySelector(`tr[data-run-id="${id}"] .status`).textContent === 'cancelled',
    runId, { timeout: PAGE_TIMEOUT_MS },
  );
  await shot(page, '10-run-cancelled');
  log('a run was cancelled from the page');

  // My scripts: the script, its versions, and the run just cancelled among its runs.
  await page.goto(`${base}/portal/scripts`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  await page.locator('#script-links a', { hasText: 'slow' }).click();
  await page.waitForURL((address) => address.pathname === '/portal/scripts/slow', { timeout: PAGE_TIMEOUT_MS });
  check((await page.locator('#versions').innerText()).includes('Version 1 is current'), await describe(page));
  check((await page.locator('#runs').innerText()).includes(runId), `the script's runs: ${await describe(page)}`);
  await shot(page, '11-script');
  log('the script page lists its version and its runs');

  // Bob, signed in too, is refused alice's export, and sees none of her work.
  const bobs = await browser.newContext();
  const bob = await bobs.newPage();
  await bob.goto(`${base}/portal`, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS });
  await logIn(bob, 'bob');
  const foreign = await bob.goto(`${base}/portal/exports/${assetId}`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  check(foreign.status() === 404, `bob opened alice's export: ${foreign.status()}`);
  await shot(bob, '12-another-persons-page');
  await bob.goto(`${base}/portal/work`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  const bobsWork = await bob.locator('main').innerText();
  check(!bobsWork.includes(slow.taskId) && !bobsWork.includes(runId), 'bob sees alice\'s work');
  const admin = await bob.goto(`${base}/portal/admin`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  check(admin.status() === 404, `bob opened the administration page: ${admin.status()}`);
  const [shared] = await Promise.all([
    bob.waitForEvent('download', { timeout: PAGE_TIMEOUT_MS }),
    bob.goto(bobsShare, { timeout: PAGE_TIMEOUT_MS }).catch(() => null),
  ]);
  check(await shared.path(), 'the share for bob gave him nothing');
  log('bob opened the share made for him, known by his portal session');
  await bobs.close();
  log('another person is refused alice\'s pages');

  // Carol, an administrator, finds alice's export in the audit log and sees the replica beating.
  const carols = await browser.newContext();
  const carol = await carols.newPage();
  await carol.goto(`${base}/portal`, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS });
  await logIn(carol, 'carol');
  await carol.locator('#nav-admin').click();
  await carol.waitForURL((address) => address.pathname === '/portal/admin', { timeout: PAGE_TIMEOUT_MS });
  await carol.locator('input[name="tool"]').fill('trino_export');
  await carol.locator('#audit-search button[type="submit"]').click();
  await carol.waitForURL((address) => address.search.includes('tool=trino_export'), { timeout: PAGE_TIMEOUT_MS });
  const audit = await carol.locator('#audit').innerText();
  check(audit.includes('trino_export') && audit.includes('alice'), `the audit search: ${audit.slice(0, 400)}`);
  check((await carol.locator('#replicas').innerText()).includes('beating'), await describe(carol));
  for (const queue of ['#queue', '#running']) {
    const text = await carol.locator(queue).innerText();
    check(text.includes('runs') && !text.includes('invalid'), `${queue}: ${text}`);
  }
  await shot(carol, '13-administration');
  const notCarols = await carol.goto(bobsShare, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  check(notCarols.status() === 404, `carol opened the share made for bob: ${notCarols.status()}`);
  await carols.close();
  log('an administrator searched the audit log and saw the replica beating');
}

const browser = await chromium.launch(LAUNCH);
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  log(`opening ${base}/portal`);
  await page.goto(`${base}/portal`, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS });
  const steps = await logIn(page, 'alice');
  check(steps.join(',') === 'login,consent', `expected the login and the consent page, saw ${steps}`);
  check(new URL(page.url()).pathname === '/portal', `landed at ${page.url()}`);
  const who = await page.locator('#who').innerText();
  check(who.includes('Alice Example'), `the portal shows ${JSON.stringify(who)}`);
  await shot(page, '3-signed-in');
  log(`signed in as ${who}`);

  // The cookie: HttpOnly (so no script, the page's own included, reads it), SameSite=Lax,
  // scoped to /portal.
  const cookies = await context.cookies(`${base}/portal`);
  const session = cookies.find((cookie) => cookie.name === 'docket_portal');
  check(session, `no session cookie among ${cookies.map((cookie) => cookie.name)}`);
  check(session.httpOnly && session.sameSite === 'Lax' && session.path === '/portal',
    `the session cookie is ${JSON.stringify({ ...session, value: '…' })}`);
  const visible = await page.evaluate(() => document.cookie);
  check(!visible.includes('docket_portal'), 'a script sees the session cookie');

  // Another site's page posts a logout form (with a made-up token) to the portal: refused for
  // its origin (and it carries no session cookie, SameSite=Lax, nor a valid token), and the session
  // it aimed at still opens the portal.
  const other = await context.newPage();
  await other.setContent(
    `<form method="post" action="${base}/portal/logout"><input name="csrf" value="forged"></form>`,
  );
  const [refused] = await Promise.all([
    other.waitForNavigation({ waitUntil: 'load', timeout: PAGE_TIMEOUT_MS }),
    other.locator('form').evaluate((form) => form.submit()),
  ]);
  check(refused && refused.status() === 403, `the foreign form was answered ${refused && refused.status()}`);
  await shot(other, '4-after-foreign-form');
  await other.close();
  const still = await fetch(`${base}/portal`, {
    headers: { cookie: `docket_portal=${session.value}` },
    redirect: 'manual',
  });
  check(still.status === 200, `the foreign form ended the session: /portal answered ${still.status}`);
  await page.goto(`${base}/portal`, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS });
  check(await page.locator('#who').isVisible(), `not signed in: ${await describe(page)}`);
  log('a form posted from another page ended nothing');

  await checkPages(browser, context, page);

  // The portal's own logout button.
  await Promise.all([
    page.waitForURL((address) => address.pathname === '/portal/signed-out', { timeout: PAGE_TIMEOUT_MS }),
    page.locator('#logout').click(),
  ]);
  await shot(page, '14-logged-out');
  const after = await context.cookies(`${base}/portal`);
  check(!after.some((cookie) => cookie.name === 'docket_portal' && cookie.value !== ''),
    'the session cookie outlived the logout');
  // The portal now wants a login again (the provider and the authorization server would sign the
  // person straight back in, so the answer itself is what is checked).
  const answer = await page.request.get(`${base}/portal`, { maxRedirects: 0 });
  check(answer.status() === 303 && answer.headers().location.startsWith('/portal/login'),
    `after logout /portal answered ${answer.status()} ${answer.headers().location}`);
  log('logged out; /portal asks for a login again');
} finally {
  await browser.close();
}
