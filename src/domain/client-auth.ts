import { invalidClient } from './errors.js';

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
