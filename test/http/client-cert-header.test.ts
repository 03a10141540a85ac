import { execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_CERT_HEADERS, forwardedCertificate } from '../../src/http/client-cert-header.js';

/**
 * A client certificate as a TLS-terminating proxy forwards it (src/http/client-cert-header.ts): real certificates
 * made with the openssl CLI (a root CA, an intermediate, a leaf), each header written out as its proxy writes it
 * (RFC 9440 Appendix A; Envoy's XFCC as conn_manager_utility.cc builds it; nginx's $ssl_client_escaped_cert and
 * $ssl_client_cert), and what the header does not parse refused with its reason.
 */

interface Pki {
  der: Buffer;
  pem: string;
  /** The subject as Envoy puts it in XFCC: X509_NAME_print_ex with XN_FLAG_RFC2253. */
  subject: string;
}

let dir: string;
let root: Pki;
let intermediate: Pki;
let leaf: Pki;
/** Another client's certificate, signed by the root: what an earlier hop saw. */
let other: Pki;
let serial = 1;

function openssl(...args: string[]): string {
  return execFileSync('openssl', args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A P-256 key and a certificate for `subject`, signed by `issuer` (or by itself), with `extensions`. */
function certificate(name: string, subject: string, issuer: string | undefined, extensions: string[]): Pki {
  writeFileSync(join(dir, `${name}.ext`), extensions.join('\n') + '\n');
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`];
  openssl('req', '-new', ...key, '-subj', subject, '-out', `${name}.csr`);
  const signer =
    issuer === undefined ? ['-signkey', `${name}.key`] : ['-CA', `${issuer}.pem`, '-CAkey', `${issuer}.key`];
  openssl(
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    ...signer,
    '-set_serial',
    String(serial++),
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  );
  openssl('x509', '-in', `${name}.pem`, '-outform', 'DER', '-out', `${name}.der`);
  const printed = openssl('x509', '-in', `${name}.pem`, '-noout', '-subject', '-nameopt', 'RFC2253').trim();
  return {
    der: readFileSync(join(dir, `${name}.der`)),
    pem: readFileSync(join(dir, `${name}.pem`), 'utf8'),
    subject: printed.replace(/^subject=/, ''),
  };
}

const CA = ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign'];
const CLIENT = [
  'basicConstraints=critical,CA:FALSE',
  'keyUsage=critical,digitalSignature',
  'extendedKeyUsage=clientAuth',
];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-client-cert-'));
  root = certificate('root', '/CN=Tessera Test Root CA', undefined, CA);
  intermediate = certificate('intermediate', '/CN=Tessera Test Intermediate CA', 'root', [
    'basicConstraints=critical,CA:TRUE,pathlen:0',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  // A DER whose length is not a multiple of 3, so that its base64 ends in "=" padding (tested without it). An
  // ECDSA signature is 70 to 72 bytes, so a few tries find one.
  for (let i = 0; ; i++) {
    leaf = certificate('leaf', '/O=Example, Inc./OU=Payments/CN=client-1', 'intermediate', [
      ...CLIENT,
      'subjectAltName=URI:spiffe://example.org/client-1,DNS:client-1.example.org,DNS:client-1.example.net',
    ]);
    if (leaf.der.length % 3 !== 0 || i === 20) break;
  }
  other = certificate('other', '/CN=someone-else', 'root', CLIENT);
}, 30_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** RFC 8941 §4.1.8: a Byte Sequence is ":" base64 ":". */
const sf = (der: Buffer): string => `:${der.toString('base64')}:`;

/** Envoy's URL-encoding of a PEM (urlEncodedPemEncodedPeerCertificate): exactly these five replacements. */
const envoyEncoded = (pem: string): string =>
  pem.replace(/[\n +/=]/g, (c) => ({ '\n': '%0A', ' ': '%20', '+': '%2B', '/': '%2F', '=': '%3D' })[c]!);

/** nginx's ngx_escape_uri(NGX_ESCAPE_URI_COMPONENT): everything but ALPHA, DIGIT, "-", ".", "_", "~". */
const nginxEscaped = (pem: string): string =>
  pem.replace(/[^A-Za-z0-9._~-]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0'));

/** nginx's $ssl_client_cert: a tab after every line break but the last (ngx_ssl_get_certificate). */
const nginxTabbed = (pem: string): string => pem.slice(0, -1).replaceAll('\n', '\n\t');

const sha256 = (der: Buffer): string => createHash('sha256').update(der).digest('hex');

/** XFCC's element for the client's certificate, as Envoy writes it with Cert, Chain, Subject, URI and DNS. */
function envoyElement(
  by: string,
  client: Pki,
  chain: Pki[] | undefined,
  details = ['Cert', 'Subject', 'URI', 'DNS'],
) {
  const pairs = [`By=${by}`, `Hash=${sha256(client.der)}`];
  for (const detail of details) {
    if (detail === 'Cert') pairs.push(`Cert="${envoyEncoded(client.pem)}"`);
    if (detail === 'Chain')
      pairs.push(`Chain="${envoyEncoded([client, ...(chain ?? [])].map((c) => c.pem).join(''))}"`);
    if (detail === 'Subject') pairs.push(`Subject="${client.subject}"`);
    if (detail === 'URI') pairs.push('URI=spiffe://example.org/client-1');
    if (detail === 'DNS') pairs.push('DNS=client-1.example.org', 'DNS=client-1.example.net');
  }
  return pairs.join(';');
}

const rfc9440 = (headers: IncomingHttpHeaders) => forwardedCertificate('client-cert', headers);
const envoy = (value: string | string[] | undefined) =>
  forwardedCertificate('x-forwarded-client-cert', { 'x-forwarded-client-cert': value });
const nginx = (value: string | string[] | undefined) =>
  forwardedCertificate('ssl-client-cert', { 'ssl-client-cert': value });

describe('the test certificates', () => {
  it('chain: the leaf is signed by the intermediate, the intermediate by the root', () => {
    const [l, i, r] = [leaf, intermediate, root].map((c) => new X509Certificate(c.der));
    expect(l!.verify(i!.publicKey) && l!.checkIssued(i!)).toBe(true);
    expect(i!.verify(r!.publicKey) && i!.ca && r!.ca).toBe(true);
    expect(l!.ca).toBe(false);
  });
});

describe('the header names', () => {
  it('are the three TESSERA_CLIENT_CERT_HEADER takes', () => {
    expect(CLIENT_CERT_HEADERS).toEqual(['client-cert', 'x-forwarded-client-cert', 'ssl-client-cert']);
  });

  it('a header absent, empty or blank is no certificate, in every format', () => {
    for (const kind of CLIENT_CERT_HEADERS) {
      expect(forwardedCertificate(kind, {})).toBeUndefined();
      expect(forwardedCertificate(kind, { [kind]: '' })).toBeUndefined();
      expect(forwardedCertificate(kind, { [kind]: ' \t ' })).toBeUndefined();
      expect(forwardedCertificate(kind, { [kind]: [] })).toBeUndefined();
      expect(forwardedCertificate(kind, { [kind]: [''] })).toBeUndefined();
    }
  });

  it('each format reads only its own header', () => {
    const headers = {
      'x-forwarded-client-cert': envoyElement('spiffe://example.org/proxy', leaf, undefined),
      'ssl-client-cert': nginxEscaped(leaf.pem),
    };
    expect(forwardedCertificate('client-cert', headers)).toBeUndefined();
    expect(forwardedCertificate('ssl-client-cert', { 'client-cert': sf(leaf.der) })).toBeUndefined();
    expect(
      forwardedCertificate('x-forwarded-client-cert', { 'ssl-client-cert': nginxEscaped(leaf.pem) }),
    ).toBeUndefined();
  });

  it('a headers object that throws is a header that could not be read, not an exception', () => {
    const headers = Object.defineProperty({}, 'client-cert', {
      get() {
        throw new Error('boom');
      },
    }) as IncomingHttpHeaders;
    expect(forwardedCertificate('client-cert', headers)).toEqual({
      malformed: 'the header could not be read',
    });
  });
});

describe('RFC 9440: Client-Cert and Client-Cert-Chain', () => {
  it('Client-Cert alone: the leaf, no chain', () => {
    expect(rfc9440({ 'client-cert': sf(leaf.der) })).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('Client-Cert-Chain as in Appendix A: the intermediates (and the root) in TLS order, comma-separated', () => {
    const headers = {
      'client-cert': sf(leaf.der),
      'client-cert-chain': `${sf(intermediate.der)}, ${sf(root.der)}`,
    };
    expect(rfc9440(headers)).toEqual({ leaf: leaf.der, chain: [intermediate.der, root.der] });
  });

  it('a chain split over header lines (Node joins them with ", "; or an array) is still one list', () => {
    const expected = { leaf: leaf.der, chain: [intermediate.der, root.der] };
    const lines = [sf(intermediate.der), sf(root.der)];
    expect(rfc9440({ 'client-cert': sf(leaf.der), 'client-cert-chain': lines })).toEqual(expected);
    expect(rfc9440({ 'client-cert': [sf(leaf.der)], 'client-cert-chain': lines.join(', ') })).toEqual(
      expected,
    );
    // RFC 8941 §3.1: OWS, tabs included, around the commas.
    expect(rfc9440({ 'client-cert': sf(leaf.der), 'client-cert-chain': lines.join('\t,\t') })).toEqual(
      expected,
    );
    expect(rfc9440({ 'client-cert': sf(leaf.der), 'client-cert-chain': lines.join(',') })).toEqual(expected);
  });

  it('an empty Client-Cert-Chain is no chain; Client-Cert-Chain without Client-Cert is no certificate', () => {
    expect(rfc9440({ 'client-cert': sf(leaf.der), 'client-cert-chain': '' })).toEqual({
      leaf: leaf.der,
      chain: [],
    });
    expect(rfc9440({ 'client-cert-chain': sf(intermediate.der) })).toBeUndefined();
    expect(rfc9440({ 'client-cert': '', 'client-cert-chain': sf(intermediate.der) })).toBeUndefined();
  });

  it('parameters on the items (RFC 8941 §4.2.3.2) are parsed and ignored', () => {
    const parameters = ';a=1;b="x \\" y";c=?1;d;e=tok/en:1;f=-1.25;g=:AAE=:; h=*';
    const headers = {
      'client-cert': sf(leaf.der) + parameters,
      'client-cert-chain': `${sf(intermediate.der)};x=1, ${sf(root.der)}${parameters}`,
    };
    expect(rfc9440(headers)).toEqual({ leaf: leaf.der, chain: [intermediate.der, root.der] });
  });

  it('base64 without its "=" padding is read (RFC 8941 §4.2.7: parsers SHOULD NOT fail on it)', () => {
    expect(leaf.der.length % 3).not.toBe(0);
    const unpadded = `:${leaf.der.toString('base64').replace(/=+$/, '')}:`;
    expect(rfc9440({ 'client-cert': unpadded })).toEqual({ leaf: leaf.der, chain: [] });
  });

  it.each([
    [
      'base64 without its colons',
      () => leaf.der.toString('base64'),
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'no closing colon',
      () => `:${leaf.der.toString('base64')}`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    ['text after the item', () => `${sf(leaf.der)} x`, 'Client-Cert is not a structured-field byte sequence'],
    [
      'two Client-Cert lines, joined by Node',
      () => `${sf(leaf.der)}, ${sf(other.der)}`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'a parameter key in upper case',
      () => `${sf(leaf.der)};A=1`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'a parameter value of no type',
      () => `${sf(leaf.der)};a=<1>`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'a parameter string unterminated',
      () => `${sf(leaf.der)};a="x`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'a parameter decimal with 4 decimals',
      () => `${sf(leaf.der)};a=1.2345`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'a parameter integer of 16 digits',
      () => `${sf(leaf.der)};a=1234567890123456`,
      'Client-Cert is not a structured-field byte sequence',
    ],
    [
      'a character outside the alphabet',
      () => `:*${leaf.der.toString('base64')}:`,
      'Client-Cert is not valid base64',
    ],
    ['base64url', () => `:${leaf.der.toString('base64url')}:`, 'Client-Cert is not valid base64'],
    [
      'line breaks in the base64',
      () => `:${leaf.der.toString('base64').replace(/(.{64})/g, '$1\n')}:`,
      'Client-Cert is not valid base64',
    ],
    [
      'a space in the base64',
      () => `:${leaf.der.toString('base64').slice(0, 10)} ${leaf.der.toString('base64').slice(10)}:`,
      'Client-Cert is not valid base64',
    ],
    ['"=" inside the base64', () => `:QQ==QUFB:`, 'Client-Cert is not valid base64'],
    ['too much padding', () => `:QUE==:`, 'Client-Cert is not valid base64'],
    ['a last quantum of one character', () => `:QUFBQ:`, 'Client-Cert is not valid base64'],
    ['an empty byte sequence', () => '::', 'the certificate does not parse'],
    [
      'garbage DER',
      () => `:${Buffer.from('not a certificate').toString('base64')}:`,
      'the certificate does not parse',
    ],
    [
      'the DER cut short',
      () => sf(leaf.der.subarray(0, leaf.der.length - 10)),
      'the certificate does not parse',
    ],
    [
      'bytes after the DER',
      () => sf(Buffer.concat([leaf.der, Buffer.from([0])])),
      'the certificate does not parse',
    ],
    ['PEM text in the byte sequence', () => sf(Buffer.from(leaf.pem)), 'the certificate does not parse'],
    [
      'a certificate over 16 KiB',
      () => sf(Buffer.alloc(16 * 1024 + 1)),
      'a certificate is larger than 16 KiB',
    ],
    ['a header over 64 KiB', () => `:${'A'.repeat(64 * 1024 - 1)}:`, 'Client-Cert is larger than 64 KiB'],
  ])('Client-Cert: %s', (_, value, why) => {
    expect(rfc9440({ 'client-cert': value() })).toEqual({ malformed: why });
  });

  it.each([
    [
      'a trailing comma',
      () => `${sf(intermediate.der)},`,
      'Client-Cert-Chain is not a structured-field list of byte sequences',
    ],
    [
      'an empty member',
      () => `${sf(intermediate.der)}, , ${sf(root.der)}`,
      'Client-Cert-Chain is not a structured-field list of byte sequences',
    ],
    [
      'an inner list',
      () => `(${sf(intermediate.der)} ${sf(root.der)})`,
      'Client-Cert-Chain is not a structured-field list of byte sequences',
    ],
    [
      'a token member',
      () => `${sf(intermediate.der)}, root`,
      'Client-Cert-Chain is not a structured-field list of byte sequences',
    ],
    [
      'no comma between members',
      () => `${sf(intermediate.der)} ${sf(root.der)}`,
      'Client-Cert-Chain is not a structured-field list of byte sequences',
    ],
    ['bad base64', () => `${sf(intermediate.der)}, :A-B_:`, 'Client-Cert-Chain is not valid base64'],
    ['garbage DER', () => `${sf(intermediate.der)}, :AAAA:`, 'the certificate does not parse'],
    [
      '11 certificates',
      () => Array(11).fill(sf(intermediate.der)).join(', '),
      'Client-Cert-Chain holds more than 10 certificates',
    ],
    [
      'a header over 64 KiB',
      () => `${sf(intermediate.der)}, :${'A'.repeat(64 * 1024)}:`,
      'Client-Cert-Chain is larger than 64 KiB',
    ],
  ])('Client-Cert-Chain: %s', (_, value, why) => {
    expect(rfc9440({ 'client-cert': sf(leaf.der), 'client-cert-chain': value() })).toEqual({
      malformed: why,
    });
  });

  it('10 chain certificates are taken', () => {
    const chain = Array(10).fill(sf(intermediate.der)).join(', ');
    expect(rfc9440({ 'client-cert': sf(leaf.der), 'client-cert-chain': chain })).toEqual({
      leaf: leaf.der,
      chain: Array(10).fill(intermediate.der),
    });
  });
});

