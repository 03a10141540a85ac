import { isIP } from 'node:net';

/**
 * An address in one form whatever its spelling, as a registered tls_client_auth_san_ip and a certificate's iPAddress are written for the compare: IPv4
 * dotted, IPv6 as the WHATWG URL parser writes a host (RFC 5952: compressed, lower case, and an IPv4-mapped address
 * in hexadecimal, `::ffff:102:304`: it stays an IPv6 address, which a certificate's 16-byte iPAddress is, never the
 * 4-byte one of 1.2.3.4). Undefined for a non-address; a zone (`fe80::1%eth0`) is none a certificate holds.
 */
export function canonicalIpAddress(text: string): string | undefined {
  const kind = text.includes('%') ? 0 : isIP(text);
  if (kind === 4) return text;
  if (kind !== 6) return undefined;
  return new URL(`http://[${text}]/`).hostname.slice(1, -1);
}
