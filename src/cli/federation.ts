import type { Command } from 'commander';
import type { FederatedCredential } from '../domain/client-auth/index.js';
import { MAX_MAX_LIFETIME, MIN_MAX_LIFETIME } from '../domain/client-auth/federation-rules.js';
import { discoveryUrl } from '../domain/client-auth/index.js';
import { parseDuration, ValidationError } from '../domain/validate.js';
import {
  GITHUB_ISSUER,
  GITLAB_ISSUER,
  githubSubject,
  gitlabSubject,
  kubernetesSubject,
} from '../management/federation-presets.js';
import { clients, federation, views, type ManagementContext } from '../management/index.js';
import { action, collectText, parseClaims, parseJwks, withJson } from './common.js';
import { formatRecord, formatTable, print, printJson } from './output.js';

/*
 * `tessera client federation add|list|show|update|remove`: a client's federated credentials (workload identity
 * federation), the platforms' tokens it accepts in place of a secret. The options name the API's fields; the
 * presets (--github-repo, --gitlab-project, --k8s-service-account) only fill the issuer and the subject
 * (management/federation-presets.ts: the table the console shows too).
 */

/** Options of `add` and `update`, as commander gives them. */
interface CredentialOptions {
  name?: string;
  issuer?: string;
  subject?: string;
  audience?: string;
  claim?: string[];
  claims?: Record<string, unknown>;
  maxLifetime?: string;
  once?: boolean;
  jwksFile?: unknown;
  jwksUri?: string;
  discovery?: boolean;
}

interface PresetOptions {
  githubRepo?: string;
  githubRef?: string;
  githubEnvironment?: string;
  gitlabProject?: string;
  gitlabRef?: string;
  k8sServiceAccount?: string;
}

const CLAIM_HELP =
  'a claim the token must carry, name=value, compared as text (repeatable); --claims for numbers or booleans';
const CLAIMS_HELP = 'the claims the token must carry, a JSON object: \'{"repository_owner":"acme"}\'';
const LIFETIME_HELP = `the longest lifetime of a token accepted, seconds or a duration (${MIN_MAX_LIFETIME}s to ${MAX_MAX_LIFETIME / 3600}h; default 1h)`;
const JWKS_FILE_HELP =
  "the issuer's public keys inline, a JWK Set file (- for stdin), e.g. kubectl get --raw /openid/v1/jwks";
const JWKS_URI_HELP = "where the issuer publishes its keys (default: found by the issuer's discovery)";

/** `--claim name=value` (repeatable): the value is text, as platforms' claims are (GitHub's ids too). */
function claimsOf(pairs: readonly string[] | undefined): Record<string, string> | undefined {
  if (pairs === undefined) return undefined;
  const claims: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0) throw new ValidationError(`a claim is name=value, got "${pair}"`);
    Object.defineProperty(claims, pair.slice(0, at), {
      value: pair.slice(at + 1),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return claims;
}

/** A `--max-lifetime` in seconds; `default` resets it. */
function lifetimeOf(value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'default') return null;
  try {
    return parseDuration(value);
  } catch {
    throw new ValidationError(
      '--max-lifetime must be a duration: seconds, or a number and s, m, h or d (e.g. 15m)',
    );
  }
}

/** The issuer and subject a preset fills: GitHub Actions, GitLab CI, a Kubernetes service account. */
function preset(options: PresetOptions): { issuer?: string; subject: string } | undefined {
  const { githubRepo, githubRef, githubEnvironment, gitlabProject, gitlabRef, k8sServiceAccount } = options;
  const given = [githubRepo, gitlabProject, k8sServiceAccount].filter((v) => v !== undefined);
  if (given.length > 1)
    throw new ValidationError('give one preset: --github-repo, --gitlab-project or --k8s-service-account');
  if ((githubRef !== undefined || githubEnvironment !== undefined) && githubRepo === undefined)
    throw new ValidationError('--github-ref and --github-environment go with --github-repo');
  if (gitlabRef !== undefined && gitlabProject === undefined)
    throw new ValidationError('--gitlab-ref goes with --gitlab-project');
  if (githubRepo !== undefined) {
    if ((githubRef === undefined) === (githubEnvironment === undefined))
      throw new ValidationError('--github-repo needs --github-ref or --github-environment (one of them)');
    return {
      issuer: GITHUB_ISSUER,
      subject: githubSubject(
        githubRepo,
        githubRef !== undefined ? { ref: githubRef } : { environment: githubEnvironment! },
      ),
    };
  }
  if (gitlabProject !== undefined) {
    if (gitlabRef === undefined) throw new ValidationError('--gitlab-project needs --gitlab-ref (a branch)');
    return { issuer: GITLAB_ISSUER, subject: gitlabSubject(gitlabProject, gitlabRef) };
  }
  if (k8sServiceAccount !== undefined) {
    const subject = kubernetesSubject(k8sServiceAccount);
    if (subject === undefined)
      throw new ValidationError(`--k8s-service-account is <namespace>:<name>, got "${k8sServiceAccount}"`);
    return { subject };
  }
  return undefined;
}

