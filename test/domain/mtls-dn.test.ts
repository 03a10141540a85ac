/**
 * Distinguished names compared as distinguished names (domain/mtls/dn.ts), for RFC 8705 §2.1.2
 * tls_client_auth_subject_dn: RFC 4514 text and the DER of a certificate's subject reduce to one canonical form.
 * Types in any case or as OIDs, RFC 4514's escapes and spaces, quoted values, `#hex` BER, string values
 * normalized (NFKC, case, insignificant spaces), the members of a multi-valued RDN in any order; the order of the
 * RDNs is significant. The certificates are made by the openssl CLI, with the string types it chooses (UTF8String,
 * BMPString, TeletexString, IA5String, PrintableString).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as asn1js from 'asn1js';
import fc from 'fast-check';
import * as pkijs from 'pkijs';
import { afterAll, describe, expect, it } from 'vitest';
import { canonicalDn, canonicalDnOfDer, dnString } from '../../src/domain/mtls/dn.js';
import { ValidationError } from '../../src/domain/validate.js';
import { thrownBy } from '../helpers/assert.js';

const NOT_A_DN = 'tls_client_auth_subject_dn is not an RFC 4514 distinguished name: ';

/** The DN of most tests: C, O, a multi-valued RDN, then CN in the DER (RFC 4514 §2.1 writes it last first). */
const WORKER = 'CN=worker,OU=Billing+UID=42,O=Example\\, Inc.,C=US';
const WORKER_CANONICAL =
  '[[["2.5.4.3","s:worker"]],[["0.9.2342.19200300.100.1.1","s:42"],["2.5.4.11","s:billing"]],' +
  '[["2.5.4.10","s:example, inc."]],[["2.5.4.6","s:us"]]]';

const errorOf = (text: string): string => thrownBy(() => canonicalDn(text), ValidationError).message;

// ---------------------------------------------------------------------------------------------------------------
// DER built by hand, for the values openssl does not make.

/** A DER element (tag, definite length, contents) as hex. */
function tlv(tag: number, content: string): string {
  const length = content.length / 2;
  const lengthHex =
    length < 0x80
      ? length.toString(16).padStart(2, '0')
      : length < 0x100
        ? `81${length.toString(16).padStart(2, '0')}`
        : `82${length.toString(16).padStart(4, '0')}`;
  return tag.toString(16).padStart(2, '0') + lengthHex + content;
}

/** An OBJECT IDENTIFIER's DER (X.690 §8.19). */
function oid(dotted: string): string {
  const [first, second, ...rest] = dotted.split('.').map(BigInt);
  const arcs = [first! * 40n + second!, ...rest];
  const content = arcs
    .map((arc) => {
      const septets = [Number(arc & 0x7fn)];
      for (let a = arc >> 7n; a > 0n; a >>= 7n) septets.unshift(Number(a & 0x7fn) | 0x80);
      return septets.map((b) => b.toString(16).padStart(2, '0')).join('');
    })
    .join('');
  return tlv(0x06, content);
}

const utf8 = (text: string): string => tlv(0x0c, Buffer.from(text, 'utf8').toString('hex'));
const member = (type: string, value: string): string => tlv(0x30, oid(type) + value);
/** A Name's DER from its RDNs in the DER's order (the most significant first), each a list of members' hex. */
const name = (...rdns: string[][]): Uint8Array =>
  Buffer.from(tlv(0x30, rdns.map((rdn) => tlv(0x31, rdn.join(''))).join('')), 'hex');

const CN = '2.5.4.3';
const O = '2.5.4.10';

// ---------------------------------------------------------------------------------------------------------------
// Certificates made by openssl.

