/* global process, Buffer */
// Shared by the reference servers: their settings (from the harness, through the environment) and the
// RFC 9068 access token every one of them issues: the same header and claims as Tessera's.
import { createHash, generateKeyPairSync, randomBytes, sign, timingSafeEqual } from 'node:crypto';

// Exit normally on SIGTERM, so that --cpu-prof (bench --profile) writes its profile.
process.once('SIGTERM', () => process.exit(0));

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export const settings = {
  port: Number(required('BENCH_PORT')),
  host: '127.0.0.1',
  issuer: required('BENCH_ISSUER'),
  audience: required('BENCH_AUDIENCE'),
  clientId: required('BENCH_CLIENT_ID'),
  clientSecret: required('BENCH_CLIENT_SECRET'),
  ttl: 1800,
};

/** The SHA-256 of a secret, as Tessera stores it. */
export const digest = (secret) => createHash('sha256').update(secret, 'utf8').digest();

const expected = digest(settings.clientSecret);
const dummy = randomBytes(32);

/** Constant-time check of a presented secret (sha256, then timingSafeEqual), the same work as Tessera's. */
export function authenticate(clientId, secret) {
  const known = clientId === settings.clientId;
  const matches = timingSafeEqual(digest(String(secret ?? '')), known ? expected : dummy);
  return known && matches;
}

/** A fresh ES256 (P-256) key pair, made once at start; its public JWK as published. */
export function es256Key() {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = randomBytes(16).toString('base64url');
  const publicJwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' };
  return { privateKey, publicKey, kid, publicJwk, jwks: JSON.stringify({ keys: [publicJwk] }) };
}

/** 128-bit token ids cut from a pool of random bytes, as Tessera does: one CSPRNG call per 1024 ids. */
let pool = Buffer.alloc(0);
let offset = 0;
export function jti() {
  if (offset + 16 > pool.length) {
    pool = randomBytes(16 * 1024);
    offset = 0;
  }
  offset += 16;
  return pool.toString('base64url', offset - 16, offset);
}

/** RFC 9068 §2.2 claims in Tessera's order: iss, sub, aud, client_id, iat, exp, jti. */
export function claims(clientId, audience, id = jti()) {
  const iat = Math.floor(Date.now() / 1000);
  return {
    iss: settings.issuer,
    sub: clientId,
    aud: audience,
    client_id: clientId,
    iat,
    exp: iat + settings.ttl,
    jti: id,
  };
}

/**
 * A signer of RFC 9068 access tokens as the ceiling makes them: Tessera's header, its claims, ES256 by
 * node:crypto (ieee-p1363) with a key made once. Returns (clientId, audience, jti?) => token.
 */
export function accessTokenSigner(key = es256Key()) {
  const header = Buffer.from(JSON.stringify({ alg: 'ES256', kid: key.kid, typ: 'at+jwt' })).toString(
    'base64url',
  );
  return (clientId, audience, id) => {
    const input =
      header + '.' + Buffer.from(JSON.stringify(claims(clientId, audience, id))).toString('base64url');
    const signature = sign('sha256', Buffer.from(input), { key: key.privateKey, dsaEncoding: 'ieee-p1363' });
    return input + '.' + signature.toString('base64url');
  };
}

/** Tessera's response headers on a token answer (no-store and the hygiene headers of INTERFACE.md). */
export const TOKEN_HEADERS = {
  'cache-control': 'no-store',
  pragma: 'no-cache',
  'content-type': 'application/json; charset=utf-8',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
};

/** Reads a request body as text, at most `limit` bytes (a token request is a few hundred). */
export function readBody(req, limit = 8192) {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk) => {
      body += chunk;
      if (Buffer.byteLength(body) > limit) {
        reject(new Error('body too large'));
        req.destroy();
      }
    });
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}
