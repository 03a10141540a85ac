import { isIP } from 'node:net';

/**
 * Which IP addresses are the open internet, for the keys Tessera fetches (INTERFACE.md, "Client
 * authentication": a `jwks_uri` on a loopback, private, link-local or unique-local address is refused unless
 * TESSERA_JWKS_ALLOW_PRIVATE=true). Decided on the address's bytes, not its text: an IPv4 address has many IPv6
 * spellings, and every one of them is that IPv4 address. No I/O: the fetcher checks what a name resolves to,
 * the management layer the literal address of a URL as it is set.
 */

/** An address range: its first bytes (the rest zero) and its prefix length in bits. */
type Range = readonly [bytes: readonly number[], prefix: number];

/** IPv4 ranges that are not the open internet (RFC 6890 and friends). */
const REFUSED_V4: readonly Range[] = [
  [[0], 8], // "this network" (RFC 791)
  [[10], 8], // private (RFC 1918)
  [[100, 64], 10], // carrier-grade NAT (RFC 6598)
  [[127], 8], // loopback (RFC 1122)
  [[169, 254], 16], // link-local, where cloud metadata services answer (RFC 3927)
  [[172, 16], 12], // private (RFC 1918)
  [[192, 0, 0], 24], // IETF protocol assignments (RFC 6890)
  [[192, 168], 16], // private (RFC 1918)
  [[198, 18], 15], // benchmarking (RFC 2544)
  [[224], 3], // multicast, reserved and broadcast (RFC 5771, RFC 1112)
];

/** IPv6 ranges that are not the open internet and carry no IPv4 address to judge instead. */
const REFUSED_V6: readonly Range[] = [
  // NAT64's well-known prefix (RFC 6052): the translator in front of it may reach any IPv4 address.
  [[0, 0x64, 0xff, 0x9b], 96],
  [[0xfc], 7], // unique-local (RFC 4193)
  [[0xfe, 0x80], 10], // link-local (RFC 4291 §2.5.6)
  [[0xff], 8], // multicast (RFC 4291 §2.7)
];

function inRange(bytes: Uint8Array, [start, prefix]: Range): boolean {
  for (let bit = 0; bit < prefix; bit += 8) {
    const i = bit / 8;
    const mask = prefix - bit >= 8 ? 0xff : (0xff << (8 - (prefix - bit))) & 0xff;
    if ((bytes[i]! & mask) !== ((start[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** The 4 bytes of a dotted-quad IPv4 address (node:net's isIP has checked it). */
const ipv4Bytes = (address: string): Uint8Array => Uint8Array.from(address.split('.').map(Number));

/**
 * The 16 bytes of an IPv6 address in any textual form (RFC 4291 §2.2): leading zeros left out or not, `::`
 * for a run of zero groups, upper or lower case, the last 32 bits as a dotted quad; a zone (`%eth0`) is
 * ignored. Undefined for anything node:net's isIP does not take as IPv6.
 */
export function ipv6Bytes(address: string): Uint8Array | undefined {
  const text = address.replace(/%.*$/, '');
  if (isIP(text) !== 6) return undefined;
  const bytes = new Uint8Array(16);
  let groups = text;
  let quad: Uint8Array | undefined;
  const last = text.lastIndexOf(':');
  if (text.includes('.', last)) {
    // RFC 4291 §2.2 (3): x:x:x:x:x:x:d.d.d.d; the quad stands for the last two groups.
    quad = ipv4Bytes(text.slice(last + 1));
    groups = `${text.slice(0, last + 1)}0:0`;
  }
  const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const [head = '', tail] = groups.split('::');
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const words = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  words.forEach((word, i) => {
    bytes[2 * i] = word >> 8;
    bytes[2 * i + 1] = word & 0xff;
  });
  if (quad !== undefined) bytes.set(quad, 12);
  return bytes;
}

/**
 * The IPv4 address an IPv6 address stands for or carries, when it is one of the forms that do:
 * IPv4-compatible `::/96` (RFC 4291 §2.5.5.1; `::` and `::1` included, as 0.0.0.0 and 0.0.0.1),
 * IPv4-mapped `::ffff:0:0/96` (§2.5.5.2), IPv4-translated `::ffff:0:0:0/96` (RFC 2765 §2.1), and 6to4
 * `2002::/16` (RFC 3056 §2, the IPv4 address in bytes 2 to 5).
 */
export function embeddedIPv4(bytes: Uint8Array): Uint8Array | undefined {
  const zero = (from: number, to: number) => bytes.subarray(from, to).every((b) => b === 0);
  const ffff = (at: number) => bytes[at] === 0xff && bytes[at + 1] === 0xff;
  if (zero(0, 12)) return bytes.slice(12);
  if (zero(0, 10) && ffff(10)) return bytes.slice(12);
  if (zero(0, 8) && ffff(8) && zero(10, 12)) return bytes.slice(12);
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return bytes.slice(2, 6);
  return undefined;
}

/**
 * Whether an address may be fetched from: an IP address (IPv4 dotted quad, or IPv6 in any spelling) that is
 * in no refused range, where an IPv6 address that carries an IPv4 address (embeddedIPv4) is judged as that
 * IPv4 address. Anything that is not an IP address is not a public address.
 */
export function isPublicAddress(address: string): boolean {
  if (isIP(address) === 4) return !REFUSED_V4.some((range) => inRange(ipv4Bytes(address), range));
  const bytes = ipv6Bytes(address);
  if (bytes === undefined) return false;
  const v4 = embeddedIPv4(bytes);
  if (v4 !== undefined) return !REFUSED_V4.some((range) => inRange(v4, range));
  return !REFUSED_V6.some((range) => inRange(bytes, range));
}
