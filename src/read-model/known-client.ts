import { createLocalJWKSet } from 'jose';
import type { FederatedCredential } from '../domain/client-auth/index.js';
import { canonicalTlsValue, certificateThumbprints } from '../domain/client-auth/certificate-registration.js';
import type {
  ClientKeys,
  GrantsByAudience,
  KnownClient,
  KnownFederatedCredential,
  KnownGrant,
  KnownSecret,
  KnownTlsIdentity,
} from '../domain/known-client.js';
import type { Quota } from '../domain/limits.js';
import { digestBytes } from '../domain/secrets.js';
import { PROFILE_CLAIMS } from '../domain/token-profiles.js';
import type { Client } from '../store/types.js';

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
  custom: Record<string, unknown>,
  tokenExchange: boolean,
): KnownGrant {
  const claims = claimsFragment(custom);
  if (scopes.length === 0 && claims === undefined && !tokenExchange) return PLAIN_GRANT;
  const taken = PROFILE_CLAIMS.filter((name) => name in custom);
  return {
    scopes: scopes.length === 0 ? NO_SCOPES : new Set(scopes),
    scope: scopes.length === 0 ? undefined : scopes.join(' '),
    claims,
    tokenExchange,
    ...(taken.length === 0 ? {} : { profileClaimsTaken: new Set(taken) }),
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

  /** The audiences, if every grant is plain (PLAIN_GRANT), else undefined. */
  plainAudiences(): string[] | undefined {
    const audiences: string[] = [];
    for (let i = 0; i < this.pairs.length; i += 2) {
      if (this.pairs[i + 1] !== PLAIN_GRANT) return undefined;
      audiences.push(this.pairs[i] as string);
    }
    return audiences;
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
        knownGrant(g.scopes, { ...client.claims, ...g.claims }, g.tokenExchange),
      ]),
    ),
    tokenTtl: client.tokenTtl,
    quota:
      client.quotaPerMinute === null && client.quotaPerDay === null
        ? NO_QUOTA
        : { perMinute: client.quotaPerMinute, perDay: client.quotaPerDay },
    keys: keysOf(client),
    dpopBound: client.dpopBoundAccessTokens,
    tls: tlsOf(client),
    selfSigned:
      client.authMethod !== 'self_signed_tls_client_auth'
        ? undefined
        : client.jwks !== null
          ? certificateThumbprints(client.jwks)
          : client.jwksUri !== null
            ? { uri: client.jwksUri }
            : undefined,
    certificateBound: client.certificateBoundAccessTokens,
  };
}

/**
 * A tls_client_auth client's registered value in the form the token path compares (certificate-registration.ts,
 * canonicalTlsValue). Undefined for a client of another method, and for a value that no longer parses (the
 * management layer refuses one; a rule made stricter after it was stored): that client's certificate then proves
 * nothing, and the lookup of the client does not fail.
 */
