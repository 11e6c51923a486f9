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

  // The portal's own logout button.
  await Promise.all([
    page.waitForURL((address) => address.pathname === '/portal/signed-out', { timeout: PAGE_TIMEOUT_MS }),
    page.locator('#logout').click(),
  ]);
  await shot(page, '5-logged-out');
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
