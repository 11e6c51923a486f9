// The results view in a real browser: Debian's Chromium (/usr/bin/chromium), headless, driven by
// playwright-core, opens the minimal MCP Apps host (host.html, served by serve.mjs) against a
// running `docket serve` whose `warehouse` connection is the Trino double. The host declares the
// io.modelcontextprotocol/ui extension, calls the tool, reads the ui:// view it names and shows
// it through the sandbox proxy; this check then works the view as a person would and asserts what
// it shows:
//
//   - trino_query: the rows in the table with their column types, a header click sorting
//     (ascending, then descending, numbers by value), the filter box narrowing the rows, a value
//     holding markup shown as text;
//   - trino_export: the export's summary, its first rows (read through the host), and the
//     download button asking the host to open the export's download URL.
//
// No page may log a CSP violation or any other error. Screenshots go to target/artefacts/apps/
// (CI keeps target/artefacts/).
//
//   node check.mjs DOCKET_MCP_URL ARTEFACT_DIR

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

import { startHost } from './serve.mjs';

const [docketMcpUrl, artefacts] = process.argv.slice(2);
if (!docketMcpUrl || !artefacts) {
  console.error('usage: node check.mjs DOCKET_MCP_URL ARTEFACT_DIR');
  process.exit(2);
}

const LAUNCH = {
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
};
const WAIT_MS = 30_000;

function log(message) {
  process.stderr.write(`apps: ${message}\n`);
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

function equal(actual, expected, what) {
  const [a, e] = [JSON.stringify(actual), JSON.stringify(expected)];
  check(a === e, `${what}: expected ${e}, got ${a}`);
}

// Opens the host for one tool call and waits until the view has been given the result.
async function openHost(browser, host, tool, args) {
  const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  const problems = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(String(error)));
  const url = new URL('/host.html', host.hostOrigin);
  url.searchParams.set('tool', tool);
  url.searchParams.set('arguments', JSON.stringify(args));
  url.searchParams.set('sandbox', host.sandboxOrigin);
  await page.goto(url.href);
  await page.waitForFunction(() => ['rendered', 'failed'].includes(window.appHost.state), null, {
    timeout: WAIT_MS,
  });
  const state = await page.evaluate(() => window.appHost);
  check(state.state === 'rendered', `the host did not show ${tool}'s view: ${state.error || state.state}`);
  check(state.view.uri === 'ui://docket/results', `the view is ${state.view.uri}`);
  equal(state.view.csp.connectDomains, [], 'the view declares no origin to connect to');
  const view = page.frameLocator('iframe').frameLocator('iframe');
  return { page, view, problems, state };
}

async function columnTexts(view, index) {
  return view.locator(`#results tbody tr td:nth-child(${index + 1})`).allTextContents();
}

