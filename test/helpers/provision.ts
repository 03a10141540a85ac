/**
 * An audience and a client granted it, for tests that then start `tessera serve` and ask it for tokens: written
 * straight to a store (as the CLI would, without a process per call), or made by the real CLI.
 */
import { expect } from 'vitest';
import { digestSecret, generateClientId, generateSecret } from '../../src/domain/secrets.js';
import type { Store } from '../../src/store/types.js';
import { tessera } from './process.js';
import { postToken } from './server.js';

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

/** RFC 8693's grant type, and the type of the tokens a token exchange takes and issues. */
export const EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

/**
 * A token exchange request's parameters: `actor`, with its secret in the body, exchanges the access token
 * `subject` for a token of `audience`.
 */
export function exchangeParams(
  actor: { id: string; secret: string },
  subject: string,
  audience: string,
): Record<string, string> {
  return {
    grant_type: EXCHANGE,
    client_id: actor.id,
    client_secret: actor.secret,
    subject_token: subject,
    subject_token_type: ACCESS_TOKEN,
    audience,
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

/**
 * A client credentials token of `who` from the server at `base` (its secret in the body, the way curl users send
 * it); the test fails, showing the answer, unless one is issued.
 */
export async function issuedToken(
  base: string,
  who: { id: string; secret: string },
  audience: string,
): Promise<string> {
  const answer = await postToken(base, tokenParams(who.id, who.secret, audience));
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.access_token as string;
}

/** A client_credentials request body. */
export function tokenForm(clientId: string, clientSecret: string, audience: string): string {
  return new URLSearchParams(tokenParams(clientId, clientSecret, audience)).toString();
}
