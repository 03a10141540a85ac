/**
 * RFC 8705 client registration in the web console, in a real Chromium (helpers/browser.ts): an operator creates a
 * tls_client_auth client through the form (the method, the kind of value its certificate must carry and the value;
 * a relative URI refused next to its field), binds its tokens to the certificate with the checkbox, sees on its page
 * what its certificate must carry and that its tokens are bound, changes the kind, and creates a
 * self_signed_tls_client_auth client with its certificate in the JWK Set (a key without x5c refused next to it); a
 * viewer sees them and changes nothing. Photographed into test-results/console-mtls/ (look at them); no page may
 * log a CSP violation or an error.
 */
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clients, type ManagementContext } from '../../src/management/index.js';
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
import { selfSigned } from '../helpers/pki.js';
import type { TestServer } from '../helpers/server.js';

// What the callbacks run in the page see (the test's own TypeScript has no DOM library).
declare const window: { innerWidth: number };
declare const document: { documentElement: { scrollWidth: number } };

const SCREENSHOTS = path.resolve('test-results/console-mtls');
const PASSWORD = 'correct horse battery staple';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';

let t: TestServer;
let ctx: ManagementContext;
let browser: Browser;
const problems: string[] = [];
const photo = (page: Page, name: string) => shot(page, SCREENSHOTS, name);
const logIn = (page: Page, email: string) => logInAs(page, t.url, email, PASSWORD);

