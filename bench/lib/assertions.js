import { createHash, generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import { Buffer } from 'node:buffer';
import { URL, URLSearchParams } from 'node:url';

/**
 * Client assertions for the private_key_jwt scenario (RFC 7523 §2.2): a fresh one per request (each jti is
 * used once; the server refuses a replay), signed ES256 as openid-client signs by default. Made in the load
 * generator's request set-up, synchronously (autocannon's setupRequest cannot wait), with node:crypto: a
 * signature is ~30 µs of the load generator's CPU, not the server's. The server verifies them (node:crypto,
 * with every check of jose's jwtVerify: src/domain/client-auth/verify-jwt.ts), which is what the warm-up's check
 * of every answer proves.
 */
export function assertionMaker() {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'bench', alg: 'ES256', use: 'sig' };
  const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const header = b64({ alg: 'ES256', kid: 'bench', typ: 'JWT' });
  const prefix = randomBytes(9).toString('base64url');
  let counter = 0;
  return {
    jwks: { keys: [jwk] },
    /** The client these keys are registered for, and the server's token endpoint: set before body(). */
    clientId: '',
    tokenEndpoint: '',
    /** Assertions made so far. */
    made: () => counter,
    /**
     * The form body of one token request, with an assertion never sent before; the audience as `audienceParam`
     * (`resource` for node-oidc-provider).
     */
    body(audience, audienceParam = 'audience') {
      const { clientId, tokenEndpoint } = this;
      const iat = Math.floor(Date.now() / 1000);
      const input = `${header}.${b64({
        iss: clientId,
        sub: clientId,
        aud: tokenEndpoint,
        iat,
        exp: iat + 300,
        jti: `${prefix}.${counter++}`,
      })}`;
      const signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      return Buffer.from(
        new URLSearchParams({
          grant_type: 'client_credentials',
          client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
          client_assertion: `${input}.${signature.toString('base64url')}`,
          [audienceParam]: audience,
        }).toString(),
      );
    },
  };
}

/**
 * DPoP proofs for the DPoP scenarios (RFC 9449 §4.2): a fresh one per request (each jti is used once; the server
 * refuses a replay), ES256 as oauth4webapi and openid-client sign by default, the key's JWK in the header. Made
 * in the load generator's request set-up with node:crypto, as the assertions are. `jkt` is the key's RFC 7638
 * thumbprint, which every token must carry as cnf.jkt. A proof is for POST to the token endpoint, or, once
 * `resource` is set (the admin API scenario, RFC 9449 §7), for that request with that token: its htm, its htu
 * (the URL without query or fragment, §4.2) and ath, the base64url SHA-256 of the token.
 */
export function dpopProofMaker() {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const { crv, kty, x, y } = publicKey.export({ format: 'jwk' });
  const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const header = b64({ alg: 'ES256', typ: 'dpop+jwt', jwk: { crv, kty, x, y } });
  const jkt = createHash('sha256').update(JSON.stringify({ crv, kty, x, y })).digest('base64url');
  const prefix = randomBytes(9).toString('base64url');
  let counter = 0;
  return {
    jkt,
    /** The token endpoint, which every proof's htu names: set before proof(). */
    tokenEndpoint: '',
    /** Proofs made so far. */
    made: () => counter,
    /** With a bound token: the request every proof is for, { htm, htu, ath } (see forResource); else undefined. */
    resource: undefined,
    /** From now on, proofs for `method` at `url` (its query left out) presenting `accessToken`. */
    forResource(method, url, accessToken) {
      const { origin, pathname } = new URL(url);
      this.resource = {
        htm: method,
        htu: `${origin}${pathname}`,
        ath: createHash('sha256').update(accessToken).digest('base64url'),
      };
    },
    /** A DPoP header never sent before. */
    proof() {
      const { resource } = this;
      const input = `${header}.${b64({
        htm: resource?.htm ?? 'POST',
        htu: resource?.htu ?? this.tokenEndpoint,
        iat: Math.floor(Date.now() / 1000),
        jti: `${prefix}.${counter++}`,
        ...(resource ? { ath: resource.ath } : {}),
      })}`;
      const signature = sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' });
      return `${input}.${signature.toString('base64url')}`;
    },
  };
}

/**
 * The platform token of the federated scenario (workload identity federation): a Kubernetes projected
 * service-account token, RS256 as the API server signs it, living an hour, made once and sent with every
 * request, as a pod sends the token of its projected volume until the kubelet renews it (the credential is not
 * `once`: no replay check). The cluster's public key is registered inline, as a private cluster does.
 */
export function platformToken({ issuer, subject, audience }) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = 'bench-cluster';
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
  const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const iat = Math.floor(Date.now() / 1000);
  const input = `${b64({ alg: 'RS256', kid })}.${b64({
    aud: [audience],
    exp: iat + 3600,
    iat,
    iss: issuer,
    jti: randomUUID(),
    'kubernetes.io': {
      namespace: 'bench',
      pod: { name: 'bench-0', uid: randomUUID() },
      serviceaccount: { name: 'bench', uid: randomUUID() },
    },
    nbf: iat,
    sub: subject,
  })}`;
  const signature = sign('sha256', Buffer.from(input), privateKey).toString('base64url');
  return { jwks: { keys: [jwk] }, token: `${input}.${signature}` };
}
