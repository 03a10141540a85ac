/**
 * Token exchange in the web console, in a real Chromium (helpers/browser.ts): an operator names an audience's
 * resource servers (an unknown client refused next to the field), allows token exchange on a client's grant with
 * its checkbox, and sees on the audience's page which clients may exchange into it; a viewer sees both and changes
 * nothing. Photographed into test-results/console-token-exchange/ (look at them); no page may log a CSP violation
 * or an error.
 */
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, type ManagementContext } from '../../src/management/index.js';
import { enrollOperator } from '../helpers/admin.js';
import {
  chromiumAvailable,
  eventually,
  expectLabelled,
  logIn as logInAs,
  openWatched,
  shot,
  startConsoleTest,
  watchedContext,
} from '../helpers/browser.js';
import type { TestServer } from '../helpers/server.js';

// What the callbacks run in the page see (the test's own TypeScript has no DOM library).
declare const window: { innerWidth: number };
declare const document: { documentElement: { scrollWidth: number } };

const SCREENSHOTS = path.resolve('test-results/console-token-exchange');
const PASSWORD = 'correct horse battery staple';
const ORDERS = 'https://orders.example.com';
const BILLING = 'https://billing.example.com';

let t: TestServer;
let ctx: ManagementContext;
let browser: Browser;
const problems: string[] = [];
const photo = (page: Page, name: string) => shot(page, SCREENSHOTS, name);

const logIn = (page: Page, email: string) => logInAs(page, t.url, email, PASSWORD);

