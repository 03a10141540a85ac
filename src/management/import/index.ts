/**
 * `tessera import` (docs/import.md): another server's export read and mapped to a Tessera apply file, with a report
 * of what was mapped, left out or changed, and the secrets the export carries. Nothing here touches the store: the
 * file is applied by `tessera apply`, whose validation it goes through.
 *
 * - source.ts: reading an export (a file's text, a directory, data), its size and depth limits, its places;
 * - auth0.ts, keycloak.ts, hydra.ts: each server's export, mapped;
 * - mapping.ts: the file being built, ids made from names, the checks of a source's shape;
 * - report.ts: the report's lines; secrets.ts: the secrets carried.
 */
import type { ConfigFile } from '../declarative/file.js';
import { auth0DirectoryFile, mapAuth0 } from './auth0.js';
import { mapHydra } from './hydra.js';
import { mapKeycloak } from './keycloak.js';
import { mappingOf, MAX_FILE_SCOPES, type MappingOptions } from './mapping.js';
import { Report, rootOf, type ReportLine } from './report.js';
import type { CarriedSecrets } from './secrets.js';
import { ImportSourceError, Problems, readSource, type ImportInput } from './source.js';

export { reportLineText, type ReportLine } from './report.js';
export { auth0DirectoryFile } from './auth0.js';
export { checkSize, ImportSourceError, MAX_SOURCE_BYTES, type ImportInput } from './source.js';
export type { MappingOptions, Named } from './mapping.js';

export const IMPORT_SOURCES = ['auth0', 'keycloak', 'hydra'] as const;
export type ImportSource = (typeof IMPORT_SOURCES)[number];

export interface ImportResult {
  /** The apply file (never a secret). */
  file: ConfigFile;
  report: ReportLine[];
  /**
   * The secrets carried (options.carrySecrets), by client id; for a file of their own, never the apply file. Each
   * its own member, whatever the client id (`__proto__` too): JSON.stringify writes every one.
   */
  secrets: Record<string, string>;
}

/**
 * An export mapped to an apply file. A source that cannot be read, or whose shape is not its server's, is refused
 * with every problem and its place (ImportSourceError, a ConfigFileError); nothing is returned then.
 */
export function importExport(
  source: ImportSource,
  input: ImportInput,
  options: MappingOptions = {},
): ImportResult {
  const directory = 'files' in input;
  if (directory && source !== 'auth0')
    throw new ImportSourceError(input.name, [
      { pointer: '', message: `is a directory; a ${source} export is one JSON file` },
    ]);
  const read = readSource(
    directory ? { ...input, files: input.files.filter((f) => auth0DirectoryFile(f.path)) } : input,
  );
  const report = new Report();
  const problems = new Problems();
  const secrets: CarriedSecrets = new Map();
  const mapping = mappingOf(options);
  const file =
    source === 'auth0'
      ? mapAuth0(read.docs, directory, mapping, report, problems)
      : source === 'keycloak'
        ? mapKeycloak(read.docs, mapping, report, problems, secrets)
        : mapHydra(read.docs, mapping, report, problems, secrets);
  if (file.overflowed)
    problems.add(
      rootOf(read.docs[0]!),
      `its apply file would hold more than ${MAX_FILE_SCOPES} scopes of audiences and grants (each client's scopes are scopes of every audience it is granted); a Tessera audience has at most 200`,
    );
  problems.check(read.name);
  return { file: file.build(), report: report.lines(), secrets: Object.fromEntries(secrets) };
}
