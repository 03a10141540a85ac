import { X509Certificate } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * The client certificate that a TLS-terminating proxy forwarded in a header (RFC 8705 behind a proxy;
 * TESSERA_CLIENT_CERT_HEADER names the format). The caller reads it only from a peer in TESSERA_TRUST_PROXY;
 * here is only the reading. A header that is there but does not parse is { malformed: why }, which the caller
 * logs at warn and otherwise treats as no certificate: `why` is short, English, and never quotes the header,
 * which is a client's certificate and whatever a misbehaving hop put beside it.
 *
 * Tessera verifies the chain itself, so only certificates are taken: a Hash, Subject or URI that a proxy states
 * about a certificate it does not forward is nothing Tessera could verify.
 */
import { CLIENT_CERT_HEADERS } from '../config/index.js';

/** The header kinds (TESSERA_CLIENT_CERT_HEADER's values), as the settings list them. */
export { CLIENT_CERT_HEADERS };
export type ClientCertHeader = (typeof CLIENT_CERT_HEADERS)[number];

/** A certificate as a proxy forwarded it: the leaf's DER and the intermediates it sent (nearest first, the leaf not among them). */
export interface ForwardedCertificate {
  leaf: Buffer;
  chain: Buffer[];
}

/** Beyond these a header is refused before it is decoded, and a certificate before it is parsed. */
const MAX_HEADER_CHARS = 64 * 1024;
const MAX_CERTIFICATE_BYTES = 16 * 1024;
const MAX_CHAIN = 10;

/**
 * The certificate in the request's headers of that kind (Node's IncomingHttpHeaders: lower-case names, repeated
 * headers joined by ', ' or as arrays); undefined when the header is absent or empty; { malformed: why } when it is
 * there but does not parse (why: a short English reason for a warn log, never including the header's value).
 */
export function forwardedCertificate(
  kind: ClientCertHeader,
  headers: IncomingHttpHeaders,
): ForwardedCertificate | undefined | { malformed: string } {
  try {
    switch (kind) {
      case 'client-cert':
        return fromClientCert(headers);
      case 'x-forwarded-client-cert':
        return fromEnvoy(headers);
      case 'ssl-client-cert':
        return fromNginx(headers);
    }
  } catch (error) {
    if (error instanceof Unparsable) return { malformed: error.message };
    // The readers below throw nothing else; should something unforeseen (a headers object of another shape)
    // throw, it is still a header that could not be read, never an error answer.
    return { malformed: 'the header could not be read' };
  }
}

/** Why a header does not parse: thrown by the readers below, returned by forwardedCertificate. */
class Unparsable extends Error {}

function refuse(why: string): never {
  throw new Unparsable(why);
}

// ---------------------------------------------------------------------------------------------------------------
// RFC 9440: Client-Cert and Client-Cert-Chain, structured fields (RFC 8941)

function fromClientCert(headers: IncomingHttpHeaders): ForwardedCertificate | undefined {
  const cert = fieldValue(headers, 'client-cert', 'Client-Cert');
  // RFC 9440 §2.3: Client-Cert-Chain MUST NOT appear unless Client-Cert is present; alone it is no certificate.
  if (cert === undefined) return undefined;
  // RFC 9440 §2.2: a Byte Sequence, and a singleton: two lines, which Node joins with ', ', are not an Item.
  const leaf = new StructuredField(cert, 'Client-Cert', 'a structured-field byte sequence').item();
  // RFC 9440 §2.3: a List of Byte Sequences, in TLS order, without the leaf; it may be split across lines,
  // which Node joins into the one list RFC 8941 §4.2 asks a parser to read.
  const chainValue = fieldValue(headers, 'client-cert-chain', 'Client-Cert-Chain') ?? '';
  const chain = new StructuredField(
    chainValue,
    'Client-Cert-Chain',
    'a structured-field list of byte sequences',
  ).list();
  return checked(leaf, chain);
}

/**
 * A structured field's value (RFC 8941 §4.2), read from its start; each method consumes what it parses. Only
 * what RFC 9440 uses is kept: byte sequences; parameters are parsed (to know where they end) and ignored, as
 * RFC 9440 defines none. Any failure refuses the whole field (RFC 8941 §4.2: a field that fails to parse is
 * ignored entirely), as not `shape` or, for the operator's sake, as not base64.
 */
class StructuredField {
  private at = 0;
  private readonly shape: string;

  constructor(
    private readonly text: string,
    private readonly name: string,
    shape: string,
  ) {
    this.shape = `${name} is not ${shape}`;
  }

