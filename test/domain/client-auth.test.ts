import { describe, expect, it } from 'vitest';
import { thrownBy } from '../helpers/assert.js';
import {
  AUTH_METHOD_NAMES,
  clientAuthMethods,
  clientSecretBasic,
  clientSecretPost,
  parseBasicAuthorization,
  SECRET_METHODS,
} from '../../src/domain/client-auth/index.js';
import { digestBytes, digestSecret, generateSecret } from '../../src/domain/secrets.js';
import type { KnownClient } from '../../src/domain/known-client.js';
import type { TokenParams, TokenRequest } from '../../src/domain/token-request.js';
import { OAuthError } from '../../src/domain/errors.js';

const b64 = (text: string | Buffer) => Buffer.from(text).toString('base64');
const basic = (raw: string | Buffer) => `Basic ${b64(raw)}`;

/** Every failure is the same invalid_client answer; only the log-only `debug` differs. */
function invalidClient(header: string, debug: string): void {
  const error = thrownBy(() => parseBasicAuthorization(header), OAuthError);
  expect({
    error: error.error,
    description: error.description,
    status: error.status,
    headers: error.headers,
    debug: error.debug,
    json: error.toJSON(),
  }).toEqual({
    error: 'invalid_client',
    description: 'client authentication failed',
    status: 401,
    headers: { 'www-authenticate': 'Basic realm="tessera"' },
    debug,
    json: { error: 'invalid_client', error_description: 'client authentication failed' },
  });
}

describe('parseBasicAuthorization', () => {
  it('returns undefined without a header', () => {
    expect(parseBasicAuthorization(undefined)).toBeUndefined();
  });

  it('decodes id and secret', () => {
    expect(parseBasicAuthorization(basic('svc-1:s3cret'))).toEqual({
      clientId: 'svc-1',
      clientSecret: 's3cret',
    });
  });

  it('accepts the scheme in any case and extra spaces around the credentials', () => {
    for (const scheme of ['basic', 'BASIC', 'bAsIc']) {
      expect(parseBasicAuthorization(`${scheme} ${b64('a:b')}`)).toEqual({
        clientId: 'a',
        clientSecret: 'b',
      });
    }
    expect(parseBasicAuthorization(`Basic    ${b64('a:b')}  `)).toEqual({ clientId: 'a', clientSecret: 'b' });
  });

  it('form-urldecodes both parts (RFC 6749 §2.3.1): + is a space, %XX an octet', () => {
    expect(parseBasicAuthorization(basic('my+client:pass+word%21'))).toEqual({
      clientId: 'my client',
      clientSecret: 'pass word!',
    });
    expect(parseBasicAuthorization(basic('a%2Bb:c%2Bd'))).toEqual({ clientId: 'a+b', clientSecret: 'c+d' });
    expect(parseBasicAuthorization(basic('%C3%A9t%C3%A9:%E2%82%AC'))).toEqual({
      clientId: 'été',
      clientSecret: '€',
    });
    expect(parseBasicAuthorization(basic('a%25b:%25'))).toEqual({ clientId: 'a%b', clientSecret: '%' });
  });

  it('splits at the first colon: %3A in the id is part of the id, a raw colon in the secret part of the secret', () => {
    expect(parseBasicAuthorization(basic('urn%3Aclient%3A1:secret'))).toEqual({
      clientId: 'urn:client:1',
      clientSecret: 'secret',
    });
    expect(parseBasicAuthorization(basic('id:se:cr:et'))).toEqual({
      clientId: 'id',
      clientSecret: 'se:cr:et',
    });
    expect(parseBasicAuthorization(basic('id:%3A'))).toEqual({ clientId: 'id', clientSecret: ':' });
  });

  it('takes raw UTF-8 as it is', () => {
    expect(parseBasicAuthorization(basic('ünï:çødé'))).toEqual({ clientId: 'ünï', clientSecret: 'çødé' });
  });

  it('accepts base64 of every padding length', () => {
    for (const raw of ['ab:c', 'ab:cd', 'ab:cde']) {
      const header = basic(raw);
      const [id, secret] = raw.split(':');
      expect(parseBasicAuthorization(header)).toEqual({ clientId: id, clientSecret: secret });
    }
  });

  it('refuses a missing colon', () => {
    invalidClient(basic('just-an-id'), 'malformed Basic credentials');
  });

  it('refuses an empty id or an empty secret', () => {
    invalidClient(basic(':secret'), 'empty Basic credentials');
    invalidClient(basic('id:'), 'empty Basic credentials');
    invalidClient(basic(':'), 'empty Basic credentials');
  });

  it.each([
    ['no credentials', 'Basic'],
    ['only spaces after the scheme', 'Basic   '],
    ['two tokens', `Basic ${b64('a:b')} ${b64('c:d')}`],
    ['base64 without padding', `Basic ${b64('a:bc').replace(/=+$/, '')}`],
    [
      'base64url characters',
      'Basic ' +
        b64(Buffer.from([0xfb, 0xff, 0x3a, 0x61]))
          .replace('+', '-')
          .replace('/', '_'),
    ],
    ['characters outside base64', 'Basic YT!6Yg=='],
    ['padding in the middle', 'Basic YQ==YTpi'],
    ['three padding characters', 'Basic YTpi===='],
    ['no space after the scheme', `Basic${b64('a:b')}`],
    ['a tab after the scheme', `Basic\t${b64('a:b')}`],
  ])('refuses a malformed header: %s', (_, header) => {
    invalidClient(header, 'malformed Authorization header');
  });

  it.each([
    ['Bearer', `Bearer ${b64('a:b')}`],
    ['Digest', 'Digest username="a", realm="x"'],
    ['a bare token', b64('a:b')],
    ['empty', ''],
    ['Basicx', `Basicx ${b64('a:b')}`],
  ])('refuses another scheme: %s', (_, header) => {
    invalidClient(header, 'malformed Authorization header');
  });

  it('refuses bytes that are not UTF-8', () => {
    invalidClient(`Basic ${b64(Buffer.from([0x61, 0x3a, 0xff, 0xfe]))}`, 'malformed Basic credentials');
    invalidClient(`Basic ${b64(Buffer.from([0xc3, 0x28, 0x3a, 0x61]))}`, 'malformed Basic credentials');
  });

  it('refuses a malformed percent-escape', () => {
    invalidClient(basic('a%:b'), 'malformed Basic credentials');
    invalidClient(basic('a:%zz'), 'malformed Basic credentials');
    invalidClient(basic('a:%C3'), 'malformed Basic credentials'); // a lone UTF-8 lead byte
  });
});

