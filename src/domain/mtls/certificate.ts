import { X509Certificate } from 'node:crypto';
import * as pkijs from 'pkijs';
import { canonicalIpAddress } from './ip.js';
import { canonicalDnOfDer } from './dn.js';

/*
 * A TLS client certificate as RFC 8705 reads it (docs/mtls.md): what it says of its holder (subject, SANs, validity,
 * extended key usage), parsed once per certificate; and whether its chain is trusted, which the TLS handshake decided
 * (OpenSSL, against TESSERA_TLS_CLIENT_CA) or, for a certificate a proxy forwarded, Tessera itself decides here with
 * pkijs's RFC 5280 path validation (a proxy's header is no proof of trust).
 *
 * pkijs, not Node's X509Certificate alone: Node has no path validation for a chain that did not arrive in a handshake,
 * exposes neither the key usage bits, basic constraints' path length nor name constraints a CA may set, and prints
 * names and SANs as text to be parsed again (a comma inside a value is then ambiguous). pkijs (PeculiarVentures, the
 * same authors as @peculiar/x509 and webcrypto-liner) parses every extension into typed values and validates a path
 * as RFC 5280 §6 says: signatures, validity, CA flags, keyCertSign, name constraints.
 */

/** RFC 5280 §4.2.1.12: the extended key usages that allow TLS client authentication. */
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EXTENDED_KEY_USAGE = '2.5.29.37.0';
const SUBJECT_ALT_NAME = '2.5.29.17';
const EXTENDED_KEY_USAGE = '2.5.29.37';

/** RFC 5280 §4.2.1.6: the GeneralName choices RFC 8705 §2.1.2 matches on. */
const RFC822_NAME = 1;
const DNS_NAME = 2;
const URI = 6;
const IP_ADDRESS = 7;

/** What a certificate says of its holder, parsed once. */
export interface CertificateFacts {
  /** The canonical form of the subject (dn.ts), or undefined when it does not parse. */
  readonly subject: string | undefined;
  /** RFC 5280 §4.2.1.6 subjectAltName, by kind; dNSName and rfc822Name lower-cased, iPAddress in Node's form. */
  readonly dns: readonly string[];
  readonly uri: readonly string[];
  readonly ip: readonly string[];
  readonly email: readonly string[];
  /** Milliseconds since the epoch. */
  readonly notBefore: number;
  readonly notAfter: number;
  /** RFC 5280 §4.2.1.12: no extended key usage, or one that allows clientAuth. */
  readonly clientAuth: boolean;
}

/** Whether a certificate's chain is trusted; the reason (the audit trail's, after `mtls: `) when it is not. */
export type ChainVerdict = { readonly trusted: true } | { readonly trusted: false; readonly reason: string };

const TRUSTED: ChainVerdict = { trusted: true };
export const NOT_TRUSTED: ChainVerdict = { trusted: false, reason: 'chain not trusted' };
const CHAIN_EXPIRED: ChainVerdict = { trusted: false, reason: 'certificate expired' };

/** A client certificate presented with a request: on the TLS connection, or by a trusted proxy. */
export interface ClientCertificate {
  /** RFC 8705 §3.1 x5t#S256: base64url of the SHA-256 of the DER. */
  readonly thumbprint: string;
  readonly facts: CertificateFacts;
  /** Whether it chains to TESSERA_TLS_CLIENT_CA: decided once per certificate (and chain), then from memory. */
  chain(): ChainVerdict | Promise<ChainVerdict>;
}

export { thumbprintOf } from './thumbprint.js';

/** A certificate's DER as pkijs reads it; throws on anything that is not one. */
const parseCertificate = (der: Uint8Array): pkijs.Certificate => pkijs.Certificate.fromBER(der);

