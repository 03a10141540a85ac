import type { Config } from '../config/index.js';
import { type clients, views } from '../management/index.js';
import type { Client } from '../store/types.js';
import { formatRecord, print, printJson } from './output.js';

/** How `tessera client` commands show a client: a record in text, the JSON document under --json. */

export function quotaText(c: Client): string | null {
  const parts = [
    c.quotaPerMinute === null ? '' : `${c.quotaPerMinute}/minute`,
    c.quotaPerDay === null ? '' : `${c.quotaPerDay}/day`,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : null;
}

export function clientRecord(c: Client, secret?: string): string {
  return formatRecord([
    ['client_id', c.id],
    ...(secret === undefined ? [] : [['client_secret', secret] as const]),
    ['name', c.name],
    ['description', c.description],
    ['enabled', c.enabled ? 'yes' : 'no'],
    ['token_ttl', c.tokenTtl],
    ['quota', quotaText(c)],
    ['claims', c.claims === null ? null : JSON.stringify(c.claims)],
    ['auth_method', c.authMethod],
    ...(c.jwks === null ? [] : [['jwks', c.jwks.keys.map((k) => k.kid ?? `(${k.kty})`).join(', ')] as const]),
    ...(c.jwksUri === null ? [] : [['jwks_uri', c.jwksUri] as const]),
    ...(c.federatedCredentials.length === 0
      ? []
      : [['federated', c.federatedCredentials.map((f) => `${f.name} (${f.issuer})`).join(', ')] as const]),
    ...(c.tlsClientAuth === null ? [] : [[`tls_${c.tlsClientAuth.kind}`, c.tlsClientAuth.value] as const]),
    ['dpop_bound', c.dpopBoundAccessTokens ? 'yes' : 'no'],
    ['cert_bound', c.certificateBoundAccessTokens ? 'yes' : 'no'],
    [
      'grants',
      c.grants
        .map(
          (g) =>
            (g.scopes.length ? `${g.audience} (${g.scopes.join(' ')})` : g.audience) +
            (g.tokenExchange ? ' [token exchange]' : ''),
        )
        .join(', '),
    ],
    ['created_at', c.createdAt],
    ['updated_at', c.updatedAt],
    ['secret_rotated_at', c.secretRotatedAt],
    ['revoked_before', c.revokedBefore],
  ]);
}

function curlHint(config: Config, c: Client, secret: string): string {
  const audience = c.audiences[0] ?? '<audience>';
  return (
    `\nGet a token:\n  curl -s ${config.issuer}/oauth/token -d grant_type=client_credentials ` +
    `-d client_id=${c.id} -d client_secret=${secret} -d audience=${encodeURIComponent(audience)}\n`
  );
}

/** A client with its secret, shown this once. */
export function printWithSecret(
  config: Config,
  json: boolean,
  heading: string,
  { client, secret }: clients.WithSecret,
) {
  if (json)
    printJson(
      secret === undefined
        ? views.clientJson(client)
        : { ...views.clientJson(client), client_secret: secret },
    );
  else if (secret === undefined) {
    // private_key_jwt: nothing secret to show; the client signs its assertions with its own key, or presents a
    // platform's token that one of its federated credentials trusts.
    const keyless = client.jwks === null && client.jwksUri === null;
    print(
      `${heading.replace(/\. The secret is shown this once$/, '')}: it authenticates with private_key_jwt (no secret)` +
        (keyless && client.federatedCredentials.length === 0
          ? `, and has no keys yet: give it federated credentials (tessera client federation add ${client.id} ...) or keys (tessera client update ${client.id} --jwks ...).\n\n`
          : '.\n\n'),
    );
    print(clientRecord(client, undefined));
  } else {
    print(`${heading}: store it now.\n\n`);
    print(clientRecord(client, secret));
    print(curlHint(config, client, secret));
  }
}
