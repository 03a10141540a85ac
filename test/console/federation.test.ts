/**
 * Workload identity federation in the web console, in a real Chromium (helpers/browser.ts): an operator creates a
 * client with the method "federation" (no secret shown), adds federated credentials from presets that fill the
 * issuer and show the sub to type, sees the API's refusals next to their fields, changes one, removes one, and
 * moves a secret client to federation (its secret actions go). Photographed into
 * test-results/console-federation/ (look at them); no page may log a CSP violation or an error.
 */
import path from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audiences, clients, federation, views, type ManagementContext } from '../../src/management/index.js';
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
import type { TestServer } from '../helpers/server.js';

// What the callbacks run in the page see (the test's own TypeScript has no DOM library).
declare const window: { innerWidth: number };
declare const document: { documentElement: { scrollWidth: number } };

const SCREENSHOTS = path.resolve('test-results/console-federation');
const PASSWORD = 'correct horse battery staple';
const API = 'https://orders.example.com';
const K8S = 'https://kubernetes.default.svc.cluster.local';
const GITHUB = 'https://token.actions.githubusercontent.com';

let t: TestServer;
let ctx: ManagementContext;
let browser: Browser;
const problems: string[] = [];
const photo = (page: Page, name: string) => shot(page, SCREENSHOTS, name);

const logIn = (page: Page, email: string) => logInAs(page, t.url, email, PASSWORD);