describe.skipIf(!chromiumAvailable)('token exchange in the web console', () => {
  beforeAll(async () => {
    ({ t, ctx, browser } = await startConsoleTest(SCREENSHOTS));
    await audiences.addAudience(ctx, { url: ORDERS, name: 'Orders API' });
    await audiences.addAudience(ctx, {
      url: BILLING,
      name: 'Billing API',
      scopes: [{ name: 'invoices:read' }],
    });
    for (const id of ['orders-api', 'gateway']) await clients.createClient(ctx, { id, name: id });
    await enrollOperator(ctx, 'admin@example.com', 'admin', PASSWORD);
    await enrollOperator(ctx, 'viewer@example.com', 'viewer', PASSWORD);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it("an audience's resource servers (an unknown one refused by its field) → a grant's token exchange → who may exchange into it", async () => {
    const context = await watchedContext(browser, t.url);
    const page = await openWatched(context, problems);
    await logIn(page, 'admin@example.com');
    const orders = await audiences.getAudience(ctx, ORDERS);
    const billing = await audiences.getAudience(ctx, BILLING);

    // --- the orders audience's resource servers: an unknown client refused next to the field ---
    await page.goto(`/console/audiences/${orders.id}`);
    const field = page.getByLabel('Resource servers (client ids)');
    await eventually(() => field.count()).toBe(1);
    await expectLabelled(page);
    await field.fill('orders-api, nobody');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const refusal = "client nobody does not exist: an audience's resource servers are existing clients";
    await eventually(() => page.getByText(refusal).count()).toBeGreaterThan(0);
    expect(await field.getAttribute('aria-invalid')).toBe('true');
    await photo(page, '01-unknown-resource-server');
    expect((await audiences.getAudience(ctx, ORDERS)).resourceServerClientIds).toEqual([]);

    await field.fill('orders-api');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await eventually(() => page.getByText('Saved.').count()).toBe(1);
    expect((await audiences.getAudience(ctx, ORDERS)).resourceServerClientIds).toEqual(['orders-api']);
    const exchange = page.getByRole('region', { name: 'Token exchange' });
    await eventually(() => exchange.getByRole('link', { name: 'orders-api' }).count()).toBe(1);
    await photo(page, '02-resource-server-saved');

    // --- the list of audiences shows them ---
    await page.goto('/console/audiences');
    const row = page.getByRole('row').filter({ hasText: ORDERS });
    await eventually(() => row.getByRole('cell', { name: 'orders-api', exact: true }).count()).toBe(1);

    // --- orders-api's grant of billing allows token exchange: the checkbox of the grant editor ---
    await page.goto('/console/clients/orders-api');
    await eventually(() => page.getByLabel('Audience', { exact: true }).count()).toBe(1);
    await page.getByLabel('Audience', { exact: true }).selectOption(billing.id);
    await page.getByRole('checkbox', { name: 'invoices:read' }).check();
    const box = page.getByRole('checkbox', { name: 'Token exchange' });
    expect(await box.isChecked()).toBe(false);
    await box.check();
    await expectLabelled(page);
    await photo(page, '03-grant-with-token-exchange');
    await page.getByRole('button', { name: 'Save grant' }).click();
    await eventually(() => page.getByText(`Granted ${BILLING}.`).count()).toBe(1);
    const grantRow = page.getByRole('row').filter({ hasText: BILLING });
    await eventually(() => grantRow.getByRole('cell', { name: 'allowed', exact: true }).count()).toBe(1);
    expect((await clients.getClient(ctx, 'orders-api')).grants).toEqual([
      { audience: BILLING, scopes: ['invoices:read'], claims: null, tokenExchange: true },
    ]);
    // Edit shows it checked; unchecking it saves false.
    await page.getByRole('button', { name: `Edit grant of ${BILLING}` }).click();
    await eventually(() => box.isChecked()).toBe(true);
    await photo(page, '04-grant-saved');

    // --- the billing audience's page: who may exchange into it ---
    await page.goto(`/console/audiences/${billing.id}`);
    const billingExchange = page.getByRole('region', { name: 'Token exchange' });
    await eventually(() => billingExchange.getByRole('link', { name: 'orders-api' }).count()).toBe(1);
    expect(await billingExchange.getByText('none').count()).toBe(1); // no resource server of its own
    await photo(page, '05-who-may-exchange');

    await page.goto('/console/clients/orders-api');
    await page.getByRole('button', { name: `Edit grant of ${BILLING}` }).click();
    await eventually(() => box.isChecked()).toBe(true);
    await box.uncheck();
    await page.getByRole('button', { name: 'Save grant' }).click();
    await eventually(() => page.getByText(`Grant of ${BILLING} saved.`).count()).toBe(1);
    await eventually(async () => (await clients.getClient(ctx, 'orders-api')).grants[0]!.tokenExchange).toBe(
      false,
    );
    await page.goto(`/console/audiences/${billing.id}`);
    await eventually(() => billingExchange.getByText('none').count()).toBe(2);
    expect(await billingExchange.getByRole('link').count()).toBe(0);
    await context.close();

    // --- a viewer sees both and changes nothing; on a phone the page is no wider than the screen ---
    await clients.createClient(ctx, {
      id: 'gateway-2',
      name: 'gateway-2',
      grants: [ORDERS],
      grantTokenExchange: [ORDERS],
    });
    const phone = await watchedContext(browser, t.url, { width: 390, height: 844 });
    const viewer = await openWatched(phone, problems);
    await logIn(viewer, 'viewer@example.com');
    await viewer.goto(`/console/audiences/${orders.id}`);
    const viewed = viewer.getByRole('region', { name: 'Token exchange' });
    await eventually(() => viewed.getByRole('link', { name: 'orders-api' }).count()).toBe(1);
    await eventually(() => viewed.getByRole('link', { name: 'gateway-2' }).count()).toBe(1);
    expect(await viewer.getByLabel('Resource servers (client ids)').count()).toBe(0);
    expect(await viewer.getByRole('button', { name: 'Save changes' }).count()).toBe(0);
    expect(await viewer.evaluate(() => document.documentElement.scrollWidth > window.innerWidth)).toBe(false);
    await photo(viewer, '06-viewer-phone');
    await phone.close();
    expect(problems).toEqual([]);
  });
});
