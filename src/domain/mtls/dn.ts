/*
 * Distinguished names compared as distinguished names (RFC 8705 §2.1.2: a tls_client_auth client registers
 * `tls_client_auth_subject_dn`, "the expected subject distinguished name of the certificate"), not as text. An
 * operator writes the DN as RFC 4514 text; the certificate holds it as the DER of an X.501 Name. Both are reduced to
 * one canonical form, and two DNs match iff their canonical forms are the same string:
 *
 *   - the RDNs in RFC 4514's order (§2.1: the last element of the RDNSequence first), so `CN=worker,O=Example,C=US`
 *     is the DER sequence C, O, CN, and the reversed DN is another DN;
 *   - each attribute type as its dotted OID, whether written as a descriptor in any case (`cn`, `CN`), as a
 *     numeric OID or as RFC 1779's `OID.2.5.4.3`;
 *   - each value of a string type as its text, normalized as RFC 4518 prepares a caseIgnoreMatch (simplified: NFKC,
 *     lower case, insignificant spaces dropped and runs of white space as one); every other value as its exact
 *     BER bytes;
 *   - the members of a multi-valued RDN (`OU=Billing+UID=42`) sorted: X.501 makes an RDN a SET, without order.
 *
 * The canonical form is JSON, `[[["2.5.4.3","s:worker"]],[["2.5.4.10","s:example"]],…]` (`s:` a normalized string,
 * `x:` the lower-case hex of a value's BER): unambiguous, not meant to be shown. dnString renders a Name for a log
 * or an audit reason.
 */
import * as asn1js from 'asn1js';
import { ValidationError } from '../validate.js';

const FIELD = 'tls_client_auth_subject_dn';
const NOT_A_DN = `${FIELD} is not an RFC 4514 distinguished name`;
/** Limits on what an operator registers: far above any real subject, low enough to bound the work on hostile text. */
const MAX_TEXT = 2048;
const MAX_RDNS = 64;
const MAX_MEMBERS = 16;
/** The longest OID content Tessera decodes (real ones are under 40 bytes): a longer one is no attribute type it knows. */
const MAX_OID_BYTES = 128;

/**
 * The attribute types a DN may name by a descriptor (lower-cased here, matched case-insensitively: RFC 4512 §1.4),
 * with their OIDs: RFC 4514 §3's table, the X.520 types certificates carry (with their RFC 4519 long names where
 * registered), and PKCS #9's emailAddress (`E` as Windows and Java print it).
 */
const DESCRIPTORS: ReadonlyMap<string, string> = new Map([
  ['cn', '2.5.4.3'],
  ['commonname', '2.5.4.3'],
  ['sn', '2.5.4.4'],
  ['surname', '2.5.4.4'],
  ['serialnumber', '2.5.4.5'],
  ['c', '2.5.4.6'],
  ['countryname', '2.5.4.6'],
  ['l', '2.5.4.7'],
  ['localityname', '2.5.4.7'],
  ['st', '2.5.4.8'],
  ['stateorprovincename', '2.5.4.8'],
  ['street', '2.5.4.9'],
  ['streetaddress', '2.5.4.9'],
  ['o', '2.5.4.10'],
  ['organizationname', '2.5.4.10'],
  ['ou', '2.5.4.11'],
  ['organizationalunitname', '2.5.4.11'],
  ['title', '2.5.4.12'],
  ['description', '2.5.4.13'],
  ['businesscategory', '2.5.4.15'],
  ['postalcode', '2.5.4.17'],
  ['name', '2.5.4.41'],
  ['gn', '2.5.4.42'],
  ['givenname', '2.5.4.42'],
  ['initials', '2.5.4.43'],
  ['generationqualifier', '2.5.4.44'],
  ['dnqualifier', '2.5.4.46'],
  ['pseudonym', '2.5.4.65'],
  ['organizationidentifier', '2.5.4.97'],
  ['uid', '0.9.2342.19200300.100.1.1'],
  ['userid', '0.9.2342.19200300.100.1.1'],
  ['dc', '0.9.2342.19200300.100.1.25'],
  ['domaincomponent', '0.9.2342.19200300.100.1.25'],
  ['emailaddress', '1.2.840.113549.1.9.1'],
  ['e', '1.2.840.113549.1.9.1'],
]);

