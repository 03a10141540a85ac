import type { Command } from 'commander';
import type { TlsIdentityKind } from '../domain/known-client.js';
import { ValidationError } from '../domain/validate.js';
import { clients, views } from '../management/index.js';
import { ADMIN_SCOPES } from '../management/builtin.js';
import {
  action,
  collect,
  claimsOption,
  collectClaim,
  parseClaims,
  parseClientId,
  parseJwks,
  parseName,
  parseQuota,
  parseTtl,
  parseTtlOrNone,
  quotaValue,
  withJson,
  type QuotaOption,
} from './common.js';
import { clientRecord, printWithSecret, quotaText } from './client-output.js';
import { federationCommands } from './federation.js';
import { secretCommands } from './secrets.js';
import { formatTable, print, printJson } from './output.js';

interface CreateOptions {
  name: string;
  description?: string;
  admin?: boolean;
  adminScopes?: string;
  grant?: string[];
  id?: string;
  ttl?: number;
  quotaMinute?: QuotaOption;
  quotaDay?: QuotaOption;
  claims?: Record<string, unknown>;
  claim?: Record<string, unknown>;
  authMethod?: string;
  jwks?: unknown;
  jwksUri?: string;
  dpopBound?: boolean;
  certBoundTokens?: boolean;
  tlsSubjectDn?: string;
  tlsSanDns?: string;
  tlsSanUri?: string;
  tlsSanIp?: string;
  tlsSanEmail?: string;
}

const AUTH_METHOD_HELP =
  'client_secret_basic (the default), client_secret_post, private_key_jwt (no secret: with --jwks or --jwks-uri, or neither for federated credentials), tls_client_auth (no secret: with one --tls-* value) or self_signed_tls_client_auth (no secret: its certificates in the x5c of --jwks keys)';
const JWKS_HELP = 'private_key_jwt: its public keys, a JWK Set as JSON or a file holding one (- for stdin)';
const JWKS_URI_HELP = 'private_key_jwt: the URL where it publishes its public keys';
const DPOP_BOUND_HELP = 'it gets no token without a DPoP proof (RFC 9449 dpop_bound_access_tokens)';
const NO_DPOP_BOUND_HELP = 'it gets tokens with or without a DPoP proof (the default)';
const CERT_BOUND_HELP =
  'its tokens are bound to its TLS client certificate, and it gets none without one (RFC 8705 tls_client_certificate_bound_access_tokens)';
const NO_CERT_BOUND_HELP = 'its tokens are not bound to a certificate (the default)';

/** tls_client_auth's values (RFC 8705 §2.1.2): each option's key (commander's), its kind, and what it is. */
const TLS_OPTIONS = [
  [
    'tlsSubjectDn',
    'subject_dn',
    'tls_client_auth: the subject DN its certificate must have (RFC 4514: CN=worker,O=Example,C=US)',
  ],
  ['tlsSanDns', 'san_dns', 'tls_client_auth: a DNS name its certificate must carry as a SAN'],
  [
    'tlsSanUri',
    'san_uri',
    'tls_client_auth: a URI its certificate must carry as a SAN (a SPIFFE ID: spiffe://prod.example.com/ns/billing/sa/worker)',
  ],
  ['tlsSanIp', 'san_ip', 'tls_client_auth: an IP address its certificate must carry as a SAN'],
  ['tlsSanEmail', 'san_email', 'tls_client_auth: an email address its certificate must carry as a SAN'],
] as const satisfies readonly (readonly [keyof CreateOptions, TlsIdentityKind, string])[];
type TlsOption = (typeof TLS_OPTIONS)[number][0];
const TLS_HELP = Object.fromEntries(TLS_OPTIONS.map(([key, , help]) => [key, help])) as Record<
  TlsOption,
  string
>;
const TLS_UPDATE = ' (replaces the value it has, of any kind; "" removes this one)';

/**
 * The --tls-* values given, by kind, in the order they were given (a second one is refused, as the admin API
 * refuses two fields); `clear`: "" is null (update). Undefined when none is.
 */
function tlsIdentityOf(
  options: Partial<Record<TlsOption, string>>,
  clear: boolean,
): clients.ClientFields['tlsIdentity'] {
  const given: NonNullable<clients.ClientFields['tlsIdentity']> = {};
  for (const key of Object.keys(options)) {
    const option = TLS_OPTIONS.find(([name]) => name === key);
    const value = options[key as TlsOption];
    if (option !== undefined && value !== undefined) given[option[1]] = clear && value === '' ? null : value;
  }
  return Object.keys(given).length === 0 ? undefined : given;
}

const CLAIMS_HELP = 'custom claims in its tokens, a JSON object: \'{"tenant_id":"acme"}\'';
const CLAIM_HELP = 'one custom claim, name=value (repeatable; value as JSON if it is JSON)';

