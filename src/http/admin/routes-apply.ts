import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { Type, type Static } from 'typebox';
import type * as declarative from '../../management/declarative/index.js';
import type { ParsedFile } from '../../management/declarative/file.js';
import type { AdminScope } from '../../management/builtin.js';
import { insufficientScope, problem } from '../problem.js';
import type { AdminRouteContext } from './route-context.js';
import { adminRoute, type AdminGuard } from './route.js';

/*
 * POST /admin/v1/apply (docs/management.md, "Declarative configuration", and the console's import page): `tessera
 * apply` over HTTP. The file is the body's `file`, the JSON that `tessera export --format json` prints; it is
 * checked, planned and applied by the management layer (parse, planApply, applyPlan), in one transaction, with the
 * caller's context: a change the caller may not make (no caller gives what it does not hold) refuses the whole
 * file with a 403, and nothing changes.
 */

/** What a dry run needs (it reads the store), and what an apply needs (it writes audiences, clients and grants). */
const READ: readonly AdminScope[] = ['audiences:read', 'clients:read'];
const WRITE: readonly AdminScope[] = ['audiences:write', 'clients:write'];

/**
 * An apply file may be a whole export (every audience and client), or what POST /imports made of a whole realm or
 * tenant: more than the admin API's other bodies, which are one resource each; as much as an import takes. Its
 * nesting is limited as every body's is (32 levels, the file being level 2).
 */
const APPLY_BODY_LIMIT = 16 * 1024 * 1024;

const ApplyBody = Type.Object(
  {
    file: Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'an apply file as JSON (what `tessera export --format json` prints; its JSON Schema is `tessera export ' +
          '--schema`). client_secret_file is refused: it names a file of the server’s machine',
      },
    ),
    dry_run: Type.Optional(Type.Boolean({ default: false, description: 'plan only: change nothing' })),
    prune: Type.Optional(
      Type.Boolean({
        default: false,
        description: 'also delete the audiences, clients and grants the file does not have',
      }),
    ),
  },
  { additionalProperties: false },
);

const Change = Type.Object(
  { field: Type.String(), from: Type.Unknown(), to: Type.Unknown() },
  { additionalProperties: false },
);

/** One step of the plan, in the file's names (as `tessera apply --json` prints them). */
const Step = Type.Object(
  {
    action: Type.Enum(['create', 'update', 'delete']),
    type: Type.Enum(['audience', 'client', 'grant', 'federated_credential']),
    identifier: Type.Optional(Type.String({ description: 'an audience step: its identifier' })),
    client_id: Type.Optional(Type.String({ description: 'a client, grant or federated credential step' })),
    audience: Type.Optional(Type.String({ description: 'a grant step: the audience identifier' })),
    name: Type.Optional(Type.String({ description: 'a federated credential step: its name' })),
    values: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), { description: 'a create step: the new values' }),
    ),
    scopes: Type.Optional(Type.Array(Type.String(), { description: 'a new grant: its scopes' })),
    claims: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    token_exchange: Type.Optional(Type.Boolean()),
    changes: Type.Optional(Type.Array(Change, { description: 'an update step: field by field' })),
  },
  { additionalProperties: false },
);

const Count = Type.Integer({ minimum: 0 });

const ApplyResult = Type.Object(
  {
    dry_run: Type.Boolean(),
    prune: Type.Boolean(),
    applied: Type.Boolean({ description: 'whether anything was changed' }),
    summary: Type.Object({ create: Count, update: Count, delete: Count }, { additionalProperties: false }),
    changes: Type.Array(Step, { description: 'the plan, in a stable order' }),
    kept: Type.Object(
      { audiences: Count, clients: Count, grants: Count },
      {
        additionalProperties: false,
        description: 'what the store has and the file does not, kept (no prune)',
      },
    ),
    lines: Type.Array(Type.String(), { description: 'the plan in words, as `tessera apply` prints it' }),
    secrets: Type.Array(
      Type.Object(
        { client_id: Type.String(), client_secret: Type.String() },
        { additionalProperties: false },
      ),
      { description: 'the secrets of the clients it created, shown this once (none on a dry run)' },
    ),
  },
  { additionalProperties: false },
);