/** The descriptor dnString writes for an OID: RFC 4514 §3's short names, and the usual name of the others. */
const NAMES: ReadonlyMap<string, string> = new Map([
  ['2.5.4.3', 'CN'],
  ['2.5.4.4', 'SN'],
  ['2.5.4.5', 'serialNumber'],
  ['2.5.4.6', 'C'],
  ['2.5.4.7', 'L'],
  ['2.5.4.8', 'ST'],
  ['2.5.4.9', 'STREET'],
  ['2.5.4.10', 'O'],
  ['2.5.4.11', 'OU'],
  ['2.5.4.12', 'title'],
  ['2.5.4.13', 'description'],
  ['2.5.4.15', 'businessCategory'],
  ['2.5.4.17', 'postalCode'],
  ['2.5.4.41', 'name'],
  ['2.5.4.42', 'GN'],
  ['2.5.4.43', 'initials'],
  ['2.5.4.44', 'generationQualifier'],
  ['2.5.4.46', 'dnQualifier'],
  ['2.5.4.65', 'pseudonym'],
  ['2.5.4.97', 'organizationIdentifier'],
  ['0.9.2342.19200300.100.1.1', 'UID'],
  ['0.9.2342.19200300.100.1.25', 'DC'],
  ['1.2.840.113549.1.9.1', 'emailAddress'],
]);

/** RFC 4512 §1.4: descr = keystring = leadkeychar *keychar. */
const DESCR = /^[A-Za-z][A-Za-z0-9-]*$/;
/** Digits and dots: what a numericoid is made of (RFC 4512 §1.4); its arcs are checked one by one. */
const DIGITS_AND_DOTS = /^[0-9.]+$/;
const HEX_DIGIT = /^[0-9A-Fa-f]$/;
/** A UTF-16 code unit that is half of no pair: text that no UTF-8 encodes (RFC 4514 §2.4 values are UTF-8). */
const LONE_SURROGATE = /\p{Cs}/u;
/**
 * The white space of RFC 4518 §2.2 (mapped to SPACE there): the C0 separators, NEL and every Unicode separator.
 * RFC 4518 also maps other controls, format characters and U+200B to nothing; they are kept here, significant,
 * so that a DN matches fewer spellings, never more.
 */
const WHITE_SPACE = /[\t\n\v\f\r\u0085\p{Zs}\p{Zl}\p{Zp}]+/gu;
/** What dnString writes as `\XX` escapes so that a log shows it: controls, format characters, separators. */
const HIDDEN = /^[\p{Cc}\p{Cf}\p{Z}]$/u;
/** RFC 4514 §3 `escaped` and `special`: the characters a `\` may escape. */
const ESCAPABLE = ',+"\\<>;= #';

/** A value as X.501 compares it: the text of a string type, or the BER of any other type. */
type Value =
  | { readonly text: string; readonly ber?: Uint8Array }
  | { readonly text?: undefined; readonly ber: Uint8Array };
/** One AttributeTypeAndValue: its type's dotted OID and its value. */
type Member = { readonly oid: string } & Value;
type Rdn = readonly Member[];

// ---------------------------------------------------------------------------------------------------------------
// Values as X.501 types: the string types decoded, everything else kept as bytes.

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const ascii = (content: Uint8Array): string | undefined =>
  content.every((byte) => byte < 0x80) ? Buffer.from(content).toString('latin1') : undefined;

/**
 * The text of each string type a Name holds (X.520's DirectoryString: UTF8String, PrintableString,
 * TeletexString, UniversalString, BMPString; IA5String for emailAddress and DC; NumericString and VisibleString),
 * by universal tag. Undefined when the bytes are not that type's encoding: such a value is compared by its bytes.
 */
