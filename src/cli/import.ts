import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Argument, InvalidArgumentError, type Command } from 'commander';
import { validateAudienceUrl } from '../domain/validate.js';
import type * as imports from '../management/import/index.js';
import { withJson } from './common.js';
import { print, printJson } from './output.js';

/** The import layer (its readers load yaml), loaded by this command only, as `apply` loads the declarative layer. */
const loadImport = (): Promise<typeof imports> => import('../management/import/index.js');

/*
 * The values given by name are kept in Maps: a name is the user's (or an export's) to choose, and on an object
 * `constructor` or `__proto__` would find what every object inherits.
 */

/** `--keyword NAME=VALUE` (repeatable): a value of the Deploy CLI's `##NAME##` placeholders. */
const collectKeyword = (value: string, previous = new Map<string, string>()): Map<string, string> => {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError(`a keyword is NAME=VALUE, got "${value}"`);
  return new Map(previous).set(value.slice(0, at), value.slice(at + 1));
};

/** `--audience NAME=URL` (repeatable): the URL of an audience the export names otherwise (a Keycloak client id). */
const collectAudience = (value: string, previous = new Map<string, string>()): Map<string, string> => {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError(`an audience is NAME=URL, got "${value}"`);
  try {
    validateAudienceUrl(value.slice(at + 1));
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
  return new Map(previous).set(value.slice(0, at), value.slice(at + 1));
};

const unreadable = (i: typeof imports, name: string, error: unknown): Error =>
  new i.ImportSourceError(name, [
    { pointer: '', message: `cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}` },
  ]);

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * A file of a directory export: a regular file only, never followed out of the directory by a symbolic link, nor
 * waited on (a FIFO, a device). Checked with lstat, then opened without following a link (O_NOFOLLOW) nor
 * blocking (O_NONBLOCK: a FIFO put there since opens at once), and checked again on what was opened.
 */
async function readDirectoryFile(
  i: typeof imports,
  source: string,
  relative: string,
  total: { bytes: number },
): Promise<string> {
  const full = path.join(source, relative);
  const refuse = (what: string) =>
    new i.ImportSourceError(source.replace(/\/+$/, ''), [
      {
        pointer: '',
        file: relative,
        message: `is ${what}, not a regular file: an export's directory is read for its own files only`,
      },
    ]);
  const kind = (info: { isSymbolicLink(): boolean; isFIFO(): boolean; isFile(): boolean }) =>
    info.isSymbolicLink()
      ? 'a symbolic link'
      : info.isFIFO()
        ? 'a FIFO'
        : info.isFile()
          ? undefined
          : 'a special file';
  let handle;
  try {
    const linked = kind(await lstat(full));
    if (linked !== undefined) throw refuse(linked);
    handle = await open(full, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (error instanceof i.ImportSourceError) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw refuse('a symbolic link');
    throw unreadable(i, full, error);
  }
  try {
    const info = await handle.stat();
    const opened = kind(info);
    if (opened !== undefined) throw refuse(opened);
    total.bytes += info.size;
    i.checkSize(source, total.bytes);
    return await handle.readFile('utf8');
  } catch (error) {
    if (error instanceof i.ImportSourceError) throw error;
    throw unreadable(i, full, error);
  } finally {
    await handle.close();
  }
}

/** The export at `source`: a file's text, standard input's, or the Deploy CLI's directories. */
async function readInput(i: typeof imports, source: string): Promise<imports.ImportInput> {
  if (source === '-') return { text: await readStdin(), name: '<stdin>' };
  let info;
  try {
    info = await stat(source);
  } catch (error) {
    throw unreadable(i, source, error);
  }
  if (!info.isDirectory()) {
    i.checkSize(source, info.size);
    try {
      return { text: await readFile(source, 'utf8'), name: source };
    } catch (error) {
      throw unreadable(i, source, error);
    }
  }
  const files: { path: string; text: string }[] = [];
  const total = { bytes: 0 };
  for (const dir of ['resource-servers', 'clients', 'grants']) {
    let names: string[];
    try {
      // Its directories its own too: a symbolic link to one elsewhere is refused, as a linked file is.
      if ((await lstat(path.join(source, dir))).isSymbolicLink())
        throw new i.ImportSourceError(source.replace(/\/+$/, ''), [
          {
            pointer: '',
            file: dir,
            message:
              "is a symbolic link, not a directory: an export's directory is read for its own files only",
          },
        ]);
      names = (await readdir(path.join(source, dir))).sort();
    } catch (error) {
      if (error instanceof i.ImportSourceError) throw error;
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw unreadable(i, path.join(source, dir), error);
    }
    for (const name of names) {
      const relative = `${dir}/${name}`;
      if (!i.auth0DirectoryFile(relative)) continue;
      files.push({ path: relative, text: await readDirectoryFile(i, source, relative, total) });
    }
  }
  if (files.length === 0)
    throw new i.ImportSourceError(source, [
      { pointer: '', message: 'has none of the Deploy CLI directories resource-servers/, clients/, grants/' },
    ]);
  return { files, name: source.replace(/\/+$/, '') };
}

/** Writes every file or none: each to a temporary file beside it, then renamed in place. */
async function writeAll(files: { file: string; text: string; mode: number }[]): Promise<void> {
  const temps = files.map((f) => `${f.file}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    for (const [n, f] of files.entries()) await writeFile(temps[n]!, f.text, { mode: f.mode, flag: 'wx' });
    for (const [n, f] of files.entries()) await rename(temps[n]!, f.file);
  } catch (error) {
    await Promise.all(temps.map((t) => rm(t, { force: true })));
    throw error;
  }
}

interface ImportOptions {
  output?: string;
  secrets?: string;
  keyword?: Map<string, string>;
  audience?: Map<string, string>;
  json?: boolean;
}

/** `tessera import`: another server's export as an apply file, and a report; the store is not touched. */
export function importCommands(program: Command): void {
  withJson(
    program
      .command('import')
      .description(
        "write an apply file from another server's export (Auth0 Deploy CLI, Keycloak realm, Hydra clients)",
      )
      .addArgument(
        new Argument('<server>', 'the server it comes from').choices(['auth0', 'keycloak', 'hydra']),
      )
      .argument('<export>', "the export: a file, the Deploy CLI's directory, or - for standard input")
      .option(
        '-o, --output <file>',
        'write the apply file there (.json: JSON, else YAML); else standard output',
      )
      .option(
        '--secrets <file>',
        'write the secrets the export holds there (JSON, mode 0600), for tessera apply --secrets',
      )
      .option(
        '--keyword <name=value>',
        "fill the Deploy CLI's ##NAME## placeholders (repeatable)",
        collectKeyword,
      )
      .option(
        '--audience <name=url>',
        'the audience URL of a Keycloak client id or an audience that is no URL (repeatable)',
        collectAudience,
      ),
  ).action(async (server: imports.ImportSource, source: string, options: ImportOptions, command: Command) => {
    const json = Boolean(command.optsWithGlobals<{ json?: boolean }>().json);
    const i = await loadImport();
    const input = await readInput(i, source);
    const { file, report, secrets } = i.importExport(server, input, {
      keywords: options.keyword ?? new Map(),
      audiences: options.audience ?? new Map(),
      carrySecrets: options.secrets !== undefined,
    });
    const yaml = async (value: unknown) => (await import('yaml')).stringify(value, { lineWidth: 0 });
    const writes: { file: string; text: string; mode: number }[] = [];
    if (options.output !== undefined)
      writes.push({
        file: options.output,
        text: options.output.endsWith('.json') ? `${JSON.stringify(file, null, 2)}\n` : await yaml(file),
        mode: 0o644,
      });
    if (options.secrets !== undefined)
      writes.push({ file: options.secrets, text: `${JSON.stringify(secrets, null, 2)}\n`, mode: 0o600 });
    await writeAll(writes);
    if (json) {
      printJson({ apply_file: file, report });
      return;
    }
    for (const line of report) process.stderr.write(`${i.reportLineText(line)}\n`);
    if (options.output === undefined) print(await yaml(file));
  });
}