/**
 * The scopes the call needs, decided before the body is validated (as every guarded change): a dry run the read
 * scopes, anything else (a dry_run that is not `true` included) the write scopes. Every one missing is named.
 */
const scopesGuard: AdminGuard = async (request) => {
  const dryRun = (request.body as { dry_run?: unknown } | null | undefined)?.dry_run === true;
  const held = request.adminCaller!.scopes;
  const missing = (dryRun ? READ : WRITE).filter((s) => !held.has(s));
  if (missing.length > 0)
    throw problem(
      403,
      'insufficient_scope',
      `${dryRun ? 'a dry run' : 'an apply'} needs the scopes ${(dryRun ? READ : WRITE).join(' ')}; this caller lacks ${missing.join(' ')}`,
      {},
      { 'www-authenticate': insufficientScope(missing) },
    );
};

/**
 * The body's file as the planner reads it: its data, its places JSON pointers (the body is JSON already parsed:
 * no line and column to tell).
 */
const bodyFile = (data: unknown): ParsedFile => ({ name: 'file', data, locate: () => undefined });

/** The management layer's declarative configuration, loaded by the first apply (as the CLI loads it). */
const loadDeclarative = (): Promise<typeof declarative> => import('../../management/declarative/index.js');

/** POST /apply: an apply file planned, and applied unless dry_run. */
export function applyRoutes(app: FastifyInstance, ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const route = adminRoute({
    operationId: 'applyConfig',
    summary:
      'Make the store match an apply file (as `tessera apply --json`): the plan, and unless dry_run the plan applied in one transaction',
    tags: ['configuration'],
    // The least the call needs, checked before the body is read; the guard asks for the rest.
    scope: 'clients:read',
    guard: scopesGuard,
    body: ApplyBody,
    ok: { 200: ApplyResult },
  });
  const security: Record<string, string[]>[] = [
    { bearer: [...WRITE] },
    { dpop: [...WRITE] },
    { session: [] },
  ];
  const schema: FastifySchema = {
    ...route.schema,
    description:
      'Needs the scopes `audiences:write clients:write` (a dry run: `audiences:read clients:read`), and every admin ' +
      'scope that a client the file changes holds or would hold (no caller gives what it does not hold: 403 ' +
      'insufficient_scope naming the scopes missing, and nothing is changed); with a console session, also the ' +
      '`Origin` of the issuer and the header `X-CSRF-Token`. A file with errors is refused whole (400, every ' +
      'error with its JSON pointer in the request body, /file/...), and nothing is changed.',
    security,
  };
  api.post('/apply', { ...route, schema, bodyLimit: APPLY_BODY_LIMIT }, async (request) => {
    const body = request.body as Static<typeof ApplyBody>;
    const mc = ctx.context(request);
    const d = await loadDeclarative();
    const dryRun = body.dry_run === true;
    let plan: declarative.Plan;
    try {
      // No secretFiles: a client_secret_file is refused at its place (it would read a file of this machine).
      plan = await d.planApply(mc, bodyFile(body.file), { prune: body.prune === true });
    } catch (error) {
      if (!(error instanceof d.ConfigFileError)) throw error;
      const count = error.problems.length;
      throw problem(
        400,
        'invalid_file',
        `the file has ${count} ${count === 1 ? 'error' : 'errors'}; nothing was changed`,
        { errors: error.problems.map((p) => ({ pointer: `/file${p.pointer}`, detail: p.message })) },
      );
    }
    const secrets = dryRun ? [] : await d.applyPlan(mc, plan);
    const { secrets: shown, ...outcome } = d.applyOutcome(plan, secrets, dryRun);
    return { ...outcome, lines: [...d.planLines(plan)], secrets: shown };
  });
}
