/**
 * The console's import page (MANAGEMENT.md, "Moving in from another server"), in a real Chromium
 * (helpers/browser.ts): an admin gives an Auth0 Deploy CLI export, sees the refusal of a placeholder left unfilled at
 * its place, fills it, reads the report grouped by outcome and the plan (POST /admin/v1/imports, then
 * POST /admin/v1/apply with dry_run), applies it and gets the new client's secret once, which works at the token
 * endpoint; the same export again plans no change, and so does the same tenant as YAML (its places line:column);
 * YAML that does not parse is refused with its line and column. A viewer reads a Hydra export and sees its plan, without a way to
 * apply it. Photographed into test-results/console-import/ (look at them); no page may log a CSP violation or an
 * error.
 */
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { clients, views, type ManagementContext } from '../../src/management/index.js';
import { enrollOperator } from '../helpers/admin.js';
import {
  chromiumAvailable,
  eventually,
  expectLabelled,
  go,
  logIn as logInAs,
  openWatched,
  shot,
  startConsoleTest,
  watchedContext,
} from '../helpers/browser.js';
import { tokenParams } from '../helpers/provision.js';
import { postToken, type TestServer } from '../helpers/server.js';

// What the callbacks run in the page see (the test's own TypeScript has no DOM library).
declare const window: { innerWidth: number };
declare const document: { documentElement: { scrollWidth: number } };

const SCREENSHOTS = path.resolve('test-results/console-import');
const PASSWORD = 'correct horse battery staple';
const API = 'https://orders.example.com';

/** An Auth0 tenant as the Deploy CLI exports it (tenant.yaml's structure, as JSON), with a ##ENV## placeholder. */
const AUTH0_EXPORT = {
  resourceServers: [
    {
      name: 'Orders API',
      identifier: API,
      token_lifetime: 172800,
      signing_alg: 'RS256',
      scopes: [
        { value: 'orders:read', description: 'Read orders' },
        { value: 'orders:write', description: 'Change orders' },
      ],
    },
  ],
  clients: [
    {
      name: 'Billing ##ENV##',
      client_id: 'billingM2M0001',
      app_type: 'non_interactive',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_post',
    },
    { name: 'Storefront', client_id: 'storefront0001', app_type: 'spa' },
  ],
  clientGrants: [
    { client_id: 'Billing ##ENV##', audience: API, scope: ['orders:read'] },
    { client_id: 'Billing ##ENV##', audience: 'https://tenant.eu.auth0.com/api/v2/', scope: ['read:users'] },
  ],
};

/** Ory Hydra's clients, as `hydra list oauth2-clients --format json` prints them. */
const HYDRA_EXPORT = {
  items: [
    {
      client_id: 'reports-job',
      client_name: 'Nightly reports',
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_basic',
      audience: ['https://reports.example.com'],
      scope: 'reports:read',
    },
  ],
  next_page_token: '',
};

let t: TestServer;
let ctx: ManagementContext;
let browser: Browser;
const problems: string[] = [];
const photo = (page: Page, name: string) => shot(page, SCREENSHOTS, name);
const logIn = (page: Page, email: string) => logInAs(page, t.url, email, PASSWORD);

/** Chooses the export file on the page, as an operator picks one from their disk. */
const chooseFile = (page: Page, name: string, content: unknown) =>
  page.getByLabel('Export file').setInputFiles({
    name,
    mimeType: 'application/json',
    buffer: Buffer.from(JSON.stringify(content, null, 2)),
  });

