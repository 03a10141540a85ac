/**
 * The console's session cookie (docs/management.md, "Sessions"): `__Host-` prefixed and Secure when the issuer is
 * https; browsers refuse that prefix on plain http, so a local http issuer uses a plain name. Always HttpOnly,
 * SameSite=Strict, Path=/. Both HTTP faces know it: the console's session API sets and clears it, the admin API
 * takes it in place of a token and names it in its OpenAPI document.
 */
export class SessionCookie {
  readonly name: string;
  private readonly secure: boolean;

  constructor(issuer: string) {
    this.secure = issuer.startsWith('https://');
    this.name = this.secure ? '__Host-tessera_session' : 'tessera_session';
  }

  /** The cookie's value in a request, if it has one (the first, if a client sent several). */
  read(header: string | undefined): string | undefined {
    if (header === undefined) return undefined;
    for (const part of header.split(';')) {
      const at = part.indexOf('=');
      if (at > 0 && part.slice(0, at).trim() === this.name) return part.slice(at + 1).trim();
    }
    return undefined;
  }

  /** The Set-Cookie of a new session, which the browser keeps until the session's absolute end. */
  set(value: string, maxAgeSeconds: number): string {
    return this.attributes(`${this.name}=${value}; Max-Age=${maxAgeSeconds}`);
  }

  /** The Set-Cookie that removes it (logout). */
  clear(): string {
    return this.attributes(`${this.name}=; Max-Age=0`);
  }

  private attributes(cookie: string): string {
    return `${cookie}; Path=/; HttpOnly; SameSite=Strict${this.secure ? '; Secure' : ''}`;
  }
}
