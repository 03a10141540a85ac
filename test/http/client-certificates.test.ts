/**
 * The certificate of a request (src/http/client-certificates.ts): nothing done twice for the same certificate — a
 * connection's certificate read once per connection, a certificate parsed once, a forwarded chain validated once
 * while its verdict is kept (and again after a new TESSERA_TLS_CLIENT_CA) — and a header only from a trusted peer.
 */
import { X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { ClientCertificates } from '../../src/http/client-certificates.js';
import { issueCert, makeCa, type Authority, type Issued } from '../helpers/pki.js';

let root: Authority;
let leaf: Issued;
let other: Issued;

beforeAll(async () => {
  root = await makeCa({ subject: 'CN=Example Client Root' });
  leaf = await issueCert(root, {
    subject: 'CN=worker,O=Example Inc',
    san: { uri: ['spiffe://example/worker'] },
  });
  other = await issueCert(root, { subject: 'CN=other,O=Example Inc' });
});

const logger = pino({ level: 'silent' });
const forwarded = (remoteAddress: string, issued: Issued): IncomingMessage =>
  ({
    socket: { remoteAddress },
    headers: { 'client-cert': `:${issued.der.toString('base64')}:` },
  }) as unknown as IncomingMessage;

describe('ClientCertificates', () => {
  it('a forwarded certificate: parsed once, its chain validated once, from memory after that', async () => {
    const certificates = new ClientCertificates({
      tls: false,
      header: 'client-cert',
      trustProxy: ['127.0.0.1'],
      clientCa: root.certPem,
      logger,
      now: Date.now,
    });
    const first = certificates.of(forwarded('127.0.0.1', leaf))!;
    expect(first.thumbprint).toBe(leaf.x5t);
    expect(first.facts.uri).toEqual(['spiffe://example/worker']);
    expect(await first.chain()).toEqual({ trusted: true });
    for (let i = 0; i < 5; i++) {
      const again = certificates.of(forwarded('127.0.0.1', leaf))!;
      // Decided: no promise, no work.
      expect(again.chain()).toEqual({ trusted: true });
    }
    expect([certificates.certificatesParsed, certificates.chainValidations]).toEqual([1, 1]);
    expect(certificates.headersRead).toBe(1);
    // Another certificate is another parse and another validation.
    expect(await certificates.of(forwarded('127.0.0.1', other))!.chain()).toEqual({ trusted: true });
    expect([certificates.certificatesParsed, certificates.chainValidations]).toEqual([2, 2]);
    // A new CA bundle: every chain is validated again (the certificate's facts stay).
    const elsewhere = await makeCa({ subject: 'CN=Another Root' });
    certificates.setClientCa(elsewhere.certPem);
    expect(await certificates.of(forwarded('127.0.0.1', leaf))!.chain()).toEqual({
      trusted: false,
      reason: 'chain not trusted',
    });
    expect([certificates.certificatesParsed, certificates.chainValidations]).toEqual([2, 3]);
  });

  it('requests that arrive before a chain is decided share its validation', async () => {
    const certificates = new ClientCertificates({
      tls: false,
      header: 'client-cert',
      trustProxy: ['127.0.0.1'],
      clientCa: root.certPem,
      logger,
      now: Date.now,
    });
    const verdicts = await Promise.all(
      Array.from({ length: 10 }, () => certificates.of(forwarded('127.0.0.1', leaf))!.chain()),
    );
    expect(verdicts).toEqual(Array.from({ length: 10 }, () => ({ trusted: true })));
    expect(certificates.chainValidations).toBe(1);
  });

  it('a header from a peer not in TESSERA_TRUST_PROXY is not read', () => {
    const certificates = new ClientCertificates({
      tls: false,
      header: 'client-cert',
      trustProxy: ['10.0.0.0/8'],
      clientCa: root.certPem,
      logger,
      now: Date.now,
    });
    expect(certificates.of(forwarded('192.0.2.1', leaf))).toBeUndefined();
    expect(certificates.of(forwarded('10.1.2.3', leaf))?.thumbprint).toBe(leaf.x5t);
    expect(certificates.certificatesParsed).toBe(1);
  });

  it("a connection's certificate is read once per connection", () => {
    const certificates = new ClientCertificates({
      tls: true,
      header: undefined,
      trustProxy: false,
      clientCa: root.certPem,
      logger,
      now: Date.now,
    });
    let reads = 0;
    const socket = {
      encrypted: true,
      authorized: true,
      authorizationError: undefined,
      remoteAddress: '192.0.2.1',
      getPeerX509Certificate: () => {
        reads++;
        return new X509Certificate(leaf.certPem);
      },
    };
    const request = { socket, headers: {} } as unknown as IncomingMessage;
    for (let i = 0; i < 3; i++) expect(certificates.of(request)?.chain()).toEqual({ trusted: true });
    expect([reads, certificates.certificatesParsed]).toEqual([1, 1]);
  });
});
