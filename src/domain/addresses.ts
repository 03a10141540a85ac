import { isIP } from 'node:net';

/**
 * Which IP addresses are the open internet, for the keys Tessera fetches (docs/interface.md, "Client
 * authentication": every address that the IANA IPv4 and IPv6 special-purpose registries do not mark globally
 * reachable is refused unless TESSERA_JWKS_ALLOW_PRIVATE=true). Decided on the address's bytes, not its text: an
 * IPv4 address has many IPv6 spellings, and every one of them is that IPv4 address. No I/O: the fetcher checks
 * what a name resolves to, the management layer the literal address of a URL as it is set.
 *
 * One table per family, each row a range of an IANA registry with its "Globally Reachable" column; the most
 * specific row that holds an address decides (the registries nest: 192.0.0.9/32 is reachable inside
 * 192.0.0.0/24, which is not). A row marked N/A in the registry (6to4's relay anycast, Teredo) is refused.
 */

/** An address range: its first bytes (the rest zero) and its prefix length in bits. */
type Range = readonly [bytes: readonly number[], prefix: number];

/** A row of a registry: the range, whether it is globally reachable, and what it is (for the tests and a reader). */
export interface SpecialRange {
  range: Range;
  reachable: boolean;
  name: string;
}

const row = (bytes: readonly number[], prefix: number, reachable: boolean, name: string): SpecialRange => ({
  range: [bytes, prefix],
  reachable,
  name,
});

/**
 * IANA IPv4 Special-Purpose Address Registry (iana-ipv4-special-registry), its rows, plus the multicast block of
 * the IPv4 Multicast Address Space Registry (not globally reachable as a unicast source of keys). An address in
 * no row is reachable.
 */
export const IPV4_SPECIAL: readonly SpecialRange[] = [
  row([0], 8, false, '"This network" (RFC 791)'),
  row([0, 0, 0, 0], 32, false, '"This host on this network" (RFC 1122)'),
  row([10], 8, false, 'Private-Use (RFC 1918)'),
  row([100, 64], 10, false, 'Shared Address Space (RFC 6598)'),
  row([127], 8, false, 'Loopback (RFC 1122)'),
  row([169, 254], 16, false, 'Link Local (RFC 3927), where cloud metadata services answer'),
  row([172, 16], 12, false, 'Private-Use (RFC 1918)'),
  row([192, 0, 0], 24, false, 'IETF Protocol Assignments (RFC 6890)'),
  row([192, 0, 0, 0], 29, false, 'IPv4 Service Continuity Prefix (RFC 7335)'),
  row([192, 0, 0, 8], 32, false, 'IPv4 dummy address (RFC 7600)'),
  row([192, 0, 0, 9], 32, true, 'Port Control Protocol Anycast (RFC 7723)'),
  row([192, 0, 0, 10], 32, true, 'Traversal Using Relays around NAT Anycast (RFC 8155)'),
  row([192, 0, 0, 170], 32, false, 'NAT64/DNS64 Discovery (RFC 8880)'),
  row([192, 0, 0, 171], 32, false, 'NAT64/DNS64 Discovery (RFC 8880)'),
  row([192, 0, 2], 24, false, 'Documentation, TEST-NET-1 (RFC 5737)'),
  row([192, 31, 196], 24, true, 'AS112-v4 (RFC 7535)'),
  row([192, 52, 193], 24, true, 'AMT (RFC 7450)'),
  row([192, 88, 99], 24, false, 'Deprecated, 6to4 Relay Anycast (RFC 7526): N/A'),
  row([192, 168], 16, false, 'Private-Use (RFC 1918)'),
  row([192, 175, 48], 24, true, 'Direct Delegation AS112 Service (RFC 7534)'),
  row([198, 18], 15, false, 'Benchmarking (RFC 2544)'),
  row([198, 51, 100], 24, false, 'Documentation, TEST-NET-2 (RFC 5737)'),
  row([203, 0, 113], 24, false, 'Documentation, TEST-NET-3 (RFC 5737)'),
  row([224], 4, false, 'Multicast (RFC 5771; the IPv4 Multicast Address Space Registry)'),
  row([240], 4, false, 'Reserved (RFC 1112)'),
  row([255, 255, 255, 255], 32, false, 'Limited Broadcast (RFC 8190)'),
];

/**
 * IANA IPv6 Special-Purpose Address Registry (iana-ipv6-special-registry), its rows; the deprecated site-local
 * block (RFC 3879) and multicast (RFC 4291 §2.7) beside them; and, from the IPv6 Address Space registry, the one
 * block allocated for global unicast, 2000::/3: an address outside it and outside every row is in space IANA
 * reserves, not reachable. The forms that carry an IPv4 address (embeddedIPv4) are judged as that address
 * before this table is read.
 */
