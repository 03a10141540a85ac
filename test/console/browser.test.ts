/**
 * The web console in a real browser (MANAGEMENT.md, "How it is tested"): Debian's Chromium driven by
 * playwright-core, against a real server. One story, as an operator lives it: enroll, log in, create an audience
 * with scopes, create a client and grant it, get a token with the secret the page showed (from the test, over
 * HTTP), find the issuance in the audit trail, add a secret with a grace period, disable the client, add a viewer
 * who can change nothing, log out. Every page is photographed at 1280×800 and some at 390×844, into
 * test-results/console/ (look at them), and no page may log a CSP violation or an error.
 */
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clients, operators } from '../../src/management/index.js';
import type { ManagementContext } from '../../src/management/index.js';
import { enrollOperator } from '../helpers/admin.js';
import {
  chromiumAvailable as available,
  eventually,
  expectLabelled,
  go,
  openWatched,
  shot as photograph,
  startConsoleTest,
  watchedContext,
} from '../helpers/browser.js';
import { postToken, type TestServer } from '../helpers/server.js';

// What the callbacks run in the page see (the test's own TypeScript has no DOM library).
declare const window: Record<string, unknown> & { innerWidth: number };
declare const document: { documentElement: { scrollWidth: number } };
declare const navigator: { clipboard: { readText(): Promise<string> } };

export const SCREENSHOTS = path.resolve('test-results/console');
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
const API = 'https://orders.example.com';
const PASSWORD = 'correct horse battery staple';

let t: TestServer;
let ctx: ManagementContext;
let browser: Browser;
/** What any page did that a clean console never does (helpers/browser.ts, openWatched). */
const problems: string[] = [];

const open = (context: BrowserContext): Promise<Page> => openWatched(context, problems);
const newContext = (viewport?: { width: number; height: number }): Promise<BrowserContext> =>
  watchedContext(browser, t.url, viewport);
const shot = (page: Page, name: string): Promise<void> => photograph(page, SCREENSHOTS, name);