/** `tessera client create|list|show|update|rotate-secret|secrets|federation|set-quota|enable|disable|revoke-tokens|delete`. */
export function clientCommands(program: Command): void {
  const client = program.command('client').alias('clients').description('API clients and their secrets');
  withJson(
    client
      .command('create')
      .description('create a client; its secret is shown this once')
      .requiredOption('--name <name>', 'display name', parseName)
      .option('--description <text>', 'what the client is for')
      .option(
        '--admin',
        `an admin client: granted the admin API (${ADMIN_SCOPES.length} scopes, or --admin-scopes)`,
      )
      .option(
        '--admin-scopes <scopes>',
        `only these admin scopes (space-separated: ${ADMIN_SCOPES.join(' ')})`,
      )
      .option('--grant <audience>', 'grant an audience (repeatable)', collect)
      .option('--id <client-id>', 'choose the client id instead of a generated one', parseClientId)
      .option('--ttl <seconds>', 'token lifetime for this client', parseTtl)
      .option('--quota-minute <n>', 'at most this many tokens a minute (or none)', parseQuota)
      .option('--quota-day <n>', 'at most this many tokens a day (or none)', parseQuota)
      .option('--claims <json>', CLAIMS_HELP, parseClaims)
      .option('--claim <name=value>', CLAIM_HELP, collectClaim)
      .option('--auth-method <method>', AUTH_METHOD_HELP)
      .option('--jwks <json-or-file>', JWKS_HELP, parseJwks)
      .option('--jwks-uri <url>', JWKS_URI_HELP)
      .option('--dpop-bound', DPOP_BOUND_HELP)
      .option('--no-dpop-bound', NO_DPOP_BOUND_HELP)
      .option('--tls-subject-dn <dn>', TLS_HELP.tlsSubjectDn)
      .option('--tls-san-dns <name>', TLS_HELP.tlsSanDns)
      .option('--tls-san-uri <uri>', TLS_HELP.tlsSanUri)
      .option('--tls-san-ip <address>', TLS_HELP.tlsSanIp)
      .option('--tls-san-email <address>', TLS_HELP.tlsSanEmail)
      .option('--cert-bound-tokens', CERT_BOUND_HELP)
      .option('--no-cert-bound-tokens', NO_CERT_BOUND_HELP),
  ).action(
    action(async (ctx, json, options: CreateOptions) => {
      const admin = options.admin === true || options.adminScopes !== undefined;
      const created = await clients.createClient(ctx, {
        name: options.name,
        description: options.description,
        ...(admin ? { adminScopes: options.adminScopes?.split(/\s+/).filter(Boolean) ?? ADMIN_SCOPES } : {}),
        id: options.id,
        tokenTtl: options.ttl,
        quotaPerMinute: quotaValue(options.quotaMinute),
        quotaPerDay: quotaValue(options.quotaDay),
        claims: claimsOption(options),
        grants: options.grant,
        authMethod: options.authMethod,
        jwks: options.jwks,
        jwksUri: options.jwksUri,
        dpopBoundAccessTokens: options.dpopBound,
        tlsIdentity: tlsIdentityOf(options, false),
        certificateBoundAccessTokens: options.certBoundTokens,
      });
      printWithSecret(ctx.config, json, 'Client created. The secret is shown this once', created);
    }),
  );
  withJson(
    client
      .command('list')
      .description('list clients')
      .option('--search <text>', 'only those whose client id or name contains the text (by client id)'),
  ).action(
    action(async (ctx, json, options: { search?: string }) => {
      const list =
        options.search === undefined
          ? await clients.listClients(ctx)
          : await clients.searchClients(ctx, options.search);
      if (json) printJson(list.map(views.clientJson));
      else
        print(
          formatTable(
            ['client_id', 'name', 'enabled', 'audiences', 'created_at'],
            list.map((c) => [c.id, c.name, c.enabled ? 'yes' : 'no', c.audiences.join(', '), c.createdAt]),
          ),
        );
    }),
  );
  withJson(
    client
      .command('update <client-id>')
      .description(
        'change a client: its name, description, token lifetime, custom claims, how it authenticates, or whether its tokens must be bound to a DPoP key or its certificate',
      )
      .option('--name <name>', 'display name', parseName)
      .option('--description <text>', 'what the client is for ("" removes it)')
      .option('--ttl <seconds>', 'token lifetime for this client (or none)', parseTtlOrNone)
      .option('--claims <json>', `${CLAIMS_HELP} (replaces them; '{}' removes them)`, parseClaims)
      .option('--claim <name=value>', `${CLAIM_HELP}; added to the current ones`, collectClaim)
      .option(
        '--auth-method <method>',
        `${AUTH_METHOD_HELP}; a switch to a method without secrets deletes its secrets, a switch away from tls_client_auth its --tls-* value`,
      )
      .option('--jwks <json-or-file>', `${JWKS_HELP} (replaces a jwks_uri)`, parseJwks)
      .option('--jwks-uri <url>', `${JWKS_URI_HELP} (replaces inline keys)`)
      .option('--dpop-bound', DPOP_BOUND_HELP)
      .option('--no-dpop-bound', 'it gets tokens with or without a DPoP proof')
      .option('--tls-subject-dn <dn>', TLS_HELP.tlsSubjectDn + TLS_UPDATE)
      .option('--tls-san-dns <name>', TLS_HELP.tlsSanDns + TLS_UPDATE)
      .option('--tls-san-uri <uri>', TLS_HELP.tlsSanUri + TLS_UPDATE)
      .option('--tls-san-ip <address>', TLS_HELP.tlsSanIp + TLS_UPDATE)
      .option('--tls-san-email <address>', TLS_HELP.tlsSanEmail + TLS_UPDATE)
      .option('--cert-bound-tokens', CERT_BOUND_HELP)
      .option('--no-cert-bound-tokens', 'its tokens are not bound to a certificate'),
  ).action(
    action(
      async (
        ctx,
        json,
        id: string,
        options: {
          name?: string;
          description?: string;
          ttl?: number | 'none';
          claims?: Record<string, unknown>;
          claim?: Record<string, unknown>;
          authMethod?: string;
          jwks?: unknown;
          jwksUri?: string;
          dpopBound?: boolean;
          certBoundTokens?: boolean;
        } & Partial<Record<TlsOption, string>>,
      ) => {
        // --claims replaces the claims; --claim adds to them (to the new ones, with both).
        const updated = await clients.updateClient(ctx, id, {
          name: options.name,
          description: options.description === '' ? null : options.description,
          tokenTtl: options.ttl === 'none' ? null : options.ttl,
          claims: options.claims,
          addClaims: options.claim,
          authMethod: options.authMethod,
          jwks: options.jwks,
          jwksUri: options.jwksUri,
          dpopBoundAccessTokens: options.dpopBound,
          tlsIdentity: tlsIdentityOf(options, true),
          certificateBoundAccessTokens: options.certBoundTokens,
        });
        if (json) printJson(views.clientJson(updated));
        else print(clientRecord(updated));
      },
    ),
  );
  withJson(client.command('show <client-id>').description('show one client (never its secret)')).action(
    action(async (ctx, json, id: string) => {
      const found = await clients.getClient(ctx, id);
      if (json) printJson(views.clientJson(found));
      else print(clientRecord(found));
    }),
  );
  secretCommands(client);
  federationCommands(client);
  withJson(
    client
      .command('set-quota <client-id>')
      .description('limit the tokens a client may get (it should cache them); none removes a limit')
      .option('--per-minute <n>', 'tokens a minute, or none', parseQuota)
      .option('--per-day <n>', 'tokens a day, or none', parseQuota),
  ).action(
    action(async (ctx, json, id: string, options: { perMinute?: QuotaOption; perDay?: QuotaOption }) => {
      if (options.perMinute === undefined && options.perDay === undefined) {
        throw new ValidationError('set-quota needs --per-minute, --per-day or both (N or none)');
      }
      const updated = await clients.setQuota(ctx, id, {
        perMinute: quotaValue(options.perMinute),
        perDay: quotaValue(options.perDay),
      });
      if (json) printJson(views.clientJson(updated));
      else print(`Client ${id}: quota ${quotaText(updated) ?? 'none'}.\n`);
    }),
  );
  for (const [name, enabled] of [
    ['disable', false],
    ['enable', true],
  ] as const) {
    withJson(client.command(`${name} <client-id>`).description(`${name} a client`)).action(
      action(async (ctx, json, id: string) => {
        const updated = await clients.setEnabled(ctx, id, enabled);
        if (json) printJson(views.clientJson(updated));
        else print(`Client ${id} ${enabled ? 'enabled' : 'disabled'}.\n`);
      }),
    );
  }
  withJson(
    client
      .command('revoke-tokens <client-id>')
      .description(
        'make every token the client holds inactive now, on every instance within a second (its secrets stay)',
      ),
  ).action(
    action(async (ctx, json, id: string) => {
      const view = views.tokensRevokedJson(await clients.revokeClientTokens(ctx, id));
      if (json) printJson(view);
      else
        print(
          `Client ${id}: its tokens issued at or before ${view.revoked_before} (to the second) are inactive.\n`,
        );
    }),
  );
  withJson(client.command('delete <client-id>').description('delete a client and its grants')).action(
    action(async (ctx, json, id: string) => {
      await clients.deleteClient(ctx, id);
      if (json) printJson({ client_id: id, deleted: true });
      else print(`Client ${id} deleted.\n`);
    }),
  );
}
