/**
 * The IANA special-purpose tables of domain/addresses.ts, row by row (INTERFACE.md, "Client authentication":
 * every address that the IANA IPv4 and IPv6 special-purpose registries do not mark globally reachable is
 * refused). The tables are held to the registries as written out here by hand; then, for every row, an address
 * that row decides (inside it, inside no more specific row) is judged as the row says, in several spellings;
 * then hand-written samples and the edges of the ranges, the address just outside included. addresses.test.ts
 * covers the IPv6 spellings of 127.0.0.1 and the parsing; this file covers the ranges.
 */
import { describe, expect, it } from 'vitest';
import {
  embeddedIPv4,
  IPV4_SPECIAL,
  IPV6_SPECIAL,
  ipv6Bytes,
  isPublicAddress,
  specialRangeOf,
  type SpecialRange,
} from '../../src/domain/addresses.js';
import { validateJwksUri } from '../../src/domain/client-auth/index.js';
import { ValidationError } from '../../src/domain/validate.js';
import { thrownBy } from '../helpers/assert.js';

/*
 * Address arithmetic of this test's own (none of it from addresses.ts): bytes to text and back, a row's first
 * and last address, and whether a row holds an address.
 */

const v4Text = (bytes: readonly number[]): string => bytes.join('.');
/** The full, uncompressed IPv6 form: eight groups of four hex digits. */
const v6Full = (bytes: readonly number[]): string =>
  Array.from({ length: 8 }, (_, i) =>
    ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16).padStart(4, '0'),
  ).join(':');
/** The compressed lower-case form RFC 5952 recommends, as the WHATWG URL serializer writes it. */
const v6Compressed = (bytes: readonly number[]): string =>
  new URL(`http://[${v6Full(bytes)}]/`).hostname.slice(1, -1);

const width = (table: readonly SpecialRange[]): number => (table === IPV4_SPECIAL ? 4 : 16);

function firstOf({ range: [start] }: SpecialRange, size: number): number[] {
  return Array.from({ length: size }, (_, i) => start[i] ?? 0);
}

function lastOf(row: SpecialRange, size: number): number[] {
  const prefix = row.range[1];
  return firstOf(row, size).map((byte, i) => {
    const fixed = Math.min(8, Math.max(0, prefix - 8 * i));
    return byte | (0xff >> fixed);
  });
}

function holds(row: SpecialRange, address: readonly number[]): boolean {
  const prefix = row.range[1];
  const first = firstOf(row, address.length);
  for (let bit = 0; bit < prefix; bit++) {
    const i = bit >> 3;
    const mask = 0x80 >> (bit & 7);
    if ((address[i]! & mask) !== (first[i]! & mask)) return false;
  }
  return true;
}

/** The address plus `delta` (a small number, either sign), as bytes; wraps like an unsigned integer. */
function plus(address: readonly number[], delta: number): number[] {
  const out = [...address];
  let carry = delta;
  for (let i = out.length - 1; i >= 0 && carry !== 0; i--) {
    const sum = out[i]! + carry;
    out[i] = ((sum % 256) + 256) % 256;
    carry = Math.floor(sum / 256);
  }
  return out;
}

/**
 * An address that `row` decides: inside it and inside no other row of the table as specific or more (the
 * tables nest: 0.0.0.0 is the /32 row's, not the /8's). Tried in turn: the first address, the one after it, the
 * last, the one before it.
 */
function sampleOf(row: SpecialRange, table: readonly SpecialRange[]): number[] {
  const size = width(table);
  const first = firstOf(row, size);
  const last = lastOf(row, size);
  const candidates = [first, plus(first, 1), last, plus(last, -1)];
  const sample = candidates.find(
    (c) =>
      holds(row, c) &&
      !table.some((other) => other !== row && other.range[1] >= row.range[1] && holds(other, c)),
  );
  if (sample === undefined) throw new Error(`no address of its own in ${row.name}`);
  return sample;
}

const cidr = (row: SpecialRange, table: readonly SpecialRange[]): string =>
  table === IPV4_SPECIAL
    ? `${v4Text(firstOf(row, 4))}/${row.range[1]}`
    : `${v6Compressed(firstOf(row, 16))}/${row.range[1]}`;

/**
 * The IANA IPv4 Special-Purpose Address Registry, its "Globally Reachable" column (N/A as false), plus the
 * multicast block 224.0.0.0/4 (RFC 5771). Written out independently of addresses.ts.
 */
