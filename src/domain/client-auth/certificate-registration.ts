import { X509Certificate } from 'node:crypto';
import type { JWK } from 'jose';
import { TLS_IDENTITY_KINDS, type TlsIdentityKind } from '../known-client.js';
import { canonicalDn } from '../mtls/dn.js';
import { canonicalIpAddress } from '../mtls/ip.js';
import { thumbprintOf } from '../mtls/thumbprint.js';
import { ValidationError } from '../validate.js';
import type { PublicJwks } from './jwks.js';
import { authMethodProblem, type AuthMethodName } from './method.js';

/*
 * What a client of RFC 8705's methods registers (docs/mtls.md), checked when it is written (management) and made
 * into what the token path compares when it is cached (read-model/known-client.ts):
 *
 * - tls_client_auth (§2.1.2): exactly one of tls_client_auth_subject_dn, _san_dns, _san_uri, _san_ip, _san_email.
 *   The value is stored as given (trimmed); the token path compares its canonical form (canonicalTlsValue).
 * - self_signed_tls_client_auth (§2.2): its certificates, inline in jwks, each the first of its key's x5c (RFC 7517
 *   §4.7) and of that very key; the token path compares their x5t#S256 (certificateThumbprints).
 */

/** The admin API's (and RFC 8705's) name of a kind's field: tls_client_auth_subject_dn, ... */
export type TlsIdentityField = `tls_client_auth_${TlsIdentityKind}`;
export const tlsIdentityField = (kind: TlsIdentityKind): TlsIdentityField => `tls_client_auth_${kind}`;
/** Every tls_client_auth_* field, in RFC 8705 §2.1.2's order. */
export const TLS_IDENTITY_FIELDS: readonly TlsIdentityField[] = TLS_IDENTITY_KINDS.map(tlsIdentityField);

/** A tls_client_auth client's one registered value, as stored: its kind, and the value as given (trimmed). */
export interface TlsIdentity {
  readonly kind: TlsIdentityKind;
  readonly value: string;
}

/** The longest subject DN or SAN URI registered. */
const MAX_TLS_VALUE = 2048;
/** RFC 1035 §2.3.4: a name of at most 253 characters (without the root's dot), labels of at most 63. */
const MAX_DNS_NAME = 253;
const DNS_LABEL = /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$/;
/** RFC 5321 §4.5.3.1: a path of at most 256 octets, an address of at most 254, a local part of at most 64. */
const MAX_EMAIL = 254;
const MAX_LOCAL_PART = 64;
/** RFC 5322 §3.2.3 dot-atom: atext runs separated by single dots (a quoted local part is not taken). */
const DOT_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
// eslint-disable-next-line no-control-regex -- control characters are exactly what is refused here
const SPACE_OR_CONTROL = /[\s\u0000-\u001f\u007f-\u009f]/;

function dnsNameProblem(name: string, wildcard: boolean): string | undefined {
  if (name.length > MAX_DNS_NAME)
    return `is ${name.length} characters; a DNS name has at most ${MAX_DNS_NAME}`;
  const labels = name.split('.');
  // A certificate's dNSName may be a wildcard (RFC 6125 §6.4.3): `*.` and a name, compared as written.
  if (wildcard && labels[0] === '*' && labels.length > 1) labels.shift();
  if (labels.every((label) => DNS_LABEL.test(label))) return undefined;
  return wildcard
    ? 'must be a DNS name: labels of letters, digits and hyphens (not first or last) separated by dots, optionally after "*."'
    : 'must be a DNS name: labels of letters, digits and hyphens (not first or last) separated by dots';
}

/**
 * A tls_client_auth_<kind> value by its kind's rule, trimmed, as the store keeps it; throws ValidationError (its
 * message names the field) when it is not one.
 */
