/**
 * Secrets an export holds (a Keycloak realm exported with them): carried to a file of their own (`--secrets FILE`,
 * never the apply file), or left for apply to make new ones. A line of the report never holds one.
 */
import { givenSecretProblem } from '../../domain/secrets.js';
import type { Mapping } from './mapping.js';
import type { Report } from './report.js';
import type { Place, Problems } from './source.js';

/** What Keycloak writes in place of a secret it does not export (its admin console's partial export). */
const MASKED_SECRET = '**********';

/**
 * The secrets carried, by client id: a Map, since a client id may be any name (`__proto__` is one, and on an object
 * its assignment would set the object's prototype, the secret lost). Written out with Object.fromEntries, whose
 * members are the object's own, whatever their names.
 */
export type CarriedSecrets = Map<string, string>;

/**
 * A client's secret as the export has it: carried, or why not (a line). A carried one shorter than 32 characters
 * (or not printable ASCII) is a problem at its place: the import refuses it, and nothing is written.
 */
export function carrySecret(
  secret: unknown,
  at: Place,
  clientId: string,
  options: Mapping,
  secrets: CarriedSecrets,
  report: Report,
  problems: Problems,
): void {
  if (secret === undefined || secret === null || secret === '') {
    report.changed(at, `client ${clientId} has no secret in the export: apply makes a new one`);
    return;
  }
  if (typeof secret !== 'string') {
    problems.add(at, 'a secret must be a string');
    return;
  }
  if (secret === MASKED_SECRET) {
    report.changed(
      at,
      `client ${clientId}'s secret is masked (**********), no secret: apply makes a new one`,
    );
    return;
  }
  if (!options.carrySecrets) {
    report.changed(
      at,
      `client ${clientId}'s secret is in the export but not carried (--secrets FILE carries it): apply makes a new one`,
    );
    return;
  }
  // The rule of every secret Tessera did not make (at least 32 characters, printable ASCII), refused here, at its place.
  const problem = givenSecretProblem(secret);
  if (problem !== undefined) {
    problems.add(
      at,
      `client ${clientId}'s secret: ${problem}: rotate it on the old server first, or leave out --secrets and let apply make one`,
    );
    return;
  }
  secrets.set(clientId, secret);
  report.mapped(at, `client ${clientId}'s secret carried to the secrets file`);
}
