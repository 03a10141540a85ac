/**
 * `tessera export`: the store as a file (everything but secrets). The entries written here are also what the
 * plan compares a file with, so that an exported file plans no change.
 */
import { DEFAULT_MAX_LIFETIME } from '../../domain/client-auth/index.js';
import { tlsIdentityField } from '../../domain/client-auth/certificate-registration.js';
import type { Audience, Client } from '../../store/types.js';
import { isBuiltInAudience } from '../builtin.js';
import type { ManagementContext } from '../context.js';
import { storeCall } from '../errors.js';
import { federatedCredentialJson } from '../views.js';
import {
  byCodeUnit,
  scopeEntries,
  type AudienceEntry,
  type ClientEntry,
  type ConfigFile,
  type FederatedCredentialEntry,
  type GrantEntry,
} from './file.js';

/** An audience as a file has it: a null field is left out (it is the default). */
export function audienceEntry(a: Audience): AudienceEntry {
  return {
    identifier: a.url,
    ...(a.name === null ? {} : { name: a.name }),
    ...(a.tokenTtl === null ? {} : { token_ttl: a.tokenTtl }),
    ...(a.signingAlg === null ? {} : { signing_alg: a.signingAlg }),
    ...(a.scopes.length === 0 ? {} : { scopes: scopeEntries(a.scopes) }),
    ...(a.resourceServerClientIds.length === 0
      ? {}
      : { resource_server_client_ids: a.resourceServerClientIds }),
    ...(a.tokenProfile === null ? {} : { token_profile: a.tokenProfile }),
  };
}

/** A grant as a file has it: no scopes or claims when it has none, token_exchange only when true. */
const grantEntry = (g: Client['grants'][number]): GrantEntry => ({
  audience: g.audience,
  ...(g.scopes.length === 0 ? {} : { scopes: g.scopes }),
  ...(g.claims === null ? {} : { claims: g.claims }),
  ...(g.tokenExchange ? { token_exchange: true } : {}),
});

/** A federated credential with every field, as the plan compares it (federatedCredentialJson's, but id and times). */
export type CredentialView = Omit<
  ReturnType<typeof federatedCredentialJson>,
  'id' | 'created_at' | 'updated_at'
>;

export const credentialView = (c: Client['federatedCredentials'][number]): CredentialView => {
  const { id: _, created_at: __, updated_at: ___, ...view } = federatedCredentialJson(c);
  return view;
};

/**
 * A federated credential as a file has it: a field left out when it is the default (no keys: discovery; the
 * audience when it is `issuer`, this server's; no claims; a lifetime of an hour; not once).
 */
export function credentialEntry(c: CredentialView, issuer: string): FederatedCredentialEntry {
  return {
    name: c.name,
    issuer: c.issuer,
    ...(c.jwks === null ? {} : { jwks: c.jwks }),
    ...(c.jwks_uri === null ? {} : { jwks_uri: c.jwks_uri }),
    subject: c.subject,
    ...(c.audience === issuer ? {} : { audience: c.audience }),
    ...(Object.keys(c.claims).length === 0 ? {} : { claims: c.claims }),
    ...(c.max_lifetime === DEFAULT_MAX_LIFETIME ? {} : { max_lifetime: c.max_lifetime }),
    ...(c.once ? { once: true } : {}),
  };
}

/**
 * A client as a file has it, its federated credentials by name, its grants by audience: a null field, the default
 * auth method and no credentials left out (`issuer`: this server's, a credential's default audience).
 */
export function clientEntry(c: Client, issuer: string): ClientEntry {
  return {
    client_id: c.id,
    name: c.name,
    ...(c.description === null ? {} : { description: c.description }),
    enabled: c.enabled,
    ...(c.tokenTtl === null ? {} : { token_ttl: c.tokenTtl }),
    ...(c.quotaPerMinute === null ? {} : { quota_per_minute: c.quotaPerMinute }),
    ...(c.quotaPerDay === null ? {} : { quota_per_day: c.quotaPerDay }),
    ...(c.claims === null ? {} : { claims: c.claims }),
    ...(c.authMethod === 'client_secret_basic' ? {} : { token_endpoint_auth_method: c.authMethod }),
    ...(c.jwks === null ? {} : { jwks: c.jwks }),
    ...(c.jwksUri === null ? {} : { jwks_uri: c.jwksUri }),
    ...(c.federatedCredentials.length === 0
      ? {}
      : {
          federated_credentials: c.federatedCredentials
            .map((f) => credentialEntry(credentialView(f), issuer))
            .sort((a, b) => byCodeUnit(a.name, b.name)),
        }),
    ...(c.dpopBoundAccessTokens ? { dpop_bound_access_tokens: true } : {}),
    ...(c.tlsClientAuth === null ? {} : { [tlsIdentityField(c.tlsClientAuth.kind)]: c.tlsClientAuth.value }),
    ...(c.certificateBoundAccessTokens ? { tls_client_certificate_bound_access_tokens: true } : {}),
    grants: [...c.grants].sort((a, b) => byCodeUnit(a.audience, b.audience)).map(grantEntry),
  };
}

/**
 * The store as a file (everything but secrets), in a stable order: audiences by identifier, clients by
 * client_id, federated credentials by name, grants by audience. A null field is left out (it is the default); `enabled` and `grants` are
 * always written.
 */
export async function exportConfig(ctx: ManagementContext): Promise<ConfigFile> {
  const [audiences, clients] = await storeCall(() =>
    Promise.all([ctx.store.listAudiences(), ctx.store.listClients()]),
  );
  // The built-in admin audience is the server's, not configuration: its grants are exported, it is not.
  return {
    audiences: audiences
      .filter((a) => !isBuiltInAudience(ctx, a.url))
      .sort((a, b) => byCodeUnit(a.url, b.url))
      .map(audienceEntry),
    clients: [...clients]
      .sort((a, b) => byCodeUnit(a.id, b.id))
      .map((c) => clientEntry(c, ctx.config.issuer)),
  };
}
