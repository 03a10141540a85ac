/*
 * The attributes of Tessera's spans (docs/traces.md, "Attributes"): one table, which the code sets its names from,
 * the docs print and the tests read. A name here is stable: dashboards and alerts are built on them (a name moved
 * or renamed breaks them, keycloak#47332), so one is added, never changed.
 */

export interface AttributeRow {
  readonly name: string;
  readonly type: 'string' | 'int';
  /** When it is set. */
  readonly when: string;
  readonly example: string;
}

/** The stable HTTP semantic conventions of every SERVER span. */
export const HTTP_ATTRIBUTES = [
  { name: 'http.request.method', type: 'string', when: 'every request', example: 'POST' },
  {
    name: 'http.route',
    type: 'string',
    when: 'every request that matched a route (the route template, not the path)',
    example: '/admin/v1/clients/:id',
  },
  { name: 'http.response.status_code', type: 'int', when: 'every answer', example: '200' },
  { name: 'url.scheme', type: 'string', when: 'every request', example: 'https' },
  {
    name: 'url.path',
    type: 'string',
    when: 'every request (never url.query: a query may carry a secret)',
    example: '/oauth/token',
  },
  {
    name: 'server.address',
    type: 'string',
    when: 'every request (the Host header’s name)',
    example: 'auth.example.com',
  },
  { name: 'server.port', type: 'int', when: 'when the Host header names one', example: '443' },
  {
    name: 'client.address',
    type: 'string',
    when: 'every request (behind TESSERA_TRUST_PROXY, the nearest untrusted hop)',
    example: '203.0.113.7',
  },
  { name: 'network.protocol.version', type: 'string', when: 'every request', example: '1.1' },
] as const satisfies readonly AttributeRow[];

/** Tessera's own attributes of the token endpoint's span. */
export const OAUTH_ATTRIBUTES = [
  {
    name: 'oauth.grant_type',
    type: 'string',
    when: 'a request with a grant type Tessera offers',
    example: 'client_credentials',
  },
  {
    name: 'oauth.client_id',
    type: 'string',
    when: 'the client authenticated (absent when authentication failed)',
    example: 'svc_8f2c…',
  },
  {
    name: 'oauth.client.auth_method',
    type: 'string',
    when: 'the client authenticated',
    example: 'private_key_jwt',
  },
  { name: 'oauth.audience', type: 'string', when: 'a token was issued', example: 'https://api.example.com' },
  {
    name: 'oauth.scope',
    type: 'string',
    when: 'a token with scopes was issued (its scope claim)',
    example: 'read write',
  },
  { name: 'oauth.token.id', type: 'string', when: 'a token was issued (its jti)', example: 'b1a6…' },
  {
    name: 'oauth.token.binding',
    type: 'string',
    when: 'a token bound to a key or a certificate was issued: dpop, mtls, or dpop+mtls when both',
    example: 'dpop',
  },
  {
    name: 'oauth.error',
    type: 'string',
    when: 'a refusal (its OAuth error code)',
    example: 'invalid_client',
  },
  {
    name: 'tessera.refusal_reason',
    type: 'string',
    when: "a refusal (the audit trail's reason)",
    example: 'invalid_client: wrong secret',
  },
] as const satisfies readonly AttributeRow[];

/** The CLIENT spans of what leaves the process on a request's behalf: a store query on a miss, a key set fetch. */
export const CLIENT_ATTRIBUTES = [
  { name: 'db.system.name', type: 'string', when: 'a store query', example: 'postgresql' },
  { name: 'db.collection.name', type: 'string', when: 'a store query', example: 'clients' },
  { name: 'db.operation.name', type: 'string', when: 'a store query', example: 'SELECT' },
  {
    name: 'db.operation.batch.size',
    type: 'int',
    when: 'a store query (the client lookups of one turn go in one)',
    example: '3',
  },
  {
    name: 'url.full',
    type: 'string',
    when: "a key set or discovery fetch (a client's jwks_uri, a federated issuer's), without its query",
    example: 'https://token.actions.githubusercontent.com/.well-known/jwks',
  },
  { name: 'error.type', type: 'string', when: 'a CLIENT span that failed', example: 'Error' },
] as const satisfies readonly AttributeRow[];

/** The admin API's SERVER spans: the management operation. */
export const ADMIN_ATTRIBUTES = [
  { name: 'tessera.operation', type: 'string', when: 'an admin API call', example: 'client.create' },
] as const satisfies readonly AttributeRow[];
