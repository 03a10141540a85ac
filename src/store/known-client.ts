import { createLocalJWKSet } from 'jose';
import type { FederatedCredential } from '../domain/client-auth/index.js';
import { digestBytes } from '../domain/secrets.js';
import type {
  ClientKeys,
  GrantsByAudience,
  KnownClient,
  KnownFederatedCredential,
  KnownGrant,
  Quota,
} from '../domain/token-types.js';
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

/*
 * A cached client is held by every process for as long as it is used, by the hundred thousand: what most
 * clients share is one object for all (no scopes, no quota, a plain grant), and a few grants are a list, not a
 * Map (whose table alone takes ~260 bytes, a Set's ~200, for one entry).
 */
const NO_SCOPES: ReadonlySet<string> = new Set();
const NO_QUOTA: Quota = Object.freeze({ perMinute: null, perDay: null });
/** A grant without scopes, claims or token exchange, as most are: one object for every such grant. */
const PLAIN_GRANT: KnownGrant = {
  scopes: NO_SCOPES,
  scope: undefined,
  claims: undefined,
  tokenExchange: false,
};

function knownGrant(
  scopes: readonly string[],
  claims: string | undefined,
  tokenExchange: boolean,
): KnownGrant {
  if (scopes.length === 0 && claims === undefined && !tokenExchange) return PLAIN_GRANT;
  return {
    scopes: scopes.length === 0 ? NO_SCOPES : new Set(scopes),
    scope: scopes.length === 0 ? undefined : scopes.join(' '),
    claims,
    tokenExchange,
  };
}

/** Past this many grants a client's are a Map: a list is searched in order. */
const GRANTS_IN_A_LIST = 8;

/** Audience URLs and their grants side by side in one array, searched in order. */
class FewGrants implements GrantsByAudience {
  constructor(private readonly pairs: readonly (string | KnownGrant)[]) {}

  get(audience: string): KnownGrant | undefined {
    const pairs = this.pairs;
    for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === audience) return pairs[i + 1] as KnownGrant;
    return undefined;
  }

  *keys(): Iterable<string> {
    for (let i = 0; i < this.pairs.length; i += 2) yield this.pairs[i] as string;
  }
}

function grantsByAudience(grants: [string, KnownGrant][]): GrantsByAudience {
  if (grants.length > GRANTS_IN_A_LIST) return new Map(grants);
  // Of its exact length (flat() and push() leave room to grow, ~150 bytes of it).
  const pairs = new Array<string | KnownGrant>(grants.length * 2);
  for (const [i, [audience, grant]] of grants.entries()) {
    pairs[2 * i] = audience;
    pairs[2 * i + 1] = grant;
  }
  return new FewGrants(pairs);
}

/**
 * `audienceUrl` gives the string to keep for an audience's URL: the directory's own, so that a hundred
 * thousand cached clients of one audience do not each hold a copy read from the store.
 */
export function toKnownClient(
  client: Client,
  audienceUrl: (url: string) => string = (url) => url,
): KnownClient {
  return {
    id: client.id,
    enabled: client.enabled,
    secrets: client.secrets.map((s) => ({
      id: s.id,
      digest: digestBytes(s.digest),
      expiresAt: s.expiresAt === null ? Infinity : Date.parse(s.expiresAt),
    })),
    grants: grantsByAudience(
      client.grants.map((g) => [
        audienceUrl(g.audience),
        knownGrant(g.scopes, claimsFragment({ ...client.claims, ...g.claims }), g.tokenExchange),
      ]),
    ),
    tokenTtl: client.tokenTtl,
    quota:
      client.quotaPerMinute === null && client.quotaPerDay === null
        ? NO_QUOTA
        : { perMinute: client.quotaPerMinute, perDay: client.quotaPerDay },
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
