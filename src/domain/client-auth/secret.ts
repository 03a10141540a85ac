import { invalidClient, invalidRequest } from '../errors.js';
import type { KnownClient } from '../known-client.js';
import { digestOf, digestsEqual, DUMMY_DIGEST, MAX_LIVE_SECRETS } from '../secrets.js';
import { present } from '../token-request.js';
import {
  failedProof,
  type ClientAuthMethod,
  type PresentedCredentials,
  type Proof,
  type AuthMethodName,
} from './method.js';

export interface BasicCredentials {
  clientId: string;
  clientSecret: string;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** application/x-www-form-urlencoded decoding of one Basic credential part (RFC 6749 §2.3.1). */
function formDecode(part: string): string {
  return decodeURIComponent(part.replace(/\+/g, ' '));
}

/**
 * `client_secret_basic` (RFC 6749 §2.3.1, RFC 7617): `Basic base64(urlencode(id) ":" urlencode(secret))`.
 * Returns undefined when there is no Authorization header; anything malformed is invalid_client.
 */
export function parseBasicAuthorization(header: string | undefined): BasicCredentials | undefined {
  if (header === undefined) return undefined;
  const match = /^basic[ ]+(\S+)[ ]*$/i.exec(header);
  const token = match?.[1];
  if (token === undefined || token.length % 4 !== 0 || !BASE64.test(token)) {
    throw invalidClient('malformed Authorization header');
  }
  let decoded: string;
  let clientId: string;
  let clientSecret: string;
  try {
    decoded = utf8.decode(Buffer.from(token, 'base64'));
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new Error('no colon');
    clientId = formDecode(decoded.slice(0, colon));
    clientSecret = formDecode(decoded.slice(colon + 1));
  } catch {
    throw invalidClient('malformed Basic credentials');
  }
  if (clientId === '' || clientSecret === '') throw invalidClient('empty Basic credentials');
  return { clientId, clientSecret };
}

/** The client id of a Basic header, for the audit trail only (undefined if it does not parse). */
export function basicClientId(header: string | undefined): string | undefined {
  try {
    return parseBasicAuthorization(header)?.clientId;
  } catch {
    return undefined;
  }
}

/** Slots compared for every request: a client's live secrets, padded with a digest no secret has. */
const SECRET_SLOTS = MAX_LIVE_SECRETS;

/**
 * A shared secret, compared in constant time with every slot of the client's secrets: always
 * MAX_LIVE_SECRETS comparisons, so that an unknown client, a client with one secret and one with five cost
 * the same. An expired secret matches nothing.
 */
class SecretCredentials implements PresentedCredentials {
  constructor(
    readonly clientId: string,
    private readonly secret: string,
    private readonly method: 'client_secret_basic' | 'client_secret_post',
  ) {}

  methodFor(): AuthMethodName {
    return this.method;
  }

  proves(client: KnownClient | undefined, now: number): Proof {
    const presented = digestOf(this.secret);
    const secrets = client?.secrets ?? [];
    let matched: string | undefined;
    for (let i = 0; i < SECRET_SLOTS; i++) {
      const candidate = secrets[i];
      const live = candidate !== undefined && candidate.expiresAt > now;
      // Compared whether or not the slot holds a live secret: the same work either way.
      if (digestsEqual(presented, live ? candidate.digest : DUMMY_DIGEST) && live) matched = candidate.id;
    }
    // A client registered for private_key_jwt has no secret that works (its secrets are deleted when it
    // switches; this holds whatever the store says): a secret from it is a failed authentication.
    if (client !== undefined && client.keys !== undefined) return KEY_ONLY;
    return matched === undefined || client === undefined ? WRONG_SECRET : { proven: true, secretId: matched };
  }
}

const WRONG_SECRET = failedProof('wrong secret');
const KEY_ONLY = failedProof('client authenticates with private_key_jwt, not a secret');

/** client_secret_basic: the id and secret in an HTTP Basic Authorization header. */
export const clientSecretBasic: ClientAuthMethod = {
  names: ['client_secret_basic'],
  presentedIn: (request) => request.authorization !== undefined,
  parse(request) {
    const basic = parseBasicAuthorization(request.authorization)!;
    return new SecretCredentials(basic.clientId, basic.clientSecret, 'client_secret_basic');
  },
  check(request, credentials) {
    const bodyId = present(request.params.client_id);
    if (bodyId !== undefined && bodyId !== credentials.clientId) {
      throw invalidRequest('client_id in the body does not match the client authenticated by HTTP Basic');
    }
  },
};

/** client_secret_post: client_id and client_secret in the body. */
export const clientSecretPost: ClientAuthMethod = {
  names: ['client_secret_post'],
  presentedIn: (request) => present(request.params.client_secret) !== undefined,
  parse(request) {
    const clientId = present(request.params.client_id);
    if (clientId === undefined) throw invalidRequest('client_id is required');
    return new SecretCredentials(clientId, request.params.client_secret!, 'client_secret_post');
  },
};
