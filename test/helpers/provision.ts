/**
 * An audience and a client written straight to a store (as the CLI would, without a process per call), for
 * tests that then start `tessera serve` on that store and load it.
 */
import { digestSecret, generateClientId, generateSecret } from '../../src/domain/secrets.js';
import type { Store } from '../../src/store/types.js';

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

/** A client_credentials request body. */
export function tokenForm(clientId: string, clientSecret: string, audience: string): string {
  return new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: clientId,
    client_secret: clientSecret,
    audience,
  }).toString();
}
