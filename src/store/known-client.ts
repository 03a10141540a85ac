import { createLocalJWKSet } from 'jose';
import type { FederatedCredential } from '../domain/client-auth/index.js';
import { digestBytes } from '../domain/secrets.js';
import type { ClientKeys, KnownClient, KnownFederatedCredential } from '../domain/token-types.js';
import type { Client } from './types.js';

/*
 * A stored client as the token path knows it (KnownClient): made once, when the directory caches the client, so
 * that a warm request computes nothing of it again (secret digests as bytes, each grant's scope string and
 * serialised claims, inline keys as jose's resolvers, federated credentials as the checks need them).
 */

/** Custom claims as the signer appends them: the inside of their JSON object, or undefined for none. */
function claimsFragment(claims: Record<string, unknown>): string | undefined {
  const json = JSON.stringify(claims);
  return json === '{}' ? undefined : json.slice(1, -1);
}

export function toKnownClient(client: Client): KnownClient {
  return {
    id: client.id,
    enabled: client.enabled,
    secrets: client.secrets.map((s) => ({
      id: s.id,
      digest: digestBytes(s.digest),
      expiresAt: s.expiresAt === null ? Infinity : Date.parse(s.expiresAt),
    })),
    grants: new Map(
      client.grants.map((g) => [
        g.audience,
        {
          scopes: new Set(g.scopes),
          scope: g.scopes.length === 0 ? undefined : g.scopes.join(' '),
          claims: claimsFragment({ ...client.claims, ...g.claims }),
          tokenExchange: g.tokenExchange,
        },
      ]),
    ),
    tokenTtl: client.tokenTtl,
    quota: { perMinute: client.quotaPerMinute, perDay: client.quotaPerDay },
    keys: keysOf(client),
    dpopBound: client.dpopBoundAccessTokens,
  };
}

/**
 * A private_key_jwt client's keys as the token path uses them: an inline set becomes jose's resolver once,
 * when the client is cached (it imports each key on first use and keeps it); a URL is fetched by the runtime's
 * JwksFetcher. A client with neither authenticates with its federated credentials (none yet: no token). A
 * client of a secret method has none.
 */
function keysOf(client: Client): ClientKeys | undefined {
  if (client.authMethod !== 'private_key_jwt') return undefined;
  if (client.jwks !== null) return { inline: createLocalJWKSet(client.jwks) };
  if (client.jwksUri !== null) return { uri: client.jwksUri };
  return { federated: client.federatedCredentials.map(knownCredential) };
}

/**
 * A federated credential as the token path checks it, made once per caching of its client: an inline set as
 * jose's resolver, the required claims as a list, the audit trail's note of a token it issues.
 */
function knownCredential(credential: FederatedCredential): KnownFederatedCredential {
  return {
    id: credential.id,
    issuer: credential.issuer,
    keys:
      credential.jwks !== null
        ? { inline: createLocalJWKSet(credential.jwks) }
        : { issuer: credential.issuer, uri: credential.jwksUri },
    subject: credential.subject,
    audience: credential.audience,
    claims: Object.entries(credential.claims),
    maxLifetime: credential.maxLifetime,
    once: credential.once,
    note: `federated ${credential.id} sub ${credential.subject}`,
  };
}