function tlsOf(client: Client): KnownTlsIdentity | undefined {
  if (client.authMethod !== 'tls_client_auth' || client.tlsClientAuth === null) return undefined;
  try {
    return { kind: client.tlsClientAuth.kind, value: canonicalTlsValue(client.tlsClientAuth) };
  } catch {
    return undefined;
  }
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

/*
 * A cached client not asked for lately, packed into one string (client-cache.ts keeps most of a large cache so):
 * the usual client (enabled, a secret or a few, plain grants of at most GRANTS_IN_A_LIST audiences, no quota, no
 * keys, no certificate) takes ~60-100 bytes this way instead of ~450 as objects. Laid out as: one character, '0'
 * plus its number of secrets; then, separated by spaces, when it was cached (ms, base 36), '1' if DPoP-bound else
 * '0', its token lifetime or nothing, its audiences as indexes into the cache's table, comma-separated, and each
 * secret's id and expiry (ms, or nothing for never); then each secret's 32-byte digest, one character a byte.
 */

/** Most secrets a packed client has: its count is one digit. */
const PACKED_SECRETS_MAX = 9;
/** What a secret id may hold to be packed: printable ASCII without a space (the separator). */
const PACKABLE_ID = /^[\x21-\x7e]+$/;
/** A character that is not one byte: a digest holds none (digestBytes). */
const WIDE = /[\u0100-\uffff]/;

/**
 * The client packed (see above), or undefined if it is not the usual client: it is then kept as it is.
 * `audienceIndex` gives an audience URL's index in the cache's table (undefined: the table is full).
 */
export function packKnownClient(
  client: KnownClient,
  cachedAt: number,
  audienceIndex: (url: string) => number | undefined,
): string | undefined {
  if (!client.enabled || client.quota !== NO_QUOTA || client.keys !== undefined) return undefined;
  if (typeof client.dpopBound !== 'boolean' || !(client.grants instanceof FewGrants)) return undefined;
  // A client of a certificate (RFC 8705) is not the usual client.
  if (client.tls !== undefined || client.selfSigned !== undefined || client.certificateBound === true)
    return undefined;
  if (client.tokenTtl !== null && !Number.isSafeInteger(client.tokenTtl)) return undefined;
  if (client.secrets.length > PACKED_SECRETS_MAX || !Number.isSafeInteger(cachedAt)) return undefined;
  const audiences = client.grants.plainAudiences();
  if (audiences === undefined) return undefined;
  const indexes: number[] = [];
  for (const url of audiences) {
    const index = audienceIndex(url);
    if (index === undefined) return undefined;
    indexes.push(index);
  }
  const text = [
    cachedAt.toString(36),
    client.dpopBound ? '1' : '0',
    client.tokenTtl === null ? '' : String(client.tokenTtl),
    indexes.join(','),
  ];
  let digests = '';
  for (const secret of client.secrets) {
    if (!PACKABLE_ID.test(secret.id) || secret.digest.length !== 32 || WIDE.test(secret.digest))
      return undefined;
    if (secret.expiresAt !== Infinity && !Number.isSafeInteger(secret.expiresAt)) return undefined;
    text.push(secret.id, secret.expiresAt === Infinity ? '' : String(secret.expiresAt));
    digests += secret.digest;
  }
  const packed = String.fromCharCode(48 + client.secrets.length) + text.join(' ') + digests;
  // One flat string of one byte a character: a concatenation is kept as its parts (and more) until flattened.
  return Buffer.from(packed, 'latin1').toString('latin1');
}

/**
 * The client of a packed string, as toKnownClient made it (the same shape: the token path's code sees one kind
 * of client), and when it was cached. `id` must be a string of its own (not a slice of a request), `audienceAt`
 * the table's URL at an index.
 */
export function unpackKnownClient(
  id: string,
  packed: string,
  audienceAt: (index: number) => string,
): { client: KnownClient; cachedAt: number } {
  const count = packed.charCodeAt(0) - 48;
  const textEnd = packed.length - 32 * count;
  const text = packed.slice(1, textEnd).split(' ');
  const secrets: KnownSecret[] = [];
  for (let i = 0; i < count; i++) {
    const expiresAt = text[5 + 2 * i]!;
    secrets.push({
      id: text[4 + 2 * i]!,
      digest: packed.slice(textEnd + 32 * i, textEnd + 32 * (i + 1)),
      expiresAt: expiresAt === '' ? Infinity : Number(expiresAt),
    });
  }
  const indexes = text[3]!;
  const tokenTtl = text[2]!;
  const client: KnownClient = {
    id,
    enabled: true,
    secrets,
    grants: grantsByAudience(
      indexes === ''
        ? []
        : indexes.split(',').map((i): [string, KnownGrant] => [audienceAt(Number(i)), PLAIN_GRANT]),
    ),
    tokenTtl: tokenTtl === '' ? null : Number(tokenTtl),
    quota: NO_QUOTA,
    keys: undefined,
    dpopBound: text[1] === '1',
    tls: undefined,
    selfSigned: undefined,
    certificateBound: false,
  };
  return { client, cachedAt: parseInt(text[0]!, 36) };
}
