/**
 * An audience and a client granted it, for tests that then start `tessera serve` and ask it for tokens: written
 * straight to a store (as the CLI would, without a process per call), or made by the real CLI.
 */
import { expect } from 'vitest';
import { digestSecret, generateClientId, generateSecret } from '../../src/domain/secrets.js';
import type { Store } from '../../src/store/types.js';
import { tessera } from './process.js';

export interface Provisioned {
  id: string;
  secret: string;
  /** The urlencoded form of a client_credentials request for the audience. */
  form: string;
}

/** Migrates `store`, registers `audience` and a client granted it. */
export async function provisionClient(store: Store, audience: string, name = 'load'): Promise<Provisioned> {
  await store.migrate();
  await store.addAudience({ url: audience, name: null, tokenTtl: null, signingAlg: null });
  const secret = generateSecret();
  const id = generateClientId();
  await store.createClient({
    id,
    name,
    secretDigest: digestSecret(secret),
    tokenTtl: null,
    audiences: [audience],
  });
  return { id, secret, form: tokenForm(id, secret, audience) };
}

/** Registers `audience` and a client granted it with the real CLI (`tessera audience add`, `client create`). */
export async function provisionWithCli(
  env: NodeJS.ProcessEnv,
  audience: string,
  name: string,
): Promise<Provisioned> {
  expect(await tessera(env, 'audience', 'add', audience, '--json')).toMatchObject({ code: 0, stderr: '' });
  const created = await tessera(env, 'client', 'create', '--name', name, '--grant', audience, '--json');
  expect(created).toMatchObject({ code: 0, stderr: '' });
  const record = JSON.parse(created.stdout) as { client_id: string; client_secret: string };
  return {
    id: record.client_id,
    secret: record.client_secret,
    form: tokenForm(record.client_id, record.client_secret, audience),
  };
}

/** A client_credentials request's parameters (postToken sends them as a form). */
export function tokenParams(
  clientId: string,
  clientSecret: string,
  audience: string,
): Record<string, string> {
  return { grant_type: 'client_credentials', client_id: clientId, client_secret: clientSecret, audience };
}

/** A client_credentials request body. */
export function tokenForm(clientId: string, clientSecret: string, audience: string): string {
  return new URLSearchParams(tokenParams(clientId, clientSecret, audience)).toString();
}