/** The fields of `add` and `update`, as the management layer takes them (`default` resets one). */
function inputOf(options: CredentialOptions): federation.FederatedCredentialInput {
  const keys = [options.jwksFile !== undefined, options.jwksUri !== undefined, options.discovery === true];
  if (keys.filter(Boolean).length > 1)
    throw new ValidationError('give one of --jwks-file, --jwks-uri and --discovery');
  if (options.claim !== undefined && options.claims !== undefined)
    throw new ValidationError('give --claim or --claims, not both');
  return {
    name: options.name,
    issuer: options.issuer,
    subject: options.subject,
    audience: options.audience === 'default' ? null : options.audience,
    claims: options.claims ?? claimsOf(options.claim),
    maxLifetime: lifetimeOf(options.maxLifetime),
    once: options.once,
    jwks: options.discovery ? null : options.jwksFile,
    jwksUri: options.discovery ? null : options.jwksUri,
  };
}

/** Where a credential's issuer keys are, in words. */
const keysText = (c: FederatedCredential): string =>
  c.jwks !== null
    ? `inline: ${c.jwks.keys.map((k) => k.kid ?? `(${k.kty})`).join(', ')}`
    : (c.jwksUri ?? `by discovery: ${discoveryUrl(c.issuer)}`);

function credentialRecord(c: FederatedCredential): string {
  return formatRecord([
    ['id', c.id],
    ['name', c.name],
    ['issuer', c.issuer],
    ['keys', keysText(c)],
    ['subject', c.subject],
    ['audience', c.audience],
    ['claims', Object.keys(c.claims).length === 0 ? null : JSON.stringify(c.claims)],
    ['max_lifetime', `${c.maxLifetime} s`],
    ['once', c.once ? 'yes' : 'no'],
    ['created_at', c.createdAt],
    ['updated_at', c.updatedAt],
  ]);
}

/**
 * A credential named on the command line by its id or its name: its id and name (or, when the client has none
 * such, the text as an id, for the operation to refuse).
 */
async function credentialNamed(
  ctx: ManagementContext,
  clientId: string,
  given: string,
): Promise<{ id: string; name?: string }> {
  const list = await federation.listFederatedCredentials(ctx, clientId);
  return list.find((c) => c.id === given) ?? list.find((c) => c.name === given) ?? { id: given };
}

/** The options of the fields, for `add` and `update`. */
function fieldOptions(command: Command, change: boolean): Command {
  const resettable = change ? ' ("default": the default)' : '';
  return command
    .option('--name <name>', "a name, unique among the client's federated credentials")
    .option('--issuer <url>', "the exact iss of the platform's tokens")
    .option('--subject <sub>', 'the exact sub required')
    .option('--audience <aud>', `the aud required (default: this Tessera's issuer URL)${resettable}`)
    .option('--claim <name=value>', change ? `${CLAIM_HELP}; replaces the claims` : CLAIM_HELP, collectText)
    .option('--claims <json>', change ? `${CLAIMS_HELP} ('{}': none)` : CLAIMS_HELP, parseClaims)
    .option('--max-lifetime <duration>', `${LIFETIME_HELP}${resettable}`)
    .option('--once', 'each token authenticates once (its jti is required and single-use)')
    .option('--jwks-file <file>', JWKS_FILE_HELP, parseJwks)
    .option('--jwks-uri <url>', JWKS_URI_HELP);
}

