/**
 * A test PKI for the mutual-TLS tests (RFC 8705): root and intermediate authorities, client certificates
 * under them (tls_client_auth), self-signed client certificates with their JWK (self_signed_tls_client_auth),
 * a server certificate for the loopback addresses, and PEM files of any of them for a server's configuration.
 * Every key is made afresh (P-256 unless a leaf asks for RSA) and is extractable.
 *
 * Subjects are RFC 4514 strings, most significant RDN last ('CN=worker,O=Example,C=US'): the certificate
 * holds them in the reverse order (C, O, CN), so that its RFC 4514 rendering (`openssl x509 -subject
 * -nameopt RFC2253`) is the string given. @peculiar/x509's Name keeps a string's order as the DER order, so
 * the RDNs are reversed here. Its parser unescapes `\,`, `\+`, `\\` and a quoted value, not RFC 4514's `\XX`
 * hex escapes.
 */
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata API loaded first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createHash, createPrivateKey, webcrypto } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as asn1js from 'asn1js';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
/** Web Crypto's JWK, open to other members: assignable to jose's JWK and to node:crypto's JsonWebKey. */
type JsonWebKey = webcrypto.JsonWebKey & Record<string, unknown>;

x509.cryptoProvider.set(globalThis.crypto);

export interface Issued {
  /** PEM of the certificate. */
  certPem: string;
  /** PKCS#8 PEM of its private key. */
  keyPem: string;
  /** DER of the certificate. */
  der: Buffer;
  /** base64url SHA-256 of the DER (RFC 8705 x5t#S256). */
  x5t: string;
  /** The public key as a JWK (with kty/crv/x/y or n/e), no private members. */
  publicJwk: JsonWebKey;
  /** The private key as a jose-usable KeyLike / CryptoKey (for signing assertions). */
  privateKey: CryptoKey;
}

export interface Authority extends Issued {
  /** Its subject, RFC 4514, as given to makeCa. */
  name: string;
  cryptoKeys: CryptoKeyPair;
}

interface SubjectAltNames {
  dns?: string[];
  uri?: string[];
  ip?: string[];
  email?: string[];
}

type Eku = 'clientAuth' | 'serverAuth' | 'emailProtection' | 'codeSigning';

export interface CaOptions {
  /** RFC 4514; default 'CN=Tessera Test Root CA'. */
  subject?: string;
  /** The authority that signs this one (an intermediate); self-signed (a root) without. */
  issuer?: Authority;
  /** Default: an hour ago. */
  notBefore?: Date;
  /** Default: ten years on. */
  notAfter?: Date;
  /** basicConstraints pathLenConstraint; none without. */
  pathLength?: number;
  /** Its key pair (another authority's, for a certificate of the same key); a new P-256 pair without. */
  keys?: CryptoKeyPair;
}

export interface LeafOptions {
  /** RFC 4514, e.g. 'CN=worker,O=Example,C=US' (CN first: the last RDN in DER). */
  subject: string;
  san?: SubjectAltNames;
  /** Extended key usages; default ['clientAuth']; null: no EKU extension at all. */
  eku?: Eku[] | null;
  /** Default: an hour ago. */
  notBefore?: Date;
  /** Default: a day on. */
  notAfter?: Date;
  /** Default P-256 (ES256); RSA: 2048 bits, RSASSA-PKCS1-v1_5 with SHA-256 (RS256). */
  key?: 'P-256' | 'RSA';
}

export interface SelfSignedOptions {
  subject: string;
  san?: SubjectAltNames;
  notBefore?: Date;
  notAfter?: Date;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const EC_KEY = { name: 'ECDSA', namedCurve: 'P-256' };
const EC_SIGN = { name: 'ECDSA', hash: 'SHA-256' };
const RSA_KEY = {
  name: 'RSASSA-PKCS1-v1_5',
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: 'SHA-256',
};
const RSA_SIGN = { name: 'RSASSA-PKCS1-v1_5' };

const EKU_OIDS: Record<Eku, x509.ExtendedKeyUsage> = {
  clientAuth: x509.ExtendedKeyUsage.clientAuth,
  serverAuth: x509.ExtendedKeyUsage.serverAuth,
  emailProtection: x509.ExtendedKeyUsage.emailProtection,
  codeSigning: x509.ExtendedKeyUsage.codeSigning,
};

function generate(key: 'P-256' | 'RSA' = 'P-256'): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(key === 'RSA' ? RSA_KEY : EC_KEY, true, ['sign', 'verify']);
}

