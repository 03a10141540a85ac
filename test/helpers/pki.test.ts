/**
 * The test PKI (test/helpers/pki.ts) as OpenSSL 3 and Node see it: chains that `openssl verify` accepts (a
 * leaf under the root, a leaf under an intermediate given as untrusted) and refuses (an expired leaf, a leaf
 * not yet valid, a server-only EKU for an SSL client), subjects printed by `-nameopt RFC2253` exactly as
 * given, the SANs, the extensions a CA and a leaf carry, x5t#S256 against OpenSSL's DER, the keys (PKCS#8
 * PEM, JWK, CryptoKey signing with jose), Node's X509Certificate on every kind, and a node:tls handshake in
 * which the server sees the client's certificate.
 */
import { spawnSync } from 'node:child_process';
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { connect, createServer, type TLSSocket } from 'node:tls';
import { jwtVerify, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCert, makeCa, selfSigned, serverCert, writePems, type Authority, type Issued } from './pki.js';

interface Run {
  status: number | null;
  stdout: Buffer;
  /** stdout and stderr as text. */
  out: string;
}

function openssl(args: string[], input?: Buffer): Run {
  const run = spawnSync('openssl', args, { input });
  if (run.error) throw run.error;
  return { status: run.status, stdout: run.stdout, out: run.stdout.toString() + run.stderr.toString() };
}

const DAY = 24 * 3_600_000;
const SUBJECT = 'CN=worker,O=Example,C=US';
const SAN = {
  dns: ['worker.example.com', 'alt.example.com'],
  uri: ['spiffe://example.com/ns/prod/sa/worker'],
  ip: ['10.1.2.3', '2001:db8::7'],
  email: ['worker@example.com'],
};

let root: Authority;
let inter: Authority;
let leaf: Issued;
let underInter: Issued;
let rsa: Issued;
let serverOnly: Issued;
let noEku: Issued;
let expired: Issued;
let future: Issued;
let server: Issued;
let self: Awaited<ReturnType<typeof selfSigned>>;
let other: Authority;
let otherLeaf: Issued;
let files: Record<string, string>;
const dirs: string[] = [];

const file = (name: string): string => files[name] ?? expect.unreachable(`no file ${name}`);