export function validateTlsIdentity(kind: TlsIdentityKind, raw: unknown): string {
  const field = tlsIdentityField(kind);
  if (typeof raw !== 'string') throw new ValidationError(`${field} must be a string`);
  const value = raw.trim();
  if (value === '') throw new ValidationError(`${field} must not be empty`);
  switch (kind) {
    case 'subject_dn':
      // Its refusal names the field and what is wrong where (mtls/dn.ts).
      canonicalDn(value);
      return value;
    case 'san_dns': {
      const problem = dnsNameProblem(value, true);
      if (problem !== undefined) throw new ValidationError(`${field} ${problem}`);
      return value;
    }
    case 'san_uri': {
      if (value.length > MAX_TLS_VALUE)
        throw new ValidationError(`${field} is longer than ${MAX_TLS_VALUE} characters`);
      let absolute = !SPACE_OR_CONTROL.test(value) && /^[A-Za-z][A-Za-z0-9+.-]*:/.test(value);
      if (absolute)
        try {
          new URL(value);
        } catch {
          absolute = false;
        }
      if (!absolute)
        throw new ValidationError(
          `${field} must be an absolute URI, with a scheme (spiffe://prod.example.com/ns/billing/sa/worker, https://...), without spaces`,
        );
      return value;
    }
    case 'san_ip':
      if (canonicalIpAddress(value) === undefined)
        throw new ValidationError(`${field} must be an IPv4 or IPv6 address (192.0.2.10, 2001:db8::10)`);
      return value;
    case 'san_email': {
      const at = value.lastIndexOf('@');
      const local = value.slice(0, at);
      const domain = value.slice(at + 1);
      if (
        value.length > MAX_EMAIL ||
        at <= 0 ||
        local.length > MAX_LOCAL_PART ||
        !DOT_ATOM.test(local) ||
        dnsNameProblem(domain, false) !== undefined
      )
        throw new ValidationError(
          `${field} must be an email address (local@domain, at most ${MAX_EMAIL} characters), as an rfc822Name SAN holds it`,
        );
      return value;
    }
  }
}

/**
 * The form of a registered value that the token path compares with a certificate's (KnownTlsIdentity): a DN's
 * canonical form (mtls/dn.ts), an address's (canonicalIpAddress), a DNS name and an email address in lower case, a
 * URI as registered. Throws ValidationError for a value validateTlsIdentity refuses.
 */
export function canonicalTlsValue({ kind, value }: TlsIdentity): string {
  switch (kind) {
    case 'subject_dn':
      return canonicalDn(value);
    case 'san_ip': {
      const address = canonicalIpAddress(value);
      if (address === undefined) throw new ValidationError(`${value} is not an IP address`);
      return address;
    }
    case 'san_dns':
    case 'san_email':
      return value.toLowerCase();
    case 'san_uri':
      return value;
  }
}

/** RFC 7517 §4.7: x5c holds standard base64 (with padding), never base64url. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The first certificate of a key's x5c, as DER; undefined when the key has none. */
const firstCertificate = (jwk: JWK): Buffer | undefined =>
  Array.isArray(jwk.x5c) && typeof jwk.x5c[0] === 'string' ? Buffer.from(jwk.x5c[0], 'base64') : undefined;

/**
 * Why key `i` of a self_signed_tls_client_auth client's jwks is not one of its certificates, or undefined: x5c must
 * be a list of base64 DER certificates, the first of them of the key the JWK describes (every member of its public
 * key as a JWK, e.g. kty, crv, x and y, equal to the JWK's).
 */
function x5cProblem(jwk: JWK, i: number): string | undefined {
  const where = `jwks key ${i + 1}`;
  const x5c: unknown = jwk.x5c;
  if (!Array.isArray(x5c) || x5c.length === 0)
    return `${where} has no x5c: a self_signed_tls_client_auth client registers each certificate in its key's x5c (RFC 7517 section 4.7)`;
  for (const [j, text] of x5c.entries()) {
    if (typeof text !== 'string' || text === '' || !BASE64.test(text))
      return `${where}: x5c[${j}] must be a certificate's DER in standard base64 (RFC 7517 section 4.7: not base64url, no line breaks)`;
    try {
      new X509Certificate(Buffer.from(text, 'base64'));
    } catch {
      return `${where}: x5c[${j}] is not an X.509 certificate (DER)`;
    }
  }
  const publicKey = new X509Certificate(firstCertificate(jwk)!).publicKey.export({ format: 'jwk' });
  for (const [member, value] of Object.entries(publicKey))
    if ((jwk as Record<string, unknown>)[member] !== value)
      return `${where}: x5c[0] is the certificate of another key (its "${member}" is not the key's): the first certificate must hold the key the JWK describes (RFC 7517 section 4.7)`;
  return undefined;
}