const dir = mkdtempSync(path.join(tmpdir(), 'tessera-dn-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let made = 0;

/**
 * A self-signed certificate's path and DER, made by `openssl req -x509` with the `-subj` given (OpenSSL's
 * `/C=US/O=Example` form, in the DER's order) and, with `mask`, the string types that OpenSSL's string_mask
 * allows: `pkix` writes what PrintableString cannot hold as a BMPString, `default` as a TeletexString; without it,
 * the default configuration's utf8only (UTF8String, and PrintableString for C).
 */
function certificate(subject: string, mask?: 'pkix' | 'default'): { file: string; der: Buffer } {
  const n = ++made;
  const file = path.join(dir, `cert-${n}.der`);
  const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  args.push('-keyout', path.join(dir, `key-${n}.pem`), '-out', file, '-outform', 'DER', '-days', '1');
  args.push('-utf8', '-multivalue-rdn', '-subj', subject);
  if (mask) {
    const config = path.join(dir, `req-${n}.cnf`);
    writeFileSync(config, `[req]\ndistinguished_name = dn\nstring_mask = ${mask}\n[dn]\n`);
    args.push('-config', config);
  }
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  return { file, der: readFileSync(file) };
}

/** The subject Name's DER, as the certificate holds it (RFC 5280 §4.1: the sixth field of the TBSCertificate). */
function subjectOf(cert: Uint8Array): Uint8Array {
  const parsed = asn1js.fromBER(cert);
  const tbs = (parsed.result as asn1js.Sequence).valueBlock.value[0] as asn1js.Sequence;
  const fields = tbs.valueBlock.value;
  // The version is [0] EXPLICIT, absent from a v1 certificate (what openssl makes without extensions).
  const subject = fields[fields[0]!.idBlock.tagClass === 3 ? 5 : 4]!;
  return new Uint8Array(subject.valueBeforeDecodeView);
}

/** The universal tag of each value of a Name, in the DER's order: which string types the certificate has. */
function valueTags(subject: Uint8Array): number[] {
  const rdns = (asn1js.fromBER(subject).result as asn1js.Sequence).valueBlock.value as asn1js.Set[];
  return rdns.flatMap((rdn) =>
    (rdn.valueBlock.value as asn1js.Sequence[]).map((atv) => atv.valueBlock.value[1]!.idBlock.tagNumber),
  );
}

/** OpenSSL's own RFC 2253 rendering of a certificate's subject (non-ASCII as `\XX` UTF-8 escapes). */
function opensslSubject(file: string, nameopt = 'RFC2253'): string {
  const out = execFileSync('openssl', [
    'x509',
    '-inform',
    'DER',
    '-in',
    file,
    '-noout',
    '-subject',
    '-nameopt',
    nameopt,
  ]);
  return out
    .toString('utf8')
    .replace(/^subject=/, '')
    .trimEnd();
}

// ---------------------------------------------------------------------------------------------------------------

describe('canonicalDn: the canonical form', () => {
  it('is the RDNs in the text order, each type as its OID, string values normalized, members sorted', () => {
    expect(canonicalDn(WORKER)).toBe(WORKER_CANONICAL);
  });

  it('is JSON, a value of another type than a string as the hex of its BER', () => {
    expect(canonicalDn('CN=#04020102,O=a \\"b\\"')).toBe(
      '[[["2.5.4.3","x:04020102"]],[["2.5.4.10","s:a \\"b\\""]]]',
    );
  });

  it('keeps a value that normalizes to nothing, and the same member twice', () => {
    expect(canonicalDn('CN=,O=  ')).toBe('[[["2.5.4.3","s:"]],[["2.5.4.10","s:"]]]');
    expect(canonicalDn('CN=a+CN=A')).toBe('[[["2.5.4.3","s:a"],["2.5.4.3","s:a"]]]');
    expect(canonicalDn('CN=a+CN=A')).not.toBe(canonicalDn('CN=a'));
  });
});

describe('canonicalDn: the same DN written differently', () => {
  it.each([
    // RFC 4512 §1.4: descriptors in any case; RFC 4519's long names.
    'cn=worker,ou=Billing+uid=42,o=Example\\, Inc.,c=US',
    'Cn=worker,oU=Billing+Uid=42,O=Example\\, Inc.,c=US',
    'commonName=worker,organizationalUnitName=Billing+userid=42,organizationName=Example\\, Inc.,countryName=US',
    // Numeric OIDs, and RFC 1779's OID. prefix in any case.
    '2.5.4.3=worker,2.5.4.11=Billing+0.9.2342.19200300.100.1.1=42,2.5.4.10=Example\\, Inc.,2.5.4.6=US',
    'OID.2.5.4.3=worker,oid.2.5.4.11=Billing+UID=42,Oid.2.5.4.10=Example\\, Inc.,C=US',
    // Spaces after separators and around + and = (as OpenSSL and Java print), and at either end.
    'CN=worker, OU=Billing + UID=42, O=Example\\, Inc., C=US',
    'CN = worker , OU = Billing+UID = 42 ,O = Example\\, Inc.,C = US',
    '   CN=worker,OU=Billing+UID=42,O=Example\\, Inc.,C=US   ',
    // A quoted value (RFC 2253 §4, RFC 1779), with spaces around it; the comma as a hex escape.
    'CN=worker,OU=Billing+UID=42,O="Example, Inc.",C=US',
    'CN=worker,OU=Billing+UID=42,O = "Example, Inc." ,C=US',
    'CN="worker",OU="Billing"+UID="42",O="Example\\, Inc.",C="US"',
    'CN=worker,OU=Billing+UID=42,O=Example\\2C Inc.,C=US',
    'CN=\\77\\6f\\72\\6B\\65\\72,OU=Billing+UID=42,O=Example\\2c Inc.,C=US',
    // Semicolons between RDNs (RFC 1779 §2.3, RFC 2253 §4).
    'CN=worker;OU=Billing+UID=42;O=Example\\, Inc.;C=US',
    // The case and spaces of values.
    'CN=WORKER,OU=billing+UID=42,O=EXAMPLE\\,   INC.,C=us',
    'CN=\\ worker\\ ,OU=Billing+UID=42,O=Example\\,\tInc.,C=US',
    // The members of the multi-valued RDN in the other order.
    'CN=worker,UID=42+OU=Billing,O=Example\\, Inc.,C=US',
    // #hex BER: a UTF8String, a PrintableString, a BMPString, a UniversalString; in either case.
    'CN=#0c06776f726b6572,OU=Billing+UID=42,O=Example\\, Inc.,C=#13025553',
    'CN=#0C06776F726B6572,OU=#1e0e00420069006c006c0069006e0067+UID=42,O=Example\\, Inc.,C=US',
    'CN=#1c18000000770000006f000000720000006b0000006500000072,OU=Billing+UID=#16023432,O=Example\\, Inc.,C=US',
  ])('%s', (text) => {
    expect(canonicalDn(text)).toBe(WORKER_CANONICAL);
  });
});

describe('canonicalDn: values', () => {
  it.each([
    // RFC 4514 §2.4 and §3: \XX escapes are the UTF-8 of the characters; NFKC composes and folds compatibility forms.
    ['CN=caf\\C3\\A9', 'CN=café'],
    ['CN=caf\\c3\\a9', 'CN=CAFÉ'],
    ['CN=café', 'CN=cafe\u0301'],
    ['CN=café', 'CN=ｃａｆé'],
    ['CN=\\E2\\84\\AB', 'CN=å'],
    ['CN=\\F0\\9F\\94\\91 key', 'CN=🔑 key'],
    ['CN=Zo\\C3\\AB\\2C Z\\C3\\BC', 'CN="Zoë, Zü"'],
    // White space: runs of it are one space, and none at either end (RFC 4518 §2.2, §2.6.1).
    ['CN=a  b', 'CN=a b'],
    ['CN=a\\09b', 'CN=a b'],
    ['CN=a\u00a0\u3000b', 'CN=a b'],
    ['CN=a\\0A\\0Db', 'CN=a b'],
    ['CN=\\20a\\20', 'CN=a'],
    // Escapes and quotes for the same characters.
    ['CN=a\\+b', 'CN="a+b"'],
    ['CN=a\\+b', 'CN=a\\2Bb'],
    ['CN=a\\"b', 'CN="a\\"b"'],
    ['CN=\\<x\\>', 'CN="<x>"'],
    ['CN=a\\;b\\=c', 'CN="a;b=c"'],
    ['CN=a=b', 'CN=a\\=b'],
    ['CN=\\#1', 'CN=\\231'],
    ['CN=x#1', 'CN=x\\#1'],
    ['CN=a\\\\b', 'CN=a\\5Cb'],
    ['CN=\\00', 'CN=#0c0100'],
    // A TeletexString is read as Latin-1.
    ['CN=#1404636166e9', 'CN=café'],
  ])('%s is %s', (a, b) => {
    expect(canonicalDn(a)).toBe(canonicalDn(b));
  });

  it.each([
    // Characters that differ, not only in case or spaces.
    ['CN=cafe', 'CN=café'],
    ['CN=ab', 'CN=a b'],
    ['CN=a.b', 'CN=a b'],
    // U+200B is kept (RFC 4518 would drop it): fewer spellings match, never more.
    ['CN=ab', 'CN=a\u200bb'],
    // A value of another type than a string is its bytes: an OCTET STRING is not the UTF8String of the same text.
    ['CN=#0406776f726b6572', 'CN=worker'],
    // A PrintableString whose bytes are not ASCII is compared by its bytes, never read as text.
    ['CN=#1304636166e9', 'CN=café'],
    ['CN=#1304636166e9', 'CN=#1404636166e9'],
    // The same text under another type.
    ['CN=worker', 'OU=worker'],
    ['CN=worker', '2.5.4.4=worker'],
  ])('%s is not %s', (a, b) => {
    expect(canonicalDn(a)).not.toBe(canonicalDn(b));
  });

  it('compares a value of any other type by its exact bytes', () => {
    expect(canonicalDn('CN=#0403010203')).toBe('[[["2.5.4.3","x:0403010203"]]]');
    expect(canonicalDn('CN=#1304636166e9')).toBe('[[["2.5.4.3","x:1304636166e9"]]]');
    // A long-form length is BER, and another spelling of the bytes: not the same value.
    expect(canonicalDn('CN=#048103010203')).toBe('[[["2.5.4.3","x:048103010203"]]]');
  });
});

describe('canonicalDn: another DN', () => {
  it.each([
    ['the RDNs reversed', 'C=US,O=Example\\, Inc.,OU=Billing+UID=42,CN=worker'],
    ['two RDNs swapped', 'CN=worker,O=Example\\, Inc.,OU=Billing+UID=42,C=US'],
    ['another value', 'CN=worker2,OU=Billing+UID=42,O=Example\\, Inc.,C=US'],
    ['another value in the multi-valued RDN', 'CN=worker,OU=Billing+UID=43,O=Example\\, Inc.,C=US'],
    ['an RDN more', 'CN=worker,OU=Billing+UID=42,O=Example\\, Inc.,L=Paris,C=US'],
    ['an RDN more at the start', 'UID=7,CN=worker,OU=Billing+UID=42,O=Example\\, Inc.,C=US'],
    ['an RDN missing', 'CN=worker,OU=Billing+UID=42,O=Example\\, Inc.'],
    ['a member missing', 'CN=worker,OU=Billing,O=Example\\, Inc.,C=US'],
    ['a member more', 'CN=worker,OU=Billing+UID=42+L=Paris,O=Example\\, Inc.,C=US'],
    ['the multi-valued RDN as two RDNs', 'CN=worker,OU=Billing,UID=42,O=Example\\, Inc.,C=US'],
    ['two RDNs as one multi-valued', 'CN=worker+OU=Billing+UID=42,O=Example\\, Inc.,C=US'],
    ['another type', 'CN=worker,OU=Billing+UID=42,OU=Example\\, Inc.,C=US'],
  ])('%s', (_what, text) => {
    expect(canonicalDn(text)).not.toBe(WORKER_CANONICAL);
  });
});

describe('canonicalDn: what is not a DN', () => {
  const escapes = '("\\" escapes one of , + " \\ < > ; = # or a space, or is followed by two hex digits)';
  it.each([
    ['', 'tls_client_auth_subject_dn is empty: an empty distinguished name matches no certificate'],
    ['   ', 'tls_client_auth_subject_dn is empty: an empty distinguished name matches no certificate'],
    [`CN=${'a'.repeat(2046)}`, 'tls_client_auth_subject_dn is longer than 2048 characters'],
    ['CN=a\ud800b', `${NOT_A_DN}it has a lone UTF-16 surrogate, which is no character`],
    ['CN=a,XX=b', `${NOT_A_DN}unknown attribute type "XX" in RDN 2`],
    ['CN=a,O=b,S=c', `${NOT_A_DN}unknown attribute type "S" in RDN 3`],
    // An unescaped comma separates RDNs: "Inc." is then an RDN without a type.
    ['CN=worker,O=Example, Inc.,C=US', `${NOT_A_DN}no "=" after "Inc." in RDN 3`],
    ['CN=a+email=b', `${NOT_A_DN}unknown attribute type "email" in RDN 1`],
    ['OID=a', `${NOT_A_DN}unknown attribute type "OID" in RDN 1`],
    ['constructor=a', `${NOT_A_DN}unknown attribute type "constructor" in RDN 1`],
    ['CN=a,', `${NOT_A_DN}RDN 2 is empty`],
    [',CN=a', `${NOT_A_DN}RDN 1 is empty`],
    ['CN=a, ,O=b', `${NOT_A_DN}RDN 2 is empty`],
    ['CN=a;;O=b', `${NOT_A_DN}RDN 2 is empty`],
    ['CN=a+', `${NOT_A_DN}nothing after "+" in RDN 1`],
    ['CN=a,O=b+ ,C=US', `${NOT_A_DN}nothing after "+" in RDN 2`],
    ['=a', `${NOT_A_DN}an attribute type is missing before "=" in RDN 1`],
    ['CN=a, =b', `${NOT_A_DN}an attribute type is missing before "=" in RDN 2`],
    ['CN', `${NOT_A_DN}no "=" after "CN" in RDN 1`],
    ['CN=a,O', `${NOT_A_DN}no "=" after "O" in RDN 2`],
    ['CN=a+UID,O=b', `${NOT_A_DN}no "=" after "UID" in RDN 1`],
    [
      'C N=a',
      `${NOT_A_DN}"C N" in RDN 1 is not an attribute type (a name such as CN, or a dotted OID such as 2.5.4.3)`,
    ],
    [
      '1CN=a',
      `${NOT_A_DN}"1CN" in RDN 1 is not an attribute type (a name such as CN, or a dotted OID such as 2.5.4.3)`,
    ],
    [
      'C\tN=a',
      `${NOT_A_DN}"C\\tN" in RDN 1 is not an attribute type (a name such as CN, or a dotted OID such as 2.5.4.3)`,
    ],
    [
      'OID.=a',
      `${NOT_A_DN}"OID." in RDN 1 is not an attribute type (a name such as CN, or a dotted OID such as 2.5.4.3)`,
    ],
    ['2..5=a', `${NOT_A_DN}"2..5" in RDN 1 is not an object identifier: an arc is empty`],
    ['2.5.4.3.=a', `${NOT_A_DN}"2.5.4.3." in RDN 1 is not an object identifier: an arc is empty`],
    ['2.5.04.3=a', `${NOT_A_DN}"2.5.04.3" in RDN 1 is not an object identifier: an arc has a leading zero`],
    ['2=a', `${NOT_A_DN}"2" in RDN 1 is not an object identifier: it has a single arc`],
    ['3.5=a', `${NOT_A_DN}"3.5" in RDN 1 is not an object identifier: the first arc is not 0, 1 or 2`],
    [
      'OID.3.1=a',
      `${NOT_A_DN}"OID.3.1" in RDN 1 is not an object identifier: the first arc is not 0, 1 or 2`,
    ],
    [
      '1.40=a',
      `${NOT_A_DN}"1.40" in RDN 1 is not an object identifier: under 0 or 1 the second arc is not from 0 to 39`,
    ],
    ['CN=a"b', `${NOT_A_DN}an unescaped " in the value of CN in RDN 1 (write \\")`],
    ['CN=a,O=<b', `${NOT_A_DN}an unescaped < in the value of O in RDN 2 (write \\<)`],
    ['cn=a>b', `${NOT_A_DN}an unescaped > in the value of cn in RDN 1 (write \\>)`],
    ['CN=a\u0000b', `${NOT_A_DN}a NUL character in the value of CN in RDN 1 (write \\00)`],
    ['CN="a\u0000b"', `${NOT_A_DN}a NUL character in the value of CN in RDN 1 (write \\00)`],
    ['CN=a\\', `${NOT_A_DN}the value of CN in RDN 1 ends in a lone "\\"`],
    ['CN=a\\q', `${NOT_A_DN}"\\q" in the value of CN in RDN 1 is not an RFC 4514 escape ${escapes}`],
    ['CN=a\\4', `${NOT_A_DN}"\\4" in the value of CN in RDN 1 is not an RFC 4514 escape ${escapes}`],
    ['CN=a\\4g', `${NOT_A_DN}"\\4" in the value of CN in RDN 1 is not an RFC 4514 escape ${escapes}`],
    ['CN=a\\\n', `${NOT_A_DN}"\\\\n" in the value of CN in RDN 1 is not an RFC 4514 escape ${escapes}`],
    ['CN=\\C3', `${NOT_A_DN}the escaped bytes \\C3 in the value of CN in RDN 1 are not UTF-8`],
    ['CN=\\c3x', `${NOT_A_DN}the escaped bytes \\C3 in the value of CN in RDN 1 are not UTF-8`],
    [
      'CN=\\ED\\A0\\80',
      `${NOT_A_DN}the escaped bytes \\ED\\A0\\80 in the value of CN in RDN 1 are not UTF-8`,
    ],
    ['CN=\\C0\\AF', `${NOT_A_DN}the escaped bytes \\C0\\AF in the value of CN in RDN 1 are not UTF-8`],
    [
      'CN=\\C3\\A9\\A9',
      `${NOT_A_DN}the escaped bytes \\C3\\A9\\A9 in the value of CN in RDN 1 are not UTF-8`,
    ],
    ['O="Example, Inc.', `${NOT_A_DN}the quoted value of O in RDN 1 has no closing '"'`],
    ['O="Example" Inc.', `${NOT_A_DN}unexpected text after the quoted value of O in RDN 1`],
    [
      'CN=#',
      `${NOT_A_DN}no hex digits after "#" in the value of CN in RDN 1 (#hex is the BER encoding of the value)`,
    ],
    ['CN=#0c0', `${NOT_A_DN}the #hex value of CN in RDN 1 has an odd number of hex digits`],
    ['CN=#0c03666f6fzz', `${NOT_A_DN}the #hex value of CN in RDN 1 has a character that is not a hex digit`],
    ['CN=#0c 03666f6f', `${NOT_A_DN}the #hex value of CN in RDN 1 has a character that is not a hex digit`],
    ['CN=#0c03666f', `${NOT_A_DN}the #hex value of CN in RDN 1 is not one BER-encoded value`],
    ['CN=#0c03666f6f00', `${NOT_A_DN}the #hex value of CN in RDN 1 is not one BER-encoded value`],
    ['CN=#00', `${NOT_A_DN}the #hex value of CN in RDN 1 is not one BER-encoded value`],
    ['CN=#1f8101020000', `${NOT_A_DN}the #hex value of CN in RDN 1 is not one BER-encoded value`],
  ])('%j', (text, message) => {
    expect(errorOf(text)).toBe(message);
  });

  it('is not a string', () => {
    expect(errorOf(42 as unknown as string)).toBe('tls_client_auth_subject_dn must be a string');
  });
});

describe('canonicalDn: limits', () => {
  it('takes 2048 characters, not 2049', () => {
    expect(canonicalDn(`CN=${'a'.repeat(2045)}`)).toBe(`[[["2.5.4.3","s:${'a'.repeat(2045)}"]]]`);
    expect(errorOf(`CN=${'a'.repeat(2046)}`)).toBe(
      'tls_client_auth_subject_dn is longer than 2048 characters',
    );
  });

  it('takes 64 RDNs, not 65', () => {
    const rdns = (n: number) => Array.from({ length: n }, (_, i) => `DC=d${i}`).join(',');
    expect(JSON.parse(canonicalDn(rdns(64)))).toHaveLength(64);
    expect(errorOf(rdns(65))).toBe('tls_client_auth_subject_dn has more than 64 RDNs');
  });

  it('takes 16 members in an RDN, not 17', () => {
    const members = (n: number) => Array.from({ length: n }, (_, i) => `DC=d${i}`).join('+');
    expect(JSON.parse(canonicalDn(`CN=a,${members(16)}`))[1]).toHaveLength(16);
    expect(errorOf(`CN=a,${members(17)}`)).toBe(
      'tls_client_auth_subject_dn has more than 16 attributes in RDN 2',
    );
  });

  it('reads the longest text in one pass, and names a long type cut short', () => {
    const attribute = '(a name such as CN, or a dotted OID such as 2.5.4.3)';
    expect(errorOf(`C${' '.repeat(2040)}N=a`)).toBe(
      `${NOT_A_DN}"C${' '.repeat(63)}…" in RDN 1 is not an attribute type ${attribute}`,
    );
    expect(errorOf(`${' '.repeat(2040)}CN`)).toBe(`${NOT_A_DN}no "=" after "CN" in RDN 1`);
    expect(canonicalDn(`CN=${'\\\\'.repeat(1022)}`)).toBe(`[[["2.5.4.3","s:${'\\\\'.repeat(1022)}"]]]`);
    expect(canonicalDn(`CN=${'\\C3\\A9'.repeat(170)}`)).toBe(`[[["2.5.4.3","s:${'é'.repeat(170)}"]]]`);
  });

  it('refuses hostile text with a ValidationError, and nothing else', () => {
    const alphabet = [...'CN=OU+,;"\\#<> \t0123456789abcdefABCDEF.é\u0000\u200b'].concat([
      'OID.',
      '\\C3',
      '#0c',
      '\ud83d',
    ]);
    const dnLike = fc.string({ unit: fc.constantFrom(...alphabet), maxLength: 40 });
    fc.assert(
      fc.property(fc.oneof(dnLike, fc.string({ unit: 'binary', maxLength: 40 })), (text) => {
        try {
          expect(typeof canonicalDn(text)).toBe('string');
        } catch (error) {
          expect(error).toBeInstanceOf(ValidationError);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('canonicalDnOfDer and dnString: certificates made by openssl', () => {
  it('matches the text of a multi-valued subject (UTF8String and PrintableString), in the order RFC 4514 writes it', () => {
    const { file, der } = certificate('/C=US/O=Example, Inc./OU=Billing+UID=42/CN=worker');
    const subject = subjectOf(der);
    expect(valueTags(subject)).toEqual([19, 12, 12, 12, 12]);
    expect(canonicalDnOfDer(subject)).toBe(WORKER_CANONICAL);
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn(WORKER));
    expect(canonicalDnOfDer(subject)).toBe(
      canonicalDn('cn=WORKER, uid=42 + ou=billing, o="Example, Inc.", c=us'),
    );
    expect(canonicalDnOfDer(subject)).not.toBe(
      canonicalDn('C=US,O=Example\\, Inc.,OU=Billing+UID=42,CN=worker'),
    );
    expect(canonicalDnOfDer(subject)).not.toBe(canonicalDn('CN=worker,OU=Billing+UID=42,O=Example\\, Inc.'));
    expect(dnString(subject)).toBe(WORKER);
    // OpenSSL's own rendering writes the multi-valued RDN's members in another order: the same DN.
    expect(opensslSubject(file)).toBe('CN=worker,UID=42+OU=Billing,O=Example\\, Inc.,C=US');
    expect(canonicalDn(opensslSubject(file))).toBe(canonicalDnOfDer(subject));
  });

  it('reads the subject that pkijs keeps as it was encoded', () => {
    const { der } = certificate('/C=US/O=Example, Inc./OU=Billing+UID=42/CN=worker');
    const cert = pkijs.Certificate.fromBER(der);
    expect(canonicalDnOfDer(new Uint8Array(cert.subject.valueBeforeDecode))).toBe(WORKER_CANONICAL);
  });

  it('reads non-ASCII UTF8String values', () => {
    const { file, der } = certificate('/O=Zoë/CN=café');
    const subject = subjectOf(der);
    expect(valueTags(subject)).toEqual([12, 12]);
    expect(canonicalDnOfDer(subject)).toBe('[[["2.5.4.3","s:café"]],[["2.5.4.10","s:zoë"]]]');
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn('CN=caf\\C3\\A9,O=Zo\\C3\\AB'));
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn('cn=CAFÉ, o=ZOË'));
    expect(canonicalDnOfDer(subject)).not.toBe(canonicalDn('CN=cafe,O=Zoe'));
    expect(dnString(subject)).toBe('CN=café,O=Zoë');
    expect(opensslSubject(file)).toBe('CN=caf\\C3\\A9,O=Zo\\C3\\AB');
    expect(canonicalDn(opensslSubject(file))).toBe(canonicalDnOfDer(subject));
    expect(canonicalDn(opensslSubject(file, 'RFC2253,-esc_msb'))).toBe(canonicalDnOfDer(subject));
  });

  it('reads BMPString values', () => {
    const { der } = certificate('/O=Zoë/CN=café ünïcode', 'pkix');
    const subject = subjectOf(der);
    expect(valueTags(subject)).toEqual([30, 30]);
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn('CN=Café Ünïcode,O=Zoë'));
    expect(dnString(subject)).toBe('CN=café ünïcode,O=Zoë');
  });

  it('reads TeletexString values as Latin-1', () => {
    const { der } = certificate('/O=Zoë/CN=café', 'default');
    const subject = subjectOf(der);
    expect(valueTags(subject)).toEqual([20, 20]);
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn('CN=café,O=Zoë'));
    expect(dnString(subject)).toBe('CN=café,O=Zoë');
  });

  it('reads IA5String values (DC, emailAddress), and the types in other spellings', () => {
    const { file, der } = certificate('/DC=com/DC=Example/emailAddress=Worker@Example.com/CN=worker');
    const subject = subjectOf(der);
    expect(valueTags(subject)).toEqual([22, 22, 22, 12]);
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn('CN=worker,E=worker@example.com,DC=example,DC=com'));
    expect(canonicalDnOfDer(subject)).toBe(
      canonicalDn('2.5.4.3=worker,1.2.840.113549.1.9.1=worker@example.com,domainComponent=example,dc=com'),
    );
    expect(dnString(subject)).toBe('CN=worker,emailAddress=Worker@Example.com,DC=Example,DC=com');
    expect(canonicalDn(opensslSubject(file))).toBe(canonicalDnOfDer(subject));
  });

  it('reads a subject with escapes in it', () => {
    const { file, der } = certificate('/O=a\\+b, "c" <d>; e\\\\f/CN=#1 ');
    const subject = subjectOf(der);
    expect(dnString(subject)).toBe('CN=\\#1\\ ,O=a\\+b\\, \\"c\\" \\<d\\>\\; e\\\\f');
    expect(canonicalDnOfDer(subject)).toBe(canonicalDn('CN=\\#1,O="a+b, \\"c\\" <d>; e\\\\f"'));
    expect(canonicalDn(opensslSubject(file))).toBe(canonicalDnOfDer(subject));
  });
});

describe('canonicalDnOfDer and dnString: Names built by hand', () => {
  it('reads a value of another type than a string as its BER, written as #hex', () => {
    const der = name([member(CN, '0403010203')], [member(O, utf8('x'))]);
    expect(canonicalDnOfDer(der)).toBe('[[["2.5.4.10","s:x"]],[["2.5.4.3","x:0403010203"]]]');
    expect(canonicalDnOfDer(der)).toBe(canonicalDn('O=x,CN=#0403010203'));
    expect(dnString(der)).toBe('O=x,CN=#0403010203');
  });

  it('writes a type it has no name for as its OID, with its value as #hex (RFC 4514 §2.3, §2.4)', () => {
    const der = name([member('1.3.6.1.4.1.99999.1', utf8('Foo'))], [member(CN, utf8('w'))]);
    expect(dnString(der)).toBe('CN=w,1.3.6.1.4.1.99999.1=#0C03466F6F');
    expect(canonicalDnOfDer(der)).toBe(canonicalDn('CN=w,1.3.6.1.4.1.99999.1=foo'));
  });

  it('reads a UniversalString, and a string type whose bytes are not its encoding as bytes', () => {
    const universal = tlv(0x1c, '0001f511000000200000006b00000065000000ff');
    expect(canonicalDnOfDer(name([member(CN, universal)]))).toBe(canonicalDn('CN=🔑 KEÿ'));
    expect(dnString(name([member(CN, universal)]))).toBe('CN=🔑 keÿ');
    // A PrintableString with a byte over 0x7f, a UTF8String that is not UTF-8, a BMPString with a lone surrogate.
    for (const value of ['1304636166e9', '0c02c328', '1e02d800', '1c0400110000']) {
      const der = name([member(CN, value)]);
      expect(canonicalDnOfDer(der)).toBe(`[[["2.5.4.3","x:${value}"]]]`);
      expect(dnString(der)).toBe(`CN=#${value.toUpperCase()}`);
      expect(canonicalDnOfDer(der)).toBe(canonicalDn(`CN=#${value}`));
    }
  });

  it('sorts the members of a multi-valued RDN whatever their order in the DER', () => {
    const a = name(
      [member(O, utf8('Example'))],
      [member(CN, utf8('w')), member('2.5.4.11', utf8('Billing'))],
    );
    const b = name(
      [member(O, utf8('Example'))],
      [member('2.5.4.11', utf8('Billing')), member(CN, utf8('w'))],
    );
    expect(canonicalDnOfDer(a)).toBe(canonicalDnOfDer(b));
    expect(canonicalDnOfDer(a)).toBe(canonicalDn('OU=billing+CN=W,O=example'));
    expect(dnString(a)).toBe('CN=w+OU=Billing,O=Example');
    expect(dnString(b)).toBe('OU=Billing+CN=w,O=Example');
  });

  it('escapes what RFC 4514 §2.4 requires, and what a log would hide', () => {
    const values = ['#x', ' a ', 'a,b+c"d\\e<f>g;h=i', 'line\nbreak\u202e', '\u0000', 'a\u00a0b', 'é'];
    const der = name(values.map((value) => member(CN, utf8(value))));
    expect(dnString(der)).toBe(
      'CN=\\#x+CN=\\ a\\ +CN=a\\,b\\+c\\"d\\\\e\\<f\\>g\\;h=i+CN=line\\0Abreak\\E2\\80\\AE+CN=\\00+CN=a\\C2\\A0b+CN=é',
    );
    expect(canonicalDn(dnString(der)!)).toBe(canonicalDnOfDer(der));
  });

  it('reads the empty Name, which no registered DN matches', () => {
    expect(canonicalDnOfDer(name())).toBe('[]');
    expect(dnString(name())).toBe('');
  });

  it('reads a Name whose OIDs have large arcs', () => {
    const der = name([member('2.999.18446744073709551616', utf8('x'))]);
    expect(canonicalDnOfDer(der)).toBe(canonicalDn('2.999.18446744073709551616=x'));
    expect(dnString(der)).toBe('2.999.18446744073709551616=#0C0178');
  });

  it.each([
    ['no bytes', ''],
    ['not a SEQUENCE', '310a300806035504030c0178'],
    ['a byte after the Name', `${tlv(0x30, tlv(0x31, member(CN, utf8('x'))))}00`],
    ['a Name cut short', tlv(0x30, tlv(0x31, member(CN, utf8('x')))).slice(0, -2)],
    ['an empty RDN', tlv(0x30, tlv(0x31, ''))],
    ['an RDN that is a SEQUENCE', tlv(0x30, tlv(0x30, member(CN, utf8('x'))))],
    ['a member with three elements', tlv(0x30, tlv(0x31, tlv(0x30, oid(CN) + utf8('x') + utf8('y'))))],
    ['a member without a value', tlv(0x30, tlv(0x31, tlv(0x30, oid(CN))))],
    ['a type that is not an OID', tlv(0x30, tlv(0x31, tlv(0x30, utf8('cn') + utf8('x'))))],
    ['an OID with a padded arc', tlv(0x30, tlv(0x31, tlv(0x30, '060455800403' + utf8('x'))))],
    ['an OID cut short', tlv(0x30, tlv(0x31, tlv(0x30, '06025584' + utf8('x'))))],
    ['an empty OID', tlv(0x30, tlv(0x31, tlv(0x30, '0600' + utf8('x'))))],
    ['an indefinite length', `3080${tlv(0x31, member(CN, utf8('x')))}0000`],
  ])('does not read %s', (_what, hex) => {
    const der = Buffer.from(hex, 'hex');
    expect(canonicalDnOfDer(der)).toBeUndefined();
    expect(dnString(der)).toBeUndefined();
  });

  it('reads what is not a Uint8Array as nothing', () => {
    expect(canonicalDnOfDer('0\u0000' as unknown as Uint8Array)).toBeUndefined();
    expect(dnString(undefined as unknown as Uint8Array)).toBeUndefined();
  });
});

describe('canonicalDnOfDer and dnString: properties', () => {
  const types = [
    CN,
    O,
    '2.5.4.11',
    '2.5.4.6',
    '0.9.2342.19200300.100.1.1',
    '1.2.840.113549.1.9.1',
    '1.3.6.1.4.1.1.2',
  ];
  const text = fc.string({ unit: 'binary', maxLength: 8 }).filter((s) => !/\p{Cs}/u.test(s));
  const value = fc.oneof(
    text.map(utf8),
    text.map((s) => tlv(0x1e, Buffer.from(s, 'utf16le').swap16().toString('hex'))),
    fc.stringMatching(/^[a-z0-9 ]{0,8}$/).map((s) => tlv(0x13, Buffer.from(s).toString('hex'))),
    fc.uint8Array({ maxLength: 6 }).map((bytes) => tlv(0x04, Buffer.from(bytes).toString('hex'))),
  );
  const rdn = fc.array(
    fc.tuple(fc.constantFrom(...types), value).map(([type, v]) => member(type, v)),
    { minLength: 1, maxLength: 3 },
  );
  const names = fc.array(rdn, { minLength: 1, maxLength: 5 }).map((rdns) => name(...rdns));

  it('dnString reads back, as RFC 4514 text, as the same DN', () => {
    fc.assert(
      fc.property(names, (der) => {
        expect(canonicalDn(dnString(der)!)).toBe(canonicalDnOfDer(der));
      }),
      { numRuns: 1000 },
    );
  });

  it('never throws on hostile bytes', () => {
    const { der } = certificate('/C=US/O=Example, Inc./OU=Billing+UID=42/CN=worker');
    const subject = subjectOf(der);
    const mutated = fc
      .array(fc.tuple(fc.nat(subject.length - 1), fc.integer({ min: 0, max: 255 })), {
        minLength: 1,
        maxLength: 4,
      })
      .map((changes) => {
        const bytes = Uint8Array.from(subject);
        for (const [at, byte] of changes) bytes[at] = byte;
        return bytes;
      });
    fc.assert(
      fc.property(fc.oneof(mutated, fc.uint8Array({ maxLength: 64 }), names), (bytes) => {
        const canonical = canonicalDnOfDer(bytes);
        const rendered = dnString(bytes);
        expect(canonical === undefined).toBe(rendered === undefined);
        if (canonical !== undefined && canonical !== '[]' && rendered!.length <= 2048) {
          expect(canonicalDn(rendered!)).toBe(canonical);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
