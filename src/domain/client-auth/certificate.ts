import { invalidRequest } from '../errors.js';
import type { KnownClient, KnownTlsIdentity } from '../known-client.js';
import type { ChainVerdict, ClientCertificate } from '../mtls/certificate.js';
import { present, type TokenRequest } from '../token-request.js';
import {
  failedProof,
  type AuthMethodName,
  type ClientAuthMethod,
  type PresentedCredentials,
  type Proof,
} from './method.js';

/*
 * A TLS client certificate as the client's credential (RFC 8705 §2, docs/mtls.md): `tls_client_auth`, a certificate
 * of a trusted CA carrying the client's registered subject DN or SAN (§2.1), and `self_signed_tls_client_auth`, one
 * of the certificates in the client's own jwks (§2.2). A request cannot tell the two apart (client_id and a
 * certificate, nothing else): the client's registration does, so both are this one method, and a client registered
 * for either authenticates only with it (a secret or an assertion proves nothing for it: secret.ts,
 * private-key-jwt.ts find no secret or key).
 *
 * What is checked, in order, each refusal with its audit reason (`mtls: …`): a certificate at all; for
 * tls_client_auth its validity, its extended key usage, the registered value, then its chain to
 * TESSERA_TLS_CLIENT_CA (decided by the TLS handshake or, for a proxy's certificate, by Tessera: mtls/certificate.ts); for
 * self_signed_tls_client_auth that it is one of the client's certificates, by its hash (no chain, no dates: RFC
 * 8705 §2.2 trusts the registration, not a CA), registered inline or published at its jwks_uri. A warm request
 * reads everything from memory: the certificate's facts and verdict are kept by its hash (http/client-certificates.ts),
 * a published set as a private_key_jwt client's keys are (keys/jwks-fetcher.ts).
 */

const NO_CERTIFICATE = failedProof('mtls: no certificate');
/**
 * A client of another method (or none) that sent only its id: a request without its credential, as it is without
 * mutual TLS (400 client_secret is required at the token endpoint), not a failed attempt.
 */
const NOT_REGISTERED: Proof = { proven: false, failure: 'no client credential', missing: true };
const NOT_YET_VALID = failedProof('mtls: certificate not yet valid');
const EXPIRED = failedProof('mtls: certificate expired');
const NOT_CLIENT_AUTH = failedProof('mtls: certificate not for client authentication (extended key usage)');
const NOT_REGISTERED_CERTIFICATE = failedProof("mtls: certificate is not one of the client's jwks x5c");
const PROVEN: Proof = { proven: true };

/** The refusal of a registered value the certificate does not carry, by kind. */
const MISMATCH: Readonly<Record<KnownTlsIdentity['kind'], Proof>> = {
  subject_dn: failedProof('mtls: subject does not match'),
  san_dns: failedProof('mtls: no SAN dNSName matches'),
  san_uri: failedProof('mtls: no SAN URI matches'),
  san_ip: failedProof('mtls: no SAN iPAddress matches'),
  san_email: failedProof('mtls: no SAN rfc822Name matches'),
};

/** RFC 8705 §2.1.2: the registered value, against the subject or the SANs of its kind. */
function carries(certificate: ClientCertificate, identity: KnownTlsIdentity): boolean {
  const facts = certificate.facts;
  switch (identity.kind) {
    case 'subject_dn':
      return facts.subject !== undefined && facts.subject === identity.value;
    case 'san_dns':
      return facts.dns.includes(identity.value);
    case 'san_uri':
      return facts.uri.includes(identity.value);
    case 'san_ip':
      return facts.ip.includes(identity.value);
    case 'san_email':
      return facts.email.includes(identity.value);
  }
}