  /** RFC 8941 §4.2 with field_type "item": SP may surround it, nothing else. */
  item(): Buffer {
    this.skipSpaces();
    const bytes = this.byteSequenceItem();
    this.skipSpaces();
    if (this.at < this.text.length) refuse(this.shape);
    return bytes;
  }

  /** RFC 8941 §4.2 with field_type "list", and §4.2.1 Parsing a List; at most MAX_CHAIN members. */
  list(): Buffer[] {
    const members: Buffer[] = [];
    this.skipSpaces();
    while (this.at < this.text.length) {
      // RFC 9440 §2.3: each member is a Byte Sequence; an Inner List (RFC 8941 §4.2.1.1) is not.
      members.push(this.byteSequenceItem());
      if (members.length > MAX_CHAIN) refuse(`${this.name} holds more than ${MAX_CHAIN} certificates`);
      this.skipOws();
      if (this.at === this.text.length) return members;
      if (this.text[this.at] !== ',') refuse(this.shape);
      this.at++;
      this.skipOws();
      // RFC 8941 §4.2.1 step 2.6: a trailing comma fails.
      if (this.at === this.text.length) refuse(this.shape);
    }
    return members;
  }

  /** RFC 8941 §4.2.3 Parsing an Item, whose bare item must be a Byte Sequence. */
  private byteSequenceItem(): Buffer {
    if (this.text[this.at] !== ':') refuse(this.shape);
    const bytes = this.byteSequence();
    this.parameters();
    return bytes;
  }

  /** RFC 8941 §4.2.7 Parsing a Byte Sequence: ":" base64 ":". */
  private byteSequence(): Buffer {
    const end = this.text.indexOf(':', this.at + 1);
    if (end === -1) refuse(this.shape);
    // RFC 8941 §4.2.7 step 6: only ALPHA, DIGIT, "+", "/" and "="; line feeds and spaces included, they fail.
    const bytes = base64(this.text, this.at + 1, end, false);
    if (bytes === undefined) refuse(`${this.name} is not valid base64`);
    this.at = end + 1;
    return bytes;
  }

  /** RFC 8941 §4.2.3.2 Parsing Parameters: *( ";" *SP key [ "=" bare-item ] ), values discarded. */
  private parameters(): void {
    while (this.text[this.at] === ';') {
      this.at++;
      this.skipSpaces();
      this.key();
      if (this.text[this.at] === '=') {
        this.at++;
        this.bareItem();
      }
    }
  }

  /** RFC 8941 §4.2.3.3 Parsing a Key: ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" ). */
  private key(): void {
    const first = this.text.charCodeAt(this.at);
    if (!(isLcAlpha(first) || first === STAR)) refuse(this.shape);
    this.at++;
    while (this.at < this.text.length && isKeyChar(this.text.charCodeAt(this.at))) this.at++;
  }

  /** RFC 8941 §4.2.3.1 Parsing a Bare Item, for a parameter's value: skipped once it is known to be well formed. */
  private bareItem(): void {
    const c = this.text.charCodeAt(this.at);
    if (c === MINUS || isDigit(c)) this.number();
    else if (c === DQUOTE) this.string();
    else if (isAlpha(c) || c === STAR) this.token();
    else if (c === COLON) this.byteSequence();
    else if (c === QUESTION) this.boolean();
    else refuse(this.shape);
  }

  /** RFC 8941 §4.2.4 Parsing an Integer or Decimal: at most 15 digits, or 12 and 3 after the ".". */
  private number(): void {
    if (this.text.charCodeAt(this.at) === MINUS) this.at++;
    if (!isDigit(this.text.charCodeAt(this.at))) refuse(this.shape);
    let length = 0; // of input_number, the "." included
    let point = -1; // where in input_number the "." is
    while (this.at < this.text.length) {
      const c = this.text.charCodeAt(this.at);
      if (isDigit(c)) length++;
      else if (c === DOT && point === -1) {
        if (length > 12) refuse(this.shape);
        point = length++;
      } else break;
      this.at++;
      if (length > (point === -1 ? 15 : 16)) refuse(this.shape);
    }
    if (point !== -1 && (point === length - 1 || length - point - 1 > 3)) refuse(this.shape);
  }

  /** RFC 8941 §4.2.5 Parsing a String: printable ASCII, with only \" and \\ escaped. */
  private string(): void {
    this.at++;
    while (this.at < this.text.length) {
      const c = this.text.charCodeAt(this.at++);
      if (c === BACKSLASH) {
        const next = this.text.charCodeAt(this.at++);
        if (next !== DQUOTE && next !== BACKSLASH) refuse(this.shape);
      } else if (c === DQUOTE) return;
      else if (c < 0x20 || c > 0x7e) refuse(this.shape);
    }
    refuse(this.shape);
  }

