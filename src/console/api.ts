/**
 * The console's one way to the server: the admin API (/admin/v1) and the console's session API
 * (/console/api), with the session cookie (sent by the browser), the session's anti-CSRF token on every
 * request that changes something, and every error as an ApiError that keeps the problem's field pointers, so
 * that a form can show each message next to its field.
 */

export interface FieldError {
  pointer: string;
  detail: string;
}

/** An RFC 9457 problem the server answered (or a network failure, status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors: FieldError[] = [],
    readonly retryAfter?: number,
  ) {
    super(message);
  }

  /** The message for a field of the request body (`/name`, `/scopes/0/name` counts for `scopes`). */
  forField(field: string): string | undefined {
    const found = this.errors.find((e) => e.pointer === `/${field}` || e.pointer.startsWith(`/${field}/`));
    return found?.detail;
  }
}

let csrfToken: string | undefined;
/** Called when a request finds the session over: the app shows the login page. */
let onSessionEnded: () => void = () => undefined;

export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

export function whenSessionEnds(handler: () => void): void {
  onSessionEnded = handler;
}

export interface Answer<T> {
  body: T;
  etag: string | null;
  status: number;
}

const SAFE = new Set(['GET', 'HEAD']);

/** A request to the server; resolves with the parsed body, rejects with an ApiError. */
export async function request<T>(
  method: string,
  path: string,
  options: { body?: unknown; ifMatch?: string | null; background?: boolean; handleSessionEnd?: boolean } = {},
): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json, application/problem+json' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  if (!SAFE.has(method) && csrfToken !== undefined) headers['x-csrf-token'] = csrfToken;
  if (options.ifMatch) headers['if-match'] = options.ifMatch;
  if (options.background) headers['x-tessera-background'] = '1';
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network', 'The server cannot be reached. Check your connection and try again.');
  }
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (response.ok) return { body: parsed as T, etag: response.headers.get('etag'), status: response.status };
  const problem = (parsed ?? {}) as { type?: string; detail?: string; errors?: FieldError[] };
  const code = problem.type?.replace(/^urn:tessera:problem:/, '') ?? `http_${response.status}`;
  const retry = Number(response.headers.get('retry-after'));
  const error = new ApiError(
    response.status,
    code,
    problem.detail ?? `The server answered ${response.status}.`,
    Array.isArray(problem.errors) ? problem.errors : [],
    Number.isFinite(retry) && retry > 0 ? retry : undefined,
  );
  if (response.status === 401 && options.handleSessionEnd !== false) onSessionEnded();
  throw error;
}

const admin = (path: string) => `/admin/v1${path}`;

/** The admin API, by verb. */
export const api = {
  get: <T>(path: string, background = false) => request<T>('GET', admin(path), { background }),
  post: <T>(path: string, body?: unknown) => request<T>('POST', admin(path), { body }),
  put: <T>(path: string, body?: unknown, ifMatch?: string | null) =>
    request<T>('PUT', admin(path), { body, ifMatch }),
  patch: <T>(path: string, body: unknown, ifMatch?: string | null) =>
    request<T>('PATCH', admin(path), { body, ifMatch }),
  delete: (path: string, ifMatch?: string | null) => request<void>('DELETE', admin(path), { ifMatch }),
};

/** A path segment as the API's paths take it. */
export const seg = encodeURIComponent;

/** A query string of the defined, non-empty values. */
export function query(values: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(values))
    if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const text = params.toString();
  return text ? `?${text}` : '';
}

// --- the admin API's documents (docs/management.md's field names) ---

export interface Page<T> {
  items: T[];
  next: string | null;
}

interface Scope {
  name: string;
  description: string | null;
}

export interface Audience {
  id: string;
  identifier: string;
  name: string | null;
  token_ttl: number | null;
  signing_alg: string | null;
  scopes: Scope[];
  /** Token exchange: the clients that receive its tokens, and so may exchange them. */
  resource_server_client_ids: string[];
  /** The claims its tokens carry: rfc9068, auth0 or keycloak. */
  token_profile: 'rfc9068' | 'auth0' | 'keycloak';
  created_at: string;
  updated_at: string;
}

export interface Client {
  client_id: string;
  name: string;
  description: string | null;
  enabled: boolean;
  token_endpoint_auth_method:
    | 'client_secret_basic'
    | 'client_secret_post'
    | 'private_key_jwt'
    | 'tls_client_auth'
    | 'self_signed_tls_client_auth';
  jwks: { keys: unknown[] } | null;
  jwks_uri: string | null;
  dpop_bound_access_tokens: boolean;
  /** tls_client_auth (RFC 8705 §2.1.2): the one value its certificate must carry; the others are null. */
  tls_client_auth_subject_dn: string | null;
  tls_client_auth_san_dns: string | null;
  tls_client_auth_san_uri: string | null;
  tls_client_auth_san_ip: string | null;
  tls_client_auth_san_email: string | null;
  /** RFC 8705 §3.4: its tokens are bound to its TLS client certificate. */
  tls_client_certificate_bound_access_tokens: boolean;
  token_ttl: number | null;
  quota_per_minute: number | null;
  quota_per_day: number | null;
  claims: Record<string, unknown> | null;
  audiences: string[];
  created_at: string;
  updated_at: string;
  secret_rotated_at: string;
  /** Its tokens issued at or before this moment (to the second) are inactive; null: never revoked. */
  revoked_before: string | null;
  client_secret?: string;
  /** In the answer of POST /clients, when it was given federated_credentials. */
  federated_credentials?: FederatedCredential[];
}

/** A client's federated credential (workload identity federation): a platform's tokens it accepts. */
export interface FederatedCredential {
  id: string;
  name: string;
  issuer: string;
  jwks: { keys: { kid?: string; kty: string }[] } | null;
  jwks_uri: string | null;
  subject: string;
  audience: string;
  claims: Record<string, string | number | boolean>;
  max_lifetime: number;
  once: boolean;
  created_at: string;
  updated_at: string;
}

export interface Secret {
  id: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  client_secret?: string;
}

export interface Grant {
  client_id: string;
  audience_id: string;
  audience: string;
  scopes: string[];
  claims: Record<string, unknown> | null;
  /** Token exchange: the client may exchange a token it received for one of this audience. */
  token_exchange: boolean;
}

export interface Key {
  kid: string;
  alg: string;
  status: 'next' | 'active' | 'superseded' | 'retired' | 'expired';
  created_at: string;
  activates_at: string;
  retires_at: string | null;
}

export interface AuditEvent {
  id: number;
  time: string;
  type: string;
  client_id: string | null;
  audience: string | null;
  jti: string | null;
  source: string | null;
  reason: string | null;
  count: number | null;
  actor: string | null;
  target: string | null;
  changes: Record<string, unknown> | null;
}

export interface Operator {
  id: string;
  email: string;
  role: 'admin' | 'viewer';
  enabled: boolean;
  enrolled: boolean;
  enrollment_expires_at: string | null;
  last_login_at: string | null;
  created_at: string;
  updated_at: string;
  enrollment_url?: string;
}

export interface Stats {
  clients: number;
  audiences: number;
  from: string;
  until: string;
  tokens: { minute: string; issued: number; refused: number }[];
}

export interface Session {
  operator: Operator;
  scopes: string[];
  csrf_token: string;
  expires_at?: string;
}
