import proxyAddr from '@fastify/proxy-addr';
import { createHash, X509Certificate } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import {
  anchorsOf,
  factsOf,
  handshakeVerdict,
  NOT_TRUSTED,
  thumbprintOf,
  validatePath,
  type Anchors,
  type CertificateFacts,
  type ChainVerdict,
  type ClientCertificate,
} from '../domain/mtls/certificate.js';
import { boundedLru } from '../lru.js';
import { forwardedCertificate, type ClientCertHeader } from './client-cert-header.js';

/*
 * The TLS client certificate of a request (RFC 8705, docs/mtls.md): the one on the connection when Tessera serves TLS
 * itself, or the one a proxy that terminated TLS forwarded in TESSERA_CLIENT_CERT_HEADER — read only from a peer in
 * TESSERA_TRUST_PROXY (anyone else's header is ignored, and so is a trusted proxy's own TLS certificate: it is the
 * proxy's, not the client's). Wherever it came from, its chain is verified against TESSERA_TLS_CLIENT_CA by Tessera:
 * OpenSSL did it in the handshake for the connection's (and keeps the verdict with a resumed session), pkijs does it
 * here for a forwarded one.
 *
 * Nothing is done twice for the same certificate: its facts (subject, SANs, dates) are parsed once per certificate
 * and kept by its hash; a connection's certificate is read once per connection, a proxy's header once per value; a forwarded chain is validated once
 * per chain and the verdict kept (until the earliest expiry in it, and ten minutes at most, so that a CA bundle's
 * change or a clock past an intermediate's end is seen).
 */

/** Certificates whose facts (and forwarded chains whose verdicts) are kept. */
const CACHE_MAX = 10_000;
/** Header values whose certificate is kept (each at most HEADER_KEY_MAX: at most 16 MiB of text in all). */
const HEADERS_MAX = 2_000;
/** A header value longer than this (a leaf with a long chain) is read every time, not kept. */
const HEADER_KEY_MAX = 8 * 1024;
/** A malformed header is warned of at most once in this long (the count of the others with the next warning). */
const MALFORMED_WARN_EVERY_MS = 10_000;
/** How long a forwarded chain's verdict is kept at most. */
const VERDICT_TTL_MS = 10 * 60_000;

/** The TLS client certificate of a request, if it has one. */
export type CertificateOf = (request: IncomingMessage) => ClientCertificate | undefined;

export interface ClientCertificatesOptions {
  /** Whether the server serves TLS (the connection's certificate counts). */
  tls: boolean;
  /** Where a trusted proxy puts the certificate; undefined: no header is read. */
  header: ClientCertHeader | undefined;
  trustProxy: false | string[];
  /** The PEM bundle of TESSERA_TLS_CLIENT_CA; undefined: no CA is trusted (self-signed certificates still work). */
  clientCa: string | undefined;
  logger: Logger;
  /** Milliseconds since the epoch. */
  now(): number;
}

interface Verdict {
  verdict: ChainVerdict | Promise<ChainVerdict>;
  until: number;
}

class Presented implements ClientCertificate {
  constructor(
    readonly thumbprint: string,
    readonly facts: CertificateFacts,
    private readonly verdict: () => ChainVerdict | Promise<ChainVerdict>,
  ) {}

  chain(): ChainVerdict | Promise<ChainVerdict> {
    return this.verdict();
  }
}