describe.skipIf(!chromiumAvailable)('RFC 8705 clients in the web console', () => {
  beforeAll(async () => {
    ({ t, ctx, browser } = await startConsoleTest(SCREENSHOTS));
    await enrollOperator(ctx, 'admin@example.com', 'admin', PASSWORD);
    await enrollOperator(ctx, 'viewer@example.com', 'viewer', PASSWORD);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('create a tls_client_auth client through the form → its page → change the kind → a self-signed client → a viewer', async () => {
    const context = await watchedContext(browser, t.url);
    const page = await openWatched(context, problems);
    await logIn(page, 'admin@example.com');

    // --- the form: the method, then the kind and the value, a bad value refused next to its field ---
    await page.goto('/console/clients');
    const method = page.getByLabel('Authentication');
    await eventually(() => method.count()).toBe(1);
    await page.getByLabel('Name', { exact: true }).fill('Billing worker');
    await page.getByLabel('Client id', { exact: true }).fill('billing-worker');
    await method.selectOption('tls_client_auth');
    const kind = page.getByLabel('The certificate must carry');
    await eventually(() => kind.count()).toBe(1);
    await kind.selectOption('san_uri');
    const uri = page.getByLabel('URI (SAN)');
    await uri.fill('ns/billing/sa/worker');
    await page.getByLabel('Bind tokens to the client certificate (RFC 8705)').check();
    await expectLabelled(page);
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() =>
      page.getByText('tls_client_auth_san_uri must be an absolute URI', { exact: false }).count(),
    ).toBe(1);
    expect(await uri.getAttribute('aria-invalid')).toBe('true');
    await photo(page, '01-relative-uri-refused');
    expect(await clients.listClients(ctx)).toEqual([]);

    // With no value at all: refused at the method.
    await uri.fill('');
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() => page.getByText('tls_client_auth needs one of', { exact: false }).count()).toBe(1);
    expect(await method.getAttribute('aria-invalid')).toBe('true');

    await kind.selectOption('subject_dn');
    await page.getByLabel('Subject DN').fill('CN=worker,O=Example,C=US');
    await photo(page, '02-tls-client-form');
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() => page.getByText('created with the id', { exact: false }).count()).toBe(1);
    // No secret: it authenticates with its certificate.
    expect(await page.getByText('Client secret').count()).toBe(0);
    await photo(page, '03-tls-client-created');
    expect(await clients.getClient(ctx, 'billing-worker')).toMatchObject({
      authMethod: 'tls_client_auth',
      tlsClientAuth: { kind: 'subject_dn', value: 'CN=worker,O=Example,C=US' },
      certificateBoundAccessTokens: true,
      secrets: [],
    });
    const row = page.getByRole('row').filter({ hasText: 'billing-worker' });
    await eventually(() => row.getByRole('cell', { name: 'certificate', exact: true }).count()).toBe(1);

    // --- its page: what its certificate must carry, its tokens bound; no secrets section ---
    await page.goto('/console/clients/billing-worker');
    await eventually(() => page.getByText('Certificate: subject DN CN=worker,O=Example,C=US').count()).toBe(
      1,
    );
    await eventually(() => page.getByText('Tokens bound to certificate').count()).toBe(1);
    expect(await page.getByRole('heading', { name: 'Secrets' }).count()).toBe(0);
    // The settings form shows the method, the kind and the value as they are.
    expect(await page.getByLabel('Authentication').inputValue()).toBe('tls_client_auth');
    expect(await page.getByLabel('The certificate must carry').inputValue()).toBe('subject_dn');
    expect(await page.getByLabel('Subject DN').inputValue()).toBe('CN=worker,O=Example,C=US');
    expect(await page.getByLabel('Bind tokens to the client certificate (RFC 8705)').isChecked()).toBe(true);
    await expectLabelled(page);
    await photo(page, '04-tls-client-page');

    // --- a change of kind replaces the value ---
    await page.getByLabel('The certificate must carry').selectOption('san_uri');
    await page.getByLabel('URI (SAN)').fill(SPIFFE);
    await page.getByLabel('Bind tokens to the client certificate (RFC 8705)').uncheck();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await eventually(() => page.getByText('Saved.').count()).toBe(1);
    await eventually(() => page.getByText(`Certificate: URI ${SPIFFE}`).count()).toBe(1);
    await eventually(() => page.getByText('Tokens not bound to a certificate').count()).toBe(1);
    expect(await clients.getClient(ctx, 'billing-worker')).toMatchObject({
      tlsClientAuth: { kind: 'san_uri', value: SPIFFE },
      certificateBoundAccessTokens: false,
    });
    await photo(page, '05-tls-client-changed');

    // --- a self-signed client: its certificate in the JWK Set; a key without x5c refused next to it ---
    const cert = await selfSigned({ subject: 'CN=self' });
    const { x5c: _, ...bare } = cert.jwk;
    await page.goto('/console/clients');
    await eventually(() => page.getByLabel('Authentication').count()).toBe(1);
    await page.getByLabel('Name', { exact: true }).fill('Self-signed worker');
    await page.getByLabel('Client id', { exact: true }).fill('self-worker');
    await page.getByLabel('Authentication').selectOption('self_signed_tls_client_auth');
    const jwks = page.getByLabel('JWK Set', { exact: true });
    await jwks.fill(JSON.stringify({ keys: [bare] }));
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() => page.getByText('jwks key 1 has no x5c', { exact: false }).count()).toBe(1);
    expect(await jwks.getAttribute('aria-invalid')).toBe('true');
    await photo(page, '06-self-signed-without-x5c');
    await jwks.fill(JSON.stringify({ keys: [cert.jwk] }));
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() => page.getByText('created with the id', { exact: false }).count()).toBe(1);
    expect(await clients.getClient(ctx, 'self-worker')).toMatchObject({
      authMethod: 'self_signed_tls_client_auth',
      jwks: { keys: [cert.jwk] },
      secrets: [],
    });
    await page.goto('/console/clients/self-worker');
    await eventually(() =>
      page.getByText('Certificate: self-signed, one of the 1 in its JWK Set').count(),
    ).toBe(1);
    await photo(page, '07-self-signed-page');

    // --- a self-signed client whose certificates are published at a URL (its jwks_uri) ---
    await page.goto('/console/clients');
    await eventually(() => page.getByLabel('Authentication').count()).toBe(1);
    await page.getByLabel('Name', { exact: true }).fill('Published partner');
    await page.getByLabel('Client id', { exact: true }).fill('published-partner');
    await page.getByLabel('Authentication').selectOption('self_signed_tls_client_auth');
    await page.getByLabel('At a URL (jwks_uri)').check();
    await page.getByLabel('JWKS URL').fill('https://partner.example.com/certificates.json');
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() => page.getByText('created with the id', { exact: false }).count()).toBe(1);
    expect(await clients.getClient(ctx, 'published-partner')).toMatchObject({
      authMethod: 'self_signed_tls_client_auth',
      jwks: null,
      jwksUri: 'https://partner.example.com/certificates.json',
    });
    await page.goto('/console/clients/published-partner');
    await eventually(() =>
      page.getByText('Certificate: self-signed, one of those published at', { exact: false }).count(),
    ).toBe(1);
    await photo(page, '07b-self-signed-published-page');
    await context.close();

    // --- a viewer sees them and changes nothing; on a phone the page is no wider than the screen ---
    const phone = await watchedContext(browser, t.url, { width: 390, height: 844 });
    const viewer = await openWatched(phone, problems);
    await logIn(viewer, 'viewer@example.com');
    await viewer.goto('/console/clients/billing-worker');
    await eventually(() => viewer.getByText(`Certificate: URI ${SPIFFE}`).count()).toBe(1);
    await eventually(() =>
      viewer
        .getByRole('definition')
        .filter({ hasText: `URI ${SPIFFE}` })
        .count(),
    ).toBe(1);
    expect(await viewer.getByRole('button', { name: 'Save changes' }).count()).toBe(0);
    await photo(viewer, '08-viewer-phone');
    expect(await viewer.evaluate(() => document.documentElement.scrollWidth > window.innerWidth)).toBe(false);
    await phone.close();
    expect(problems).toEqual([]);
  });
});
