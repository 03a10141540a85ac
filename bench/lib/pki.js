// The certificates of the mutual-TLS scenarios (RFC 8705; lib/scenarios.js): made once a run, at the start of the
// first scenario that needs them, with the openssl CLI into a temporary directory, removed at the end. A server CA
// and a certificate of Tessera's HTTPS for 127.0.0.1 (and localhost); a client CA and one client certificate whose
// subjectAltName is a SPIFFE ID, which the tls_client_auth client is registered with. All keys EC P-256.
import { execFileSync } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The client certificate's identity: its one URI subjectAltName, the client's tls_client_auth_san_uri. */
export const CLIENT_SAN_URI = 'spiffe://bench.example/ns/load/sa/client';

const openssl = (dir, args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });

/** A new EC P-256 key in `dir/<name>.key`. */
function ecKey(dir, name) {
  openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`]);
}

/** A self-signed CA `dir/<name>.pem` (and its key), valid for two days. */
function ca(dir, name, subject) {
  ecKey(dir, name);
  openssl(dir, [
    'req',
    '-x509',
    '-new',
    '-key',
    `${name}.key`,
    '-sha256',
    '-days',
    '2',
    '-subj',
    subject,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    `${name}.pem`,
  ]);
}

/** A certificate `dir/<name>.pem` (and its key) issued by the CA `issuer`, with the extensions `extensions`. */
function issued(dir, name, issuer, subject, extensions) {
  ecKey(dir, name);
  openssl(dir, ['req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`]);
  writeFileSync(join(dir, `${name}.ext`), extensions.join('\n') + '\n');
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${issuer}.pem`,
    '-CAkey',
    `${issuer}.key`,
    '-set_serial',
    `0x${randomBytes(12).toString('hex')}`,
    '-sha256',
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  ]);
}

/**
 * The run's PKI, made now in a temporary directory (removed by the cleanup pushed to `cleanups`): the files the
 * server is started with (serverCert, serverKey, clientCaFile), the PEM texts the load generator connects with (ca,
 * clientCert, clientKey), and the client certificate as an RFC 9440 Client-Cert header value (`:<base64 DER>:`).
 */
export function makePki(cleanups) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-bench-pki-'));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  ca(dir, 'server-ca', '/O=Tessera bench/CN=Tessera bench server CA');
  issued(dir, 'server', 'server-ca', '/O=Tessera bench/CN=127.0.0.1', [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=serverAuth',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ]);
  ca(dir, 'client-ca', '/O=Tessera bench/CN=Tessera bench client CA');
  issued(dir, 'client', 'client-ca', '/O=Tessera bench/CN=load client', [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=clientAuth',
    `subjectAltName=URI:${CLIENT_SAN_URI}`,
  ]);
  const text = (name) => readFileSync(join(dir, name), 'utf8');
  const clientCert = text('client.pem');
  return {
    dir,
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCaFile: join(dir, 'client-ca.pem'),
    ca: text('server-ca.pem'),
    clientCert,
    clientKey: text('client.key'),
    clientSanUri: CLIENT_SAN_URI,
    clientCertHeader: `:${new X509Certificate(clientCert).raw.toString('base64')}:`,
  };
}

/**
 * A fetch that trusts the server CA `ca` (PEM) for https URLs: undici's own fetch with an Agent of its own (undici
 * 7, a devDependency; loaded only by the TLS scenarios). Node's global fetch has no option for a CA.
 */
export async function httpsFetch(ca) {
  const { Agent, fetch } = await import('undici');
  const dispatcher = new Agent({ connect: { ca } });
  return (url, init = {}) => fetch(url, { ...init, dispatcher });
}
