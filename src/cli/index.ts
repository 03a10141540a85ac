import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/index.js';
import type { ConfigFileError } from '../management/declarative/index.js';
import { asManagementError, type ErrorKind } from '../management/index.js';
import { SchemaError } from '../runtime/store.js';
import { auditCommand } from './audit.js';
import { audienceCommands } from './audiences.js';
import { clientCommands } from './clients.js';
import { configCommands } from './config.js';
import { EXIT_FAILED, EXIT_USAGE } from './common.js';
import { grantCommands } from './grants.js';
import { importCommands } from './import.js';
import { keyCommands } from './keys.js';
import { operatorCommands } from './operators.js';
import { serveCommands } from './serve.js';

/** The exit code of each kind of management failure: a value the rules refuse is a usage error. */
const EXIT_CODES: Record<ErrorKind, number> = {
  invalid: EXIT_USAGE,
  not_found: EXIT_FAILED,
  conflict: EXIT_FAILED,
  precondition: EXIT_FAILED,
  failed: EXIT_FAILED,
  // The console's logins, and the admin API's callers (the CLI holds every scope): no command gives these.
  unauthenticated: EXIT_FAILED,
  throttled: EXIT_FAILED,
  forbidden: EXIT_FAILED,
};

/** This Tessera's version: package.json's, two levels above this module (src/cli/ and dist/cli/ alike). */
function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

export function buildProgram(): Command {
  const program = new Command('tessera')
    .description('Tessera: OAuth 2.0 client-credentials token server')
    .version(version(), '-V, --version', "print Tessera's version")
    .option('--json', 'print one JSON document instead of text')
    .showHelpAfterError()
    .exitOverride();
  serveCommands(program);
  audienceCommands(program);
  clientCommands(program);
  grantCommands(program);
  keyCommands(program);
  auditCommand(program);
  configCommands(program);
  importCommands(program);
  operatorCommands(program);
  return program;
}

function fail(
  json: boolean,
  code: string,
  message: string,
  exitCode: number,
  details: Record<string, unknown> = {},
): void {
  if (json) process.stderr.write(JSON.stringify({ error: code, message, ...details }) + '\n');
  else process.stderr.write(`tessera: ${message}\n`);
  process.exitCode = exitCode;
}

/** A key id as Tessera makes them: the RFC 7638 thumbprint, 43 base64url characters. */
const KID = /^[A-Za-z0-9_-]{43}$/;

/**
 * A key id is a thumbprint, so one in 64 starts with `-` and commander would take it for an option.
 * For `keys retire`, such an argument moves behind `--` (no option is 43 characters of that alphabet);
 * any other operand that starts with `-`, like a client id, is written after `--` by the user.
 */
export function kidOperands(argv: string[]): string[] {
  const at = argv.indexOf('keys');
  if (at < 0 || argv[at + 1] !== 'retire' || argv.includes('--')) return argv;
  const rest = argv.slice(at + 2);
  const kids = rest.filter((arg) => arg.startsWith('-') && KID.test(arg));
  if (kids.length === 0) return argv;
  return [...argv.slice(0, at + 2), ...rest.filter((arg) => !kids.includes(arg)), '--', ...kids];
}

/** Entry point of the `tessera` command. */
export async function main(args: string[] = process.argv): Promise<void> {
  const argv = kidOperands(args);
  const json = argv.includes('--json');
  const program = buildProgram();
  // Each subcommand copied the output settings when it was made, so configure every one: with --json,
  // commander's own message and help stay off stderr, which holds the one JSON document.
  const quiet = (command: Command): void => {
    command.configureOutput({ writeErr: () => undefined });
    command.commands.forEach(quiet);
  };
  if (json) quiet(program);
  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return; // --help, --version
      // A command group without its subcommand shows help; commander's message is then "(outputHelp)".
      const message = error.code === 'commander.help' ? 'a command is required (see --help)' : error.message;
      if (json) fail(true, 'usage', message.replace(/^error: /, ''), EXIT_USAGE);
      else process.exitCode = EXIT_USAGE; // commander has printed the message and the usage
    } else if (error instanceof ConfigError) {
      fail(json, error.code, error.message, EXIT_USAGE);
    } else if (error instanceof SchemaError) {
      fail(json, error.code, error.message, EXIT_FAILED);
    } else if (asManagementError(error)) {
      const failure = asManagementError(error)!;
      // A file refused by `apply` lists every problem and its place.
      // (By its code: the declarative layer is loaded only by the commands that read files, see config.ts.)
      const details =
        failure.code === 'invalid_file' ? { errors: (failure as ConfigFileError).problems } : {};
      fail(json, failure.code, failure.message, EXIT_CODES[failure.kind], details);
    } else {
      fail(json, 'failed', (error as Error).message ?? String(error), EXIT_FAILED);
    }
  }
}