export const IPV6_SPECIAL: readonly SpecialRange[] = [
  row([0x20], 3, true, 'Global Unicast (IPv6 Address Space registry)'),
  row([], 128, false, 'Unspecified Address (RFC 4291)'),
  row([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, false, 'Loopback Address (RFC 4291)'),
  // Globally reachable in the registry; refused here all the same: the translator in front of it may reach any
  // IPv4 address, private ones included (RFC 6052 §3.1), and which it reaches is not this server's to know.
  row([0, 0x64, 0xff, 0x9b], 96, false, 'IPv4-IPv6 Translation, the NAT64 well-known prefix (RFC 6052)'),
  row([0, 0x64, 0xff, 0x9b, 0, 1], 48, false, 'IPv4-IPv6 Translation, local use (RFC 8215)'),
  row([1, 0], 64, false, 'Discard-Only Address Block (RFC 6666)'),
  row([1, 0, 0, 0, 0, 0, 0, 1], 64, false, 'Dummy IPv6 Prefix (RFC 9780)'),
  row([0x20, 0x01], 23, false, 'IETF Protocol Assignments (RFC 2928)'),
  row([0x20, 0x01], 32, false, 'TEREDO (RFC 4380): N/A'),
  row(
    [0x20, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    128,
    true,
    'Port Control Protocol Anycast (RFC 7723)',
  ),
  row([0x20, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2], 128, true, 'TURN Anycast (RFC 8155)'),
  row(
    [0x20, 0x01, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3],
    128,
    true,
    'DNS-SD Service Registration Protocol Anycast (RFC 9665)',
  ),
  row([0x20, 0x01, 0, 2, 0, 0], 48, false, 'Benchmarking (RFC 5180)'),
  row([0x20, 0x01, 0, 3], 32, true, 'AMT (RFC 7450)'),
  row([0x20, 0x01, 0, 4, 0x01, 0x12], 48, true, 'AS112-v6 (RFC 7535)'),
  row([0x20, 0x01, 0, 0x10], 28, false, 'Deprecated, previously ORCHID (RFC 4843)'),
  row([0x20, 0x01, 0, 0x20], 28, true, 'ORCHIDv2 (RFC 7343)'),
  row([0x20, 0x01, 0, 0x30], 28, true, 'Drone Remote ID Protocol Entity Tags (RFC 9374)'),
  row([0x20, 0x01, 0x0d, 0xb8], 32, false, 'Documentation (RFC 3849)'),
  row([0x26, 0x20, 0, 0x4f, 0x80, 0], 48, true, 'Direct Delegation AS112 Service (RFC 7534)'),
  row([0x3f, 0xff], 20, false, 'Documentation (RFC 9637)'),
  row([0x5f, 0x00], 16, false, 'Segment Routing (SRv6) SIDs (RFC 9602)'),
  row([0xfc], 7, false, 'Unique-Local (RFC 4193)'),
  row([0xfe, 0x80], 10, false, 'Link-Local Unicast (RFC 4291)'),
  row([0xfe, 0xc0], 10, false, 'Site-Local, deprecated (RFC 3879)'),
  row([0xff], 8, false, 'Multicast (RFC 4291 §2.7)'),
];

function inRange(bytes: Uint8Array, [start, prefix]: Range): boolean {
  for (let bit = 0; bit < prefix; bit += 8) {
    const i = bit / 8;
    const mask = prefix - bit >= 8 ? 0xff : (0xff << (8 - (prefix - bit))) & 0xff;
    if ((bytes[i]! & mask) !== ((start[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** The most specific row of `table` that holds the address, if any. */
export function specialRangeOf(bytes: Uint8Array, table: readonly SpecialRange[]): SpecialRange | undefined {
  let found: SpecialRange | undefined;
  for (const entry of table)
    if (inRange(bytes, entry.range) && (found === undefined || entry.range[1] > found.range[1]))
      found = entry;
  return found;
}

/** Whether an IPv4 address (4 bytes) is globally reachable: in no row of IPV4_SPECIAL, or in a reachable one. */
const reachableV4 = (bytes: Uint8Array): boolean => specialRangeOf(bytes, IPV4_SPECIAL)?.reachable ?? true;
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
 * Whether an address may be fetched from: an IP address (IPv4 dotted quad, or IPv6 in any spelling) that the
 * registries mark globally reachable, where an IPv6 address that carries an IPv4 address (embeddedIPv4) is
 * judged as that IPv4 address. Anything that is not an IP address is not a public address.
 */
export function isPublicAddress(address: string): boolean {
  if (isIP(address) === 4) return reachableV4(ipv4Bytes(address));
  const bytes = ipv6Bytes(address);
  if (bytes === undefined) return false;
  const v4 = embeddedIPv4(bytes);
  if (v4 !== undefined) return reachableV4(v4);
  return specialRangeOf(bytes, IPV6_SPECIAL)?.reachable ?? false;
}