describe.skipIf(!chromiumAvailable)('the import page of the web console', () => {
  beforeAll(async () => {
    ({ t, ctx, browser } = await startConsoleTest(SCREENSHOTS));
    await enrollOperator(ctx, 'admin@example.com', 'admin', PASSWORD);
    await enrollOperator(ctx, 'viewer@example.com', 'viewer', PASSWORD);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('an Auth0 export: a placeholder unfilled at its place → keywords → report and plan → apply, the secret once → again, no changes', async () => {
    const context = await watchedContext(browser, t.url);
    const page = await openWatched(context, problems);
    await logIn(page, 'admin@example.com');
    await go(page, 'Import');
    await eventually(() => page.getByRole('heading', { name: 'Import', level: 1 }).count()).toBe(1);
    await expectLabelled(page);
    await photo(page, '01-import-empty');

    // --- the placeholder left unfilled: refused, at its place in the export ---
    await page.getByLabel('Import from').selectOption('auth0');
    await chooseFile(page, 'tenant.json', AUTH0_EXPORT);
    await page.getByRole('button', { name: 'Read the export' }).click();
    const refusal = page.getByRole('alert').filter({ hasText: 'placeholder ##ENV## has no value' });
    await eventually(() => refusal.count()).toBeGreaterThan(0);
    expect(await page.getByRole('list', { name: 'Errors in the export' }).textContent()).toContain(
      'clients/0/name',
    );
    expect(await page.getByRole('heading', { name: '2. The report' }).count()).toBe(0);
    await photo(page, '02-import-placeholder-refused');

    // --- keywords: the report by outcome, and the plan ---
    await page.getByLabel('Keywords').fill('ENV=prod');
    await page.getByRole('button', { name: 'Read the export' }).click();
    await eventually(() => page.getByRole('heading', { name: '2. The report' }).count()).toBe(1);
    const mapped = page.getByRole('region', { name: 'Mapped' });
    const changed = page.getByRole('region', { name: 'Changed on the way' });
    const leftOut = page.getByRole('region', { name: 'Left out' });
    await eventually(() => mapped.getByRole('listitem').count()).toBeGreaterThan(0);
    expect(await leftOut.getByText('Storefront', { exact: false }).count()).toBeGreaterThan(0);
    expect(
      await leftOut.getByText('https://tenant.eu.auth0.com/api/v2/', { exact: false }).count(),
    ).toBeGreaterThan(0);
    expect(await changed.getByText('86400', { exact: false }).count()).toBeGreaterThan(0);
    const plan = page.getByRole('list', { name: 'The plan' });
    await eventually(() => plan.getByRole('listitem').count()).toBeGreaterThan(0);
    const lines = await plan.getByRole('listitem').allTextContents();
    expect(lines.some((l) => l.startsWith(`+ audience ${API}`))).toBe(true);
    expect(lines).toContain(`+ grant billingM2M0001 → ${API} (scopes "orders:read")`);
    expect(lines.some((l) => l.startsWith('+ client billingM2M0001 (name "Billing prod"'))).toBe(true);
    await eventually(() => page.getByText('Plan: 3 to create, 0 to update, 0 to delete.').count()).toBe(1);
    // Nothing is written until the plan is applied.
    await expect(clients.getClient(ctx, 'billingM2M0001')).rejects.toThrow('does not exist');
    await expectLabelled(page);
    await photo(page, '03-import-report-and-plan');

    // --- apply: the new client's secret, shown once, works at the token endpoint ---
    await page.getByRole('button', { name: 'Apply the plan' }).click();
    await eventually(() => page.getByText('Applied: 3 created, 0 updated, 0 deleted.').count()).toBe(1);
    const secret = (await page.getByLabel('Secret of billingM2M0001', { exact: true }).textContent())!;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await page.getByRole('button', { name: 'Apply the plan' }).count()).toBe(0);
    await photo(page, '04-import-applied');
    expect(views.clientJson(await clients.getClient(ctx, 'billingM2M0001'))).toMatchObject({
      name: 'Billing prod',
      token_endpoint_auth_method: 'client_secret_post',
    });
    await t.sync();
    const token = await postToken(t.url, tokenParams('billingM2M0001', secret, API));
    expect(token.status, JSON.stringify(token.body)).toBe(200);
    expect(token.body.scope).toBe('orders:read');

    // --- the same export again: nothing to change; the secret is gone from the page ---
    await page.getByRole('button', { name: 'Read the export' }).click();
    await eventually(() =>
      page.getByText('No changes: the server already has everything in the export.').count(),
    ).toBe(1);
    expect(await page.getByLabel('Secret of billingM2M0001', { exact: true }).count()).toBe(0);
    await photo(page, '05-import-no-changes');

    // --- the same tenant as the Deploy CLI's YAML: read by the server, its places line:column ---
    await page.getByLabel('Export file').setInputFiles({
      name: 'tenant.yaml',
      mimeType: 'application/yaml',
      buffer: Buffer.from(stringify(AUTH0_EXPORT)),
    });
    await page.getByRole('button', { name: 'Read the export' }).click();
    await eventually(() =>
      page.getByRole('region', { name: 'Mapped' }).locator('code.place').first().textContent(),
    ).toMatch(/^\d+:\d+$/);
    await eventually(() =>
      page.getByText('No changes: the server already has everything in the export.').count(),
    ).toBe(1);
    await photo(page, '06-import-yaml');

    // --- YAML that does not parse: refused, with its line and column ---
    await page.getByLabel('Export file').setInputFiles({
      name: 'tenant.yaml',
      mimeType: 'application/yaml',
      buffer: Buffer.from('resourceServers:\n  - name: [unclosed\nclients: []\n'),
    });
    await page.getByRole('button', { name: 'Read the export' }).click();
    const yamlErrors = page.getByRole('list', { name: 'Errors in the export' });
    await eventually(() => yamlErrors.count()).toBe(1);
    expect(await yamlErrors.textContent()).toMatch(/the export\s*\d+:\d+: /);
    expect(await page.getByRole('heading', { name: '2. The report' }).count()).toBe(0);
    await photo(page, '07-import-yaml-refused');

    // --- a phone-sized window: the plan fits without sideways scrolling ---
    await page.setViewportSize({ width: 390, height: 844 });
    await chooseFile(page, 'tenant.json', AUTH0_EXPORT);
    await page.getByRole('button', { name: 'Read the export' }).click();
    await eventually(() => page.getByText('No changes: the server already has everything').count()).toBe(1);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(
      await page.evaluate(() => window.innerWidth),
    );
    await photo(page, '08-import-phone');
    await context.close();
  });

  it('a viewer reads a Hydra export and sees its plan, but cannot apply it', async () => {
    const context = await watchedContext(browser, t.url);
    const page = await openWatched(context, problems);
    await logIn(page, 'viewer@example.com');
    await go(page, 'Import');
    await page.getByLabel('Import from').selectOption('hydra');
    await chooseFile(page, 'clients.json', HYDRA_EXPORT);
    await page.getByRole('button', { name: 'Read the export' }).click();
    const plan = page.getByRole('list', { name: 'The plan' });
    await eventually(() => plan.getByRole('listitem').count()).toBeGreaterThan(0);
    const lines = await plan.getByRole('listitem').allTextContents();
    expect(lines.some((l) => l.startsWith('+ audience https://reports.example.com'))).toBe(true);
    expect(lines.some((l) => l.startsWith('+ client reports-job (name "Nightly reports"'))).toBe(true);
    await eventually(() => page.getByText('Your role can see the plan but not apply it.').count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Apply the plan' }).count()).toBe(0);
    await photo(page, '09-import-viewer');
    await expect(clients.getClient(ctx, 'reports-job')).rejects.toThrow('does not exist');
    await context.close();
    expect(problems).toEqual([]);
  });
});
