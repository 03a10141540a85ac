/* global console */
// node-oidc-provider (panva) configured for the client credentials grant with a resource indicator
// (RFC 8707) whose resource server takes JWT access tokens (RFC 9068) signed ES256, with an ES256 key made
// at start. Everything else stays at the library's defaults (its in-memory adapter included).
import { createServer } from 'node:http';
import Provider, { errors } from 'oidc-provider';
import { es256Key, settings } from './common.js';

const key = es256Key();
const privateJwk = { ...key.privateKey.export({ format: 'jwk' }), kid: key.kid, alg: 'ES256', use: 'sig' };

const provider = new Provider(settings.issuer, {
  clients: [
    {
      client_id: settings.clientId,
      client_secret: settings.clientSecret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  ttl: { ClientCredentials: settings.ttl },
  jwks: { keys: [privateJwk] },
  routes: { token: '/oauth/token', jwks: '/.well-known/jwks.json' },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
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