const IPV4_REGISTRY: [string, boolean][] = [
  ['0.0.0.0/8', false],
  ['0.0.0.0/32', false],
  ['10.0.0.0/8', false],
  ['100.64.0.0/10', false],
  ['127.0.0.0/8', false],
  ['169.254.0.0/16', false],
  ['172.16.0.0/12', false],
  ['192.0.0.0/24', false],
  ['192.0.0.0/29', false],
  ['192.0.0.8/32', false],
  ['192.0.0.9/32', true],
  ['192.0.0.10/32', true],
  ['192.0.0.170/32', false],
  ['192.0.0.171/32', false],
  ['192.0.2.0/24', false],
  ['192.31.196.0/24', true],
  ['192.52.193.0/24', true],
  ['192.88.99.0/24', false], // deprecated 6to4 relay anycast: N/A
  ['192.168.0.0/16', false],
  ['192.175.48.0/24', true],
  ['198.18.0.0/15', false],
  ['198.51.100.0/24', false],
  ['203.0.113.0/24', false],
  ['224.0.0.0/4', false],
  ['240.0.0.0/4', false],
  ['255.255.255.255/32', false],
];

/**
 * The IANA IPv6 Special-Purpose Address Registry, plus 2000::/3 (the global unicast block of the IPv6 Address
 * Space registry), the deprecated site-local fec0::/10 (RFC 3879) and multicast ff00::/8. Two rows differ from
 * the registry's column on purpose: 64:ff9b::/96 is refused (a translator may reach a private IPv4 address),
 * Teredo (N/A) is refused. ::ffff:0:0/96 and 2002::/16 are no rows: their addresses are judged as the IPv4
 * address they carry.
 */
const IPV6_REGISTRY: [string, boolean][] = [
  ['2000::/3', true],
  ['::/128', false],
  ['::1/128', false],
  ['64:ff9b::/96', false],
  ['64:ff9b:1::/48', false],
  ['100::/64', false],
  ['100:0:0:1::/64', false],
  ['2001::/23', false],
  ['2001::/32', false],
  ['2001:1::1/128', true],
  ['2001:1::2/128', true],
  ['2001:1::3/128', true],
  ['2001:2::/48', false],
  ['2001:3::/32', true],
  ['2001:4:112::/48', true],
  ['2001:10::/28', false],
  ['2001:20::/28', true],
  ['2001:30::/28', true],
  ['2001:db8::/32', false],
  ['2620:4f:8000::/48', true],
  ['3fff::/20', false],
  ['5f00::/16', false],
  ['fc00::/7', false],
  ['fe80::/10', false],
  ['fec0::/10', false],
  ['ff00::/8', false],
];

describe('the tables are the registries', () => {
  it.each([
    ['IPv4', IPV4_SPECIAL, IPV4_REGISTRY],
    ['IPv6', IPV6_SPECIAL, IPV6_REGISTRY],
  ] as const)('%s: every row, with its Globally Reachable column, and no other', (_, table, registry) => {
    expect(table.map((row) => [cidr(row, table), row.reachable])).toEqual(registry);
  });

  it.each([
    ...IPV4_SPECIAL.map((row) => [row.name, row, IPV4_SPECIAL] as const),
    ...IPV6_SPECIAL.map((row) => [row.name, row, IPV6_SPECIAL] as const),
  ])('%s: no bit set past its prefix, a prefix within the family', (_, row, table) => {
    const size = width(table);
    const prefix = row.range[1];
    expect(prefix).toBeGreaterThan(0);
    expect(prefix).toBeLessThanOrEqual(8 * size);
    expect(row.range[0].length).toBeLessThanOrEqual(size);
    // The first address of the row, with the host bits cleared, is the row's bytes themselves.
    const first = firstOf(row, size);
    const cleared = first.map(
      (byte, i) => byte & (0xff << (8 - Math.min(8, Math.max(0, prefix - 8 * i)))) & 0xff,
    );
    expect(cleared).toEqual(first);
  });
});

