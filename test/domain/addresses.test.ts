/**
 * Which addresses a jwks_uri may be fetched from (domain/addresses.ts; INTERFACE.md, "Client authentication"):
 * every spelling of a refused IPv4 address is refused, in IPv4 and in each IPv6 form that carries one (mapped,
 * compatible, translated, 6to4), and the IPv6 ranges of their own; public addresses pass in any spelling. And
 * the rule at set time (validateJwksUri): a URL whose host is a literal refused address is refused, however
 * the URL writes it, unless TESSERA_JWKS_ALLOW_PRIVATE; a host name is not resolved there.
 */
import { describe, expect, it } from 'vitest';
import { embeddedIPv4, ipv6Bytes, isPublicAddress } from '../../src/domain/addresses.js';
import { validateJwksUri } from '../../src/domain/client-auth/index.js';
import { ValidationError } from '../../src/domain/validate.js';
import { thrownBy } from '../helpers/assert.js';

const hex = (bytes: Uint8Array | undefined): string | undefined =>
  bytes === undefined ? undefined : Buffer.from(bytes).toString('hex');

describe('ipv6Bytes: any textual form, its 16 bytes (RFC 4291 §2.2)', () => {
  it.each([
    ['::', '00000000000000000000000000000000'],
    ['::1', '00000000000000000000000000000001'],
    ['::7f00:1', '0000000000000000000000007f000001'],
    ['::127.0.0.1', '0000000000000000000000007f000001'],
    ['::ffff:127.0.0.1', '00000000000000000000ffff7f000001'],
    ['0:0:0:0:0:FFFF:7F00:0001', '00000000000000000000ffff7f000001'],
    ['0000:0000:0000:0000:0000:ffff:127.0.0.1', '00000000000000000000ffff7f000001'],
    ['::ffff:0:7f00:1', '0000000000000000ffff00007f000001'],
    ['2002:7f00:1::', '20027f00000100000000000000000000'],
    ['2606:4700::1111', '26064700000000000000000000001111'],
    ['fe80::1%eth0', 'fe800000000000000000000000000001'],
    ['1:2:3:4:5:6:7:8', '00010002000300040005000600070008'],
    ['1::', '00010000000000000000000000000000'],
  ])('%s', (address, bytes) => {
    expect(hex(ipv6Bytes(address))).toBe(bytes);
  });

  it.each(['127.0.0.1', 'localhost', '', '::ffff:127.1', '1:2:3:4:5:6:7:8:9', ':::', '[::1]', '::g'])(
    'not IPv6: %j',
    (text) => {
      expect(ipv6Bytes(text)).toBeUndefined();
    },
  );
});

describe('embeddedIPv4: the IPv4 address an IPv6 form carries', () => {
  it.each([
    ['::7f00:1', '7f000001'], // IPv4-compatible, ::/96 (RFC 4291 §2.5.5.1)
    ['::ffff:7f00:1', '7f000001'], // IPv4-mapped, ::ffff:0:0/96 (RFC 4291 §2.5.5.2)
    ['::ffff:0:7f00:1', '7f000001'], // IPv4-translated, ::ffff:0:0:0/96 (RFC 2765 §2.1)
    ['2002:a9fe:a9fe::1', 'a9fea9fe'], // 6to4, 2002::/16 (RFC 3056 §2)
    ['::1', '00000001'],
    ['2606:4700::1111', undefined],
    ['64:ff9b::7f00:1', undefined], // NAT64 is refused as a whole, not judged by what it carries
    ['::1:ffff:7f00:1', undefined], // neither mapped nor translated: a 1 before the ffff
  ])('%s', (address, v4) => {
    expect(hex(embeddedIPv4(ipv6Bytes(address)!))).toBe(v4);
  });
});