beforeAll(async () => {
  root = await makeCa();
  inter = await makeCa({ subject: 'CN=Tessera Test Intermediate CA,O=Tessera', issuer: root, pathLength: 0 });
  leaf = await issueCert(root, { subject: SUBJECT, san: SAN });
  underInter = await issueCert(inter, { subject: 'CN=deep,O=Example' });
  rsa = await issueCert(root, { subject: 'CN=rsa-worker', key: 'RSA' });
  serverOnly = await issueCert(root, { subject: 'CN=server-only', eku: ['serverAuth'] });
  noEku = await issueCert(root, { subject: 'CN=no-eku', eku: null });
  const now = Date.now();
  expired = await issueCert(root, {
    subject: 'CN=expired',
    notBefore: new Date(now - 2 * DAY),
    notAfter: new Date(now - DAY),
  });
  future = await issueCert(root, { subject: 'CN=future', notBefore: new Date(now + DAY) });
  server = await serverCert(root);
  self = await selfSigned({ subject: 'CN=self,O=Example', san: { uri: ['https://client.example.com'] } });
  other = await makeCa({ subject: 'CN=Another Root' });
  otherLeaf = await issueCert(other, { subject: 'CN=stranger' });
  const certs = { root, inter, leaf, underInter, rsa, serverOnly, noEku, expired, future, server, self };
  files = await writePems({
    ...Object.fromEntries(Object.entries(certs).map(([name, c]) => [`${name}.pem`, c.certPem])),
    'leaf.key': leaf.keyPem,
  });
  dirs.push(path.dirname(file('root.pem')));
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('openssl verify', () => {
  it('accepts a leaf under the root', () => {
    const run = openssl(['verify', '-CAfile', file('root.pem'), file('leaf.pem')]);
    expect(run.out.trim()).toBe(`${file('leaf.pem')}: OK`);
    expect(run.status).toBe(0);
  });

  it('accepts an RSA leaf, the server certificate, and the self-signed one as its own anchor', () => {
    for (const [ca, name] of [
      ['root.pem', 'rsa.pem'],
      ['root.pem', 'server.pem'],
      ['self.pem', 'self.pem'],
    ] as const) {
      expect(openssl(['verify', '-CAfile', file(ca), file(name)]).out.trim()).toBe(`${file(name)}: OK`);
    }
  });

  it('accepts a leaf under an intermediate given as untrusted, and not without it', () => {
    const chained = openssl([
      'verify',
      '-CAfile',
      file('root.pem'),
      '-untrusted',
      file('inter.pem'),
      file('underInter.pem'),
    ]);
    expect(chained.out.trim()).toBe(`${file('underInter.pem')}: OK`);
    const alone = openssl(['verify', '-CAfile', file('root.pem'), file('underInter.pem')]);
    expect(alone.status).not.toBe(0);
    expect(alone.out).toContain('unable to get local issuer certificate');
    const inter = openssl(['verify', '-CAfile', file('root.pem'), file('inter.pem')]);
    expect(inter.out.trim()).toBe(`${file('inter.pem')}: OK`);
  });

  it('-purpose sslclient passes clientAuth and no EKU, and refuses serverAuth alone', () => {
    const client = (name: string) =>
      openssl(['verify', '-CAfile', file('root.pem'), '-purpose', 'sslclient', file(name)]);
    expect(client('leaf.pem').out.trim()).toBe(`${file('leaf.pem')}: OK`);
    expect(client('rsa.pem').out.trim()).toBe(`${file('rsa.pem')}: OK`);
    expect(client('noEku.pem').out.trim()).toBe(`${file('noEku.pem')}: OK`);
    const refused = client('serverOnly.pem');
    expect(refused.status).not.toBe(0);
    expect(refused.out).toContain('unsuitable certificate purpose');
    const sslserver = openssl([
      'verify',
      '-CAfile',
      file('root.pem'),
      '-purpose',
      'sslserver',
      file('server.pem'),
    ]);
    expect(sslserver.out.trim()).toBe(`${file('server.pem')}: OK`);
    expect(client('server.pem').out).toContain('unsuitable certificate purpose');
  });

  it('refuses an expired leaf and one not yet valid', () => {
    const old = openssl(['verify', '-CAfile', file('root.pem'), file('expired.pem')]);
    expect(old.status).not.toBe(0);
    expect(old.out).toContain('certificate has expired');
    const early = openssl(['verify', '-CAfile', file('root.pem'), file('future.pem')]);
    expect(early.status).not.toBe(0);
    expect(early.out).toContain('certificate is not yet valid');
  });

  it('refuses a leaf of another root', async () => {
    const { 'stranger.pem': stranger } = await writePems({ 'stranger.pem': otherLeaf.certPem });
    dirs.push(path.dirname(stranger!));
    const run = openssl(['verify', '-CAfile', file('root.pem'), stranger!]);
    expect(run.status).not.toBe(0);
    expect(run.out).toContain('unable to get local issuer certificate');
  });
});

describe('names and extensions', () => {
  const subjectOf = (name: string) =>
    openssl(['x509', '-in', file(name), '-noout', '-subject', '-nameopt', 'RFC2253']).out.trim();
  const issuerOf = (name: string) =>
    openssl(['x509', '-in', file(name), '-noout', '-issuer', '-nameopt', 'RFC2253']).out.trim();
  const ext = (name: string, which: string) =>
    openssl(['x509', '-in', file(name), '-noout', '-ext', which]).out;

  it('prints each subject exactly as given, and each issuer as its authority’s name', () => {
    expect(subjectOf('leaf.pem')).toBe(`subject=${SUBJECT}`);
    expect(subjectOf('root.pem')).toBe('subject=CN=Tessera Test Root CA');
    expect(root.name).toBe('CN=Tessera Test Root CA');
    expect(subjectOf('inter.pem')).toBe('subject=CN=Tessera Test Intermediate CA,O=Tessera');
    expect(subjectOf('self.pem')).toBe('subject=CN=self,O=Example');
    expect(issuerOf('self.pem')).toBe('issuer=CN=self,O=Example');
    expect(issuerOf('root.pem')).toBe(`issuer=${root.name}`);
    expect(issuerOf('inter.pem')).toBe(`issuer=${root.name}`);
    expect(issuerOf('leaf.pem')).toBe(`issuer=${root.name}`);
    expect(issuerOf('underInter.pem')).toBe(`issuer=${inter.name}`);
  });

  it('encodes the RDNs most significant first (C, O, CN for CN=…,O=…,C=…)', () => {
    expect(new X509Certificate(leaf.certPem).subject).toBe('C=US\nO=Example\nCN=worker');
  });

  it('round-trips longer subjects and an escaped comma', async () => {
    const subjects = [
      'CN=svc-a,OU=Payments,O=Example Corp,L=Springfield,ST=Illinois,C=US',
      'CN=Doe\\, John,O=Example',
      'CN=a+OU=b,O=Example',
      'CN=one',
    ];
    const certs = await Promise.all(subjects.map((subject) => issueCert(root, { subject })));
    const written = await writePems(Object.fromEntries(certs.map((c, i) => [`s${i}.pem`, c.certPem])));
    dirs.push(path.dirname(written['s0.pem']!));
    subjects.forEach((subject, i) => {
      const printed = openssl([
        'x509',
        '-in',
        written[`s${i}.pem`]!,
        '-noout',
        '-subject',
        '-nameopt',
        'RFC2253',
      ]);
      expect(printed.out.trim()).toBe(`subject=${subject}`);
    });
  });

  it('prints the SANs', () => {
    expect(ext('leaf.pem', 'subjectAltName')).toContain(
      'DNS:worker.example.com, DNS:alt.example.com, URI:spiffe://example.com/ns/prod/sa/worker, ' +
        'IP Address:10.1.2.3, IP Address:2001:DB8:0:0:0:0:0:7, email:worker@example.com',
    );
    expect(ext('server.pem', 'subjectAltName')).toContain(
      'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    expect(ext('self.pem', 'subjectAltName')).toContain('URI:https://client.example.com');
    expect(ext('rsa.pem', 'subjectAltName')).not.toContain('Subject Alternative Name');
  });

  it('gives a CA critical cA=true and keyCertSign+cRLSign, a key id, and its issuer’s', () => {
    const rootExt = ext('root.pem', 'basicConstraints,keyUsage');
    expect(rootExt).toMatch(/Basic Constraints: critical\s+CA:TRUE\n/);
    expect(rootExt).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign\n/);
    expect(ext('inter.pem', 'basicConstraints')).toMatch(/critical\s+CA:TRUE, pathlen:0\n/);
    const rootSki = ext('root.pem', 'subjectKeyIdentifier').split('\n')[1]!.trim();
    expect(rootSki).toMatch(/^([0-9A-F]{2}:){19}[0-9A-F]{2}$/);
    expect(ext('inter.pem', 'authorityKeyIdentifier')).toContain(rootSki);
    expect(ext('leaf.pem', 'authorityKeyIdentifier')).toContain(rootSki);
  });

  it('gives a leaf cA=false, digitalSignature (keyEncipherment for RSA), its EKU, and key ids', () => {
    expect(ext('leaf.pem', 'basicConstraints')).toMatch(/CA:FALSE\n/);
    expect(ext('leaf.pem', 'keyUsage')).toMatch(/critical\s+Digital Signature\n/);
    expect(ext('rsa.pem', 'keyUsage')).toMatch(/critical\s+Digital Signature, Key Encipherment\n/);
    expect(ext('leaf.pem', 'extendedKeyUsage')).toMatch(/TLS Web Client Authentication\n/);
    expect(ext('server.pem', 'extendedKeyUsage')).toMatch(/TLS Web Server Authentication\n/);
    expect(ext('noEku.pem', 'extendedKeyUsage')).not.toContain('Extended Key Usage');
    expect(ext('leaf.pem', 'subjectKeyIdentifier')).toMatch(/([0-9A-F]{2}:){19}[0-9A-F]{2}/);
    const interSki = ext('inter.pem', 'subjectKeyIdentifier').split('\n')[1]!.trim();
    expect(ext('underInter.pem', 'authorityKeyIdentifier')).toContain(interSki);
    // Node reads the EKU as `keyUsage`: undefined when the extension is absent.
    expect(new X509Certificate(noEku.certPem).keyUsage).toBeUndefined();
    expect(new X509Certificate(serverOnly.certPem).keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(new X509Certificate(leaf.certPem).keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
  });

  it('draws random positive serial numbers', () => {
    const all = [root, inter, leaf, underInter, rsa, serverOnly, noEku, expired, future, server, self];
    const serials = all.map((c) => new X509Certificate(c.certPem).serialNumber);
    expect(new Set(serials).size).toBe(all.length);
    for (const serial of serials) expect(serial).toMatch(/^[4-7][0-9A-F]{31}$/);
    expect(openssl(['x509', '-in', file('leaf.pem'), '-noout', '-serial']).out.trim()).toBe(
      `serial=${serials[2]}`,
    );
  });

  it('sets the validity asked for, and by default an hour ago to a day on', () => {
    const c = new X509Certificate(leaf.certPem);
    const now = Date.now();
    expect(Math.abs(Date.parse(c.validFrom) - (now - 3_600_000))).toBeLessThan(60_000);
    expect(Math.abs(Date.parse(c.validTo) - (now + DAY))).toBeLessThan(60_000);
    expect(Date.parse(new X509Certificate(expired.certPem).validTo)).toBeLessThan(now);
  });
});

describe('encodings and keys', () => {
  it('x5t is the base64url SHA-256 of the DER as OpenSSL writes it', () => {
    for (const name of ['leaf.pem', 'rsa.pem', 'self.pem', 'root.pem']) {
      const der = openssl(['x509', '-in', file(name), '-outform', 'DER']).stdout;
      const digest = openssl(['dgst', '-sha256', '-binary'], der).stdout;
      const issued = { 'leaf.pem': leaf, 'rsa.pem': rsa, 'self.pem': self, 'root.pem': root }[name]!;
      expect(issued.der.equals(der)).toBe(true);
      expect(issued.x5t).toBe(digest.toString('base64url'));
      expect(issued.x5t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
  });

  it('Node’s X509Certificate parses every kind, each issued by its authority', () => {
    const pairs: [Issued, Issued][] = [
      [root, root],
      [inter, root],
      [leaf, root],
      [underInter, inter],
      [rsa, root],
      [serverOnly, root],
      [noEku, root],
      [expired, root],
      [future, root],
      [server, root],
      [otherLeaf, other],
    ];
    for (const [cert, by] of pairs) {
      const c = new X509Certificate(cert.certPem);
      const ca = new X509Certificate(by.certPem);
      expect(c.raw.equals(cert.der)).toBe(true);
      expect(c.checkIssued(ca)).toBe(true);
      expect(c.verify(ca.publicKey)).toBe(true);
    }
    expect(new X509Certificate(root.certPem).ca).toBe(true);
    expect(new X509Certificate(inter.certPem).ca).toBe(true);
    expect(new X509Certificate(leaf.certPem).ca).toBe(false);
    expect(new X509Certificate(self.certPem).ca).toBe(false);
    expect(new X509Certificate(server.certPem).checkHost('localhost')).toBe('localhost');
    expect(new X509Certificate(server.certPem).checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(new X509Certificate(server.certPem).checkIP('::1')).toBe('::1');
  });

  it('keyPem is PKCS#8 of the certificate’s key, publicJwk its public half', () => {
    for (const [issued, type, kty] of [
      [leaf, 'ec', 'EC'],
      [rsa, 'rsa', 'RSA'],
      [root, 'ec', 'EC'],
      [self, 'ec', 'EC'],
    ] as const) {
      expect(issued.keyPem).toMatch(
        /^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/=\n]+-----END PRIVATE KEY-----\n$/,
      );
      const key = createPrivateKey(issued.keyPem);
      expect(key.asymmetricKeyType).toBe(type);
      const certKey = new X509Certificate(issued.certPem).publicKey;
      expect(createPublicKey(key).equals(certKey)).toBe(true);
      expect(createPublicKey({ key: issued.publicJwk, format: 'jwk' }).equals(certKey)).toBe(true);
      expect(issued.publicJwk.kty).toBe(kty);
      expect(Object.keys(issued.publicJwk).sort()).toEqual(
        kty === 'EC' ? ['crv', 'kty', 'x', 'y'] : ['e', 'kty', 'n'],
      );
    }
    expect(leaf.publicJwk.crv).toBe('P-256');
    expect(openssl(['pkey', '-in', file('leaf.key'), '-noout']).status).toBe(0);
  });

  it('privateKey signs with jose: ES256 for P-256, RS256 for RSA', async () => {
    for (const [issued, alg] of [
      [leaf, 'ES256'],
      [rsa, 'RS256'],
      [self, 'ES256'],
    ] as const) {
      const jwt = await new SignJWT({ sub: 'worker' }).setProtectedHeader({ alg }).sign(issued.privateKey);
      const { payload } = await jwtVerify(jwt, createPublicKey(issued.certPem), { algorithms: [alg] });
      expect(payload.sub).toBe('worker');
    }
  });

  it('selfSigned’s jwk is the public JWK with alg ES256 and x5c, the DER in standard base64', () => {
    expect(self.jwk).toEqual({ ...self.publicJwk, alg: 'ES256', x5c: [self.der.toString('base64')] });
    expect(self.jwk).not.toHaveProperty('d');
    expect(Buffer.from(self.jwk.x5c[0]!, 'base64').equals(self.der)).toBe(true);
    const c = new X509Certificate(self.certPem);
    expect(c.subject).toBe(c.issuer);
    expect(c.verify(c.publicKey)).toBe(true);
    // A leaf's keyUsage (digitalSignature, no keyCertSign) keeps OpenSSL from counting it as its own
    // issuer: X509_check_issued answers "key usage does not include certificate signing".
    // self_signed_tls_client_auth matches the certificate against the client's registered key (RFC 8705
    // §2.2), not through a chain.
    expect(c.checkIssued(c)).toBe(false);
  });

  it('writePems writes each file into a new directory and names its path', async () => {
    const a = await writePems({ 'ca.pem': root.certPem, 'client.key': leaf.keyPem });
    const b = await writePems({ 'ca.pem': root.certPem });
    dirs.push(path.dirname(a['ca.pem']!), path.dirname(b['ca.pem']!));
    expect(Object.keys(a)).toEqual(['ca.pem', 'client.key']);
    expect(path.isAbsolute(a['ca.pem']!)).toBe(true);
    expect(path.dirname(a['client.key']!)).toBe(path.dirname(a['ca.pem']!));
    expect(path.dirname(a['ca.pem']!)).not.toBe(path.dirname(b['ca.pem']!));
    expect(readFileSync(a['ca.pem']!, 'utf8')).toBe(root.certPem);
    expect(readFileSync(a['client.key']!, 'utf8')).toBe(leaf.keyPem);
    expect(statSync(a['client.key']!).mode & 0o777).toBe(0o600);
  });
});

interface Seen {
  /** The server's view. */
  authorized: boolean;
  authorizationError: string | null;
  peer: Buffer | null;
  /** Whether the client accepted the server's certificate. */
  clientAuthorized: boolean;
}

/** A mutual-TLS handshake with a server on `server`'s certificate, which asks for a client's but needs none. */
async function handshake(client: { cert?: string; key?: string }): Promise<Seen> {
  const tlsServer = createServer({
    key: server.keyPem,
    cert: server.certPem,
    requestCert: true,
    rejectUnauthorized: false,
    ca: root.certPem,
  });
  const seen = new Promise<Omit<Seen, 'clientAuthorized'>>((resolve, reject) => {
    tlsServer.on('tlsClientError', reject);
    tlsServer.on('secureConnection', (socket: TLSSocket) => {
      const peer = socket.getPeerX509Certificate();
      resolve({
        authorized: socket.authorized,
        authorizationError: socket.authorizationError ? String(socket.authorizationError) : null,
        peer: peer ? peer.raw : null,
      });
      socket.end();
    });
  });
  await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = tlsServer.address() as { port: number };
    const clientAuthorized = await new Promise<boolean>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, ca: root.certPem, ...client }, () => {
        resolve(socket.authorized);
        socket.on('end', () => socket.end());
      });
      socket.on('error', reject);
    });
    return { ...(await seen), clientAuthorized };
  } finally {
    await new Promise((resolve) => tlsServer.close(resolve));
  }
}

describe('node:tls', () => {
  it('the server sees a good client certificate, authorized, and the client trusts the server', async () => {
    const seen = await handshake({ cert: leaf.certPem, key: leaf.keyPem });
    expect(seen).toEqual({
      authorized: true,
      authorizationError: null,
      peer: leaf.der,
      clientAuthorized: true,
    });
  });

  it('an RSA client certificate, and one under the intermediate with the chain sent', async () => {
    expect((await handshake({ cert: rsa.certPem, key: rsa.keyPem })).authorized).toBe(true);
    const chained = await handshake({ cert: underInter.certPem + inter.certPem, key: underInter.keyPem });
    expect(chained).toMatchObject({ authorized: true, peer: underInter.der });
  });

  it('a self-signed or foreign certificate is seen, not authorized; without one none is seen', async () => {
    expect(await handshake({ cert: self.certPem, key: self.keyPem })).toMatchObject({
      authorized: false,
      peer: self.der,
    });
    const stranger = await handshake({ cert: otherLeaf.certPem, key: otherLeaf.keyPem });
    expect(stranger).toMatchObject({ authorized: false, peer: otherLeaf.der });
    expect(stranger.authorizationError).toMatch(/UNABLE_TO_(GET_ISSUER_CERT_LOCALLY|VERIFY_LEAF_SIGNATURE)/);
    expect(await handshake({})).toMatchObject({ authorized: false, peer: null });
  });
});
