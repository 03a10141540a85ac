import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Option, type Command } from 'commander';
import type * as declarative from '../management/declarative/index.js';
import type { ManagementContext } from '../management/index.js';
import { ManagementError } from '../management/errors.js';
import { action, withJson } from './common.js';
import { jsonPieces, print, printJson, writePieces } from './output.js';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The declarative layer (the file's schema and its validator, YAML, the plan), loaded by the commands that use it:
 * every other command starts without it (Ajv and yaml are a quarter of the CLI's start-up).
 */
type Declarative = typeof declarative;
const loadDeclarative = (): Promise<Declarative> => import('../management/declarative/index.js');

const asYaml = async (value: unknown): Promise<string> =>
  (await import('yaml')).stringify(value, { lineWidth: 0 });

/** What the store has and the file does not, kept: `Not in the file, kept (...): 1 client.` */
function keptText({ kept }: declarative.Plan): string {
  const { audiences, clients, grants } = kept;
  const parts = [
    audiences && `${audiences} audience${audiences === 1 ? '' : 's'}`,
    clients && `${clients} client${clients === 1 ? '' : 's'}`,
    grants && `${grants} grant${grants === 1 ? '' : 's'}`,
  ].filter(Boolean);
  return parts.length ? `Not in the file, kept (--prune deletes them): ${parts.join(', ')}.\n` : '';
}

/**
 * `tessera apply`'s words: the plan, its summary, and the new clients' secrets, shown once. In pieces, a line at a
 * time: an apply may create hundreds of thousands of clients.
 */
function* applyText(
  d: Declarative,
  plan: declarative.Plan,
  secrets: declarative.CreatedSecret[],
  dryRun: boolean,
): Generator<string> {
  if (plan.steps.length === 0) {
    yield `No changes.\n${keptText(plan)}`;
    return;
  }
  const summary = d.planSummary(plan);
  for (const line of d.planLines(plan)) yield `${line}\n`;
  yield '\n';
  yield `Plan: ${summary.create} to create, ${summary.update} to update, ${summary.delete} to delete.\n`;
  yield keptText(plan);
  if (dryRun) {
    yield 'Dry run: nothing was changed.\n';
    return;
  }
  yield 'Applied.\n';
  if (secrets.length > 0) {
    yield '\nSecrets of the new clients, shown this once: store them now.\n';
    // A loop, not Math.max(...): an apply may create hundreds of thousands of clients, more arguments than a call
    // takes.
    let width = 0;
    for (const s of secrets) width = Math.max(width, s.client_id.length);
    for (const s of secrets) yield `  ${s.client_id.padEnd(width)}  ${s.client_secret}\n`;
  }
}

/** `tessera apply --json`'s document, as printJson would print it, in pieces (see jsonPieces). */
function* applyJson(document: Record<string, unknown>): Generator<string> {
  yield* jsonPieces(document);
  yield '\n';
}

/**
 * The plan of a file. Its text and data are let go when this returns, before the plan is applied and printed
 * (for 200 000 clients, some 100 MB).
 */
async function planOf(
  d: Declarative,
  ctx: ManagementContext,
  file: string,
  name: string,
  prune: boolean,
  secretsFile: string | undefined,
): Promise<declarative.Plan> {
  const given = secretsFile === undefined ? undefined : await readSecrets(secretsFile);
  const text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  // A client's client_secret_file is relative to the file's directory (standard input's: the working one).
  const baseDir = file === '-' ? process.cwd() : dirname(resolve(file));
  return d.planApply(ctx, d.parseConfigFile(text, name), {
    prune,
    secretFiles: {
      baseDir,
      ...(given === undefined ? {} : { given: { secrets: given, from: secretsFile! } }),
    },
  });
}

/**
 * `--secrets FILE`: the secrets `tessera import --secrets` carried over, a JSON object of client_id to secret (kept
 * out of the apply file, which goes into git). A file that is not one is a usage error, its secrets never shown.
 */
async function readSecrets(file: string): Promise<Map<string, string>> {
  let data: unknown;
  try {
    data = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ManagementError(
      'invalid_file',
      code === undefined ? `${file}: not JSON` : `${file}: cannot read it (${code})`,
    );
  }
  // (Never JSON.parse's message: it quotes the text, a secret.)
  if (
    typeof data !== 'object' ||
    data === null ||
    Array.isArray(data) ||
    Object.values(data).some((secret) => typeof secret !== 'string')
  )
    throw new ManagementError('invalid_file', `${file}: not a JSON object of client ids and their secrets`);
  return new Map(Object.entries(data as Record<string, string>));
}

/** `tessera export` and `tessera apply`: the configuration as a file kept in git. */
export function configCommands(program: Command): void {
  program
    .command('export')
    .description('print audiences and clients (never secrets) as a file for tessera apply')
    .addOption(new Option('--format <format>', 'file format').choices(['yaml', 'json']))
    .option('--schema', 'print the JSON Schema of the file instead')
    .option('--json', 'the same as --format json')
    .action(
      action(async (ctx, json, options: { format?: string; schema?: boolean }) => {
        const format = options.format ?? (json ? 'json' : 'yaml');
        const d = await loadDeclarative();
        if (options.schema) {
          printJson(d.configSchema());
          return;
        }
        const file = await d.exportConfig(ctx);
        if (format === 'json') printJson(file);
        else print(await asYaml(file));
      }),
    );
  withJson(
    program
      .command('apply')
      .description('make the store match a file: print the plan, then apply it in one transaction')
      .requiredOption('-f, --file <file>', 'the file (YAML or JSON); - reads standard input')
      .option('--dry-run', 'print the plan and change nothing')
      .option('--prune', 'also delete what the file does not have (audiences, clients, grants)')
      .option(
        '--secrets <file>',
        'secrets of its clients, a JSON object of client_id to secret (as tessera import --secrets writes them)',
      ),
  ).action(
    action(
      async (ctx, json, options: { file: string; dryRun?: boolean; prune?: boolean; secrets?: string }) => {
        const name = options.file === '-' ? '<stdin>' : options.file;
        const d = await loadDeclarative();
        const plan = await planOf(d, ctx, options.file, name, Boolean(options.prune), options.secrets);
        const dryRun = Boolean(options.dryRun);
        const secrets = dryRun ? [] : await d.applyPlan(ctx, plan);
        if (json) {
          // Its changes and secrets are written one at a time: for 200 000 clients the document is 90 MB.
          await writePieces(applyJson({ file: name, ...d.applyOutcome(plan, secrets, dryRun) }));
          return;
        }
        await writePieces(applyText(d, plan, secrets, dryRun));
      },
    ),
  );
}