describe('every IPv4 row decides its addresses', () => {
  it.each(IPV4_SPECIAL.map((row) => [cidr(row, IPV4_SPECIAL), row.reachable, row] as const))(
    '%s: reachable %s',
    (_, reachable, row) => {
      const sample = sampleOf(row, IPV4_SPECIAL);
      const text = v4Text(sample);
      expect(specialRangeOf(Uint8Array.from(sample), IPV4_SPECIAL)).toBe(row);
      expect(isPublicAddress(text)).toBe(reachable);
      // The same address in each IPv6 form that carries it is judged as it is.
      const [a, b, c, d] = sample.map((n) => n.toString(16).padStart(2, '0'));
      for (const form of [
        `::ffff:${text}`, // IPv4-mapped, dotted
        `::ffff:${a}${b}:${c}${d}`, // IPv4-mapped, hex
        `::FFFF:0:${text}`, // IPv4-translated, upper case
        `0:0:0:0:0:0:${text}`, // IPv4-compatible, uncompressed
        `2002:${a}${b}:${c}${d}::1`, // 6to4
      ])
        expect(isPublicAddress(form), form).toBe(reachable);
    },
  );
});

describe('every IPv6 row decides its addresses', () => {
  it.each(IPV6_SPECIAL.map((row) => [cidr(row, IPV6_SPECIAL), row.reachable, row] as const))(
    '%s: reachable %s',
    (_, reachable, row) => {
      const sample = sampleOf(row, IPV6_SPECIAL);
      expect(specialRangeOf(Uint8Array.from(sample), IPV6_SPECIAL)).toBe(row);
      const full = v6Full(sample);
      const compressed = v6Compressed(sample);
      // Its bytes read back from each spelling; only :: and ::1 carry an IPv4 address (0.0.0.0, 0.0.0.1).
      for (const spelling of [
        full,
        compressed,
        full.toUpperCase(),
        compressed.toUpperCase(),
        `${compressed}%eth0`,
      ]) {
        expect(Array.from(ipv6Bytes(spelling) ?? []), spelling).toEqual(sample);
        expect(isPublicAddress(spelling), spelling).toBe(reachable);
      }
      const carries = embeddedIPv4(Uint8Array.from(sample));
      expect(carries === undefined ? undefined : v4Text(Array.from(carries))).toBe(
        { '::/128': '0.0.0.0', '::1/128': '0.0.0.1' }[cidr(row, IPV6_SPECIAL)],
      );
    },
  );
});

