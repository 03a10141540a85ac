/* global console, process */
// node-oidc-provider (panva) configured for the client credentials grant with a resource indicator
// (RFC 8707) whose resource server takes JWT access tokens (RFC 9068) signed ES256, with an ES256 key made
// at start. Everything else stays at the library's defaults (its in-memory adapter included).
//
// BENCH_CLIENT_JWKS (a JWK Set, the bench's assertion maker's public key): the client authenticates with
// private_key_jwt instead of its secret (token_endpoint_auth_method private_key_jwt, the set as its jwks, ES256 its
// token_endpoint_auth_signing_alg; the method is among clientAuthMethods by default). BENCH_DPOP=1:
// features.dPoP.enabled (the default of version 9, set explicitly), so a request with a DPoP proof gets a token
// bound to its key (cnf.jkt, token_type DPoP). Both keep the library's replay detection of assertion and proof ids
// (ReplayDetection) on its default in-memory adapter, the one a configuration without an adapter uses.
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';
import { es256Key, settings } from './common.js';

const key = es256Key();
const privateJwk = { ...key.privateKey.export({ format: 'jwk' }), kid: key.kid, alg: 'ES256', use: 'sig' };
const clientJwks = process.env.BENCH_CLIENT_JWKS ? JSON.parse(process.env.BENCH_CLIENT_JWKS) : undefined;

const provider = new Provider(settings.issuer, {
  clients: [
    {
      client_id: settings.clientId,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      ...(clientJwks
        ? {
            token_endpoint_auth_method: 'private_key_jwt',
            token_endpoint_auth_signing_alg: 'ES256',
            jwks: clientJwks,
          }
        : { client_secret: settings.clientSecret, token_endpoint_auth_method: 'client_secret_post' }),
    },
  ],
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  ttl: { ClientCredentials: settings.ttl },
  jwks: { keys: [privateJwk] },
  routes: { token: '/oauth/token', jwks: '/.well-known/jwks.json' },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    ...(process.env.BENCH_DPOP === '1' ? { dPoP: { enabled: true } } : {}),
    resourceIndicators: {
      enabled: true,
      defaultResource: () => settings.audience,
      useGrantedResource: () => true,
      getResourceServerInfo(_ctx, resourceIndicator) {
        if (resourceIndicator !== settings.audience) throw new errors.InvalidTarget();
        return {
          scope: 'api',
          audience: resourceIndicator,
          accessTokenTTL: settings.ttl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
provider.on('server_error', (_ctx, error) => console.error(error));

createServer(provider.callback()).listen(settings.port, settings.host);
