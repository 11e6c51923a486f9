// A person's browser for the OAuth checks: Debian's Chromium (/usr/bin/chromium), headless,
// driven by playwright-core (no browser of Playwright's own is downloaded). Given an
// authorization URL at Docket, it follows it as a person would: signs in at the team's OpenID
// provider by choosing the account in the provider's login form and clicking "Sign in", approves
// Docket's consent page by clicking its approve button, and stops once the browser has loaded the
// client's loopback redirect URI (so that request reaches the client's own callback server).
//
// Each page is recognised by what is on it, not by a fixed order, and each may be seen at most
// once: a login form shown twice (an unknown account), or a page that is none of the three,
// fails with the page's address and text.
//
// As a module: `authorizeInBrowser(url, { account, redirectUri, consentMustName })` resolves to
// `{ steps, finalUrl }`. From the command line (the Python client's redirect handler runs it):
//
//   node browser.mjs AUTHORIZATION_URL --account alice --redirect-uri http://127.0.0.1:PORT/callback \
//       [--consent-must-name "Client name"]
//
// prints each step on stderr, then `{"steps": [...]}` on stdout, and exits non-zero on any
// failure.

import { pathToFileURL } from 'node:url';

import { chromium } from 'playwright-core';

// A hang guard for each page, far above what a page of the loopback servers takes.
const PAGE_TIMEOUT_MS = 30_000;

const LAUNCH = {
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
};

function log(message) {
  process.stderr.write(`browser: ${message}\n`);
}

// Resolves to the name of the first of `waits` (name -> promise) to resolve; the others are left
// to time out or to fail when the browser closes, and their outcome is ignored.
async function first(waits) {
  const entries = Object.entries(waits).map(([name, promise]) => promise.then(() => name));
  for (const entry of entries) entry.catch(() => {});
  return Promise.any(entries);
}

async function describe(page) {
  const text = await page.locator('body').innerText({ timeout: 1_000 }).catch(() => '(no text)');
  return `${page.url()}: ${text.replace(/\s+/g, ' ').slice(0, 600)}`;
}

/**
 * Follows `url` in a fresh headless Chromium until the client's redirect URI has loaded.
 *
 * @param {string} url the authorization URL (Docket's /oauth/authorize with the client's parameters)
 * @param {{ account: string, redirectUri: string, consentMustName?: string }} options
 *   `account`: the provider account to sign in as; `redirectUri`: the client's redirect URI (the
 *   browser stops once a page under it has loaded); `consentMustName`: text the consent page must
 *   show (the client's name).
 * @returns {Promise<{ steps: string[], finalUrl: string }>}
 */
export async function authorizeInBrowser(url, { account, redirectUri, consentMustName }) {
  const browser = await chromium.launch(LAUNCH);
  const steps = [];
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    const atClient = (address) => address.href.startsWith(redirectUri);
    const loginForm = page.locator('form[action$="/login"]:has(select[name="account"])');
    const approve = page.locator('button[type="submit"][name="decision"][value="approve"]');

    log(`opening ${new URL(url).origin}${new URL(url).pathname}`);
    // The first answer is a redirect to the provider; the page that matters comes after it.
    await page.goto(url, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS });

    for (;;) {
      let found;
      try {
        found = await first({
          client: page.waitForURL(atClient, { waitUntil: 'load', timeout: PAGE_TIMEOUT_MS }),
          login: loginForm.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }),
          consent: approve.waitFor({ state: 'visible', timeout: PAGE_TIMEOUT_MS }),
        });
      } catch {
        throw new Error(`the browser reached a page that is neither the provider's login, Docket's consent, nor the client's redirect URI: ${await describe(page)}`);
      }
      if (found === 'client') {
        steps.push('redirected to the client');
        log(`reached the client's redirect URI (${new URL(page.url()).origin}${new URL(page.url()).pathname})`);
        return { steps, finalUrl: page.url() };
      }
      if (steps.includes(found)) {
        throw new Error(`the ${found} page came a second time: ${await describe(page)}`);
      }
      steps.push(found);
      const before = page.url();
      if (found === 'login') {
        log(`signing in at ${new URL(before).origin} as ${account}`);
        await loginForm.locator('select[name="account"]').selectOption(account);
        await Promise.all([
          page.waitForURL((address) => address.href !== before, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS }),
          loginForm.getByRole('button', { name: 'Sign in' }).click(),
        ]);
      } else {
        const text = await page.locator('body').innerText();
        if (consentMustName && !text.includes(consentMustName)) {
          throw new Error(`Docket's consent page does not name the client ${JSON.stringify(consentMustName)}: ${await describe(page)}`);
        }
        log(`approving Docket's consent page at ${new URL(before).origin}${new URL(before).pathname}`);
        await Promise.all([
          page.waitForURL((address) => address.href !== before, { waitUntil: 'commit', timeout: PAGE_TIMEOUT_MS }),
          approve.click(),
        ]);
      }
    }
  } finally {
    await browser.close();
  }
}

function parseArguments(args) {
  const options = {};
  let url;
  for (let i = 0; i < args.length; i += 1) {
    const flag = args[i];
    const value = args[i + 1];
    if (flag === '--account' && value !== undefined) options.account = value;
    else if (flag === '--redirect-uri' && value !== undefined) options.redirectUri = value;
    else if (flag === '--consent-must-name' && value !== undefined) options.consentMustName = value;
    else if (url === undefined && !flag.startsWith('--')) {
      url = flag;
      continue;
    } else throw new Error(`unknown argument ${JSON.stringify(flag)}`);
    i += 1;
  }
  if (!url || !options.account || !options.redirectUri) {
    throw new Error('usage: node browser.mjs AUTHORIZATION_URL --account ID --redirect-uri URI [--consent-must-name TEXT]');
  }
  return { url, options };
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const { url, options } = parseArguments(process.argv.slice(2));
    const { steps } = await authorizeInBrowser(url, options);
    log(`done: ${steps.join(' -> ')}`);
    process.stdout.write(`${JSON.stringify({ steps })}\n`);
  } catch (error) {
    log(`failed: ${error.message}`);
    process.exit(1);
  }
}