describe("Envoy's x-forwarded-client-cert", () => {
  it("Envoy's element with By, Hash, Cert, Subject (quoted, with its commas), URI and DNS: the leaf", () => {
    const value = envoyElement('spiffe://example.org/ns/edge/sa/envoy', leaf, undefined);
    expect(leaf.subject).toContain('\\,'); // O=Example\, Inc.
    expect(envoy(value)).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('Chain, the whole chain with the leaf first: the chain is its certificates besides the leaf', () => {
    const value = envoyElement(
      'spiffe://example.org/proxy',
      leaf,
      [intermediate, root],
      ['Cert', 'Chain', 'Subject', 'URI'],
    );
    expect(envoy(value)).toEqual({ leaf: leaf.der, chain: [intermediate.der, root.der] });
  });

  it('Chain without Cert: the leaf is its first certificate', () => {
    const value = envoyElement('spiffe://example.org/proxy', leaf, [intermediate], ['Chain', 'Subject']);
    expect(envoy(value)).toEqual({ leaf: leaf.der, chain: [intermediate.der] });
  });

  it('two elements: the last is the nearest proxy, whose client is the one to authenticate', () => {
    // Envoy's example 2, with certificates: the edge proxy's element first, the nearest proxy's appended after ",".
    const edge = envoyElement('http://frontend.lyft.com', other, [root], ['Cert', 'Chain', 'Subject', 'URI']);
    const nearest = envoyElement(
      'http://backend.lyft.com',
      leaf,
      [intermediate],
      ['Cert', 'Chain', 'Subject'],
    );
    expect(envoy(`${edge},${nearest}`)).toEqual({ leaf: leaf.der, chain: [intermediate.der] });
    expect(envoy(`${nearest},${edge}`)).toEqual({ leaf: other.der, chain: [root.der] });
    // Two header lines, which Node joins with ", " (or hands over as an array).
    expect(envoy(`${edge}, ${nearest}`)).toEqual({ leaf: leaf.der, chain: [intermediate.der] });
    expect(envoy([edge, nearest])).toEqual({ leaf: leaf.der, chain: [intermediate.der] });
  });

  it('commas, semicolons, "=" and escaped quotes inside quoted values do not split', () => {
    const subject = 'Subject="CN=a\\,b;c=d,O=\\"Quoted\\", Inc.;x"';
    const edge = `By=spiffe://example.org/edge;${subject};URI=spiffe://example.org/x`;
    const nearest = `${subject};Cert="${envoyEncoded(leaf.pem)}";Subject="trailing \\\\"`;
    expect(envoy(`${edge},${nearest}`)).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('keys are case-insensitive; empty elements and pairs are skipped', () => {
    expect(envoy(`hash=${sha256(leaf.der)};cert="${envoyEncoded(leaf.pem)}"`)).toEqual({
      leaf: leaf.der,
      chain: [],
    });
    expect(
      envoy(`CERT="${envoyEncoded(leaf.pem)}";;CHAIN="${envoyEncoded(leaf.pem + intermediate.pem)}";`),
    ).toEqual({
      leaf: leaf.der,
      chain: [intermediate.der],
    });
    expect(envoy(`By=x;Cert="${envoyEncoded(leaf.pem)}",,`)).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('a Cert URL-encoded by another encoder (encodeURIComponent) reads the same', () => {
    expect(envoy(`Cert="${encodeURIComponent(leaf.pem)}"`)).toEqual({ leaf: leaf.der, chain: [] });
  });

  it("Envoy's documented examples (Hash, Subject, URI, DNS; no certificate) are no certificate", () => {
    // From Envoy's docs, verbatim: Tessera verifies chains itself and never trusts a Hash or Subject alone.
    const examples = [
      'By=http://frontend.lyft.com;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject="/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client";URI=http://testclient.lyft.com',
      'By=http://frontend.lyft.com;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;URI=http://testclient.lyft.com,By=http://backend.lyft.com;Hash=9ba61d6425303443c0748a02dd8de688468ed33be74eee6556d90c0149c1309e;URI=http://frontend.lyft.com',
      'By=http://frontend.lyft.com;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject="/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client";URI=http://testclient.lyft.com;DNS=lyft.com;DNS=www.lyft.com',
    ];
    for (const example of examples) expect(envoy(example)).toBeUndefined();
    // A certificate in an earlier element only: the nearest proxy forwarded none.
    expect(envoy(`${envoyElement('x', leaf, undefined)},${examples[0]}`)).toBeUndefined();
    expect(envoy(',, ,')).toBeUndefined();
  });

  it.each([
    [
      'an unterminated quoted value',
      () => `By=x;Cert="${envoyEncoded(leaf.pem)};Subject=CN=a`,
      'x-forwarded-client-cert has an unterminated quoted value',
    ],
    [
      'a backslash ending a quoted value',
      () => `Cert="${envoyEncoded(leaf.pem)}\\`,
      'x-forwarded-client-cert has an unterminated quoted value',
    ],
    [
      'text after a quoted value',
      () => `Cert="${envoyEncoded(leaf.pem)}"x`,
      'x-forwarded-client-cert has text after a quoted value',
    ],
    [
      'a key without a value',
      () => `By=x;Hash;Cert="${envoyEncoded(leaf.pem)}"`,
      'x-forwarded-client-cert has a key without a value',
    ],
    [
      'a value without a key',
      () => `By=x;="${envoyEncoded(leaf.pem)}"`,
      'x-forwarded-client-cert has a value without a key',
    ],
    [
      'two Certs',
      () => `Cert="${envoyEncoded(leaf.pem)}";cert="${envoyEncoded(other.pem)}"`,
      'the nearest XFCC element has more than one Cert',
    ],
    [
      'two Chains',
      () => `Chain="${envoyEncoded(leaf.pem)}";Chain="${envoyEncoded(leaf.pem)}"`,
      'the nearest XFCC element has more than one Chain',
    ],
    ['a Cert not URL-encoded', () => `Cert="${envoyEncoded(leaf.pem)}%ZZ"`, 'XFCC Cert is not URL-encoded'],
    [
      'a Cert that is not PEM',
      () => `Cert="${leaf.der.toString('base64')}"`,
      'XFCC Cert holds text outside its PEM certificates',
    ],
    ['an empty Cert', () => 'Cert=""', 'XFCC Cert holds no PEM certificate'],
    [
      'a Cert cut before its END line',
      () => `Cert="${envoyEncoded(leaf.pem.slice(0, 200))}"`,
      'XFCC Cert holds a PEM certificate without its END line',
    ],
    [
      'a Cert with lines missing',
      () => `Cert="${envoyEncoded(leaf.pem.split('\n').toSpliced(2, 2).join('\n'))}"`,
      'the certificate does not parse',
    ],
    [
      'a Cert whose base64 is not',
      () => `Cert="${envoyEncoded(leaf.pem.replace('MII', 'M*I'))}"`,
      'XFCC Cert holds a PEM certificate that is not valid base64',
    ],
    [
      'a Cert of two certificates',
      () => `Cert="${envoyEncoded(leaf.pem + other.pem)}"`,
      'XFCC Cert holds more than one certificate',
    ],
    [
      'a Cert of garbage DER',
      () => `Cert="${envoyEncoded(`-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n`)}"`,
      'the certificate does not parse',
    ],
    [
      'a Chain with garbage after it',
      () => `Chain="${envoyEncoded(leaf.pem)}%0Ajunk"`,
      'XFCC Chain holds text outside its PEM certificates',
    ],
    [
      'a Chain of 12, the leaf and 11 more',
      () => `Chain="${envoyEncoded(leaf.pem + intermediate.pem.repeat(11))}"`,
      'XFCC Chain holds more than 10 chain certificates',
    ],
    [
      'a Cert and a Chain of 11 without it',
      () => `Cert="${envoyEncoded(leaf.pem)}";Chain="${envoyEncoded(intermediate.pem.repeat(11))}"`,
      'XFCC Chain holds more than 10 chain certificates',
    ],
    [
      'a header over 64 KiB',
      () => `Subject="${'x'.repeat(64 * 1024)}";Cert="${envoyEncoded(leaf.pem)}"`,
      'x-forwarded-client-cert is larger than 64 KiB',
    ],
  ])('malformed: %s', (_, value, why) => {
    expect(envoy(value())).toEqual({ malformed: why });
  });

  it('a Chain of the leaf and 10 more is taken', () => {
    expect(envoy(`Chain="${envoyEncoded(leaf.pem + intermediate.pem.repeat(10))}"`)).toEqual({
      leaf: leaf.der,
      chain: Array(10).fill(intermediate.der),
    });
  });
});

describe("nginx's ssl-client-cert", () => {
  it('$ssl_client_escaped_cert (URL-encoded PEM): the leaf', () => {
    expect(nginxEscaped(leaf.pem)).not.toMatch(/[\n /+=]/);
    expect(nginx(nginxEscaped(leaf.pem))).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('$ssl_client_cert (a tab after each line break), and as it reads unfolded into spaces and tabs', () => {
    const tabbed = nginxTabbed(leaf.pem);
    expect(
      tabbed
        .split('\n')
        .slice(1)
        .every((line) => line.startsWith('\t')),
    ).toBe(true);
    expect(nginx(tabbed)).toEqual({ leaf: leaf.der, chain: [] });
    // RFC 9112 §5.2: a recipient replaces each obs-fold with SP.
    expect(nginx(tabbed.replaceAll('\n', ' '))).toEqual({ leaf: leaf.der, chain: [] });
    expect(nginx(tabbed.replaceAll('\n', ''))).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('a PEM whose line breaks became spaces', () => {
    expect(nginx(leaf.pem.trimEnd().replaceAll('\n', ' '))).toEqual({ leaf: leaf.der, chain: [] });
  });

  it('a bundle: the leaf first, then its chain', () => {
    const bundle = leaf.pem + intermediate.pem + root.pem;
    expect(nginx(nginxEscaped(bundle))).toEqual({ leaf: leaf.der, chain: [intermediate.der, root.der] });
    expect(nginx(nginxEscaped(leaf.pem + intermediate.pem.repeat(10)))).toEqual({
      leaf: leaf.der,
      chain: Array(10).fill(intermediate.der),
    });
  });

  it.each([
    ['not URL-encoded', () => nginxEscaped(leaf.pem) + '%', 'ssl-client-cert is not URL-encoded'],
    [
      'escapes that are not UTF-8',
      () => nginxEscaped(leaf.pem) + '%FF',
      'ssl-client-cert is not URL-encoded',
    ],
    [
      'base64 DER without the PEM lines',
      () => leaf.der.toString('base64'),
      'ssl-client-cert holds text outside its PEM certificates',
    ],
    [
      'a PEM cut before its END line',
      () => nginxEscaped(leaf.pem.slice(0, -30)),
      'ssl-client-cert holds a PEM certificate without its END line',
    ],
    [
      'a PEM cut in its base64',
      () => nginxEscaped(leaf.pem.slice(0, 100) + '\n-----END CERTIFICATE-----\n'),
      'the certificate does not parse',
    ],
    [
      'two BEGIN lines',
      () => nginxEscaped(leaf.pem.replace('\n', '\n-----BEGIN CERTIFICATE-----\n')),
      'ssl-client-cert holds a PEM certificate that is not valid base64',
    ],
    [
      'text before the PEM',
      () => nginxEscaped('subject=CN=client-1\n' + leaf.pem),
      'ssl-client-cert holds text outside its PEM certificates',
    ],
    [
      'two header lines, joined by Node',
      () => [nginxEscaped(leaf.pem), nginxEscaped(other.pem)],
      'ssl-client-cert holds text outside its PEM certificates',
    ],
    [
      'a private key',
      () => nginxEscaped(readFileSync(join(dir, 'leaf.key'), 'utf8')),
      'ssl-client-cert holds text outside its PEM certificates',
    ],
    [
      '11 chain certificates',
      () => nginxEscaped(leaf.pem + intermediate.pem.repeat(11)),
      'ssl-client-cert holds more than 10 chain certificates',
    ],
    [
      'a garbage chain certificate',
      () => nginxEscaped(leaf.pem + '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'),
      'the certificate does not parse',
    ],
    [
      'a certificate over 16 KiB',
      () => `${'-----BEGIN CERTIFICATE-----'}${'A'.repeat(22 * 1024)}-----END CERTIFICATE-----`,
      'a certificate is larger than 16 KiB',
    ],
    [
      'a header over 64 KiB',
      () => nginxEscaped(leaf.pem) + '%20'.repeat(22 * 1024),
      'ssl-client-cert is larger than 64 KiB',
    ],
  ])('malformed: %s', (_, value, why) => {
    expect(nginx(value())).toEqual({ malformed: why });
  });
});

describe('as Node hands the headers over', () => {
  let server: Server;
  let port: number;
  let received: IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    // Certificate headers are larger than Node's default 16 KiB header block with a chain (RFC 9440 §3.2).
    server = createServer({ maxHeaderSize: 256 * 1024 }, (request, response) => {
      received.push(request.headers);
      response.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  /** Sends a request with these header lines; the status line of the answer, and the headers Node parsed. */
  async function send(
    lines: string[],
  ): Promise<{ status: string; headers: IncomingHttpHeaders | undefined }> {
    received = [];
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () =>
        socket.end(`GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${lines.join('\r\n')}\r\n\r\n`),
      );
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    return { status: answer.split('\r\n')[0]!, headers: received[0] };
  }

  it('Client-Cert-Chain over two lines, and a Client-Cert sent twice', async () => {
    const { headers } = await send([
      `Client-Cert: ${sf(leaf.der)}`,
      `Client-Cert-Chain: ${sf(intermediate.der)}`,
      `Client-Cert-Chain: ${sf(root.der)}`,
    ]);
    expect(forwardedCertificate('client-cert', headers!)).toEqual({
      leaf: leaf.der,
      chain: [intermediate.der, root.der],
    });
    const twice = await send([`Client-Cert: ${sf(leaf.der)}`, `Client-Cert: ${sf(other.der)}`]);
    expect(forwardedCertificate('client-cert', twice.headers!)).toEqual({
      malformed: 'Client-Cert is not a structured-field byte sequence',
    });
  });

  it('XFCC over two lines: the second line is the nearest proxy', async () => {
    const { headers } = await send([
      `X-Forwarded-Client-Cert: ${envoyElement('spiffe://example.org/edge', other, undefined)}`,
      `X-Forwarded-Client-Cert: ${envoyElement('spiffe://example.org/mesh', leaf, [intermediate], ['Cert', 'Chain'])}`,
    ]);
    expect(forwardedCertificate('x-forwarded-client-cert', headers!)).toEqual({
      leaf: leaf.der,
      chain: [intermediate.der],
    });
  });

  it("nginx's $ssl_client_escaped_cert arrives whole; its folded $ssl_client_cert is refused by Node itself", async () => {
    const { headers } = await send([`SSL-Client-Cert: ${nginxEscaped(leaf.pem + intermediate.pem)}`]);
    expect(forwardedCertificate('ssl-client-cert', headers!)).toEqual({
      leaf: leaf.der,
      chain: [intermediate.der],
    });
    // Obsolete line folding (RFC 9112 §5.2): Node answers 400 before any handler sees the request.
    const folded = await send([`SSL-Client-Cert: ${nginxTabbed(leaf.pem)}`]);
    expect(folded.status).toBe('HTTP/1.1 400 Bad Request');
    expect(folded.headers).toBeUndefined();
  });
});

describe('hostile input', () => {
  const SIZE = 64 * 1024 - 64;
  const patterns = [
    '"',
    '\\',
    '\\"',
    ',',
    ';',
    '=',
    ':',
    '%',
    '%2',
    ' ',
    'A',
    '=A',
    '-----BEGIN CERTIFICATE-----',
    '-----END CERTIFICATE-----',
    '-----BEGIN CERTIFICATE-----A',
    'Cert="',
    'Cert=";',
    'a=";,',
    ':A:,',
    ':A:;a=',
    ';a="\\',
    '(',
    '-',
    '1.',
  ];

  it('every format answers 64 KiB of repeated delimiters, quotes and escapes at once, without throwing', () => {
    for (const kind of CLIENT_CERT_HEADERS) {
      for (const pattern of patterns) {
        const value = pattern.repeat(Math.floor(SIZE / pattern.length));
        for (const headers of [
          { [kind]: value },
          { 'client-cert': sf(leaf.der), 'client-cert-chain': value },
        ]) {
          const started = performance.now();
          const result = forwardedCertificate(kind, headers);
          expect(performance.now() - started, `${kind}: ${JSON.stringify(pattern)}`).toBeLessThan(100);
          expect(result === undefined || 'malformed' in result || 'leaf' in result).toBe(true);
        }
      }
    }
  });

  it('any string, in any format, is one of the three answers (property)', () => {
    const alphabet = fc.constantFrom(
      ...'":;,=\\%(): -AQ+/\t\r\n,.*?1'.split(''),
      'Cert=',
      'Chain=',
      '-----BEGIN CERTIFICATE-----',
      '-----END CERTIFICATE-----',
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...CLIENT_CERT_HEADERS),
        fc.array(alphabet, { maxLength: 200 }),
        (kind, parts) => {
          const value = parts.join('');
          const result = forwardedCertificate(kind, { [kind]: value, 'client-cert-chain': value });
          if (result === undefined) return;
          if ('malformed' in result) {
            expect(typeof result.malformed).toBe('string');
            // The reason never carries the header's value.
            if (value.length > 8) expect(result.malformed).not.toContain(value);
          } else expect(result.leaf).toBeInstanceOf(Buffer);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