const STRING_TYPES: ReadonlyMap<number, (content: Uint8Array) => string | undefined> = new Map([
  [
    12,
    (content) => {
      try {
        return UTF8.decode(content);
      } catch {
        return undefined;
      }
    },
  ],
  [18, ascii],
  [19, ascii],
  // TeletexString as Latin-1, as OpenSSL and most software read it: T.61's own character set is history.
  [20, (content) => Buffer.from(content).toString('latin1')],
  [22, ascii],
  [26, ascii],
  [
    28,
    (content) => {
      // UniversalString: UCS-4, big-endian.
      if (content.length % 4 !== 0) return undefined;
      const view = new DataView(content.buffer, content.byteOffset, content.byteLength);
      const characters: string[] = [];
      for (let at = 0; at < content.length; at += 4) {
        const code = view.getUint32(at);
        if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return undefined;
        characters.push(String.fromCodePoint(code));
      }
      return characters.join('');
    },
  ],
  [
    30,
    (content) => {
      // BMPString: UCS-2, big-endian (read as UTF-16, which only adds the surrogate pairs).
      if (content.length % 2 !== 0) return undefined;
      const text = Buffer.from(content).swap16().toString('utf16le');
      return LONE_SURROGATE.test(text) ? undefined : text;
    },
  ],
]);

/** The contents octets of a definite-length element; undefined for an indefinite one (not DER: X.690 §10.1). */
function contentOf(block: asn1js.BaseBlock): Uint8Array | undefined {
  const whole = block.valueBeforeDecodeView;
  const header = block.idBlock.blockLength + block.lenBlock.blockLength;
  if (block.lenBlock.isIndefiniteForm || header + block.lenBlock.length !== whole.length) return undefined;
  return whole.subarray(header);
}

/** A value as X.501 compares it: a string type's text when it is one and its bytes are its encoding. */
function valueOf(block: asn1js.BaseBlock): Value {
  const ber = block.valueBeforeDecodeView.slice();
  const { tagClass, tagNumber, isConstructed } = block.idBlock;
  // A constructed string (BER, never DER: X.690 §10.2) is compared by its bytes, as a type of its own.
  const decode = tagClass === 1 && !isConstructed ? STRING_TYPES.get(tagNumber) : undefined;
  const content = decode && contentOf(block);
  const text = content && decode(content);
  return text === undefined ? { ber } : { text, ber };
}

/** One BER element parsed, the whole of `bytes`; undefined for anything else. asn1js may throw on hostile input. */
function parseBer(bytes: Uint8Array): asn1js.BaseBlock | undefined {
  if (bytes.length === 0) return undefined;
  try {
    // parseEmbedded: an OCTET STRING's contents are a value's bytes, not ASN.1 to look into.
    const parsed = asn1js.fromBER(bytes, { parseEmbedded: false });
    return parsed.offset === bytes.length ? parsed.result : undefined;
  } catch {
    return undefined;
  }
}

/** A DER OBJECT IDENTIFIER's contents as dotted decimal (X.690 §8.19); undefined when it is not one. */
function oidOf(content: Uint8Array): string | undefined {
  if (content.length === 0 || content.length > MAX_OID_BYTES) return undefined;
  const arcs: bigint[] = [];
  let arc = 0n;
  let within = false;
  for (const byte of content) {
    // X.690 §8.19.2: each subidentifier in as few octets as possible (no leading 0x80).
    if (!within && byte === 0x80) return undefined;
    arc = (arc << 7n) | BigInt(byte & 0x7f);
    within = (byte & 0x80) !== 0;
    if (!within) {
      arcs.push(arc);
      arc = 0n;
    }
  }
  if (within) return undefined;
  // X.690 §8.19.4: the first subidentifier is 40 × the first arc + the second (the first arc is 0, 1 or 2).
  const first = arcs[0]!;
  const top = first < 40n ? 0n : first < 80n ? 1n : 2n;
  return [top, first - 40n * top, ...arcs.slice(1)].join('.');
}

// ---------------------------------------------------------------------------------------------------------------
// The DER of a Name (X.501: Name ::= RDNSequence; RDNSequence ::= SEQUENCE OF RelativeDistinguishedName;
// RelativeDistinguishedName ::= SET SIZE (1..MAX) OF AttributeTypeAndValue; AttributeTypeAndValue ::=
// SEQUENCE { type OBJECT IDENTIFIER, value ANY }).