/** A client's method and credentials as registered, for credentialProblem. */
export interface RegisteredCredentials {
  authMethod: AuthMethodName;
  jwks: PublicJwks | null;
  jwksUri: string | null;
  tlsClientAuth: TlsIdentity | null;
}

/** A rule of a client's credentials broken: the field at fault (a path: `jwks/keys/0/x5c`), and why. */
export interface CredentialProblem {
  field: string;
  message: string;
}

/**
 * The rule of a client's method and credentials together, of every method (method.ts's authMethodProblem for the
 * others): tls_client_auth has one tls_client_auth_* value and no keys; self_signed_tls_client_auth has jwks inline,
 * each key with its certificate in x5c, or a jwks_uri where such a set is published (checked when it is fetched);
 * a tls_client_auth_* value is for tls_client_auth only.
 * Returns the first rule broken and the field to name, or undefined.
 */
export function credentialProblem(client: RegisteredCredentials): CredentialProblem | undefined {
  const { authMethod: method, jwks, jwksUri, tlsClientAuth: tls } = client;
  if (tls !== null && method !== 'tls_client_auth')
    return {
      field: tlsIdentityField(tls.kind),
      message: `tls_client_auth_* fields are for tls_client_auth; this client uses ${method}`,
    };
  if (method === 'tls_client_auth') {
    if (jwks !== null || jwksUri !== null)
      return {
        field: jwks !== null ? 'jwks' : 'jwks_uri',
        message:
          'jwks and jwks_uri are for private_key_jwt and self_signed_tls_client_auth; this client uses tls_client_auth',
      };
    if (tls === null)
      return {
        field: 'token_endpoint_auth_method',
        message: `tls_client_auth needs one of ${TLS_IDENTITY_FIELDS.join(', ')}`,
      };
    return undefined;
  }
  if (method === 'self_signed_tls_client_auth') {
    if (jwks !== null && jwksUri !== null)
      return { field: 'jwks_uri', message: 'give jwks or jwks_uri, not both' };
    // RFC 8705 §2.2: the certificates, inline or where the client publishes them (their x5c read at each fetch).
    if (jwksUri !== null) return undefined;
    if (jwks === null)
      return {
        field: 'jwks',
        message:
          "self_signed_tls_client_auth needs jwks or jwks_uri: its certificates, each in its key's x5c",
      };
    for (const [i, jwk] of jwks.keys.entries()) {
      const problem = x5cProblem(jwk, i);
      if (problem !== undefined) return { field: `jwks/keys/${i}/x5c`, message: problem };
    }
    return undefined;
  }
  const problem = authMethodProblem(method, jwks, jwksUri);
  if (problem === undefined) return undefined;
  return {
    field:
      jwks !== null && jwksUri !== null
        ? 'jwks_uri'
        : method === 'private_key_jwt'
          ? 'jwks'
          : jwks !== null
            ? 'jwks'
            : 'jwks_uri',
    message: problem,
  };
}

/**
 * A self_signed_tls_client_auth client's certificates as the token path compares them: the x5t#S256 (base64url
 * SHA-256 of the DER, RFC 8705 §3.1) of the first certificate of each key's x5c.
 */
export function certificateThumbprints(jwks: PublicJwks): Set<string> {
  const thumbprints = new Set<string>();
  for (const jwk of jwks.keys) {
    const der = firstCertificate(jwk);
    if (der !== undefined) thumbprints.add(thumbprintOf(der));
  }
  return thumbprints;
}