async function queryView(browser, host) {
  const sql =
    "SELECT orderkey, orderstatus, totalprice, comment, '<b>bold</b>' AS markup " +
    'FROM memory.default.orders ORDER BY orderkey LIMIT 12';
  const { page, view, problems, state } = await openHost(browser, host, 'trino_query', { sql });
  const expected = state.result.structuredContent;
  equal(expected.row_count, 12, 'the call returned 12 rows');

  const rows = view.locator('#results tbody tr');
  await rows.first().waitFor({ timeout: WAIT_MS });
  equal(await rows.count(), 12, 'rows in the table');
  const headers = await view.locator('#results thead th').allTextContents();
  // Each header is the column's name over its type (the literal's type varies by engine).
  equal(
    headers.slice(0, 4),
    ['orderkeybigint', 'orderstatusvarchar(1)', 'totalpricedecimal(12,2)', 'commentvarchar'],
    'column names with their types',
  );
  check(headers[4].startsWith('markupvarchar'), `the markup column's header: ${headers[4]}`);
  equal(await columnTexts(view, 0), expected.rows.map((row) => String(row[0])), 'the orderkey column');
  equal(await columnTexts(view, 3), expected.rows.map((row) => row[3]), 'the comment column');
  // Markup in a value is text on the page, not an element.
  equal((await columnTexts(view, 4))[0], '<b>bold</b>', 'a value holding markup');
  equal(await view.locator('#results tbody b').count(), 0, 'elements made from values');
  await page.screenshot({ path: join(artefacts, 'query-table.png'), fullPage: true });
  log('trino_query: 12 rows with their column types');

  // A header click sorts by that column; a second click reverses it.
  const orderkeyHeader = view.locator('#results thead th', { hasText: 'orderkey' }).locator('button');
  await orderkeyHeader.click();
  await orderkeyHeader.click();
  equal(
    await view.locator('#results thead th').first().getAttribute('aria-sort'),
    'descending',
    'the orderkey header after two clicks',
  );
  equal(
    await columnTexts(view, 0),
    expected.rows.map((row) => String(row[0])).reverse(),
    'orderkey sorted descending',
  );
  const priceHeader = view.locator('#results thead th', { hasText: 'totalprice' }).locator('button');
  await priceHeader.click();
  const prices = (await columnTexts(view, 2)).map(Number);
  equal(prices, [...prices].sort((a, b) => a - b), 'totalprice sorted ascending by value');
  equal(prices.length, 12, 'rows after sorting');
  await page.screenshot({ path: join(artefacts, 'query-sorted.png'), fullPage: true });
  log('trino_query: sorted by a header click, both directions');

  // The filter keeps the rows with a matching value; clearing it brings all back.
  await view.locator('#filter').fill('order 1');
  const kept = expected.rows.filter((row) => row.some((value) => String(value).toLowerCase().includes('order 1')));
  check(kept.length > 0 && kept.length < 12, `the filter should keep some rows, not ${kept.length}`);
  equal(
    (await columnTexts(view, 3)).sort(),
    kept.map((row) => row[3]).sort(),
    'rows the filter "order 1" keeps',
  );
  equal(await view.locator('#shown').textContent(), `${kept.length} of 12 shown`, 'the count of rows shown');
  await page.screenshot({ path: join(artefacts, 'query-filtered.png'), fullPage: true });
  await view.locator('#filter').fill('');
  equal(await rows.count(), 12, 'rows after clearing the filter');
  log(`trino_query: the filter kept ${kept.length} of 12 rows`);

  check(problems.length === 0, `the pages logged errors: ${problems.join(' | ')}`);
  await page.close();
}

async function exportView(browser, host) {
  const args = {
    sql: 'SELECT orderkey, orderstatus, totalprice FROM memory.default.orders ORDER BY orderkey LIMIT 30',
    format: 'csv',
    name: 'thirty-orders',
  };
  const { page, view, problems, state } = await openHost(browser, host, 'trino_export', args);
  const exported = state.result.structuredContent;
  equal(exported.row_count, 30, 'exported rows');
  await view.locator('#summary', { hasText: 'thirty-orders' }).waitFor({ timeout: WAIT_MS });
  const summary = await view.locator('#summary').textContent();
  check(summary.includes('csv') && summary.includes('30 rows'), `the export summary: ${summary}`);
  // The first rows come from the asset itself, read through the host.
  const rows = view.locator('#results tbody tr');
  await rows.first().waitFor({ timeout: WAIT_MS });
  equal(await rows.count(), 30, 'first rows of the export');
  equal((await columnTexts(view, 0)).slice(0, 3), ['1', '2', '3'], 'the export starts with orderkey 1');
  const forwarded = await page.evaluate(() => window.appHost.forwarded);
  check(forwarded.includes('resources/read'), `the view read the asset through the host: ${forwarded}`);
  await page.screenshot({ path: join(artefacts, 'export.png'), fullPage: true });

  // The download button asks the host to open the export's download URL.
  await view.locator('#download').click();
  await page.waitForFunction(() => window.appHost.openedLinks.length > 0, null, { timeout: WAIT_MS });
  equal(await page.evaluate(() => window.appHost.openedLinks), [exported.download_url], 'the link opened');
  log('trino_export: summary, first rows through the host, download link');

  check(problems.length === 0, `the pages logged errors: ${problems.join(' | ')}`);
  await page.close();
}

await mkdir(artefacts, { recursive: true });
const host = await startHost(docketMcpUrl);
const browser = await chromium.launch(LAUNCH);
try {
  await queryView(browser, host);
  await exportView(browser, host);
  log(`screenshots in ${artefacts}`);
} finally {
  await browser.close();
  host.close();
}