const SEQUENCE = 16;
const SET = 17;
const OBJECT_IDENTIFIER = 6;

/** The elements of a definite-length universal SEQUENCE or SET; undefined when `block` is not one. */
function elementsOf(block: asn1js.BaseBlock, tag: number): asn1js.BaseBlock[] | undefined {
  const { tagClass, tagNumber, isConstructed } = block.idBlock;
  if (tagClass !== 1 || tagNumber !== tag || !isConstructed || block.lenBlock.isIndefiniteForm)
    return undefined;
  return block instanceof asn1js.Constructed ? block.valueBlock.value : undefined;
}

/** The RDNs of a Name's DER, in the DER's order (the most significant first); undefined when it is not one. */
function parseName(der: Uint8Array): Rdn[] | undefined {
  try {
    const name = der instanceof Uint8Array ? parseBer(der) : undefined;
    const sets = name && elementsOf(name, SEQUENCE);
    if (!sets) return undefined;
    const rdns: Rdn[] = [];
    for (const set of sets) {
      const members = elementsOf(set, SET);
      if (!members || members.length === 0) return undefined;
      const rdn: Member[] = [];
      for (const member of members) {
        const parts = elementsOf(member, SEQUENCE);
        if (!parts || parts.length !== 2) return undefined;
        const [type, value] = parts as [asn1js.BaseBlock, asn1js.BaseBlock];
        const { tagClass, tagNumber, isConstructed } = type.idBlock;
        if (tagClass !== 1 || tagNumber !== OBJECT_IDENTIFIER || isConstructed) return undefined;
        const content = contentOf(type);
        const oid = content && oidOf(content);
        if (oid === undefined) return undefined;
        rdn.push({ oid, ...valueOf(value) });
      }
      rdns.push(rdn);
    }
    return rdns;
  } catch {
    // Nothing above should throw; a hostile Name that finds a way is still only a Name that does not parse.
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The canonical form.

/**
 * RFC 4518's preparation for caseIgnoreMatch, simplified: NFKC (§2.3); case folded to lower case (§2.2), then NFKC
 * again, as a lower-cased character may not be normalized; the white space of §2.2 as one space between words and
 * none at either end (§2.6.1, insignificant space handling).
 */
function normalized(text: string): string {
  const folded = text.normalize('NFKC').toLowerCase().normalize('NFKC');
  const spaced = folded.replace(WHITE_SPACE, ' ');
  return spaced.slice(spaced.startsWith(' ') ? 1 : 0, spaced.endsWith(' ') ? -1 : undefined);
}

const hexOf = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** RDNs in RFC 4514's order as one string; each RDN's members sorted (X.501: an RDN is a SET). */
function canonicalOf(rdns: readonly Rdn[]): string {
  const form = rdns.map((rdn) =>
    rdn
      .map(({ oid, text, ber }): [string, string] => [
        oid,
        text === undefined ? `x:${hexOf(ber)}` : `s:${normalized(text)}`,
      ])
      .sort(([oidA, valueA], [oidB, valueB]) =>
        oidA !== oidB ? (oidA < oidB ? -1 : 1) : valueA < valueB ? -1 : valueA > valueB ? 1 : 0,
      ),
  );
  return JSON.stringify(form);
}

// ---------------------------------------------------------------------------------------------------------------
// RFC 4514 text.

/** A type or value named in a message: quoted, control characters escaped, a long one cut short. */
const quoted = (text: string): string => JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);

const isSeparator = (c: string | undefined): boolean => c === ',' || c === '+' || c === ';';

function notADn(what: string): never {
  throw new ValidationError(`${NOT_A_DN}: ${what}`);
}

/** A parser of one DN's text, left to right; `at` is where it is. */
class DnText {
  private at = 0;
  private rdn = 0;

  constructor(private readonly text: string) {}

  private fail(what: string): never {
    notADn(what);
  }

  /** RFC 4514 §3 allows, and OpenSSL and Java print, spaces around `,` `+` and `=`: they are skipped. */
  private skipSpaces(): void {
    while (this.text[this.at] === ' ') this.at++;
  }

  /** The RDNs in the text's order (RFC 4514 §2.1: the last of the RDNSequence first). */
  parse(): Rdn[] {
    const rdns: Rdn[] = [];
    this.skipSpaces();
    for (;;) {
      this.rdn = rdns.length + 1;
      if (this.rdn > MAX_RDNS) throw new ValidationError(`${FIELD} has more than ${MAX_RDNS} RDNs`);
      const members: Member[] = [this.member(true)];
      // RFC 4514 §3: `+` joins the members of a multi-valued RDN.
      while (this.text[this.at] === '+') {
        this.at++;
        this.skipSpaces();
        if (members.length === MAX_MEMBERS) {
          throw new ValidationError(`${FIELD} has more than ${MAX_MEMBERS} attributes in RDN ${this.rdn}`);
        }
        members.push(this.member(false));
      }
      rdns.push(members);
      if (this.at === this.text.length) return rdns;
      // RFC 4514 §3: `,` separates RDNs; RFC 1779 §2.3 (and RFC 2253 §4) also `;`, which RFC 4514 has escaped.
      this.at++;
      this.skipSpaces();
    }
  }

  /** One AttributeTypeAndValue; leaves `at` at the separator after it or at the end. */
  private member(first: boolean): Member {
    const start = this.at;
    while (this.at < this.text.length && this.text[this.at] !== '=' && !isSeparator(this.text[this.at]))
      this.at++;
    let end = this.at;
    while (end > start && this.text[end - 1] === ' ') end--;
    const written = this.text.slice(start, end);
    if (written === '') {
      if (this.text[this.at] === '=') this.fail(`an attribute type is missing before "=" in RDN ${this.rdn}`);
      this.fail(first ? `RDN ${this.rdn} is empty` : `nothing after "+" in RDN ${this.rdn}`);
    }
    if (this.text[this.at] !== '=') this.fail(`no "=" after ${quoted(written)} in RDN ${this.rdn}`);
    const oid = this.attributeType(written);
    this.at++;
    this.skipSpaces();
    return { oid, ...this.value(written) };
  }

  /** RFC 4514 §3 attributeType = descr / numericoid, and RFC 1779 §2.3's `OID.` before a numericoid. */
  private attributeType(written: string): string {
    const numeric = /^oid\./i.test(written) ? written.slice(4) : written;
    if (DIGITS_AND_DOTS.test(numeric)) return this.numericOid(written, numeric);
    if (!DESCR.test(written)) {
      this.fail(
        `${quoted(written)} in RDN ${this.rdn} is not an attribute type (a name such as CN, or a dotted OID such as 2.5.4.3)`,
      );
    }
    const oid = DESCRIPTORS.get(written.toLowerCase());
    if (oid === undefined) this.fail(`unknown attribute type ${quoted(written)} in RDN ${this.rdn}`);
    return oid;
  }

  /** RFC 4512 §1.4 numericoid = number 1*( DOT number ), number = DIGIT / ( LDIGIT 1*DIGIT ); X.660's first arcs. */
  private numericOid(written: string, numeric: string): string {
    const arcs = numeric.split('.');
    const wrong = (why: string) =>
      this.fail(`${quoted(written)} in RDN ${this.rdn} is not an object identifier: ${why}`);
    if (arcs.some((arc) => arc === '')) wrong('an arc is empty');
    if (arcs.some((arc) => arc.length > 1 && arc.startsWith('0'))) wrong('an arc has a leading zero');
    if (arcs.length < 2) wrong('it has a single arc');
    // X.660 §A.2 (and X.690 §8.19.4, which encodes the first two arcs as one number): 0, 1 or 2, then under 40.
    if (!['0', '1', '2'].includes(arcs[0]!)) wrong('the first arc is not 0, 1 or 2');
    if (arcs[0] !== '2' && (arcs[1]!.length > 2 || Number(arcs[1]) > 39)) {
      wrong('under 0 or 1 the second arc is not from 0 to 39');
    }
    return numeric;
  }

  /** RFC 4514 §3 attributeValue = string / hexstring, or RFC 2253 §4's quoted string. */
  private value(type: string): Value {
    const where = `${type} in RDN ${this.rdn}`;
    const c = this.text[this.at];
    if (c === '#') return this.hexValue(where);
    if (c === '"') return this.quotedValue(where);
    return this.stringValue(where);
  }

  /**
   * RFC 4514 §3 string, with its escapes; trailing spaces (which §3 wants escaped) are kept in the text, and dropped
   * by the comparison with all insignificant spaces.
   */
  private stringValue(where: string): Value {
    const out = new Escapes(where);
    while (this.at < this.text.length && !isSeparator(this.text[this.at])) {
      const c = this.text[this.at]!;
      if (c === '\\') this.escape(out, where);
      // RFC 4514 §3: these are not stringchar (SUTF1) unescaped.
      else if (c === '"' || c === '<' || c === '>')
        this.fail(`an unescaped ${c} in the value of ${where} (write \\${c})`);
      else if (c === '\0') this.fail(`a NUL character in the value of ${where} (write \\00)`);
      else {
        out.literal(c);
        this.at++;
      }
    }
    return { text: out.end() };
  }

  /** RFC 1779 §2.3 and RFC 2253 §4: a value in double quotes, where `,` `+` `;` need no escape. */
  private quotedValue(where: string): Value {
    const out = new Escapes(where);
    this.at++;
    for (;;) {
      const c = this.text[this.at];
      if (c === undefined) this.fail(`the quoted value of ${where} has no closing '"'`);
      if (c === '"') break;
      if (c === '\\') this.escape(out, where);
      else if (c === '\0') this.fail(`a NUL character in the value of ${where} (write \\00)`);
      else {
        out.literal(c);
        this.at++;
      }
    }
    this.at++;
    this.skipSpaces();
    if (this.at < this.text.length && !isSeparator(this.text[this.at])) {
      this.fail(`unexpected text after the quoted value of ${where}`);
    }
    return { text: out.end() };
  }

  /** RFC 4514 §3 pair = ESC ( ESC / special / hexpair ); `at` is at the `\`. */
  private escape(out: Escapes, where: string): void {
    const next = this.text[this.at + 1];
    if (next === undefined) this.fail(`the value of ${where} ends in a lone "\\"`);
    if (ESCAPABLE.includes(next)) {
      out.literal(next);
      this.at += 2;
      return;
    }
    const second = this.text[this.at + 2];
    if (HEX_DIGIT.test(next) && second !== undefined && HEX_DIGIT.test(second)) {
      out.byte(parseInt(next + second, 16));
      this.at += 3;
      return;
    }
    // JSON's escapes inside the quotes, so that a control character shows.
    const escaped = JSON.stringify(String.fromCodePoint(this.text.codePointAt(this.at + 1)!)).slice(1, -1);
    this.fail(
      `"\\${escaped}" in the value of ${where} is not an RFC 4514 escape ("\\" escapes one of , + " \\ < > ; = # ` +
        'or a space, or is followed by two hex digits)',
    );
  }

  /** RFC 4514 §2.4 and §3 hexstring = SHARP 1*hexpair: the BER encoding of the value. */
  private hexValue(where: string): Value {
    const start = ++this.at;
    while (this.at < this.text.length && HEX_DIGIT.test(this.text[this.at]!)) this.at++;
    const hex = this.text.slice(start, this.at);
    this.skipSpaces();
    if (this.at < this.text.length && !isSeparator(this.text[this.at])) {
      this.fail(`the #hex value of ${where} has a character that is not a hex digit`);
    }
    if (hex === '')
      this.fail(`no hex digits after "#" in the value of ${where} (#hex is the BER encoding of the value)`);
    if (hex.length % 2 !== 0) this.fail(`the #hex value of ${where} has an odd number of hex digits`);
    const element = parseBer(Buffer.from(hex, 'hex'));
    if (element === undefined) this.fail(`the #hex value of ${where} is not one BER-encoded value`);
    return valueOf(element);
  }
}

/**
 * A value's text as it is unescaped: literal characters, and the bytes of `\XX` escapes, each run of which must be
 * UTF-8 (RFC 4514 §2.4: a string's octets are UTF-8, and §3 escapes any of them as a hexpair).
 */
class Escapes {
  private text = '';
  private bytes: number[] = [];

  constructor(private readonly where: string) {}

  literal(c: string): void {
    this.flush();
    this.text += c;
  }

  byte(value: number): void {
    this.bytes.push(value);
  }

  end(): string {
    this.flush();
    return this.text;
  }

  private flush(): void {
    if (this.bytes.length === 0) return;
    const bytes = Uint8Array.from(this.bytes);
    this.bytes = [];
    try {
      this.text += UTF8.decode(bytes);
    } catch {
      const escapes = [...bytes].map((b) => `\\${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
      notADn(`the escaped bytes ${escapes} in the value of ${this.where} are not UTF-8`);
    }
  }
}

/** RFC 4514 §2.4: a string value escaped so that it reads back as the same value. */
function escaped(text: string): string {
  const characters = [...text];
  return characters
    .map((c, index) => {
      if ('"+,;<>\\'.includes(c)) return `\\${c}`;
      if ((index === 0 && (c === ' ' || c === '#')) || (index === characters.length - 1 && c === ' '))
        return `\\${c}`;
      // §2.4 lets any other character be escaped as hex pairs: so are those a log would hide (NUL, line breaks,
      // bidirectional overrides, unusual spaces).
      if (c !== ' ' && HIDDEN.test(c)) {
        return [...Buffer.from(c, 'utf8')]
          .map((b) => `\\${b.toString(16).toUpperCase().padStart(2, '0')}`)
          .join('');
      }
      return c;
    })
    .join('');
}

/** RFC 4514 §2.3 and §2.4: a known type by its descriptor with its text, any other as its OID with #hex BER. */
function memberString({ oid, text, ber }: Member): string {
  const name = NAMES.get(oid);
  if (name !== undefined && text !== undefined) return `${name}=${escaped(text)}`;
  return `${name ?? oid}=#${hexOf(ber!).toUpperCase()}`;
}

// ---------------------------------------------------------------------------------------------------------------

/**
 * The canonical form of an RFC 4514 DN string: two DNs match iff their canonical forms are equal strings. Throws
 * ValidationError with what is wrong and where (`tls_client_auth_subject_dn is not an RFC 4514 distinguished
 * name: unknown attribute type "XX" in RDN 2`).
 */
export function canonicalDn(text: string): string {
  if (typeof text !== 'string') throw new ValidationError(`${FIELD} must be a string`);
  if (text.length > MAX_TEXT) throw new ValidationError(`${FIELD} is longer than ${MAX_TEXT} characters`);
  if (text.trim() === '') {
    throw new ValidationError(`${FIELD} is empty: an empty distinguished name matches no certificate`);
  }
  if (LONE_SURROGATE.test(text)) notADn('it has a lone UTF-16 surrogate, which is no character');
  return canonicalOf(new DnText(text).parse());
}

/**
 * The canonical form of the DER of an X.501 Name (a certificate's subject: the bytes inside the certificate, as
 * pkijs keeps them in `cert.subject.valueBeforeDecode`), in RFC 4514's order (the DER's last
 * RDN first), so that it equals canonicalDn of the Name's RFC 4514 text; undefined when it does not parse.
 */
export function canonicalDnOfDer(der: Uint8Array): string | undefined {
  const rdns = parseName(der);
  return rdns && canonicalOf(rdns.reverse());
}

/**
 * The RFC 4514 string of a DER Name (`CN=worker,O=Example,C=US`), for logs and audit reasons; undefined when it does
 * not parse. canonicalDn of it is canonicalDnOfDer of the Name.
 */
export function dnString(der: Uint8Array): string | undefined {
  const rdns = parseName(der);
  return (
    rdns &&
    rdns
      .reverse()
      .map((rdn) => rdn.map(memberString).join('+'))
      .join(',')
  );
}