describe('isPublicAddress', () => {
  /** Every one of these is refused: each is, or carries, an address that is not the open internet. */
  const REFUSED: [string, string][] = [
    // IPv4 (RFC 6890 and friends)
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback, the /8'],
    ['0.0.0.0', 'this network'],
    ['10.0.0.1', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['169.254.169.254', 'link-local: cloud metadata'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private, the /12'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'benchmarking'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    // 127.0.0.1 in IPv6
    ['::7f00:1', 'IPv4-compatible'],
    ['::127.0.0.1', 'IPv4-compatible, dotted'],
    ['0:0:0:0:0:0:7f00:1', 'IPv4-compatible, uncompressed'],
    ['::ffff:127.0.0.1', 'IPv4-mapped, dotted'],
    ['::ffff:7f00:1', 'IPv4-mapped'],
    ['::FFFF:7F00:1', 'IPv4-mapped, upper case'],
    ['0:0:0:0:0:ffff:7f00:1', 'IPv4-mapped, uncompressed'],
    ['0000:0000:0000:0000:0000:ffff:7f00:0001', 'IPv4-mapped, full form'],
    ['0:0:0:0:0:ffff:127.0.0.1', 'IPv4-mapped, uncompressed, dotted'],
    ['::ffff:0:7f00:1', 'IPv4-translated'],
    ['::ffff:0:127.0.0.1', 'IPv4-translated, dotted'],
    ['0:0:0:0:ffff:0:7f00:1', 'IPv4-translated, uncompressed'],
    ['::FFFF:0:7F00:1', 'IPv4-translated, upper case'],
    ['2002:7f00:1::', '6to4'],
    ['2002:7f00:0001:0:0:0:0:1', '6to4, another host behind it'],
    // Other refused IPv4 addresses in IPv6
    ['::ffff:a00:1', 'IPv4-mapped 10.0.0.1'],
    ['::ffff:10.0.0.1', 'IPv4-mapped 10.0.0.1, dotted'],
    ['::a00:1', 'IPv4-compatible 10.0.0.1'],
    ['::ffff:0:a9fe:a9fe', 'IPv4-translated 169.254.169.254'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped 169.254.169.254'],
    ['::169.254.169.254', 'IPv4-compatible 169.254.169.254'],
    ['2002:a9fe:a9fe::', '6to4 169.254.169.254'],
    ['2002:c0a8:101::1', '6to4 192.168.1.1'],
    ['::ffff:6440:1', 'IPv4-mapped 100.64.0.1'],
    ['::ffff:0:0', 'IPv4-mapped 0.0.0.0'],
    // IPv6 of its own
    ['::', 'unspecified (0.0.0.0 as IPv4-compatible)'],
    ['::1', 'loopback (0.0.0.1 as IPv4-compatible)'],
    ['0:0:0:0:0:0:0:1', 'loopback, uncompressed'],
    ['64:ff9b::8.8.8.8', 'NAT64, whatever it carries'],
    ['64:ff9b::7f00:1', 'NAT64'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['FE80::1%eth0', 'link-local with a zone, upper case'],
    ['febf:ffff::1', 'link-local, the /10'],
    ['ff02::1', 'multicast'],
    // Not an IP address at all
    ['localhost', 'a name'],
    ['', 'nothing'],
    ['2130706433', 'a number (the URL parser writes it as a dotted quad; here it is no address)'],
  ];

  it.each(REFUSED)('%s is refused (%s)', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  const PUBLIC: [string, string][] = [
    ['8.8.8.8', 'IPv4'],
    ['1.1.1.1', 'IPv4'],
    ['172.32.0.1', 'just past 172.16.0.0/12'],
    ['100.128.0.1', 'just past 100.64.0.0/10'],
    ['198.20.0.1', 'just past 198.18.0.0/15'],
    ['2606:4700::1111', 'IPv6'],
    ['2606:4700:0:0:0:0:0:1111', 'IPv6, uncompressed'],
    ['2001:4860:4860::8888', 'IPv6'],
    ['::ffff:8.8.8.8', 'IPv4-mapped 8.8.8.8'],
    ['::ffff:808:808', 'IPv4-mapped 8.8.8.8, hex'],
    ['::ffff:0:808:808', 'IPv4-translated 8.8.8.8'],
    ['::8.8.8.8', 'IPv4-compatible 8.8.8.8'],
    ['2002:808:808::1', '6to4 8.8.8.8'],
  ];

  it.each(PUBLIC)('%s passes (%s)', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('validateJwksUri: a literal address is judged when the URL is set', () => {
  const refused = (uri: string, host: string) => {
    const error = thrownBy(() => validateJwksUri(uri, false, false), ValidationError);
    expect(error.message).toBe(
      `jwks_uri's host ${host} is not a public address (loopback, private, link-local, unique-local or reserved)`,
    );
    // TESSERA_JWKS_ALLOW_PRIVATE=true: the same URL is taken as it is.
    expect(validateJwksUri(uri, false, true)).toBe(uri);
  };

  it.each([
    ['http://[::7f00:1]/jwks', '[::7f00:1]'],
    ['http://[::127.0.0.1]/jwks', '[::7f00:1]'],
    ['http://[::ffff:127.0.0.1]/jwks', '[::ffff:7f00:1]'],
    ['http://[0:0:0:0:0:FFFF:7F00:1]/jwks', '[::ffff:7f00:1]'],
    ['http://[::ffff:0:7f00:1]/jwks', '[::ffff:0:7f00:1]'],
    ['https://[::ffff:0:127.0.0.1]:8443/jwks', '[::ffff:0:7f00:1]'],
    ['https://[2002:7f00:1::]/jwks', '[2002:7f00:1::]'],
    ['https://[::ffff:0:a9fe:a9fe]/latest/meta-data', '[::ffff:0:a9fe:a9fe]'],
    ['https://[::1]/jwks', '[::1]'],
    ['https://[fd00::1]/jwks', '[fd00::1]'],
    ['http://127.0.0.1:8080/jwks', '127.0.0.1'],
    ['http://2130706433/jwks', '127.0.0.1'],
    ['http://0x7f.1/jwks', '127.0.0.1'],
    ['http://017700000001/jwks', '127.0.0.1'],
    ['http://127.1/jwks', '127.0.0.1'],
    ['http://127.0.0.1./jwks', '127.0.0.1'],
    ['https://169.254.169.254/latest/meta-data', '169.254.169.254'],
    ['https://10.1.2.3/jwks', '10.1.2.3'],
  ])('%s is refused', refused);

  it.each([
    'https://keys.example.com/jwks.json',
    'https://localhost/jwks', // a name: what it resolves to is checked at each fetch
    'https://8.8.8.8/jwks',
    'https://[2606:4700::1111]/jwks',
    'https://[::ffff:8.8.8.8]/jwks',
  ])('%s is taken', (uri) => {
    expect(validateJwksUri(uri, true, false)).toBe(uri);
  });
});
