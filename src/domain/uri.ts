/*
 * Comparing an http(s) URI the way RFC 3986 §6.2.2 and §6.2.3 allow, and no other way (docs/interface.md, DPoP: a
 * proof's `htu`). The WHATWG URL parser is no help here: it takes a leading space, a tab, `127.1` or `0x7f.1` for
 * the same URL, and RFC 9449 §4.3 wants the URI the client signed, compared as a URI.
 */

/** RFC 3986 appendix B, for an absolute URI with an authority: scheme, authority, path, then query and fragment. */
const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(?:\?[^#]*)?(?:#.*)?$/;
/** Printable ASCII but the space: a URI is nothing else (RFC 3986 §2), whitespace anywhere refuses it. */
const URI_CHARACTERS = /^[\x21-\x7e]*$/;
/** RFC 3986 §2.3. */
const UNRESERVED = /[A-Za-z0-9\-._~]/;
/**
 * RFC 3986 §3.2.2: an IP literal in brackets, or a reg-name (unreserved, percent-encodings, sub-delims: never a
 * colon, so `host:8080:80` is no host and port).
 */
const HOST = /^(?:\[[0-9A-Za-z:._~!$&'()*+,;=-]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)$/;
const DEFAULT_PORTS: Readonly<Record<string, string>> = { http: '80', https: '443' };

/**
 * RFC 3986 §6.2.2.2: every percent-encoding in upper-case hex, and those of unreserved characters decoded.
 * Undefined when a `%` is not followed by two hex digits (not a URI).
 */
function normalizePercents(text: string): string | undefined {
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '%') {
      out += c;
      continue;
    }
    const hex = text.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
    const decoded = String.fromCharCode(parseInt(hex, 16));
    out += UNRESERVED.test(decoded) ? decoded : `%${hex.toUpperCase()}`;
    i += 2;
  }
  return out;
}

/** RFC 3986 §5.2.4: remove_dot_segments. */
function removeDotSegments(path: string): string {
  let input = path;
  const output: string[] = [];
  while (input.length > 0) {
    if (input.startsWith('../')) input = input.slice(3);
    else if (input.startsWith('./')) input = input.slice(2);
    else if (input.startsWith('/./')) input = input.slice(2);
    else if (input === '/.') input = '/';
    else if (input.startsWith('/../')) {
      input = input.slice(3);
      output.pop();
    } else if (input === '/..') {
      input = '/';
      output.pop();
    } else if (input === '.' || input === '..') input = '';
    else {
      const next = input.indexOf('/', input.startsWith('/') ? 1 : 0);
      const segment = next < 0 ? input : input.slice(0, next);
      output.push(segment);
      input = next < 0 ? '' : input.slice(next);
    }
  }
  return output.join('');
}

/**
 * An http or https URI in its normal form (RFC 3986 §6.2.2, §6.2.3), without its query and fragment (RFC 9449
 * §4.3: they are not compared): scheme and host in lower case, percent-encodings normalized, dot segments
 * removed, an empty or default port dropped, an empty path as `/`. Undefined for anything else: not an absolute
 * http(s) URI, whitespace or a character no URI has anywhere in it, a malformed percent-encoding, a port that
 * is not digits. Nothing else is reinterpreted: `127.1` stays a host name that is not `127.0.0.1`.
 */
export function normalizedHttpUri(text: string): string | undefined {
  if (!URI_CHARACTERS.test(text)) return undefined;
  const match = ABSOLUTE.exec(text);
  if (match === null) return undefined;
  const scheme = match[1]!.toLowerCase();
  const defaultPort = DEFAULT_PORTS[scheme];
  if (defaultPort === undefined) return undefined;
  let authority = match[2]!;
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at + 1);
  authority = authority.slice(at + 1);
  // RFC 3986 §3.2.2-3.2.3: host, then an optional port of digits (an IP literal's colons are inside brackets).
  const portAt = authority.lastIndexOf(':');
  const hasPort = portAt >= 0 && !authority.slice(portAt).includes(']');
  const rawHost = hasPort ? authority.slice(0, portAt) : authority;
  const port = hasPort ? authority.slice(portAt + 1) : '';
  if (!/^[0-9]*$/.test(port) || !HOST.test(rawHost)) return undefined;
  // Case-insensitive but for the hex of its percent-encodings, which are upper case (§6.2.2.1).
  const host = normalizePercents(rawHost)?.replace(/%[0-9A-F]{2}|[A-Z]+/g, (part) =>
    part.startsWith('%') ? part : part.toLowerCase(),
  );
  const user = normalizePercents(userinfo);
  const path = normalizePercents(match[3]!);
  if (host === undefined || user === undefined || path === undefined) return undefined;
  const portPart = port === '' || port === defaultPort ? '' : `:${port}`;
  return `${scheme}://${user}${host}${portPart}${path === '' ? '/' : removeDotSegments(path)}`;
}