/** `tessera client federation add|list|show|update|remove`. */
export function federationCommands(client: Command): void {
  const fed = client
    .command('federation')
    .alias('federated-credentials')
    .description(
      "a client's federated credentials: platform tokens it authenticates with, instead of a secret",
    );

  withJson(
    fieldOptions(
      fed
        .command('add <client-id>')
        .description(
          "trust a platform's tokens for a private_key_jwt client without keys (at most 10 per client)",
        ),
      false,
    )
      .option('--github-repo <owner/repo>', "GitHub Actions: the issuer and sub of this repository's jobs")
      .option('--github-ref <ref>', 'with --github-repo: jobs of this ref (e.g. refs/heads/main)')
      .option('--github-environment <name>', 'with --github-repo: jobs of this environment')
      .option('--gitlab-project <group/project>', "GitLab CI (gitlab.com, or --issuer): this project's jobs")
      .option('--gitlab-ref <branch>', 'with --gitlab-project: jobs of this branch')
      .option(
        '--k8s-service-account <namespace:name>',
        "Kubernetes: the sub of this service account (give the cluster's --issuer)",
      ),
  ).action(
    action(async (ctx, json, id: string, options: CredentialOptions & PresetOptions) => {
      const filled = preset(options);
      if (filled !== undefined && options.subject !== undefined)
        throw new ValidationError('give --subject or a preset, not both');
      const added = await federation.addFederatedCredential(ctx, id, {
        ...inputOf(options),
        issuer: options.issuer ?? filled?.issuer,
        subject: options.subject ?? filled?.subject,
      });
      if (json) {
        printJson(views.federatedCredentialJson(added));
        return;
      }
      const audience = (await clients.getClient(ctx, id)).audiences[0] ?? '<audience>';
      print(
        `Federated credential ${added.id} added to ${id}: a token of ${added.issuer} with sub ${added.subject} ` +
          `and aud ${added.audience} now authenticates it.\n\n`,
      );
      print(credentialRecord(added));
      print(
        `\nGet a token with the platform's token in $PLATFORM_TOKEN:\n  curl -s ${ctx.config.issuer}/oauth/token ` +
          `-d grant_type=client_credentials -d client_id=${id} ` +
          '-d client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer ' +
          `-d client_assertion="$PLATFORM_TOKEN" -d audience=${encodeURIComponent(audience)}\n`,
      );
    }),
  );

  withJson(
    fed.command('list <client-id>').description('the federated credentials of a client, oldest first'),
  ).action(
    action(async (ctx, json, id: string) => {
      const list = await federation.listFederatedCredentials(ctx, id);
      if (json) printJson({ items: list.map(views.federatedCredentialJson) });
      else
        print(
          formatTable(
            ['id', 'name', 'issuer', 'subject', 'max_lifetime', 'once'],
            list.map((c) => [c.id, c.name, c.issuer, c.subject, `${c.maxLifetime} s`, c.once ? 'yes' : 'no']),
          ),
        );
    }),
  );

  withJson(
    fed
      .command('show <client-id> <credential>')
      .description('one federated credential, by its id or its name'),
  ).action(
    action(async (ctx, json, id: string, given: string) => {
      const found = await federation.getFederatedCredential(
        ctx,
        id,
        (await credentialNamed(ctx, id, given)).id,
      );
      if (json) printJson(views.federatedCredentialJson(found));
      else print(credentialRecord(found));
    }),
  );

  withJson(
    fieldOptions(
      fed
        .command('update <client-id> <credential>')
        .description(
          'change a federated credential (by its id or its name): the fields given, the others stay',
        ),
      true,
    )
      .option('--no-once', 'a token may authenticate many times within its life (the default)')
      .option(
        '--discovery',
        "the issuer's keys are found by its discovery (removes --jwks-file and --jwks-uri)",
      ),
  ).action(
    action(async (ctx, json, id: string, given: string, options: CredentialOptions) => {
      const changed = await federation.updateFederatedCredential(
        ctx,
        id,
        (await credentialNamed(ctx, id, given)).id,
        inputOf(options),
      );
      if (json) printJson(views.federatedCredentialJson(changed));
      else print(credentialRecord(changed));
    }),
  );

  withJson(
    fed
      .command('remove <client-id> <credential>')
      .description('remove a federated credential (by its id or its name): its tokens stop working at once'),
  ).action(
    action(async (ctx, json, id: string, given: string) => {
      const { id: fid, name } = await credentialNamed(ctx, id, given);
      await federation.removeFederatedCredential(ctx, id, fid);
      if (json) printJson({ client_id: id, id: fid, removed: true });
      else
        print(`Federated credential ${fid} (${name}) of ${id} removed: its tokens stop working at once.\n`);
    }),
  );
}