describe('client authentication methods', () => {
  const secret = generateSecret();
  const client = {
    id: 'svc-1',
    secrets: [{ id: 'sec_1', digest: digestBytes(digestSecret(secret)), expiresAt: Infinity }],
  } as unknown as KnownClient;
  const basicOf = (id: string, s: string) =>
    `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(s)}`).toString('base64')}`;
  const request = (params: TokenParams, authorization?: string): TokenRequest => ({
    params,
    authorization,
    source: '203.0.113.1',
  });

  it('are the ones discovery lists, in the order a request is examined; the secret methods first', () => {
    expect(SECRET_METHODS.flatMap((m) => m.names)).toEqual(['client_secret_basic', 'client_secret_post']);
    const all = clientAuthMethods({
      privateKeyJwt: {
        issuer: 'https://auth.example.com',
        tokenEndpoint: 'https://auth.example.com/oauth/token',
        replay: { use: async () => true },
        remote: { keysFor: async () => Promise.reject(new Error('none')), refetch: async () => undefined },
      },
      certificates: {
        remote: {
          certificatesFor: async () => Promise.reject(new Error('none')),
          refetchCertificates: async () => undefined,
        },
      },
    });
    expect(all.flatMap((m) => m.names)).toEqual([...AUTH_METHOD_NAMES]);
  });

  it('client_secret_basic: used when there is an Authorization header; proves only the client of that secret', () => {
    const r = request({}, basicOf('svc-1', secret));
    expect(clientSecretBasic.presentedIn(r)).toBe(true);
    expect(clientSecretPost.presentedIn(r)).toBe(false);
    const credentials = clientSecretBasic.parse(r);
    expect(credentials.clientId).toBe('svc-1');
    expect(credentials.proves(client, Date.now())).toEqual({ proven: true, secretId: client.secrets[0]!.id });
    expect(credentials.proves(undefined, Date.now())).toEqual({ proven: false, failure: 'wrong secret' });
    expect(
      clientSecretBasic.parse(request({}, basicOf('svc-1', 'wrong'))).proves(client, Date.now()),
    ).toEqual({ proven: false, failure: 'wrong secret' });
    expect(() => clientSecretBasic.parse(request({}, 'Basic !!'))).toThrow(
      expect.objectContaining({ error: 'invalid_client' }),
    );
    expect(() =>
      clientSecretBasic.check!(request({ client_id: 'other' }, basicOf('svc-1', secret)), credentials),
    ).toThrow(
      expect.objectContaining({
        error: 'invalid_request',
        description: 'client_id in the body does not match the client authenticated by HTTP Basic',
      }),
    );
    expect(() =>
      clientSecretBasic.check!(request({ client_id: 'svc-1' }, basicOf('svc-1', secret)), credentials),
    ).not.toThrow();
  });

  it('client_secret_post: used when the body has a client_secret; needs the client_id beside it', () => {
    const r = request({ client_id: 'svc-1', client_secret: secret });
    expect(clientSecretPost.presentedIn(r)).toBe(true);
    expect(clientSecretBasic.presentedIn(r)).toBe(false);
    expect(clientSecretPost.presentedIn(request({ client_id: 'svc-1', client_secret: '' }))).toBe(false);
    expect(clientSecretPost.parse(r).proves(client, Date.now())).toEqual({
      proven: true,
      secretId: client.secrets[0]!.id,
    });
    expect(() => clientSecretPost.parse(request({ client_secret: secret }))).toThrow(
      expect.objectContaining({ error: 'invalid_request', description: 'client_id is required' }),
    );
  });
});