describe.skipIf(!available)('the web console in Chromium', () => {
  beforeAll(async () => {
    ({ t, ctx, browser } = await startConsoleTest(SCREENSHOTS));
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('enroll → log in → audience with scopes → client → grant → token with the shown secret → audit → secret with grace → disable → a viewer changes nothing → log out', async () => {
    const admin = await operators.addOperator(ctx, { email: 'admin@example.com', role: 'admin' });
    const context = await newContext();
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: t.url });
    const page = await open(context);

    // --- enroll: the link's token is in the fragment, and leaves the address bar ---
    const enrollPage = await page.goto(admin.url);
    expect(enrollPage!.headers()['content-security-policy']).toBe(CSP);
    await eventually(() => page.getByText('For admin@example.com (admin)').count()).toBe(1);
    expect(page.url()).toBe(`${t.url}/console/enroll`);
    await page.getByLabel('New password').fill('too short');
    await page.getByLabel('The same password again').fill('too short');
    await page.getByRole('button', { name: 'Set password' }).click();
    // The API's error, in words, next to the field.
    await eventually(() => page.getByText('password must have at least 12 characters').count()).toBe(1);
    await expectLabelled(page);
    await shot(page, '01-enroll-error');
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('The same password again').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password' }).click();
    await page.waitForURL(`${t.url}/console/login?enrolled=1`);

    // --- log in with the keyboard alone ---
    await page.goto('/console/clients');
    await page.waitForURL(`${t.url}/console/login?next=%2Fconsole%2Fclients`);
    await page.getByLabel('Password').fill('wrong password, surely');
    await page.getByLabel('Email').fill('admin@example.com');
    await page.getByRole('button', { name: 'Log in' }).click();
    await eventually(() => page.getByText('The email or the password is not right.').count()).toBe(1);
    await shot(page, '02-login-refused');
    await page.getByLabel('Password').fill('');
    await page.getByLabel('Email').focus();
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${t.url}/console/clients`);
    const cookie = (await context.cookies()).find((c) => c.name === 'tessera_session')!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/', secure: false });

    // --- an audience with scopes ---
    await go(page, 'Audiences');
    await page.getByLabel('Identifier (URL)').fill(API);
    await page.getByLabel('Name', { exact: true }).fill('Orders API');
    await page.getByRole('button', { name: 'Add a scope' }).click();
    await page.getByLabel('Scope 1 name').fill('orders:read');
    await page.getByLabel('Scope 1 description').fill('read orders');
    await page.getByRole('button', { name: 'Add a scope' }).click();
    await page.getByLabel('Scope 2 name').fill('orders write');
    await page.getByRole('button', { name: 'Create audience' }).click();
    // The API refuses the scope name with a space, and the page says so next to that field.
    await eventually(() => page.locator('.field.invalid').getByLabel('Scope 2 name').count()).toBe(1);
    await eventually(() =>
      page.getByText('scope "orders write" is not a scope token', { exact: false }).count(),
    ).toBe(1);
    await shot(page, '03-audience-error');
    await page.getByLabel('Scope 2 name').fill('orders:write');
    await page.getByRole('button', { name: 'Create audience' }).click();
    await eventually(() => page.getByText('Audience created.').count()).toBe(1);
    await expectLabelled(page);
    await shot(page, '04-audience');
    await go(page, 'Audiences');
    await eventually(() => page.getByRole('link', { name: API }).count()).toBe(1);
    await shot(page, '05-audiences');

    // --- a client, its secret shown once ---
    await go(page, 'Clients');
    await page.getByLabel('Name', { exact: true }).fill('Billing service');
    await page.getByLabel('Client id', { exact: true }).fill('billing');
    await page.getByLabel('Custom claims (JSON)').fill('{"tenant_id": "acme"');
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() => page.getByText('is not valid JSON').count()).toBe(1);
    await page.getByLabel('Custom claims (JSON)').fill('{"tenant_id": "acme"}');
    await page.getByRole('button', { name: 'Create client' }).click();
    const secretBox = page.getByLabel('Client secret', { exact: true });
    await eventually(() => secretBox.count()).toBe(1);
    const secret = (await secretBox.textContent())!;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await page.getByRole('button', { name: 'Copy client secret' }).click();
    await eventually(() => page.getByText('Copied.').count()).toBe(1);
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
    await expectLabelled(page);
    await shot(page, '06-client-created');

    // --- search, then the client's page: grant the audience with one scope ---
    await page.getByLabel('Search by client id or name').fill('BILL');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.waitForURL(`${t.url}/console/clients?search=BILL`);
    await eventually(() => page.getByRole('link', { name: 'billing', exact: true }).count()).toBe(1);
    await page.getByRole('link', { name: 'billing', exact: true }).click();
    await page.waitForURL(`${t.url}/console/clients/billing`);
    await page.getByLabel('Audience', { exact: true }).selectOption({ label: `${API} (Orders API)` });
    await page.getByLabel('orders:read').check();
    await page.getByLabel('Claims for this audience (JSON)').fill('{"plan": "gold"}');
    await page.getByRole('button', { name: 'Save grant' }).click();
    await eventually(() => page.getByText(`Granted ${API}.`).count()).toBe(1);
    await expectLabelled(page);
    await shot(page, '07-client-granted');

    // --- a token with the secret the page showed, over HTTP ---
    const form = { grant_type: 'client_credentials', client_id: 'billing', audience: API };
    const issued = await postToken(t.url, { ...form, client_secret: secret });
    expect(issued.status).toBe(200);
    expect(issued.body).toMatchObject({ token_type: 'Bearer', expires_in: 1800, scope: 'orders:read' });
    const claims = JSON.parse(
      Buffer.from((issued.body.access_token as string).split('.')[1]!, 'base64url').toString(),
    ) as Record<string, unknown>;
    expect(claims).toMatchObject({ client_id: 'billing', aud: API, tenant_id: 'acme', plan: 'gold' });

    // --- the issuance in the audit trail (the trail's writer takes about a second) ---
    await go(page, 'Audit trail');
    await page.getByLabel('Type').selectOption('token.issued');
    await page.getByLabel('Client id', { exact: true }).fill('billing');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/type=token.issued/);
    const row = page.getByRole('row').filter({ hasText: 'token.issued' }).filter({ hasText: 'billing' });
    await eventually(
      async () => {
        if ((await row.count()) === 0) await page.reload();
        return row.count();
      },
      { timeout: 10_000 },
    ).toBe(1);
    await eventually(() => row.getByText(API).count()).toBe(1);
    await shot(page, '08-audit-issued');
    await page.getByRole('link', { name: 'Clear filters' }).click();
    await eventually(() => page.getByRole('row').filter({ hasText: 'client.created' }).count()).toBe(1);
    expect(await page.getByRole('row').filter({ hasText: 'client.created' }).textContent()).toContain(
      'operator:admin@example.com',
    );
    await shot(page, '09-audit');

    // --- a second secret, the first kept for a grace period ---
    await go(page, 'Clients');
    await page.getByRole('link', { name: 'billing', exact: true }).click();
    await page.getByLabel('Grace period for the other secrets').fill('24h');
    await page.getByRole('button', { name: 'Add secret' }).click();
    const newSecretBox = page.getByLabel('New client secret', { exact: true });
    await eventually(() => newSecretBox.count()).toBe(1);
    const second = (await newSecretBox.textContent())!;
    expect(second).not.toBe(secret);
    await eventually(() => page.getByRole('region', { name: 'Secrets' }).getByRole('row').count()).toBe(3);
    await shot(page, '10-client-secrets');
    for (const s of [secret, second])
      expect((await postToken(t.url, { ...form, client_secret: s })).status).toBe(200);

    // --- every token it holds revoked at once, after a confirmation ---
    const held = (await postToken(t.url, { ...form, client_secret: second })).body.access_token as string;
    const { client: rs, secret: rsSecret } = await clients.createClient(ctx, {
      name: 'orders api',
      adminScopes: ['tokens:introspect'],
    });
    await t.sync();
    const introspect = async (token: string) =>
      (
        await fetch(`${t.url}/oauth/introspect`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token, client_id: rs.id, client_secret: rsSecret! }).toString(),
        })
      ).json();
    expect(await introspect(held)).toMatchObject({ active: true, client_id: 'billing' });
    await eventually(() => page.getByText('None of its tokens has been revoked.').count()).toBe(1);
    await page.getByRole('button', { name: 'Revoke all tokens…' }).click();
    const revokeDialog = page.getByRole('dialog', { name: 'Revoke every token of this client?' });
    await eventually(() => revokeDialog.isVisible()).toBe(true);
    await shot(page, '10b-client-revoke-tokens-confirm');
    await revokeDialog.getByRole('button', { name: 'Revoke tokens' }).click();
    await eventually(() =>
      page
        .getByRole('status')
        .filter({ hasText: /^Revoked: every token it held at/ })
        .count(),
    ).toBe(1);
    await eventually(() => page.getByText(/^Its tokens issued at or before .* are inactive\.$/).count()).toBe(
      1,
    );
    await shot(page, '10c-client-tokens-revoked');
    await eventually(() => introspect(held), { timeout: 2000 }).toEqual({ active: false });
    // In a later second, its new tokens work.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const fresh = (await postToken(t.url, { ...form, client_secret: second })).body.access_token as string;
    expect(await introspect(fresh)).toMatchObject({ active: true });

    // --- disable it, after a confirmation ---
    await page.getByRole('button', { name: 'Disable client…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Disable this client?' });
    await eventually(() => dialog.isVisible()).toBe(true);
    await shot(page, '11-client-disable-confirm');
    await dialog.getByRole('button', { name: 'Disable client' }).click();
    await eventually(() => page.getByRole('button', { name: 'Enable client' }).count()).toBe(1);
    await shot(page, '12-client-disabled');
    await eventually(async () => (await postToken(t.url, { ...form, client_secret: second })).status, {
      timeout: 2000,
    }).toBe(401);

    // --- keys: rotate ---
    await go(page, 'Keys');
    await page.getByLabel('Algorithm').selectOption('ES256');
    await page.getByRole('button', { name: 'Rotate keys' }).click();
    await eventually(() => page.getByText(/ES256: new key/).count()).toBe(1);
    await eventually(() => page.getByText('next', { exact: true }).count()).toBe(1);
    await shot(page, '13-keys');

    // --- the overview: the tokens above on the chart, the counts ---
    await go(page, 'Overview');
    // The trail's writer adds to the counts about once a second: the page is read again until they are there.
    const figures = async () => {
      const read = async () =>
        `${await page.locator('.card.issued .figure').textContent()} ${await page.locator('.card.refused .figure').textContent()}`;
      if ((await read()) !== '5 1') await page.reload();
      return read();
    };
    await eventually(figures).toBe('5 1');
    await eventually(() => page.locator('.chart canvas').count()).toBe(1);
    await shot(page, '14-overview');

    // --- a viewer, who sees and changes nothing ---
    await go(page, 'Operators');
    await page.getByLabel('Email').fill('viewer@example.com');
    await page.getByLabel('Role', { exact: true }).selectOption('viewer');
    await page.getByRole('button', { name: 'Add operator' }).click();
    const linkBox = page.getByLabel('Enrollment link for viewer@example.com', { exact: true });
    await eventually(() => linkBox.count()).toBe(1);
    const viewerLink = (await linkBox.textContent())!;
    expect(viewerLink).toMatch(new RegExp(`^${t.url}/console/enroll#token=[A-Za-z0-9_-]{43}$`));
    await expectLabelled(page);
    await shot(page, '15-operators');

    // --- log out ---
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(`${t.url}/console/login?signed_out=1`);
    await shot(page, '16-logged-out');
    expect((await context.cookies()).find((c) => c.name === 'tessera_session')).toBeUndefined();
    await page.goto('/console/clients/billing');
    await page.waitForURL(`${t.url}/console/login?next=%2Fconsole%2Fclients%2Fbilling`);

    // The viewer, in a browser of their own.
    const viewerContext = await newContext();
    const viewer = await open(viewerContext);
    await viewer.goto(viewerLink);
    await viewer.getByLabel('New password').fill(PASSWORD);
    await viewer.getByLabel('The same password again').fill(PASSWORD);
    await viewer.getByRole('button', { name: 'Set password' }).click();
    await viewer.waitForURL(/\/console\/login/);
    await viewer.getByLabel('Email').fill('viewer@example.com');
    await viewer.getByLabel('Password').fill(PASSWORD);
    await viewer.getByRole('button', { name: 'Log in' }).click();
    await viewer.waitForURL(`${t.url}/console/`);
    expect(
      await viewer.getByRole('navigation', { name: 'Console' }).getByRole('link').allTextContents(),
    ).toEqual(['Overview', 'Audiences', 'Clients', 'Keys', 'Audit trail', 'Import']);
    await go(viewer, 'Clients');
    await eventually(() => viewer.getByText('Your role can see clients but not change them.').count()).toBe(
      1,
    );
    expect(await viewer.getByRole('button', { name: 'Create client' }).count()).toBe(0);
    await viewer.getByRole('link', { name: 'billing', exact: true }).click();
    await eventually(() => viewer.getByRole('heading', { name: 'Billing service' }).count()).toBe(1);
    for (const name of ['Enable client', 'Revoke all tokens…', 'Delete client…', 'Add secret', 'Save grant'])
      expect(await viewer.getByRole('button', { name }).count()).toBe(0);
    await shot(viewer, '17-viewer-client');
    // Past the page, the API itself refuses the viewer's change, with the session's own anti-CSRF token.
    const refused = await viewer.evaluate(async () => {
      const session = (await (await fetch('/console/api/session')).json()) as { csrf_token: string };
      const response = await fetch('/admin/v1/clients/billing', {
        method: 'PATCH',
        headers: { 'content-type': 'application/json', 'x-csrf-token': session.csrf_token },
        body: JSON.stringify({ enabled: true }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    });
    expect(refused).toEqual({
      status: 403,
      body: {
        type: 'urn:tessera:problem:insufficient_scope',
        title: 'Forbidden',
        status: 403,
        detail: 'this call needs the scope clients:write',
      },
    });
    expect((await postToken(t.url, { ...form, client_secret: second })).status).toBe(401);
    await viewer.goto('/console/operators');
    await eventually(() => viewer.getByText('Only admins see the operators.').count()).toBe(1);
    await viewerContext.close();
    await context.close();
    expect(problems).toEqual([]);
  }, 90_000); // forty steps in one browser: 23 s on an idle machine, past 30 s while the rest of the suite runs beside it

  it('is readable in a phone-sized window (390×844): nothing wider than the screen, the menu opens', async () => {
    await enrollOperator(ctx, 'phone@example.com', 'admin', PASSWORD);
    const context = await newContext({ width: 390, height: 844 });
    const page = await open(context);
    await page.goto('/console/login');
    await page.getByLabel('Email').fill('phone@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${t.url}/console/`);
    const tooWide = () => page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    await eventually(() => page.locator('.chart canvas').count()).toBe(1);
    expect(await tooWide()).toBe(false);
    await shot(page, '20-phone-overview');
    await page.getByRole('button', { name: 'Menu' }).click();
    await shot(page, '21-phone-menu');
    await go(page, 'Clients');
    await page.waitForURL(`${t.url}/console/clients`);
    expect(await tooWide()).toBe(false);
    await shot(page, '22-phone-clients');
    await page.getByRole('button', { name: 'Menu' }).click();
    await go(page, 'Audit trail');
    await page.waitForURL(`${t.url}/console/audit`);
    expect(await tooWide()).toBe(false);
    await shot(page, '23-phone-audit');
    await context.close();
    expect(problems).toEqual([]);
  });
  it("a client's DPoP requirement: a checkbox when it is created and on its page, shown as a badge; the token endpoint follows it", async () => {
    await enrollOperator(ctx, 'dpop@example.com', 'admin', PASSWORD);
    const context = await newContext();
    const page = await open(context);
    await page.goto('/console/login');
    await page.getByLabel('Email').fill('dpop@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${t.url}/console/`);

    // Created with the box checked.
    await go(page, 'Clients');
    const box = () => page.getByLabel("Require DPoP: bind every token to the client's key");
    await page.getByLabel('Name', { exact: true }).fill('Payments robot');
    await page.getByLabel('Client id', { exact: true }).fill('payments');
    expect(await box().isChecked()).toBe(false);
    await box().check();
    await page.getByRole('button', { name: 'Create client' }).click();
    const secretBox = page.getByLabel('Client secret', { exact: true });
    await eventually(() => secretBox.count()).toBe(1);
    const secret = (await secretBox.textContent())!;
    expect((await ctx.store.findClient('payments'))?.dpopBoundAccessTokens).toBe(true);

    // Its page says so, and its settings have the box checked.
    await page.getByRole('link', { name: 'Payments robot' }).click();
    await page.waitForURL(`${t.url}/console/clients/payments`);
    await eventually(() => page.getByText('DPoP required', { exact: true }).count()).toBe(1);
    expect(await box().isChecked()).toBe(true);
    await expectLabelled(page);
    await shot(page, '24-client-dpop-required');

    // The token endpoint: no token without a proof.
    await page.getByLabel('Audience', { exact: true }).selectOption({ label: `${API} (Orders API)` });
    await page.getByRole('button', { name: 'Save grant' }).click();
    await eventually(() => page.getByText(`Granted ${API}.`).count()).toBe(1);
    const form = {
      grant_type: 'client_credentials',
      client_id: 'payments',
      client_secret: secret,
      audience: API,
    };
    await eventually(async () => (await postToken(t.url, form)).body.error, { timeout: 3000 }).toBe(
      'invalid_dpop_proof',
    );

    // Unchecked and saved: optional again, and the secret alone gets a Bearer token.
    await box().uncheck();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await eventually(() => page.getByText('Saved.').count()).toBe(1);
    await eventually(() => page.getByText('DPoP optional', { exact: true }).count()).toBe(1);
    await shot(page, '25-client-dpop-optional');
    expect((await ctx.store.findClient('payments'))?.dpopBoundAccessTokens).toBe(false);
    await eventually(async () => (await postToken(t.url, form)).body.token_type, { timeout: 3000 }).toBe(
      'Bearer',
    );
    await context.close();
    expect(problems).toEqual([]);
  });
});
