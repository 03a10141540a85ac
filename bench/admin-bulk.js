/* global console, fetch, URLSearchParams, performance */
// Clients created through the admin API by one program: `npm run build && node bench/admin-bulk.js
// [--clients N] [--concurrency C] [--store sqlite|postgres]`. Starts a server on a fresh store, creates an
// admin client, gets a token at /oauth/token, then POSTs N clients to /admin/v1/clients (C at a time) and
// grants each an audience (PUT), and reports the time of the N creations and grants.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../dist/config/index.js';
import { createLogger } from '../dist/logger.js';
import { startServer } from '../dist/main.js';
import { clients } from '../dist/management/index.js';
import { ADMIN_SCOPES, adminAudienceUrl } from '../dist/management/builtin.js';

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '8' },
  },
});
const N = Number(values.clients);
const C = Number(values.concurrency);

const dataDir = mkdtempSync(join(tmpdir(), 'tessera-bench-admin-'));
const config = loadConfig({
  TESSERA_DATA_DIR: dataDir,
  TESSERA_PORT: '0',
  TESSERA_HOST: '127.0.0.1',
  TESSERA_MASTER_KEY: randomBytes(32).toString('base64url'),
  TESSERA_LOG_LEVEL: 'warn',
});
const server = await startServer(config, createLogger(config));
try {
  const base = server.address;
  const ctx = { store: server.runtime.store, config, actor: 'bench' };
  const url = adminAudienceUrl(config);
  const admin = await clients.createClient(ctx, {
    name: 'bench',
    grants: [url],
    scopes: { [url]: [...ADMIN_SCOPES] },
  });
  await server.runtime.directory.poll();
  const token = await (
    await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: admin.client.id,
        client_secret: admin.secret,
        audience: url,
      }),
    })
  ).json();
  const headers = { authorization: `Bearer ${token.access_token}`, 'content-type': 'application/json' };
  const api = async (method, path, body) => {
    const r = await fetch(`${base}/admin/v1${path}`, { method, headers, body: JSON.stringify(body) });
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return r.json();
  };
  const audience = await api('POST', '/audiences', { identifier: 'https://api.example.com' });

  const start = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: C }, async () => {
      for (let i = next++; i < N; i = next++) {
        const created = await api('POST', '/clients', { name: `client ${i}`, client_id: `bulk-${i}` });
        await api('PUT', `/clients/${created.client_id}/grants/${audience.id}`, {});
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  console.log(
    `${N} clients created and granted through the admin API in ${seconds.toFixed(2)} s ` +
      `(${Math.round(N / seconds)} clients/s, ${C} at a time, SQLite)`,
  );
} finally {
  await server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