describe.skipIf(!chromiumAvailable)('federated credentials in the web console', () => {
  beforeAll(async () => {
    ({ t, ctx, browser } = await startConsoleTest(SCREENSHOTS));
    await audiences.addAudience(ctx, { url: API, name: 'Orders API' });
    await enrollOperator(ctx, 'admin@example.com', 'admin', PASSWORD);
    await enrollOperator(ctx, 'viewer@example.com', 'viewer', PASSWORD);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('create a federation client → add from presets (errors next to their fields) → change → remove → a secret client moved to federation', async () => {
    const { publicKey } = await generateKeyPair('RS256', { extractable: true });
    const clusterKeys = { keys: [{ ...(await exportJWK(publicKey)), kid: 'cluster-key', alg: 'RS256' }] };
    const context = await watchedContext(browser, t.url);
    const page = await openWatched(context, problems);
    await logIn(page, 'admin@example.com');

    // --- a client with the method "federation": no secret shown ---
    await go(page, 'Clients');
    await page.getByLabel('Name', { exact: true }).fill('Billing on Kubernetes');
    await page.getByLabel('Client id', { exact: true }).fill('k8s-billing');
    await page.getByLabel('Authentication').selectOption({ label: "Federation (a platform's token)" });
    await eventually(() => page.getByText('A federated client has no secret and no key').count()).toBe(1);
    await expectLabelled(page);
    await photo(page, '01-new-federation-client');
    await page.getByRole('button', { name: 'Create client' }).click();
    await eventually(() =>
      page.getByText('Add its federated credentials and grant it an audience').count(),
    ).toBe(1);
    expect(await page.getByLabel('Client secret', { exact: true }).count()).toBe(0);
    const row = page.getByRole('row').filter({ hasText: 'k8s-billing' });
    await eventually(() => row.getByRole('cell', { name: 'federation', exact: true }).count()).toBe(1);
    await photo(page, '02-federation-client-created');
    expect(views.clientJson(await clients.getClient(ctx, 'k8s-billing'))).toMatchObject({
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: null,
      jwks_uri: null,
    });

    // --- its page: no secrets, the federated credentials, a preset that shows the sub to type ---
    await page.getByRole('link', { name: 'k8s-billing', exact: true }).click();
    await page.waitForURL(`${t.url}/console/clients/k8s-billing`);
    await eventually(() =>
      page.getByText('No federated credential yet: this client cannot get a token.').count(),
    ).toBe(1);
    expect(await page.getByRole('heading', { name: 'Secrets' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Add secret' }).count()).toBe(0);
    expect(await page.getByLabel('Platform', { exact: true }).inputValue()).toBe('kubernetes');
    await eventually(() => page.getByText('system:serviceaccount:<namespace>:<name>').count()).toBe(1);
    // Each preset fills the issuer (where it is the same everywhere) and shows its sub.
    for (const [label, issuer, sub] of [
      ['GitHub Actions', GITHUB, 'repo:<owner>/<repo>:ref:refs/heads/<branch>'],
      ['GitLab CI', 'https://gitlab.com', 'project_path:<group>/<project>:ref_type:branch:ref:<branch>'],
      ['SPIFFE JWT-SVID', '', 'spiffe://<trust-domain>/<path>'],
      ['Another OIDC issuer', '', '<the sub of its tokens>'],
      ['Kubernetes service account', '', 'system:serviceaccount:<namespace>:<name>'],
    ] as const) {
      await page.getByLabel('Platform', { exact: true }).selectOption({ label });
      expect(await page.getByLabel('Issuer', { exact: true }).inputValue(), label).toBe(issuer);
      await eventually(() => page.locator('.hint code').filter({ hasText: sub }).count()).toBe(1);
      if (label === 'GitHub Actions') await photo(page, '03-preset-github');
    }
    await expectLabelled(page);
    await photo(page, '04-preset-kubernetes');

    // --- a Kubernetes credential whose cluster keys are pasted inline ---
    await page.getByLabel('Credential name').fill('prod');
    await page.getByLabel('Issuer', { exact: true }).fill(K8S);
    await page.getByLabel('Subject (sub)').fill('system:serviceaccount:prod:billing');
    expect(await page.getByLabel('A JWK Set here (a private cluster)').isChecked()).toBe(true);
    await page.getByLabel('Issuer JWK Set').fill(JSON.stringify(clusterKeys));
    await page.getByRole('button', { name: 'Add credential' }).click();
    await eventually(() =>
      page
        .getByText(
          `Federated credential prod added: tokens of ${K8S} for system:serviceaccount:prod:billing now authenticate this client.`,
        )
        .count(),
    ).toBe(1);
    const credentials = page.getByRole('region', { name: 'Federated credentials' });
    await eventually(() => credentials.getByRole('row').count()).toBe(2);
    expect(await credentials.getByRole('row').nth(1).textContent()).toContain('inline (cluster-key)');
    await photo(page, '05-kubernetes-added');

    // --- GitHub Actions: the API's refusals next to their fields, then added ---
    await page.getByLabel('Platform', { exact: true }).selectOption({ label: 'GitHub Actions' });
    await page.getByLabel('Credential name').fill('deploy');
    await page.getByLabel('Subject (sub)').fill('repo:acme/billing:ref:refs/heads/main');
    await page.getByLabel('Max lifetime').fill('2d');
    await page.getByLabel('Required claims (JSON)').fill('{"repository_owner": "acme"');
    await page.getByRole('button', { name: 'Add credential' }).click();
    await eventually(() => page.getByText('is not valid JSON').count()).toBe(1);
    await page.getByLabel('Required claims (JSON)').fill('{"repository_owner": "acme"}');
    await page.getByRole('button', { name: 'Add credential' }).click();
    await eventually(() =>
      page
        .locator('.field.invalid')
        .getByText('max_lifetime must be a whole number of seconds from 60 to 86400 (24 hours)')
        .count(),
    ).toBe(1);
    await photo(page, '06-refused-max-lifetime');
    await page.getByLabel('Max lifetime').fill('15m');
    await page.getByLabel('Credential name').fill('prod');
    await page.getByRole('button', { name: 'Add credential' }).click();
    await eventually(() =>
      page.getByText('Client k8s-billing already has a federated credential named prod.').count(),
    ).toBe(1);
    await photo(page, '07-refused-name-taken');
    await page.getByLabel('Credential name').fill('deploy');
    await page.getByRole('button', { name: 'Add credential' }).click();
    await eventually(() => credentials.getByRole('row').count()).toBe(3);
    await photo(page, '08-github-added');

    // --- change it: another subject, each token once ---
    await page.getByRole('button', { name: 'Edit federated credential deploy' }).click();
    await eventually(() => page.getByRole('heading', { name: 'Change deploy' }).count()).toBe(1);
    expect(await page.getByLabel('Subject (sub)').inputValue()).toBe('repo:acme/billing:ref:refs/heads/main');
    expect(await page.getByLabel('Max lifetime').inputValue()).toBe('900');
    await page.getByLabel('Subject (sub)').fill('repo:acme/billing:environment:production');
    await page.getByLabel('Each token authenticates once').check();
    await expectLabelled(page);
    await photo(page, '09-editing');
    await page.getByRole('button', { name: 'Save credential' }).click();
    await eventually(() => page.getByText('Federated credential deploy saved.').count()).toBe(1);
    const deployRow = credentials.getByRole('row').filter({ hasText: 'deploy' });
    await eventually(() => deployRow.getByText('repo:acme/billing:environment:production').count()).toBe(1);
    expect(await deployRow.getByRole('cell', { name: 'yes', exact: true }).count()).toBe(1);
    await photo(page, '10-changed');

    // --- remove the first, after a confirmation ---
    await page.getByRole('button', { name: 'Remove federated credential prod' }).click();
    const dialog = page.getByRole('dialog', { name: 'Remove this federated credential?' });
    await eventually(() => dialog.isVisible()).toBe(true);
    await photo(page, '11-remove-confirm');
    await dialog.getByRole('button', { name: 'Remove credential' }).click();
    await eventually(() => credentials.getByRole('row').count()).toBe(2);

    const stored = (await federation.listFederatedCredentials(ctx, 'k8s-billing')).map(
      views.federatedCredentialJson,
    );
    expect(stored).toEqual([
      {
        id: expect.stringMatching(/^fed_/),
        name: 'deploy',
        issuer: GITHUB,
        jwks: null,
        jwks_uri: null,
        subject: 'repo:acme/billing:environment:production',
        audience: t.config.issuer,
        claims: { repository_owner: 'acme' },
        max_lifetime: 900,
        once: true,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      },
    ]);

    // --- a secret client moved to federation: its secret actions go, the credentials come ---
    await clients.createClient(ctx, { id: 'legacy-batch', name: 'Legacy batch', grants: [API] });
    await page.goto('/console/clients/legacy-batch');
    await eventually(() => page.getByRole('button', { name: 'Add secret' }).count()).toBe(1);
    expect(await page.getByRole('heading', { name: 'Federated credentials' }).count()).toBe(0);
    await page.getByLabel('Authentication').selectOption('federation');
    await eventually(() =>
      page.getByText("Switching to federation deletes the client's secrets.").count(),
    ).toBe(1);
    await photo(page, '12-switch-to-federation');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await eventually(() => page.getByRole('heading', { name: 'Federated credentials' }).count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Add secret' }).count()).toBe(0);
    expect(await page.getByRole('heading', { name: 'Secrets' }).count()).toBe(0);
    expect((await clients.getClient(ctx, 'legacy-batch')).secrets).toEqual([]);
    await photo(page, '13-switched');
    await context.close();

    // --- a viewer sees them and changes nothing; on a phone the page is no wider than the screen ---
    const phone = await watchedContext(browser, t.url, { width: 390, height: 844 });
    const viewer = await openWatched(phone, problems);
    await logIn(viewer, 'viewer@example.com');
    await viewer.goto('/console/clients/k8s-billing');
    await eventually(() =>
      viewer.getByText('Your role can see federated credentials but not change them.').count(),
    ).toBe(1);
    for (const name of [
      'Add credential',
      'Edit federated credential deploy',
      'Remove federated credential deploy',
    ])
      expect(await viewer.getByRole('button', { name }).count()).toBe(0);
    expect(await viewer.evaluate(() => document.documentElement.scrollWidth > window.innerWidth)).toBe(false);
    await photo(viewer, '14-viewer-phone');
    await phone.close();
    expect(problems).toEqual([]);
  });
});