export class ClientCertificates {
  private anchors: Anchors = { x509: [], pkijs: [] };
  /** Facts by thumbprint. */
  private readonly facts = boundedLru<string, CertificateFacts>(CACHE_MAX);
  /** A forwarded chain's verdict, by the hash of the leaf and its intermediates. */
  private readonly verdicts = boundedLru<string, Verdict>(CACHE_MAX);
  /** A forwarded certificate by the header's value, read once per value. */
  private readonly headers = boundedLru<string, ClientCertificate>(HEADERS_MAX);
  /** A connection's certificate (null: it has none), read once per connection, with the CAs' version it was judged by. */
  private readonly connections = new WeakMap<
    TLSSocket,
    { certificate: ClientCertificate | undefined; version: number }
  >();
  /** Advances with each new set of client CAs. */
  private anchorsVersion = 0;
  /** Malformed headers since the last warning, and when that was (performance.now()). */
  private malformed = 0;
  private malformedWarnedAt = -Infinity;
  private readonly trusted: ((address: string, hop: number) => boolean) | undefined;
  /** Forwarded chains validated (path validations begun): each distinct chain once while its verdict is kept. */
  chainValidations = 0;
  /** Certificates parsed: each distinct certificate once while its facts are kept. */
  certificatesParsed = 0;
  /** Proxies' header values read: each distinct value once while its certificate is kept. */
  headersRead = 0;

  constructor(private readonly options: ClientCertificatesOptions) {
    this.trusted =
      options.header === undefined || options.trustProxy === false
        ? undefined
        : proxyAddr.compile(options.trustProxy);
    if (options.clientCa !== undefined) this.setClientCa(options.clientCa);
  }

  /** Whether a proxy's header is read (a certificate and its chain in a header need more than Node's 16 KiB). */
  get readsHeader(): boolean {
    return this.trusted !== undefined;
  }

  /** Whether any certificate can arrive: TLS served, or a proxy's header read. */
  get enabled(): boolean {
    return this.options.tls || this.trusted !== undefined;
  }

  /** A new TESSERA_TLS_CLIENT_CA (PEM); throws for a bad bundle. */
  setClientCa(pem: string): void {
    this.setAnchors(anchorsOf(pem));
  }

  /**
   * New client CAs (a reload): every chain is judged again by them — a forwarded one when it next arrives, and the
   * certificate of a connection opened before, whose handshake OpenSSL judged by the CAs of then, by Tessera's path
   * validation against the new ones (with the chain the handshake received).
   */
  setAnchors(anchors: Anchors): void {
    this.anchors = anchors;
    this.anchorsVersion++;
    this.verdicts.clear();
  }

  /** The request's certificate, if it has one (or its trusted proxy forwarded one). */
  of(request: IncomingMessage): ClientCertificate | undefined {
    const socket = request.socket;
    if (this.trusted !== undefined && this.trusted(socket.remoteAddress ?? '', 0))
      return this.forwarded(request);
    if (!this.options.tls || !('encrypted' in socket)) return undefined;
    const tls = socket as TLSSocket;
    const known = this.connections.get(tls);
    if (known !== undefined && (known.certificate === undefined || known.version === this.anchorsVersion))
      return known.certificate;
    const certificate = this.ofConnection(tls, known !== undefined);
    this.connections.set(tls, { certificate, version: this.anchorsVersion });
    return certificate;
  }

  /**
   * A connection's certificate, with OpenSSL's verdict of its handshake; or, `rejudged` after the client CAs
   * changed, Tessera's own against the new ones.
   */
  private ofConnection(socket: TLSSocket, rejudged: boolean): ClientCertificate | undefined {
    const peer = socket.getPeerX509Certificate();
    if (peer === undefined) return undefined;
    const der = peer.raw;
    const thumbprint = thumbprintOf(der);
    const facts = this.factsOf(thumbprint, der);
    if (facts === undefined) return undefined;
    if (rejudged) {
      const chain = peerChainOf(socket);
      return new Presented(thumbprint, facts, () => this.verdictOf(der, chain, facts));
    }
    // OpenSSL's verdict in the handshake, against TESSERA_TLS_CLIENT_CA (the context's `ca`); without it, no CA is
    // trusted, and the verdict of Node's default roots must not count.
    const verdict =
      this.anchors.x509.length === 0
        ? NOT_TRUSTED
        : handshakeVerdict(socket.authorized, socket.authorizationError?.toString());
    return new Presented(thumbprint, facts, () => verdict);
  }