/** The algorithm a key signs certificates with. */
const signingAlgorithm = (key: CryptoKey) => (key.algorithm.name === 'ECDSA' ? EC_SIGN : RSA_SIGN);

/**
 * The Name whose RFC 4514 rendering is `rfc4514`: @peculiar/x509 parses the RDNs in the text's order and
 * encodes them in that order, so the SEQUENCE of RDNs it makes is reversed, and so is each multi-valued RDN's
 * SET ('CN=a+OU=b': OpenSSL prints a SET's attributes last first too).
 */
function nameOf(rfc4514: string): x509.Name {
  const parsed = asn1js.fromBER(new x509.Name(rfc4514).toArrayBuffer());
  if (parsed.offset === -1 || !(parsed.result instanceof asn1js.Sequence)) {
    throw new Error(`pki: cannot encode the name ${JSON.stringify(rfc4514)}`);
  }
  const rdns = parsed.result.valueBlock.value.map((rdn) => {
    if (!(rdn instanceof asn1js.Set))
      throw new Error(`pki: cannot encode the name ${JSON.stringify(rfc4514)}`);
    return new asn1js.Set({ value: [...rdn.valueBlock.value].reverse() });
  });
  return new x509.Name(new asn1js.Sequence({ value: rdns.reverse() }).toBER());
}

/** 16 random bytes, the first in 0x40..0x7f: positive, and 16 bytes long in DER. */
function serialNumber(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0]! & 0x3f) | 0x40;
  return Buffer.from(bytes).toString('hex');
}

function sanExtension(san: SubjectAltNames | undefined): x509.Extension[] {
  const names: x509.JsonGeneralName[] = [
    ...(san?.dns ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(san?.uri ?? []).map((value) => ({ type: 'url' as const, value })),
    ...(san?.ip ?? []).map((value) => ({ type: 'ip' as const, value })),
    ...(san?.email ?? []).map((value) => ({ type: 'email' as const, value })),
  ];
  return names.length ? [new x509.SubjectAlternativeNameExtension(names)] : [];
}

async function publicJwkOf(key: CryptoKey): Promise<JsonWebKey> {
  const { kty, crv, x, y, n, e } = await webcrypto.subtle.exportKey('jwk', key);
  return kty === 'EC' ? { kty, crv, x, y } : { kty, n, e };
}

async function issued(cert: x509.X509Certificate, keys: CryptoKeyPair): Promise<Issued> {
  const der = Buffer.from(cert.rawData);
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const keyPem = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({
    type: 'pkcs8',
    format: 'pem',
  });
  return {
    certPem: cert.toString('pem') + '\n',
    keyPem: keyPem.toString(),
    der,
    x5t: createHash('sha256').update(der).digest('base64url'),
    publicJwk: await publicJwkOf(keys.publicKey),
    privateKey: keys.privateKey,
  };
}

/** The issuer's Name (as its certificate encodes it) and its subject key identifier. */
function issuerOf(ca: Authority): { issuer: x509.Name; aki: x509.AuthorityKeyIdentifierExtension } {
  const cert = new x509.X509Certificate(ca.der);
  const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension);
  if (!ski) throw new Error(`pki: the authority ${ca.name} has no subject key identifier`);
  return { issuer: cert.subjectName, aki: new x509.AuthorityKeyIdentifierExtension(ski.keyId) };
}

/**
 * A certificate authority: a root (self-signed) or, with `issuer`, an intermediate under it. basicConstraints
 * cA=true and keyUsage keyCertSign+cRLSign, both critical; a subject key identifier (and, under an issuer,
 * the issuer's as the authority key identifier). Its key is P-256.
 */
