import { createHash } from 'node:crypto';

/**
 * RFC 8705 §3.1: a certificate's x5t#S256, base64url of the SHA-256 of its DER. Apart from certificate.ts so that
 * what only compares thumbprints (a registration's checks, the CLI) does not load pkijs.
 */
export const thumbprintOf = (der: Uint8Array): string => createHash('sha256').update(der).digest('base64url');