  private forwarded(request: IncomingMessage): ClientCertificate | undefined {
    const header = this.options.header!;
    const headers = request.headers;
    // The same header as before (a client's every request carries its certificate): what it held, from memory.
    const value = headers[header];
    const chainValue = header === 'client-cert' ? headers['client-cert-chain'] : undefined;
    const key =
      typeof value !== 'string' || (chainValue !== undefined && typeof chainValue !== 'string')
        ? undefined
        : chainValue === undefined
          ? value
          : `${value}\n${chainValue}`;
    if (key !== undefined) {
      const seen = this.headers.get(key);
      if (seen !== undefined) return seen;
    }
    const certificate = this.readForwarded(header, headers);
    // Only what parsed is kept: a malformed header is warned of every time it comes.
    if (key !== undefined && certificate !== undefined && key.length <= HEADER_KEY_MAX)
      this.headers.set(key, certificate);
    return certificate;
  }

  private readForwarded(
    header: ClientCertHeader,
    headers: IncomingMessage['headers'],
  ): ClientCertificate | undefined {
    this.headersRead++;
    const found = forwardedCertificate(header, headers);
    if (found === undefined) return undefined;
    if ('malformed' in found) {
      // A proxy that keeps sending a broken header must not flood the log: once in a while, with the count.
      this.malformed++;
      const now = performance.now();
      if (now - this.malformedWarnedAt >= MALFORMED_WARN_EVERY_MS) {
        this.options.logger.warn(
          { header, reason: found.malformed, count: this.malformed },
          'a client certificate header from a trusted proxy does not parse: ignored',
        );
        this.malformedWarnedAt = now;
        this.malformed = 0;
      }
      return undefined;
    }
    const { leaf, chain } = found;
    const thumbprint = thumbprintOf(leaf);
    const facts = this.factsOf(thumbprint, leaf);
    if (facts === undefined) return undefined;
    return new Presented(thumbprint, facts, () => this.verdictOf(leaf, chain, facts));
  }

  private factsOf(thumbprint: string, der: Buffer): CertificateFacts | undefined {
    let facts = this.facts.get(thumbprint);
    if (facts !== undefined) return facts;
    try {
      this.certificatesParsed++;
      facts = factsOf(der);
    } catch {
      this.options.logger.warn('a client certificate does not parse: ignored');
      return undefined;
    }
    this.facts.set(thumbprint, facts);
    return facts;
  }

  /** A forwarded chain's verdict: kept once decided, shared while it is being decided. */
  private verdictOf(
    leaf: Buffer,
    chain: readonly Buffer[],
    facts: CertificateFacts,
  ): ChainVerdict | Promise<ChainVerdict> {
    const now = this.options.now();
    const hash = createHash('sha256').update(leaf);
    for (const certificate of chain) hash.update(certificate);
    const key = hash.digest('base64url');
    const kept = this.verdicts.get(key);
    if (kept !== undefined && now < kept.until) return kept.verdict;
    const anchors = this.anchors;
    this.chainValidations++;
    const pending = validatePath(leaf, chain, anchors, now).then((verdict) => {
      // Kept as decided, unless the CA bundle changed meanwhile (then the next request decides again).
      if (this.anchors === anchors) this.verdicts.set(key, { verdict, until: entry.until });
      else this.verdicts.delete(key);
      return verdict;
    });
    const entry: Verdict = {
      verdict: pending,
      until: Math.min(now + VERDICT_TTL_MS, facts.notAfter, ...chain.map(notAfterOf)),
    };
    this.verdicts.set(key, entry);
    return pending;
  }
}

/** The certificates above a connection's leaf, as its handshake received and completed them (at most ten). */
function peerChainOf(socket: TLSSocket): Buffer[] {
  const chain: Buffer[] = [];
  let current = socket.getPeerCertificate(true);
  while (chain.length < 10 && current?.issuerCertificate && current.issuerCertificate !== current) {
    current = current.issuerCertificate;
    chain.push(current.raw);
  }
  return chain;
}

/** A certificate's end of validity (ms); a certificate that does not parse ends now (it is refused anyway). */
function notAfterOf(der: Buffer): number {
  try {
    return new X509Certificate(der).validToDate.getTime();
  } catch {
    return 0;
  }
}
