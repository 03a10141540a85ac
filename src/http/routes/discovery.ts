import type { FastifyInstance } from 'fastify';
import type { Keyring } from '../../keys/keyring.js';
import type { Directory } from '../../read-model/directory.js';
import { methodNotAllowed } from '../errors.js';
import { ASSERTION_ALGS } from '../../domain/client-auth/index.js';
import { DPOP_ALGS } from '../../domain/dpop.js';

export const TOKEN_PATH = '/oauth/token';
export const REVOCATION_PATH = '/oauth/revoke';
export const INTROSPECTION_PATH = '/oauth/introspect';
const JWKS_PATH = '/.well-known/jwks.json';
const METADATA_MAX_AGE = 60;

/**
 * RFC 8414 §2 authorization server metadata, with the `audiences_supported` extension and RFC 9449's
 * `dpop_signing_alg_values_supported`; `scopes_supported` is every audience's scopes, sorted, each once.
 */
function metadata(
  issuer: string,
  offered: Offered,
  audiences: readonly string[],
  scopes: readonly string[] = [],
): Record<string, unknown> {
  const { grantTypes, authMethods, mtlsBaseUrl } = offered;
  return {
    issuer,
    token_endpoint: issuer + TOKEN_PATH,
    jwks_uri: issuer + JWKS_PATH,
    // The token service's grant types: client_credentials, and RFC 8693's token exchange.
    grant_types_supported: grantTypes,
    token_endpoint_auth_methods_supported: authMethods,
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    // RFC 7009 and RFC 7662, as RFC 8414 §2 names them: clients authenticate there as at the token endpoint.
    revocation_endpoint: issuer + REVOCATION_PATH,
    revocation_endpoint_auth_methods_supported: authMethods,
    revocation_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    introspection_endpoint: issuer + INTROSPECTION_PATH,
    introspection_endpoint_auth_methods_supported: authMethods,
    introspection_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    // No authorization endpoint: no response type is supported (the member is REQUIRED, so it is empty).
    response_types_supported: [],
    scopes_supported: scopes,
    // RFC 9449 §5.1: the algorithms a DPoP proof may be signed with.
    dpop_signing_alg_values_supported: DPOP_ALGS,
    audiences_supported: audiences,
    // RFC 8705 §3.3 and §5, where certificates can arrive (TLS served, or a proxy's header read).
    ...(mtlsBaseUrl === undefined
      ? {}
      : {
          tls_client_certificate_bound_access_tokens: true,
          mtls_endpoint_aliases: {
            token_endpoint: mtlsBaseUrl + TOKEN_PATH,
            revocation_endpoint: mtlsBaseUrl + REVOCATION_PATH,
            introspection_endpoint: mtlsBaseUrl + INTROSPECTION_PATH,
          },
        }),
  };
}

/** What the server offers, as discovery lists it. */
export interface Offered {
  /** The token service's grant types: client_credentials, and RFC 8693's token exchange. */
  grantTypes: readonly string[];
  /** The client authentication methods (the same at the token, revocation and introspection endpoints). */
  authMethods: readonly string[];
  /** Where certificates can arrive: the origin of RFC 8705 §5's aliases; undefined: no certificate methods. */
  mtlsBaseUrl: string | undefined;
}

/** The two well-known metadata URLs and the JWKS. Bodies are built once per change, not per request. */
export function discoveryRoutes(
  app: FastifyInstance,
  issuer: string,
  directory: Directory,
  keyring: Keyring,
  offered: Offered,
): void {
  let audiences: readonly unknown[] | undefined;
  let body = '';
  const current = (): string => {
    const list = directory.listAudiences();
    if (list !== audiences) {
      audiences = list;
      const scopes = [...new Set(list.flatMap((a) => a.scopes.map((s) => s.name)))].sort();
      body = JSON.stringify(
        metadata(
          issuer,
          offered,
          list.map((a) => a.url),
          scopes,
        ),
      );
    }
    return body;
  };

  for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
    app.get(path, (_request, reply) =>
      reply
        .header('cache-control', `public, max-age=${METADATA_MAX_AGE}`)
        .type('application/json; charset=utf-8')
        .send(current()),
    );
    methodNotAllowed(app, path, ['GET', 'HEAD']);
  }

  app.get(JWKS_PATH, (_request, reply) =>
    reply
      .header('cache-control', `public, max-age=${keyring.jwksMaxAge}`)
      .type('application/jwk-set+json; charset=utf-8')
      .send(keyring.jwks()),
  );
  methodNotAllowed(app, JWKS_PATH, ['GET', 'HEAD']);
}
