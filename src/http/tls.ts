import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Server as HttpsServer, ServerOptions } from 'node:https';
import type { Logger } from 'pino';
import { anchorsOf } from '../domain/mtls/certificate.js';
import type { ClientCertificates } from './client-certificates.js';

/*
 * HTTPS served by Tessera itself (docs/mtls.md, "TLS"): TESSERA_TLS_CERT and TESSERA_TLS_KEY (PEM; the certificate
 * file may carry the chain), TLS 1.2 and 1.3 only. Every TLS client is asked for a certificate, and no handshake
 * fails for the lack of one or for an unknown issuer (RFC 8705 §2: the certificate is a credential the token
 * endpoint judges, not a condition of the connection; a client without one uses its other methods). The client's
 * chain is verified in the handshake against TESSERA_TLS_CLIENT_CA only (the context's `ca`, which replaces Node's
 * default roots), and the verdict is read per connection (client-certificates.ts).
 *
 * Resumption stays on (TLS 1.3 tickets, 1.2 session tickets): a resumed session carries the peer certificate and
 * OpenSSL's verify result of its first handshake, so it authenticates exactly as that handshake did (RFC 8705
 * §7.2's concern) — and a warm client pays one round trip and no certificate verification per connection.
 *
 * New files are taken without a restart, on SIGHUP (main.ts) and within a minute of a change (watched here): the
 * server's secure context is replaced, connections open keep theirs. Files that do not load keep the running ones
 * (logged at error with the reason).
 */

export interface TlsFiles {
  cert: string;
  key: string;
  /** TESSERA_TLS_CLIENT_CA: the CAs whose client certificates tls_client_auth trusts. */
  clientCa: string | undefined;
}

/** How often the files are looked at for a change. */
const WATCH_INTERVAL_MS = 30_000;

/** The files' contents, read now; throws an Error naming the file that cannot be read. */
function read(files: TlsFiles): { cert: string; key: string; ca: string | undefined } {
  const load = (file: string, name: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      throw new Error(`${name} (${file}) cannot be read: ${(error as Error).message}`, { cause: error });
    }
  };
  return {
    cert: load(files.cert, 'TESSERA_TLS_CERT'),
    key: load(files.key, 'TESSERA_TLS_KEY'),
    ca: files.clientCa === undefined ? undefined : load(files.clientCa, 'TESSERA_TLS_CLIENT_CA'),
  };
}

/** The secure context's options from the files as they are now; throws for files that do not load. */
export function tlsOptions(files: TlsFiles): ServerOptions & { ca?: string } {
  const { cert, key, ca } = read(files);
  return {
    cert,
    key,
    ...(ca === undefined ? {} : { ca }),
    minVersion: 'TLSv1.2',
    // Ask for a certificate, never require one or refuse an unknown issuer (see above).
    requestCert: true,
    rejectUnauthorized: false,
  };
}

/** What is watched: the server's certificate and key (when TLS is served), and the client CAs (when given). */
export interface WatchedFiles {
  tls: { server: HttpsServer; cert: string; key: string } | undefined;
  clientCa: string | undefined;
}

/**
 * Reloads the server's certificate and key and the client CAs from their files: on `reload()` (SIGHUP), and when a
 * file changes. The client CAs are watched behind a proxy too (a SPIFFE bundle rotates whoever terminates TLS). All
 * is read and parsed before anything is replaced: files that do not load change nothing. Returns the reload function
 * and a stop for the watch.
 */
export function watchTls(
  files: WatchedFiles,
  certificates: ClientCertificates,
  logger: Logger,
): { reload(): boolean; stop(): void } {
  const { tls, clientCa } = files;
  const reload = (): boolean => {
    try {
      const options = tls === undefined ? undefined : tlsOptions({ ...tls, clientCa });
      const ca = tls === undefined ? readCa(clientCa) : options!.ca;
      const anchors = ca === undefined ? undefined : anchorsOf(ca);
      tls?.server.setSecureContext(options!);
      if (anchors !== undefined) certificates.setAnchors(anchors);
    } catch (error) {
      logger.error(
        { reason: (error as Error).message },
        'TLS files not reloaded: the certificate, key and client CAs in use are kept',
      );
      return false;
    }
    logger.info({ cert: tls?.cert ?? null, clientCa: clientCa ?? null }, 'TLS files reloaded');
    return true;
  };
  const paths = [
    ...(tls === undefined ? [] : [tls.cert, tls.key]),
    ...(clientCa === undefined ? [] : [clientCa]),
  ];
  const changed = (current: Stats, previous: Stats) => {
    if (current.mtimeMs !== previous.mtimeMs || current.ino !== previous.ino) reload();
  };
  // fs.watchFile polls (stat), which sees a Kubernetes secret's symlink swap as a change; fs.watch would not.
  for (const file of paths) watchFile(file, { interval: WATCH_INTERVAL_MS, persistent: false }, changed);
  return {
    reload,
    stop: () => {
      for (const file of paths) unwatchFile(file, changed);
    },
  };
}

/** The client CA bundle's text, or undefined when none is configured; throws naming the file. */
function readCa(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new Error(`TESSERA_TLS_CLIENT_CA (${file}) cannot be read: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