describe('hand-written addresses, and the edges of the ranges', () => {
  const REFUSED: [string, string][] = [
    // IPv4
    ['0.0.0.1', 'this network, 0/8'],
    ['0.255.255.255', 'this network, the last of 0/8'],
    ['10.0.0.0', 'private, first of 10/8'],
    ['10.20.30.40', 'private'],
    ['10.255.255.255', 'private, last of 10/8'],
    ['100.64.0.0', 'shared (CGN), first of 100.64/10'],
    ['100.100.100.100', 'shared (CGN)'],
    ['100.127.255.255', 'shared (CGN), last of 100.64/10'],
    ['127.0.0.0', 'loopback, first of 127/8'],
    ['127.1.2.3', 'loopback'],
    ['127.255.255.255', 'loopback, last of 127/8'],
    ['169.254.0.0', 'link-local, first'],
    ['169.254.255.255', 'link-local, last'],
    ['172.16.0.0', 'private, first of 172.16/12'],
    ['172.20.1.1', 'private'],
    ['172.31.255.255', 'private, last of 172.16/12'],
    ['192.0.0.0', 'IPv4 service continuity prefix'],
    ['192.0.0.7', 'IPv4 service continuity prefix, last'],
    ['192.0.0.11', 'IETF protocol assignments, just after TURN anycast'],
    ['192.0.0.170', 'NAT64/DNS64 discovery'],
    ['192.0.0.171', 'NAT64/DNS64 discovery'],
    ['192.0.0.255', 'IETF protocol assignments, last'],
    ['192.0.2.0', 'TEST-NET-1, first'],
    ['192.0.2.1', 'TEST-NET-1'],
    ['192.0.2.255', 'TEST-NET-1, last'],
    ['192.88.99.1', 'deprecated 6to4 relay anycast (N/A)'],
    ['192.168.0.0', 'private, first of 192.168/16'],
    ['192.168.255.255', 'private, last of 192.168/16'],
    ['198.18.0.0', 'benchmarking, first of 198.18/15'],
    ['198.19.255.255', 'benchmarking, last of 198.18/15'],
    ['198.51.100.1', 'TEST-NET-2'],
    ['203.0.113.1', 'TEST-NET-3'],
    ['224.0.0.0', 'multicast, first'],
    ['224.0.0.251', 'multicast (mDNS)'],
    ['239.255.255.255', 'multicast, last'],
    ['240.0.0.0', 'reserved, first of 240/4'],
    ['240.1.2.3', 'reserved'],
    ['255.255.255.254', 'reserved, last before the broadcast'],
    ['255.255.255.255', 'limited broadcast'],
    // IPv6
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback, judged as 127.0.0.1'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private, judged as 10.0.0.1'],
    ['::ffff:100.64.0.1', 'IPv4-mapped CGN'],
    ['::ffff:192.0.2.1', 'IPv4-mapped TEST-NET-1'],
    ['fec0::1', 'site-local, deprecated'],
    ['feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'site-local, last of fec0::/10'],
    ['fe80::1', 'link-local'],
    ['fc00::', 'unique-local, first'],
    ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'unique-local, last'],
    ['ff02::1', 'multicast, all nodes'],
    ['ff00::', 'multicast, first'],
    ['2001:db8::1', 'documentation'],
    ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation, last of 2001:db8::/32'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation, last of 3fff::/20'],
    ['100::1', 'discard-only'],
    ['100::ffff:ffff:ffff:ffff', 'discard-only, last of 100::/64'],
    ['100:0:0:1::1', 'dummy prefix'],
    ['2001::1', 'Teredo'],
    ['2001:0:ffff:ffff:ffff:ffff:ffff:ffff', 'Teredo, last'],
    ['2001:1::', 'IETF protocol assignments, just before PCP anycast'],
    ['2001:1::4', 'IETF protocol assignments, just after DNS-SD SRP anycast'],
    ['2001:2::1', 'benchmarking'],
    ['2001:2:0:ffff:ffff:ffff:ffff:ffff', 'benchmarking, last of 2001:2::/48'],
    ['2001:2:1::', 'IETF protocol assignments, just after benchmarking'],
    ['2001:4:113::', 'IETF protocol assignments, just after AS112-v6'],
    ['2001:10::1', 'deprecated ORCHID'],
    ['2001:40::', 'IETF protocol assignments, just after the DETs'],
    ['2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', 'IETF protocol assignments, last of 2001::/23'],
    ['5f00::1', 'SRv6 SIDs'],
    ['64:ff9b::1', 'NAT64 well-known prefix'],
    ['64:ff9b::808:808', 'NAT64, even of a public address'],
    ['64:ff9b:1::1', 'NAT64 local use'],
    ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved, just before 2000::/3'],
    ['4000::', 'reserved, just after 2000::/3'],
    ['2002:a00:1::', '6to4 of 10.0.0.1'],
  ];

  it.each(REFUSED)('%s is refused (%s)', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  const REACHABLE: [string, string][] = [
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['1.0.0.0', 'just after 0/8'],
    ['9.255.255.255', 'just before 10/8'],
    ['11.0.0.0', 'just after 10/8'],
    ['100.63.255.255', 'just before 100.64/10'],
    ['100.128.0.0', 'just after 100.64/10'],
    ['126.255.255.255', 'just before 127/8'],
    ['128.0.0.0', 'just after 127/8'],
    ['169.253.255.255', 'just before 169.254/16'],
    ['169.255.0.0', 'just after 169.254/16'],
    ['172.15.255.255', 'just before 172.16/12'],
    ['172.32.0.0', 'just after 172.16/12'],
    ['191.255.255.255', 'just before 192.0.0/24'],
    ['192.0.0.9', 'PCP anycast'],
    ['192.0.0.10', 'TURN anycast'],
    ['192.0.1.0', 'just after 192.0.0/24'],
    ['192.0.1.255', 'just before TEST-NET-1'],
    ['192.0.3.0', 'just after TEST-NET-1'],
    ['192.31.196.1', 'AS112-v4'],
    ['192.52.193.1', 'AMT'],
    ['192.88.98.255', 'just before the 6to4 relay anycast'],
    ['192.88.100.0', 'just after the 6to4 relay anycast'],
    ['192.167.255.255', 'just before 192.168/16'],
    ['192.169.0.0', 'just after 192.168/16'],
    ['192.175.48.1', 'AS112 direct delegation'],
    ['198.17.255.255', 'just before 198.18/15'],
    ['198.20.0.0', 'just after 198.18/15'],
    ['198.51.99.255', 'just before TEST-NET-2'],
    ['198.51.101.0', 'just after TEST-NET-2'],
    ['203.0.112.255', 'just before TEST-NET-3'],
    ['203.0.114.0', 'just after TEST-NET-3'],
    ['223.255.255.255', 'just before multicast'],
    ['::ffff:192.0.0.9', 'IPv4-mapped PCP anycast, judged as 192.0.0.9'],
    ['2606:4700::1111', 'public'],
    ['2000::', 'first of 2000::/3'],
    ['2001:1::1', 'PCP anycast'],
    ['2001:1::2', 'TURN anycast'],
    ['2001:1::3', 'DNS-SD SRP anycast'],
    ['2001:3::1', 'AMT'],
    ['2001:4:112::1', 'AS112-v6'],
    ['2001:20::1', 'ORCHIDv2'],
    ['2001:30::1', 'Drone Remote ID DETs'],
    ['2001:3f:ffff:ffff:ffff:ffff:ffff:ffff', 'DETs, last of 2001:30::/28'],
    ['2001:200::', 'just after 2001::/23'],
    ['2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', 'just before 2001:db8::/32'],
    ['2001:db9::', 'just after 2001:db8::/32'],
    ['2620:4f:8000::1', 'AS112 direct delegation'],
    ['3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'just before 3fff::/20'],
    ['3fff:1000::', 'just after 3fff::/20'],
    ['3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'last of 2000::/3'],
  ];

  it.each(REACHABLE)('%s is reachable (%s)', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  it.each([
    ['FEC0::1', false],
    ['fec0:0:0:0:0:0:0:1', false],
    ['FEC0:0000:0000:0000:0000:0000:0000:0001', false],
    ['fec0::1%eth0', false],
    ['2001:DB8::1', false],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', false],
    ['3FFF::1', false],
    ['3fff:0::1', false],
    ['5F00::1', false],
    ['0100::1', false],
    ['2001:0:0::1', false],
    ['0:0:0:0:0:0:0:0', false],
    ['::0', false],
    ['::0.0.0.0', false],
    ['::FFFF:0A00:0001', false],
    ['FF02::1', false],
    ['2606:4700:0:0:0:0:0:1111', true],
    ['2606:4700::1111%eth0', true],
    ['2606:4700:0000::1111', true],
    ['2001:0001::0001', true],
    ['::FFFF:C000:9', true],
  ])('a spelling: %s (reachable %s)', (address, reachable) => {
    expect(isPublicAddress(address)).toBe(reachable);
  });

  it.each(['[fec0::1]', '[2606:4700::1111]', ' 8.8.8.8', '8.8.8.8 ', '008.008.008.008', '2606:4700::1111 '])(
    'not an address, so not a public one: %j (a URL host has its brackets taken off by the caller)',
    (text) => {
      expect(isPublicAddress(text)).toBe(false);
    },
  );
});

describe('validateJwksUri: a bracketed or dotted host in a special range, as the URL is set', () => {
  it.each([
    ['https://[fec0::1]/jwks', '[fec0::1]'],
    ['https://[FEC0:0:0:0:0:0:0:1]/jwks', '[fec0::1]'],
    ['https://[2001:db8::1]/jwks', '[2001:db8::1]'],
    ['https://[3fff::1]/jwks', '[3fff::1]'],
    ['https://[100::1]/jwks', '[100::1]'],
    ['https://[2001::1]/jwks', '[2001::1]'],
    ['https://[5f00::1]/jwks', '[5f00::1]'],
    ['https://[64:ff9b::1]/jwks', '[64:ff9b::1]'],
    ['https://[ff02::1]/jwks', '[ff02::1]'],
    ['https://[::ffff:10.0.0.1]/jwks', '[::ffff:a00:1]'],
    ['https://192.0.2.1/jwks', '192.0.2.1'],
    ['https://100.64.0.0/jwks', '100.64.0.0'],
    ['https://172.16.0.0/jwks', '172.16.0.0'],
    ['https://240.0.0.1/jwks', '240.0.0.1'],
    ['https://255.255.255.255/jwks', '255.255.255.255'],
  ])('%s is refused', (uri, host) => {
    const error = thrownBy(() => validateJwksUri(uri, false, false), ValidationError);
    expect(error.message).toBe(
      `jwks_uri's host ${host} is not a public address (loopback, private, link-local, unique-local or reserved)`,
    );
    expect(validateJwksUri(uri, false, true)).toBe(uri);
  });

  it.each([
    'https://192.0.0.9/jwks',
    'https://172.15.255.255/jwks',
    'https://100.128.0.0/jwks',
    'https://[2001:1::1]/jwks',
    'https://[2620:4f:8000::1]/jwks',
  ])('%s is taken', (uri) => {
    expect(validateJwksUri(uri, false, false)).toBe(uri);
  });
});