export async function makeCa(options: CaOptions = {}): Promise<Authority> {
  const name = options.subject ?? 'CN=Tessera Test Root CA';
  const keys = options.keys ?? (await generate());
  const now = Date.now();
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(true, options.pathLength, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
  ];
  const validity = {
    serialNumber: serialNumber(),
    notBefore: options.notBefore ?? new Date(now - HOUR),
    notAfter: options.notAfter ?? new Date(now + 3650 * DAY),
  };
  let cert: x509.X509Certificate;
  if (options.issuer) {
    const { issuer, aki } = issuerOf(options.issuer);
    cert = await x509.X509CertificateGenerator.create({
      ...validity,
      subject: nameOf(name),
      issuer,
      publicKey: keys.publicKey,
      signingKey: options.issuer.privateKey,
      signingAlgorithm: signingAlgorithm(options.issuer.privateKey),
      extensions: [...extensions, aki],
    });
  } else {
    cert = await x509.X509CertificateGenerator.createSelfSigned({
      ...validity,
      name: nameOf(name),
      keys,
      signingAlgorithm: EC_SIGN,
      extensions,
    });
  }
  return { ...(await issued(cert, keys)), name, cryptoKeys: keys };
}

/** keyUsage for an end entity's key: digitalSignature, and keyEncipherment for RSA. */
const leafKeyUsage = (key: 'P-256' | 'RSA') =>
  new x509.KeyUsagesExtension(
    key === 'RSA'
      ? x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment
      : x509.KeyUsageFlags.digitalSignature,
    true,
  );

/**
 * An end-entity certificate signed by `ca`: basicConstraints cA=false and keyUsage (both critical), the
 * extended key usages asked for (clientAuth by default), the SANs given, the issuer's key identifier and its
 * own.
 */
export async function issueCert(ca: Authority, options: LeafOptions): Promise<Issued> {
  const key = options.key ?? 'P-256';
  const keys = await generate(key);
  const now = Date.now();
  const eku = options.eku === undefined ? ['clientAuth' as const] : options.eku;
  const { issuer, aki } = issuerOf(ca);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: nameOf(options.subject),
    issuer,
    notBefore: options.notBefore ?? new Date(now - HOUR),
    notAfter: options.notAfter ?? new Date(now + DAY),
    publicKey: keys.publicKey,
    signingKey: ca.privateKey,
    signingAlgorithm: signingAlgorithm(ca.privateKey),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      leafKeyUsage(key),
      ...(eku === null ? [] : [new x509.ExtendedKeyUsageExtension(eku.map((u) => EKU_OIDS[u]))]),
      ...sanExtension(options.san),
      aki,
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return issued(cert, keys);
}

/**
 * A self-signed client certificate (RFC 8705 §2.2 self_signed_tls_client_auth), P-256: basicConstraints
 * cA=false, keyUsage digitalSignature, EKU clientAuth, the SANs given, its key identifier as both subject and
 * authority key identifier. `jwk` is the public JWK a client registers for it: alg ES256 and x5c, the
 * certificate's DER in standard (not url) base64.
 */
export async function selfSigned(
  options: SelfSignedOptions,
): Promise<Issued & { jwk: JsonWebKey & { x5c: string[]; alg: string } }> {
  const keys = await generate();
  const now = Date.now();
  const ski = await x509.SubjectKeyIdentifierExtension.create(keys.publicKey);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: nameOf(options.subject),
    notBefore: options.notBefore ?? new Date(now - HOUR),
    notAfter: options.notAfter ?? new Date(now + DAY),
    keys,
    signingAlgorithm: EC_SIGN,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      leafKeyUsage('P-256'),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
      ...sanExtension(options.san),
      new x509.AuthorityKeyIdentifierExtension(ski.keyId),
      ski,
    ],
  });
  const result = await issued(cert, keys);
  return { ...result, jwk: { ...result.publicJwk, alg: 'ES256', x5c: [result.der.toString('base64')] } };
}

/** A TLS server certificate under `ca`: CN=localhost, SANs localhost, 127.0.0.1 and ::1, EKU serverAuth. */
export function serverCert(ca: Authority): Promise<Issued> {
  return issueCert(ca, {
    subject: 'CN=localhost',
    san: { dns: ['localhost'], ip: ['127.0.0.1', '::1'] },
    eku: ['serverAuth'],
  });
}

/**
 * Writes each file (name → PEM text) into a new temporary directory, readable by its owner only; returns each
 * name's path. The caller removes the directory (path.dirname of any of them) when done.
 */
export async function writePems(files: Record<string, string>): Promise<Record<string, string>> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tessera-pki-'));
  const paths: Record<string, string> = {};
  for (const [name, text] of Object.entries(files)) {
    const file = path.join(dir, name);
    await writeFile(file, text, { mode: 0o600 });
    paths[name] = file;
  }
  return paths;
}
