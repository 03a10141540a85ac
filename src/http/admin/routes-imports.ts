import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { Type, type Static } from 'typebox';
import type * as imports from '../../management/import/index.js';
import type { AdminScope } from '../../management/builtin.js';
import { insufficientScope, problem } from '../problem.js';
import type { AdminRouteContext } from './route-context.js';
import { adminRoute, type AdminGuard } from './route.js';

/*
 * POST /admin/v1/imports (docs/import.md, and the console's import page): `tessera import` over HTTP. The export is
 * the body's `file` (as JSON, or its text); it is mapped by the management layer's import (importExport), and the
 * answer is the apply file and the report. Nothing is changed, and no secret is ever answered: the export's
 * secrets are not carried (its clients get new ones when the file is applied, as the report says).
 */

const NEEDS: readonly AdminScope[] = ['clients:read', 'audiences:read'];

/** An export may be a whole realm or tenant: a Keycloak realm of 5,000 clients is some 10 MB. */
const IMPORT_BODY_LIMIT = 16 * 1024 * 1024;

/**
 * The export as text (`file` a string), at most 2 MiB: YAML's reader builds a whole document of a text with an
 * anchor or an error in it, some 75 to 100 bytes of memory a byte, where JSON (`file` as parsed JSON) costs what
 * the body does. A bigger export is given as JSON, up to the body's limit.
 */
const MAX_TEXT_BYTES = 2 * 1024 * 1024;

const ImportBody = Type.Object(
  {
    source: Type.Enum(['auth0', 'keycloak', 'hydra'], { description: 'the server the export comes from' }),
    file: Type.Union(
      [Type.Object({}, { additionalProperties: true }), Type.Array(Type.Unknown()), Type.String()],
      {
        description:
          "the export as JSON: Auth0's Deploy CLI YAML file (tenant.yaml) as JSON (resourceServers, clients, " +
          'clientGrants), a Keycloak realm export, or Hydra clients (one, a list, or a page of `hydra list ' +
          'oauth2-clients --format json`); or the text of the export file (YAML or JSON)',
      },
    ),
    keywords: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description: "values of the Deploy CLI's ##NAME## placeholders, by NAME",
      }),
    ),
    audiences: Type.Optional(
      Type.Record(Type.String(), Type.String({ format: 'uri' }), {
        description:
          'audience URLs of names that are no URL: a Keycloak client id (included.client.audience), an audience like `my-api`',
      }),
    ),
  },
  { additionalProperties: false },
);

const ReportLine = Type.Object(
  {
    place: Type.String({
      description: 'where in the export: a JSON pointer (in the text of a YAML file, line:column)',
    }),
    outcome: Type.Enum(['mapped', 'left_out', 'changed']),
    detail: Type.String({ description: 'what, and why' }),
  },
  { additionalProperties: false },
);

const ImportResult = Type.Object(
  {
    apply_file: Type.Object(
      {},
      {
        additionalProperties: true,
        description: 'the apply file (for POST /apply or `tessera apply`); never a secret',
      },
    ),
    report: Type.Array(ReportLine, { description: 'one line for each thing mapped, left out or changed' }),
  },
  { additionalProperties: false },
);

/** Both read scopes, every one missing named (the route's own scope is the first, checked before the body). */
const scopesGuard: AdminGuard = async (request) => {
  const held = request.adminCaller!.scopes;
  const missing = NEEDS.filter((s) => !held.has(s));
  if (missing.length > 0)
    throw problem(
      403,
      'insufficient_scope',
      `an import needs the scopes ${NEEDS.join(' ')}; this caller lacks ${missing.join(' ')}`,
      {},
      { 'www-authenticate': insufficientScope(missing) },
    );
};

/** The import, loaded by the first call (as the CLI loads it). */
const loadImport = (): Promise<typeof imports> => import('../../management/import/index.js');

/** POST /imports: an export mapped to an apply file and a report; nothing changes. */
export function importRoutes(app: FastifyInstance, _ctx: AdminRouteContext): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();
  const route = adminRoute({
    operationId: 'createImport',
    summary:
      "Map another server's export (Auth0 Deploy CLI, Keycloak realm, Hydra clients) to an apply file and a report; changes nothing",
    tags: ['configuration'],
    scope: 'clients:read',
    guard: scopesGuard,
    body: ImportBody,
    ok: { 200: ImportResult },
    errors: [400, 401, 403, 413, 415, 429, 503],
  });
  const schema: FastifySchema = {
    ...route.schema,
    description:
      'Needs the scopes `clients:read audiences:read`. Changes nothing, and answers no secret: a secret in the ' +
      'export is not carried (apply makes a new one; `tessera import --secrets` carries them). An export that is ' +
      'not of its server, or a placeholder without a keyword, is refused (400, every problem with its JSON pointer ' +
      'in the request body, /file/...). The export as text (`file` a string) is read up to 2 MiB (413 past it); ' +
      'as JSON, up to the body limit (16 MiB).',
    security: [{ bearer: [...NEEDS] }, { dpop: [...NEEDS] }, { session: [] }],
  };
  api.post('/imports', { ...route, schema, bodyLimit: IMPORT_BODY_LIMIT }, async (request) => {
    const body = request.body as Static<typeof ImportBody>;
    if (typeof body.file === 'string') {
      const bytes = Buffer.byteLength(body.file);
      if (bytes > MAX_TEXT_BYTES)
        throw problem(
          413,
          'body_too_large',
          `the export as text (file, a string) is ${bytes} bytes; as text it is read up to ${MAX_TEXT_BYTES} bytes (2 MiB): give a bigger one as JSON`,
          { errors: [{ pointer: '/file', detail: `is ${bytes} bytes of text; at most ${MAX_TEXT_BYTES}` }] },
        );
    }
    const i = await loadImport();
    const input: imports.ImportInput =
      typeof body.file === 'string' ? { text: body.file, name: 'file' } : { data: body.file, name: 'file' };
    try {
      // The names given, in Maps (Object.entries: the body's own members), never looked up on the body's objects.
      const { file, report } = i.importExport(body.source, input, {
        keywords: new Map(Object.entries(body.keywords ?? {})),
        audiences: new Map(Object.entries(body.audiences ?? {})),
        carrySecrets: false,
      });
      return { apply_file: file, report };
    } catch (error) {
      // The mapping refuses what it can foresee (each problem at its place); whatever else an export makes it
      // throw (a TypeError, a RangeError) is the export's doing too, and answered as a bad export, not a 500.
      if (error instanceof TypeError || error instanceof RangeError) {
        request.log.warn(
          { error: `${error.name}: ${error.message.slice(0, 200)}` },
          'an export could not be mapped',
        );
        throw problem(400, 'invalid_file', 'the export cannot be mapped; nothing was mapped', {
          errors: [{ pointer: '/file', detail: `the export cannot be mapped (${error.name})` }],
        });
      }
      if (!(error instanceof i.ImportSourceError)) throw error;
      const count = error.problems.length;
      const text = typeof body.file === 'string';
      throw problem(
        400,
        'invalid_file',
        `the export has ${count} ${count === 1 ? 'problem' : 'problems'}; nothing was mapped`,
        {
          errors: error.problems.map((p) => ({
            pointer: text ? '/file' : `/file${p.pointer}`,
            detail:
              text && p.line !== undefined
                ? `${p.line}:${p.column ?? 1}: ${p.pointer ? `${p.pointer}: ` : ''}${p.message}`
                : p.message,
          })),
        },
      );
    }
  });
}
