/**
 * The web console in a real browser (MANAGEMENT.md, "How it is tested"): Debian's Chromium driven by
 * playwright-core. A page is watched for what a clean console never does (a CSP violation or another console
 * error, an uncaught exception, a failed request, a file the server did not answer), photographed, and checked
 * for unlabelled form fields.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';
import type { ManagementContext } from '../../src/management/index.js';
import { managementOf } from './management.js';
import { startTestServer, type TestServer } from './server.js';

// What the callbacks run in the page see (the test's own TypeScript has no DOM library).
declare const window: Record<string, unknown>;
declare const document: {
  addEventListener(type: string, listener: (e: Record<string, unknown>) => void): void;
  querySelectorAll(selector: string): Iterable<{
    hidden: boolean;
    type: string;
    labels: { length: number } | null;
    outerHTML: string;
    getAttribute(name: string): string | null;
  }>;
};

const CHROMIUM = process.env.TESSERA_CHROMIUM ?? '/usr/bin/chromium';

// CI installs Chromium (.ci/run) and sets CI=true: there a browser test fails without it rather than skipping.
export const chromiumAvailable = existsSync(CHROMIUM);
if (!chromiumAvailable && process.env.CI)
  throw new Error(`Chromium is not at ${CHROMIUM}: install Debian's chromium`);

/** Chromium as root in a container, with no network but loopback: no sandbox, nothing fetched by itself. */
function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

export interface ConsoleTest {
  t: TestServer;
  /** The management layer over the server's store: what a story starts from is set up by it. */
  ctx: ManagementContext;
  browser: Browser;
}

/**
 * What a console story runs against: a server, the management layer over its store, and Chromium; `screenshots`
 * emptied first, so that what is in it after a run is that run's photographs. Close the browser, then the server,
 * after the tests.
 */
export async function startConsoleTest(screenshots: string): Promise<ConsoleTest> {
  rmSync(screenshots, { recursive: true, force: true });
  mkdirSync(screenshots, { recursive: true });
  const t = await startTestServer({ TESSERA_HOST: '127.0.0.1' });
  try {
    return { t, ctx: managementOf(t), browser: await launchChromium() };
  } catch (error) {
    // The caller has no server to close in its afterAll yet.
    await t.close();
    throw error;
  }
}

/**
 * A new page of `context`, watched: anything it does that a clean console never does is added to `problems`. The
 * API's refusals (4xx on /admin/v1 and /console/api, which a story provokes on purpose) are answers, not
 * problems; Chromium logs each as "Failed to load resource", which is left out for them alone.
 */
export async function openWatched(context: BrowserContext, problems: string[]): Promise<Page> {
  const page = await context.newPage();
  const isApi = (url: string) => /\/(admin\/v1|console\/api)\//.test(new URL(url).pathname);
  page.on('console', (message) => {
    const text = message.text();
    const refusal = /^Failed to load resource: the server responded with a status of 4\d\d/.test(text);
    if (refusal && isApi(message.location().url)) return;
    if (message.type() === 'error' || /Content Security Policy|Refused to/i.test(text))
      problems.push(`console ${message.type()}: ${text} (${message.location().url})`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message} (${page.url()})`));
  // A request cut short by the page moving on (the icon of a page left at once) did not fail.
  page.on('requestfailed', (request) => {
    if (request.failure()?.errorText !== 'net::ERR_ABORTED')
      problems.push(`request failed: ${request.url()}`);
  });
  page.on('response', (response) => {
    if (response.status() >= 500 || (response.status() >= 400 && !isApi(response.url())))
      problems.push(`${response.status()} for ${response.url()}`);
  });
  return page;
}

/**
 * A browser context on `baseURL` whose pages record every CSP violation where shot() reads it: injected by the
 * browser itself (not a page script), so the page's CSP does not apply to it.
 */
export async function watchedContext(
  browser: Browser,
  baseURL: string,
  viewport = { width: 1280, height: 800 },
): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport, baseURL });
  await context.addInitScript(() => {
    const seen: string[] = [];
    window.cspViolations = seen;
    document.addEventListener('securitypolicyviolation', (e) =>
      seen.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`),
    );
  });
  return context;
}

/** Waits for what a page shows (a request or two away), as long as a busy CI machine may need. */
export const eventually = <T>(read: () => T | Promise<T>, options: { timeout?: number } = {}) =>
  expect.poll(read, { timeout: 10_000, ...options });

/** A full-page photograph into `dir`, once nothing is loading; the page must have had no CSP violation. */
export async function shot(page: Page, dir: string, name: string): Promise<void> {
  await eventually(() => page.getByRole('status').filter({ hasText: 'Loading' }).count()).toBe(0);
  await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
  expect(await page.evaluate(() => window.cspViolations)).toEqual([]);
}

/** Every visible form control has a label (its own, or aria-label). */
export async function expectLabelled(page: Page): Promise<void> {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll('input, select, textarea')]
      .filter((el) => !el.hidden && el.type !== 'hidden')
      .filter((el) => el.labels?.length === 0 && !el.getAttribute('aria-label'))
      .map((el) => el.outerHTML),
  );
  expect(unlabelled).toEqual([]);
}

/** Follows a link of the console's menu. */
export async function go(page: Page, link: string): Promise<void> {
  await page
    .getByRole('navigation', { name: 'Console' })
    .getByRole('link', { name: link, exact: true })
    .click();
}

/** Logs an operator in through the console's login page, and waits for the overview. */
export async function logIn(page: Page, base: string, email: string, password: string): Promise<void> {
  await page.goto('/console/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${base}/console/`);
}