/** An iPAddress SAN (4 or 16 bytes) as Node writes an address (IPv6 compressed, lower case); undefined otherwise. */
function ipText(bytes: Uint8Array): string | undefined {
  if (bytes.length === 4) return bytes.join('.');
  if (bytes.length !== 16) return undefined;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // As a registered tls_client_auth_san_ip is written (certificate-registration.ts), so that the two compare as text.
  return canonicalIpAddress(groups.join(':'));
}

/** What `der` says of its holder; throws when it is not a certificate. */
export function factsOf(der: Uint8Array): CertificateFacts {
  const certificate = parseCertificate(der);
  const dns: string[] = [];
  const uri: string[] = [];
  const ip: string[] = [];
  const email: string[] = [];
  let clientAuth = true;
  for (const extension of certificate.extensions ?? []) {
    if (extension.extnID === SUBJECT_ALT_NAME && extension.parsedValue instanceof pkijs.AltName) {
      for (const name of (extension.parsedValue as pkijs.AltName).altNames) {
        const value: unknown = name.value;
        if (name.type === DNS_NAME && typeof value === 'string') dns.push(value.toLowerCase());
        else if (name.type === URI && typeof value === 'string') uri.push(value);
        else if (name.type === RFC822_NAME && typeof value === 'string') email.push(value.toLowerCase());
        else if (name.type === IP_ADDRESS && value instanceof Object && 'valueBlock' in value) {
          const text = ipText(
            (value as { valueBlock: { valueHexView: Uint8Array } }).valueBlock.valueHexView,
          );
          if (text !== undefined) ip.push(text);
        }
      }
    } else if (
      extension.extnID === EXTENDED_KEY_USAGE &&
      extension.parsedValue instanceof pkijs.ExtKeyUsage
    ) {
      // RFC 5280 §4.2.1.12: a certificate with the extension is for the purposes it lists only.
      const purposes = (extension.parsedValue as pkijs.ExtKeyUsage).keyPurposes;
      clientAuth = purposes.includes(CLIENT_AUTH) || purposes.includes(ANY_EXTENDED_KEY_USAGE);
    }
  }
  const subjectDer = new Uint8Array(certificate.subject.valueBeforeDecode);
  return {
    subject: canonicalDnOfDer(subjectDer),
    dns,
    uri,
    ip,
    email,
    notBefore: certificate.notBefore.value.getTime(),
    notAfter: certificate.notAfter.value.getTime(),
    clientAuth,
  };
}

/** The CAs of TESSERA_TLS_CLIENT_CA, as Node and pkijs read them. */
export interface Anchors {
  readonly x509: readonly X509Certificate[];
  readonly pkijs: readonly pkijs.Certificate[];
}

/** The anchors of a PEM bundle; throws for a bundle with no certificate, or one that does not parse. */
export function anchorsOf(pem: string): Anchors {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate in it');
  const x509 = blocks.map((block) => new X509Certificate(block));
  return { x509, pkijs: x509.map((certificate) => parseCertificate(certificate.raw)) };
}

/** At most this many intermediates between a forwarded leaf and an anchor (the header's own limit is 10). */
const MAX_INTERMEDIATES = 10;
/** A path validation that takes longer than this is not trusted (pkijs is async: nothing should take near it). */
const VALIDATION_DEADLINE_MS = 2000;

/** Whether `issuer` issued `subject`: its name and key identifiers (OpenSSL's check), and the signature. */
const issued = (subject: X509Certificate, issuer: X509Certificate): boolean => {
  try {
    return subject.checkIssued(issuer) && subject.verify(issuer.publicKey);
  } catch {
    return false;
  }
};

/**
 * The one path from the leaf up through the forwarded intermediates to an anchor, each certificate's issuer found
 * by its name and signature, none used twice, at most MAX_INTERMEDIATES deep: the intermediates in order (the
 * leaf's issuer first) and the anchor; undefined when there is none. Linear and bounded, whatever a hostile proxy or
 * client sends (certificates that issue each other in a loop, a hundred of the same name): the path validation then
 * follows exactly this path.
 */