/** tls_client_auth (RFC 8705 §2.1): the certificate, checked against the client's registered value. */
function tlsClientAuth(certificate: ClientCertificate, identity: KnownTlsIdentity, now: number) {
  const { facts } = certificate;
  if (now < facts.notBefore) return NOT_YET_VALID;
  if (now > facts.notAfter) return EXPIRED;
  if (!facts.clientAuth) return NOT_CLIENT_AUTH;
  // The registered value before the chain: a certificate that could never match costs no path validation.
  if (!carries(certificate, identity)) return MISMATCH[identity.kind];
  const decide = (verdict: ChainVerdict): Proof =>
    verdict.trusted ? PROVEN : failedProof(`mtls: ${verdict.reason}`);
  const verdict = certificate.chain();
  return verdict instanceof Promise ? verdict.then(decide) : decide(verdict);
}

/** The certificates a self-signed client publishes at its jwks_uri (keys/jwks-fetcher.ts, as its keys are fetched). */
export interface RemoteCertificates {
  /** The set's certificates, fetched or cached; rejects with an Error whose message says why there are none. */
  certificatesFor(place: { uri: string }): Promise<ReadonlySet<string>>;
  /** Fetched again for a certificate not among them, at most once a minute: the new set, or undefined. */
  refetchCertificates(place: { uri: string }): Promise<ReadonlySet<string> | undefined>;
}

/** RFC 8705 §2.2: the certificate is one the client published at its jwks_uri (fetched again once for a new one). */
async function publishedAt(
  place: { uri: string },
  thumbprint: string,
  remote: RemoteCertificates,
): Promise<Proof> {
  let published: ReadonlySet<string>;
  try {
    published = await remote.certificatesFor(place);
  } catch (error) {
    return failedProof(`mtls: the client's jwks_uri: ${(error as Error).message}`);
  }
  if (published.has(thumbprint)) return PROVEN;
  const again = await remote.refetchCertificates(place).catch(() => undefined);
  return again?.has(thumbprint) === true ? PROVEN : NOT_REGISTERED_CERTIFICATE;
}

class CertificateCredentials implements PresentedCredentials {
  readonly byCertificate = true;

  methodFor(client: KnownClient): AuthMethodName {
    return client.tls !== undefined ? 'tls_client_auth' : 'self_signed_tls_client_auth';
  }

  constructor(
    readonly clientId: string,
    private readonly certificate: ClientCertificate | undefined,
    private readonly remote: RemoteCertificates,
  ) {}

  proves(client: KnownClient | undefined, now: number): Proof | Promise<Proof> {
    if (client === undefined) return NOT_REGISTERED;
    const { tls, selfSigned } = client;
    if (tls === undefined && selfSigned === undefined) return NOT_REGISTERED;
    const certificate = this.certificate;
    if (certificate === undefined) return NO_CERTIFICATE;
    if (tls !== undefined) return tlsClientAuth(certificate, tls, now);
    // RFC 8705 §2.2: the same certificate as one registered, by the hash of its DER.
    if (selfSigned instanceof Set)
      return selfSigned.has(certificate.thumbprint) ? PROVEN : NOT_REGISTERED_CERTIFICATE;
    return publishedAt(selfSigned as { uri: string }, certificate.thumbprint, this.remote);
  }
}

/** Whether the request carries a credential of another method (a secret, a Basic header, an assertion). */
const carriesOtherCredential = (request: TokenRequest): boolean =>
  request.authorization !== undefined ||
  present(request.params.client_secret) !== undefined ||
  present(request.params.client_assertion) !== undefined ||
  present(request.params.client_assertion_type) !== undefined;

/**
 * tls_client_auth and self_signed_tls_client_auth: a request that names its client (client_id, RFC 8705 §2) and
 * carries no other credential. With or without a certificate: a certificate client that sent none is refused as
 * such (`mtls: no certificate`), and a client of another method that sent nothing is refused as one without its
 * credential.
 */
export function tlsCertificate(options: { remote: RemoteCertificates }): ClientAuthMethod {
  return {
    names: ['tls_client_auth', 'self_signed_tls_client_auth'],
    presentedIn: (request) =>
      present(request.params.client_id) !== undefined && !carriesOtherCredential(request),
    parse(request) {
      const clientId = present(request.params.client_id);
      if (clientId === undefined) throw invalidRequest('client_id is required');
      return new CertificateCredentials(clientId, request.certificate, options.remote);
    },
  };
}
