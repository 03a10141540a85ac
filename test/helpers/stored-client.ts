/** A client as the store reads it (store/types.ts Client), for the tests of what the cache makes of it. */
import { digestSecret } from '../../src/domain/secrets.js';
import type { Client } from '../../src/store/types.js';

export const API = 'https://api.example.com';
const AT = '2026-11-27T12:00:00.000Z';

/** A client as the store reads it: one secret, one grant without scopes, claims or token exchange. */
export function stored(i: number): Client {
  // One flat string, as the store's rows hold (padEnd alone makes a rope of its parts, twice the size).
  const id = Buffer.from(`client-${i}`.padEnd(32, 'x')).toString();
  return {
    id,
    name: `client ${i}`,
    description: null,
    secretDigest: digestSecret(`secret-${i}`),
    enabled: true,
    tokenTtl: null,
    createdAt: AT,
    updatedAt: AT,
    secretRotatedAt: AT,
    quotaPerMinute: null,
    quotaPerDay: null,
    audiences: [API],
    grants: [{ audience: API, scopes: [], claims: null, tokenExchange: false }],
    claims: null,
    secrets: [
      {
        id: `sec_${i}`,
        digest: digestSecret(`secret-${i}`),
        createdAt: AT,
        expiresAt: null,
        lastUsedAt: null,
      },
    ],
    authMethod: 'client_secret_basic',
    jwks: null,
    jwksUri: null,
    federatedCredentials: [],
    dpopBoundAccessTokens: false,
    revokedBefore: null,
    tlsClientAuth: null,
    certificateBoundAccessTokens: false,
  };
}