  /** RFC 8941 §4.2.6 Parsing a Token: ( ALPHA / "*" ) *( tchar / ":" / "/" ). */
  private token(): void {
    this.at++;
    while (this.at < this.text.length) {
      const c = this.text.charCodeAt(this.at);
      if (!(isTchar(c) || c === COLON || c === SLASH)) return;
      this.at++;
    }
  }

  /** RFC 8941 §4.2.8 Parsing a Boolean: "?1" or "?0". */
  private boolean(): void {
    const value = this.text[this.at + 1];
    if (value !== '1' && value !== '0') refuse(this.shape);
    this.at += 2;
  }

  private skipSpaces(): void {
    while (this.text[this.at] === ' ') this.at++;
  }

  /** OWS (RFC 9110 §5.6.3): SP and HTAB, which RFC 8941 §3.1 allows around a List's commas. */
  private skipOws(): void {
    while (this.text[this.at] === ' ' || this.text[this.at] === '\t') this.at++;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Envoy: x-forwarded-client-cert (XFCC)

function fromEnvoy(headers: IncomingHttpHeaders): ForwardedCertificate | undefined {
  const value = fieldValue(headers, 'x-forwarded-client-cert', 'x-forwarded-client-cert');
  if (value === undefined) return undefined;
  // Envoy: each proxy appends its element at the end; the last is the nearest proxy's, the peer the caller trusts.
  const nearest = xfccElements(value).at(-1);
  if (nearest === undefined) return undefined;
  const cert = onlyPair(nearest, 'cert', 'Cert');
  const chain = onlyPair(nearest, 'chain', 'Chain');
  // Only By, Hash, Subject, URI or DNS: statements about a certificate, not one Tessera can verify.
  if (cert === undefined && chain === undefined) return undefined;
  // Envoy: Cert is the client certificate in URL-encoded PEM.
  const leaves = cert === undefined ? [] : pemCertificates(urlDecoded(cert, 'XFCC Cert'), 'XFCC Cert', 1);
  // Envoy: Chain is the whole chain in URL-encoded PEM, the leaf included (first: it is OpenSSL's peer chain).
  const whole =
    chain === undefined ? [] : pemCertificates(urlDecoded(chain, 'XFCC Chain'), 'XFCC Chain', MAX_CHAIN + 1);
  const leaf = leaves[0] ?? whole[0]!;
  const intermediates = whole.filter((der) => !der.equals(leaf));
  if (intermediates.length > MAX_CHAIN) refuse(`XFCC Chain holds more than ${MAX_CHAIN} chain certificates`);
  return checked(leaf, intermediates);
}

/** One XFCC key's value (keys are case-insensitive, Envoy); a certificate given twice is refused, not chosen. */
function onlyPair(element: XfccPair[], key: string, name: string): string | undefined {
  const values = element.filter((pair) => pair.key === key);
  if (values.length > 1) refuse(`the nearest XFCC element has more than one ${name}`);
  return values[0]?.value;
}

interface XfccPair {
  /** Lower-cased. */
  key: string;
  /** Unquoted. */
  value: string;
}

/**
 * The elements of an XFCC value, each its pairs in order, in one pass (so no input costs more than its length).
 * Envoy: elements are separated by ",", pairs by ";", key and value by "="; a value with ",", ";" or "=" is
 * double-quoted, a double quote in it escaped as \". Envoy quotes Cert, Chain and Subject and escapes nothing
 * itself (a Subject's RFC 4514 escapes, \, and \", pass through), so a backslash in a quoted value takes the next
 * character as it is. Empty elements and pairs (a doubled or trailing separator) are skipped, as RFC 9110 §5.6.1.2
 * asks of a list's recipient. A syntax error anywhere refuses the whole header: past it, where the elements
 * begin is not known, so neither is which one is last.
 */
function xfccElements(text: string): XfccPair[][] {
  const elements: XfccPair[][] = [];
  let pairs: XfccPair[] = [];
  let at = 0;
  for (;;) {
    const keyStart = at;
    while (at < text.length && !isXfccDelimiter(text.charCodeAt(at)) && text[at] !== '=') at++;
    const key = trimOws(text.slice(keyStart, at)).toLowerCase();
    if (text[at] === '=') {
      if (key === '') refuse('x-forwarded-client-cert has a value without a key');
      at++;
      let value: string;
      while (text[at] === ' ' || text[at] === '\t') at++;
      if (text[at] === '"') {
        // A quoted value: up to the next unescaped double quote; then only OWS before the next delimiter.
        at++;
        value = '';
        let from = at;
        while (at < text.length && text[at] !== '"') {
          if (text[at] === '\\') {
            value += text.slice(from, at);
            from = ++at; // the escaped character is kept as it is
            if (at === text.length) break;
          }
          at++;
        }
        if (at >= text.length) refuse('x-forwarded-client-cert has an unterminated quoted value');
        value += text.slice(from, at);
        at++;
        while (text[at] === ' ' || text[at] === '\t') at++;
        if (at < text.length && !isXfccDelimiter(text.charCodeAt(at)))
          refuse('x-forwarded-client-cert has text after a quoted value');
      } else {
        const valueStart = at;
        while (at < text.length && !isXfccDelimiter(text.charCodeAt(at))) at++;
        value = trimOws(text.slice(valueStart, at));
      }
      pairs.push({ key, value });
    } else if (key !== '') refuse('x-forwarded-client-cert has a key without a value');
    if (at >= text.length || text[at] === ',') {
      if (pairs.length > 0) elements.push(pairs);
      pairs = [];
    }
    if (at >= text.length) return elements;
    at++; // past the ";" or ","
  }
}

function isXfccDelimiter(c: number): boolean {
  return c === SEMICOLON || c === COMMA;
}

// ---------------------------------------------------------------------------------------------------------------
// nginx: ssl-client-cert, set to $ssl_client_escaped_cert

/**
 * nginx's $ssl_client_escaped_cert is the PEM URL-encoded (ngx_escape_uri, NGX_ESCAPE_URI_COMPONENT). Its older
 * $ssl_client_cert puts a tab after each line break so that the PEM folds over header lines: obsolete line
 * folding, which Node refuses (400) and which an intermediary that unfolds it turns into spaces and tabs
 * (RFC 9112 §5.2); some proxies send the PEM with its line breaks as spaces. Whitespace inside the base64 is
 * skipped, so all of these read alike; a PEM has no "%", so URL-decoding leaves the unescaped ones as they are.
 * A bundle (some proxies send the chain after the leaf) is the leaf first, then its chain.
 */
function fromNginx(headers: IncomingHttpHeaders): ForwardedCertificate | undefined {
  const value = fieldValue(headers, 'ssl-client-cert', 'ssl-client-cert');
  if (value === undefined) return undefined;
  const [leaf, ...chain] = pemCertificates(
    urlDecoded(value, 'ssl-client-cert'),
    'ssl-client-cert',
    MAX_CHAIN + 1,
  );
  return checked(leaf!, chain);
}

// ---------------------------------------------------------------------------------------------------------------
// What the formats share

/**
 * A header's value as one string: Node joins a repeated header's lines with ", " (an array, as from
 * headersDistinct or another framework, is joined the same way); undefined when it is absent or blank. Refused
 * beyond MAX_HEADER_CHARS before anything reads it: a certificate's header is a few KiB.
 */
function fieldValue(headers: IncomingHttpHeaders, header: string, name: string): string | undefined {
  const raw = headers[header];
  const value = Array.isArray(raw) ? raw.join(', ') : raw;
  if (typeof value !== 'string' || trimOws(value) === '') return undefined;
  if (value.length > MAX_HEADER_CHARS) refuse(`${name} is larger than ${MAX_HEADER_CHARS / 1024} KiB`);
  return value;
}

function urlDecoded(text: string, name: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    // A "%" not followed by two hex digits, or escapes that are not UTF-8.
    refuse(`${name} is not URL-encoded`);
  }
}

const PEM_BEGIN = '-----BEGIN CERTIFICATE-----';
const PEM_END = '-----END CERTIFICATE-----';

/**
 * The DER of each certificate in a PEM text (RFC 7468 §5.1), in order; at least one, at most `most`. Between and
 * around them only whitespace: RFC 7468 §5.2 lets a file carry explanatory text there, but a header is written by
 * a proxy, and text beside its certificates means the value is not what the proxy wrote (two header lines that
 * Node joined with ", ", say). indexOf and one pass over each body: linear in the text, whatever it holds.
 */
function pemCertificates(text: string, name: string, most: number): Buffer[] {
  const found: Buffer[] = [];
  let at = 0;
  for (;;) {
    const begin = text.indexOf(PEM_BEGIN, at);
    if (!isBlank(text, at, begin === -1 ? text.length : begin))
      refuse(`${name} holds text outside its PEM certificates`);
    if (begin === -1) break;
    const body = begin + PEM_BEGIN.length;
    const end = text.indexOf(PEM_END, body);
    if (end === -1) refuse(`${name} holds a PEM certificate without its END line`);
    // RFC 7468 §3: the base64 text may be broken into lines, and whitespace is to be ignored.
    const der = base64(text, body, end, true);
    if (der === undefined) refuse(`${name} holds a PEM certificate that is not valid base64`);
    if (found.length === most)
      refuse(
        most === 1
          ? `${name} holds more than one certificate`
          : `${name} holds more than ${most - 1} chain certificates`,
      );
    found.push(der);
    at = end + PEM_END.length;
  }
  if (found.length === 0) refuse(`${name} holds no PEM certificate`);
  return found;
}

/**
 * The bytes of text[from, to) as base64 (RFC 4648 §4, the standard alphabet), or undefined if it is not: a
 * character outside the alphabet, "=" anywhere but at the end or more of it than the last quantum needs, or a
 * last quantum of one character. Missing "=" padding and non-zero pad bits are accepted: RFC 8941 §4.2.7 says
 * parsers SHOULD NOT fail on either. With `whitespace`, SP, HTAB, CR and LF are skipped (PEM's line breaks and
 * nginx's tabs); without, they are refused (RFC 8941 §4.2.7: MUST fail on line feeds in encoded data). Checked
 * here because Buffer.from(…, 'base64') accepts anything, dropping what it does not know.
 */
function base64(text: string, from: number, to: number, whitespace: boolean): Buffer | undefined {
  let data = 0;
  let padding = 0;
  let spaced = false;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (isAlpha(c) || isDigit(c) || c === PLUS || c === SLASH) {
      if (padding > 0) return undefined;
      data++;
    } else if (c === EQUALS) padding++;
    else if (whitespace && (c === SPACE || c === TAB || c === CR || c === LF)) spaced = true;
    else return undefined;
  }
  // RFC 4648 §4: a last quantum of 2 or 3 characters is padded with 2 or 1 "=", a full one not at all.
  if (data % 4 === 1 || (padding > 0 && (padding > 2 || (data + padding) % 4 !== 0))) return undefined;
  const encoded = text.slice(from, to);
  return Buffer.from(spaced ? encoded.replace(/[\t\n\r ]+/g, '') : encoded, 'base64');
}

