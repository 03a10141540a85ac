import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/**
 * The console's built files (`vite build` writes them to dist/console at `npm run build`), served from memory:
 * a few hundred KiB, read once at start. Only these files are ever answered, so no request path reaches the
 * file system. Hashed files under assets/ are immutable and cached for a year; index.html is revalidated.
 */
export interface Asset {
  body: Buffer;
  type: string;
  etag: string;
  /** Named after its content's hash (assets/…): it never changes under its name. */
  immutable: boolean;
  /** Compressed copies, made on first request. */
  encoded: Map<'br' | 'gzip', Buffer>;
}

/** dist/console, from src/http/console (tests) and from dist/http/console (the package) alike. */
const CONSOLE_DIST = fileURLToPath(new URL('../../../dist/console/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
};

/** Every file under `dir` by its path relative to it (with /); undefined when the console is not built. */
export function loadAssets(dir: string = CONSOLE_DIST): Map<string, Asset> | undefined {
  if (!existsSync(path.join(dir, 'index.html'))) return undefined;
  const assets = new Map<string, Asset>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    const name = path.relative(dir, file).split(path.sep).join('/');
    const type = TYPES[path.extname(name)];
    // Source maps and anything unexpected stay on disk.
    if (type === undefined || name.endsWith('.map')) continue;
    const body = readFileSync(file);
    assets.set(name, {
      body,
      type,
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      immutable: name.startsWith('assets/'),
      encoded: new Map(),
    });
  }
  return assets;
}

/** The body to send for an Accept-Encoding, and its Content-Encoding (none for small or binary files). */
export function encodingFor(
  asset: Asset,
  acceptEncoding: string | undefined,
): { body: Buffer; encoding: 'br' | 'gzip' | undefined } {
  const compressible = asset.body.length >= 1024 && !asset.type.startsWith('image/png');
  if (!compressible || acceptEncoding === undefined) return { body: asset.body, encoding: undefined };
  const accepts = (name: string) =>
    new RegExp(`(^|[,\\s])${name}(?!;\\s*q=0(\\.0*)?\\b)`).test(acceptEncoding);
  const encoding = accepts('br') ? 'br' : accepts('gzip') ? 'gzip' : undefined;
  if (encoding === undefined) return { body: asset.body, encoding };
  let body = asset.encoded.get(encoding);
  if (body === undefined) {
    body =
      encoding === 'br'
        ? brotliCompressSync(asset.body, { params: { [constants.BROTLI_PARAM_QUALITY]: 9 } })
        : gzipSync(asset.body, { level: 9 });
    asset.encoded.set(encoding, body);
  }
  return { body, encoding };
}