function pathOf(
  leaf: X509Certificate,
  pool: readonly X509Certificate[],
  anchors: Anchors,
): { intermediates: number[]; anchor: number } | undefined {
  const used = new Set<number>();
  const intermediates: number[] = [];
  let current = leaf;
  for (let depth = 0; depth <= MAX_INTERMEDIATES; depth++) {
    const anchor = anchors.x509.findIndex((candidate) => issued(current, candidate));
    if (anchor >= 0) return { intermediates, anchor };
    const next = pool.findIndex((candidate, i) => !used.has(i) && issued(current, candidate));
    if (next < 0) return undefined;
    used.add(next);
    intermediates.push(next);
    current = pool[next]!;
  }
  return undefined;
}

/**
 * RFC 5280 §6 path validation of a certificate a proxy forwarded, with the intermediates it sent, to `anchors` (the
 * certificates of TESSERA_TLS_CLIENT_CA) at `now`: the path found by pathOf, validated by pkijs's engine (signatures,
 * validity, basic constraints, key usage, name constraints) along exactly that path. Never throws, and never takes
 * longer than VALIDATION_DEADLINE_MS: what cannot be validated is not trusted.
 */
export async function validatePath(
  leafDer: Uint8Array,
  intermediateDers: readonly Uint8Array[],
  anchors: Anchors,
  now: number,
): Promise<ChainVerdict> {
  if (anchors.x509.length === 0) return NOT_TRUSTED;
  let timer: NodeJS.Timeout | undefined;
  try {
    const leaf = new X509Certificate(leafDer);
    const pool = intermediateDers.slice(0, MAX_INTERMEDIATES).map((der) => new X509Certificate(der));
    const path = pathOf(leaf, pool, anchors);
    if (path === undefined) return NOT_TRUSTED;
    // pkijs takes the end entity as the last of `certs`; each certificate's issuer is the next of the path.
    const chain = [
      parseCertificate(leafDer),
      ...path.intermediates.map((i) => parseCertificate(pool[i]!.raw)),
    ];
    const anchor = anchors.pkijs[path.anchor]!;
    const engine = new pkijs.CertificateChainValidationEngine({
      trustedCerts: [anchor],
      certs: [...chain.slice(1).reverse(), chain[0]!],
      checkDate: new Date(now),
      findIssuer: async (certificate: pkijs.Certificate) => {
        const at = chain.findIndex((c) => Buffer.from(c.tbsView).equals(Buffer.from(certificate.tbsView)));
        if (at < 0) return [];
        return [at + 1 < chain.length ? chain[at + 1]! : anchor];
      },
    });
    const deadline = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), VALIDATION_DEADLINE_MS);
    });
    const result = await Promise.race([engine.verify(), deadline]);
    if (result === undefined) return NOT_TRUSTED;
    // The path validated must be the one of this leaf (RFC 5280 §6.1: the end entity is the path's last certificate).
    const validated = result.certificatePath?.[0];
    if (
      result.result &&
      validated !== undefined &&
      Buffer.from(validated.tbsView).equals(Buffer.from(chain[0]!.tbsView))
    )
      return TRUSTED;
    // pkijs's code 8: a certificate of the path is not yet valid or expired (the leaf's own dates are checked before).
    return result.resultCode === 8 ? CHAIN_EXPIRED : NOT_TRUSTED;
  } catch {
    return NOT_TRUSTED;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * OpenSSL's verdict on a handshake's certificate (Node's TLSSocket.authorizationError codes) as the same reasons as
 * validatePath's: the two sources of a certificate are refused alike.
 */
export function handshakeVerdict(authorized: boolean, error: string | undefined): ChainVerdict {
  if (authorized) return TRUSTED;
  return error === 'CERT_HAS_EXPIRED' || error === 'CERT_NOT_YET_VALID' ? CHAIN_EXPIRED : NOT_TRUSTED;
}
