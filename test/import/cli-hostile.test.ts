/**
 * `tessera import` with the real CLI against hostile exports (the security review of the import): a Deploy CLI
 * directory whose files are symbolic links or FIFOs is refused, each naming its file, never followed out of the
 * directory nor waited on; `--keyword constructor=…` is a keyword like any other; a carried secret of a client
 * whose id is `__proto__` is written to the secrets file.
 *
 * The CLI loads dist/, so `npm run build` must have run (`npm test` does).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, tessera, tesseraEnv } from '../helpers/process.js';
import { tempDir } from '../helpers/server.js';

const FIXTURES = path.join(ROOT, 'test/fixtures/import');

/** A copy of the fixture's Deploy CLI directory, and the environment of a command. */
function exportDir(prefix: string) {
  const dir = tempDir(prefix);
  const source = path.join(dir, 'export');
  cpSync(path.join(FIXTURES, 'auth0/directory'), source, { recursive: true });
  const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
  return { dir, source, env };
}

/** Whether mkfifo(1) is there to make a FIFO with. */
const hasMkfifo = ((): boolean => {
  try {
    execFileSync('mkfifo', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

const REFUSED = "not a regular file: an export's directory is read for its own files only";

describe("tessera import auth0 DIR: the directory's own regular files only", () => {
  it('refuses a file that is a symbolic link (to a file outside the directory), naming it: exit 2', async () => {
    const { dir, source, env } = exportDir('tessera-import-symlink-');
    const outside = path.join(dir, 'outside.json');
    writeFileSync(outside, JSON.stringify({ name: 'Outside', app_type: 'non_interactive' }));
    symlinkSync(outside, path.join(source, 'clients', 'Linked.json'));
    const refused = await tessera(env, 'import', 'auth0', source, '--keyword', 'ENV=prod');
    expect([refused.code, refused.stdout, refused.stderr]).toEqual([
      2,
      '',
      `tessera: ${source}: 1 error, nothing was written\n  ${source}/clients/Linked.json: is a symbolic link, ${REFUSED}\n`,
    ]);
  });

  it('refuses a directory of the export that is a symbolic link', async () => {
    const { dir, source, env } = exportDir('tessera-import-symlink-dir-');
    const elsewhere = path.join(dir, 'elsewhere');
    mkdirSync(elsewhere);
    cpSync(path.join(source, 'grants'), elsewhere, { recursive: true });
    execFileSync('rm', ['-r', path.join(source, 'grants')]);
    symlinkSync(elsewhere, path.join(source, 'grants'));
    const refused = await tessera(env, 'import', 'auth0', source, '--keyword', 'ENV=prod');
    expect([refused.code, refused.stderr]).toEqual([
      2,
      `tessera: ${source}: 1 error, nothing was written\n  ${source}/grants: is a symbolic link, not a directory: an export's directory is read for its own files only\n`,
    ]);
  });

  it.skipIf(!hasMkfifo)(
    'refuses a FIFO at once, naming it, never waiting on it (skipped without mkfifo)',
    async () => {
      const { source, env } = exportDir('tessera-import-fifo-');
      execFileSync('mkfifo', [path.join(source, 'clients', 'Pipe.json')]);
      const started = Date.now();
      const refused = await tessera(env, 'import', 'auth0', source, '--keyword', 'ENV=prod');
      expect(Date.now() - started).toBeLessThan(5000);
      expect([refused.code, refused.stderr]).toEqual([
        2,
        `tessera: ${source}: 1 error, nothing was written\n  ${source}/clients/Pipe.json: is a FIFO, ${REFUSED}\n`,
      ]);
    },
    10_000,
  );
});

describe('names and ids every object inherits', () => {
  it('takes --keyword constructor=VALUE as any keyword, and writes the carried secret of client __proto__', async () => {
    const dir = tempDir('tessera-import-proto-');
    const env = tesseraEnv({ TESSERA_DATA_DIR: path.join(dir, 'data') });
    const tenant = path.join(dir, 'tenant.json');
    writeFileSync(
      tenant,
      JSON.stringify({ resourceServers: [{ identifier: 'https://a.example', name: '##constructor##' }] }),
    );
    const imported = await tessera(
      env,
      'import',
      'auth0',
      tenant,
      '--keyword',
      'constructor=Orders',
      '--json',
    );
    expect(imported.code).toBe(0);
    expect((imported.json as { apply_file: unknown }).apply_file).toEqual({
      audiences: [{ identifier: 'https://a.example', name: 'Orders', token_profile: 'auth0' }],
      clients: [],
    });

    const secret = 'W5vKq2mZ8xT1rY7uN4bH6cJ9dL3fG0sA';
    const realm = path.join(dir, 'realm.json');
    writeFileSync(
      realm,
      JSON.stringify({ clients: [{ clientId: '__proto__', serviceAccountsEnabled: true, secret }] }),
    );
    const secrets = path.join(dir, 'secrets.json');
    const carried = await tessera(
      env,
      'import',
      'keycloak',
      realm,
      '-o',
      path.join(dir, 'out.yaml'),
      '--secrets',
      secrets,
    );
    expect(carried.code).toBe(0);
    expect(readFileSync(secrets, 'utf8')).toBe(`{\n  "__proto__": "${secret}"\n}\n`);
  });
});