/**
 * The certificates, each at most MAX_CERTIFICATE_BYTES and exactly one DER certificate: X509Certificate also
 * takes PEM, and ignores bytes after the DER, so its own encoding must be the bytes given — those are what a
 * certificate-bound token's x5t#S256 hashes (RFC 8705 §3.1) and what the chain is verified from.
 */
function checked(leaf: Buffer, chain: Buffer[]): ForwardedCertificate {
  for (const der of [leaf, ...chain]) {
    if (der.length > MAX_CERTIFICATE_BYTES)
      refuse(`a certificate is larger than ${MAX_CERTIFICATE_BYTES / 1024} KiB`);
    if (!isOneCertificate(der)) refuse('the certificate does not parse');
  }
  return { leaf, chain };
}

function isOneCertificate(der: Buffer): boolean {
  try {
    return new X509Certificate(der).raw.equals(der);
  } catch {
    return false;
  }
}

function isBlank(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c !== SPACE && c !== TAB && c !== CR && c !== LF) return false;
  }
  return true;
}

/** Without the OWS (SP, HTAB) at either end; String.prototype.trim would take other whitespace too. */
function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text[start] === ' ' || text[start] === '\t')) start++;
  while (end > start && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  return text.slice(start, end);
}

const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const DQUOTE = 0x22;
const STAR = 0x2a;
const PLUS = 0x2b;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const SLASH = 0x2f;
const COLON = 0x3a;
const SEMICOLON = 0x3b;
const EQUALS = 0x3d;
const QUESTION = 0x3f;
const BACKSLASH = 0x5c;

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

function isLcAlpha(c: number): boolean {
  return c >= 0x61 && c <= 0x7a;
}

function isAlpha(c: number): boolean {
  return isLcAlpha(c) || (c >= 0x41 && c <= 0x5a);
}

function isKeyChar(c: number): boolean {
  return isLcAlpha(c) || isDigit(c) || c === 0x5f || c === MINUS || c === DOT || c === STAR;
}

/** RFC 9110 §5.6.2 tchar. */
function isTchar(c: number): boolean {
  return isAlpha(c) || isDigit(c) || "!#$%&'*+-.^_`|~".includes(String.fromCharCode(c));
}
