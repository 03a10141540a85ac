/**
 * Real clients with a certificate, unchanged (INTERFACE.md, "Mutual TLS…": "Real clients work unchanged"): curl
 * `--cert/--key`, Python requests `cert=(…)` and Authlib's OAuth2Session, Go's x/oauth2 clientcredentials over an
 * http.Client whose TLS config carries the certificate, and openid-client and oauth4webapi over undici's Agent with
 * use_mtls_endpoint_aliases; each token verified with jose's createRemoteJWKSet. Go and Python come from Debian's
 * packages (golang-go, golang-golang-x-oauth2-dev, python3-authlib, python3-requests: .ci/run installs them); without
 * them a test says so and is skipped, except under CI, where it fails.
 */
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createRemoteJWKSet, customFetch as joseFetch, jwtVerify } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCert, makeCa, serverCert, writePems, type Authority, type Issued } from '../helpers/pki.js';
import { freePort, NO_BLOCKING, startTestServer, tempDir, type TestServer } from '../helpers/server.js';

const run = promisify(execFile);
const API = 'https://api.example.com';
const SPIFFE = 'spiffe://prod.example.com/ns/billing/sa/worker';
const GOPATH = '/usr/share/gocode';
const hasGo = existsSync('/usr/bin/go') && existsSync(`${GOPATH}/src/golang.org/x/oauth2/clientcredentials`);
const hasPython = await run('/usr/bin/python3', [
  '-c',
  'import requests, authlib.integrations.requests_client',
]).then(
  () => true,
  () => false,
);
/** Skipped where the client is not installed, with the reason; under CI a missing client fails instead. */
const needs = (present: boolean, what: string) => {
  if (!present && process.env.CI) throw new Error(`${what} is not installed: .ci/run installs it`);
  if (!present) console.warn(`skipped: ${what} is not installed (apt-get install it to run this test)`);
  return present ? it : it.skip;
};

let serverRoot: Authority;
let worker: Issued;
let files: Record<string, string>;
let t: TestServer;
let base: string;
let dispatcher: Agent;

let alias: string;
/** Every URL the libraries' custom fetch was asked for. */
const fetched: string[] = [];
/** undici's fetch with the client certificate, as a client library's custom fetch. */
const withCertificate = ((url: string | URL, options: RequestInit) => {
  fetched.push(String(url));
  return undiciFetch(url, { ...(options as object), dispatcher });
}) as unknown as typeof fetch;

async function verify(accessToken: string) {
  const jwks = createRemoteJWKSet(new URL(`${base}/.well-known/jwks.json`), { [joseFetch]: withCertificate });
  return (await jwtVerify(accessToken, jwks, { issuer: base, audience: API })).payload;
}

beforeAll(async () => {
  const root = await makeCa({ subject: 'CN=Example Client Root' });
  serverRoot = await makeCa({ subject: 'CN=Example Server Root' });
  worker = await issueCert(root, { subject: 'CN=worker,O=Example Inc,C=US', san: { uri: [SPIFFE] } });
  const server = await serverCert(serverRoot);
  files = await writePems({
    'server.pem': server.certPem,
    'server-key.pem': server.keyPem,
    'client-ca.pem': root.certPem,
    'server-ca.pem': serverRoot.certPem,
    'worker.pem': worker.certPem,
    'worker-key.pem': worker.keyPem,
  });
  const port = await freePort();
  base = `https://localhost:${port}`;
  // The aliases on another name of the same server (its certificate is for both): a client that uses them is seen.
  alias = `https://127.0.0.1:${port}`;
  t = await startTestServer({
    ...NO_BLOCKING,
    TESSERA_PORT: String(port),
    TESSERA_ISSUER: base,
    TESSERA_MTLS_BASE_URL: alias,
    TESSERA_TLS_CERT: files['server.pem']!,
    TESSERA_TLS_KEY: files['server-key.pem']!,
    TESSERA_TLS_CLIENT_CA: files['client-ca.pem']!,
  });
  await t.addAudience(API);
  await t.server.runtime.store.createClient({
    id: 'worker',
    name: 'worker',
    secretDigest: null,
    authMethod: 'tls_client_auth',
    tlsClientAuth: { kind: 'san_uri', value: SPIFFE },
    certificateBoundAccessTokens: true,
    tokenTtl: null,
    audiences: [API],
  });
  await t.sync();
  dispatcher = new Agent({
    connect: { ca: serverRoot.certPem, cert: worker.certPem, key: worker.keyPem },
  });
}, 60_000);

afterAll(async () => {
  await dispatcher?.close();
  await t?.close();
});

/** A token from a client's output, verified, bound to the worker's certificate. */
async function expectBound(accessToken: string) {
  const claims = await verify(accessToken);
  expect(claims.client_id).toBe('worker');
  expect(claims.cnf).toEqual({ 'x5t#S256': worker.x5t });
}

describe('real clients with a certificate', () => {
  it('curl --cert --key', async () => {
    const { stdout } = await run('curl', [
      '-sS',
      '--cacert',
      files['server-ca.pem']!,
      '--cert',
      files['worker.pem']!,
      '--key',
      files['worker-key.pem']!,
      `${base}/oauth/token`,
      '-d',
      'grant_type=client_credentials',
      '-d',
      'client_id=worker',
      '-d',
      `audience=${API}`,
    ]);
    const body = JSON.parse(stdout) as Record<string, unknown>;
    expect([body.token_type, body.expires_in]).toEqual(['Bearer', 1800]);
    await expectBound(body.access_token as string);
  });

  needs(hasPython, "Python's requests and Authlib")('Python requests cert=(…) and Authlib', async () => {
    const script = [
      'import json, sys, requests',
      'from authlib.integrations.requests_client import OAuth2Session',
      'url, cert, key, ca, api = sys.argv[1:]',
      "plain = requests.post(url, data={'grant_type': 'client_credentials', 'client_id': 'worker', 'audience': api}, cert=(cert, key), verify=ca)",
      "session = OAuth2Session('worker', token_endpoint_auth_method='none')",
      'session.cert = (cert, key)',
      'session.verify = ca',
      "token = session.fetch_token(url, grant_type='client_credentials', audience=api)",
      "print(json.dumps({'requests': plain.json(), 'authlib': token}))",
    ].join('\n');
    // requests lets REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE (set on this machine) override a session's verify.
    const env = { ...process.env };
    delete env.REQUESTS_CA_BUNDLE;
    delete env.CURL_CA_BUNDLE;
    const { stdout } = await run(
      '/usr/bin/python3',
      [
        '-c',
        script,
        `${base}/oauth/token`,
        files['worker.pem']!,
        files['worker-key.pem']!,
        files['server-ca.pem']!,
        API,
      ],
      { env },
    );
    const answers = JSON.parse(stdout) as Record<'requests' | 'authlib', Record<string, unknown>>;
    await expectBound(answers.requests.access_token as string);
    await expectBound(answers.authlib.access_token as string);
  });

  needs(hasGo, 'Go with golang.org/x/oauth2')(
    'Go x/oauth2 clientcredentials over a TLS config with the certificate',
    async () => {
      const dir = tempDir('tessera-go-');
      writeFileSync(
        join(dir, 'main.go'),
        `package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

func main() {
	cert, err := tls.LoadX509KeyPair(os.Args[1], os.Args[2])
	if err != nil {
		panic(err)
	}
	ca, err := os.ReadFile(os.Args[3])
	if err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	tlsConfig := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots}
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, httpClient)
	config := clientcredentials.Config{
		ClientID:       "worker",
		TokenURL:       os.Args[4],
		EndpointParams: url.Values{"audience": {os.Args[5]}},
		AuthStyle:      oauth2.AuthStyleInParams,
	}
	token, err := config.Token(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Print(token.AccessToken)
}
`,
      );
      const env = { ...process.env, GO111MODULE: 'off', GOPATH, GOCACHE: join(dir, 'cache'), HOME: dir };
      await run('/usr/bin/go', ['build', '-o', join(dir, 'client'), join(dir, 'main.go')], { env, cwd: dir });
      const { stdout } = await run(join(dir, 'client'), [
        files['worker.pem']!,
        files['worker-key.pem']!,
        files['server-ca.pem']!,
        `${base}/oauth/token`,
        API,
      ]);
      await expectBound(stdout);
    },
    120_000,
  );

  it('openid-client: TlsClientAuth over undici’s Agent, with use_mtls_endpoint_aliases', async () => {
    const config = await client.discovery(
      new URL(base),
      'worker',
      { use_mtls_endpoint_aliases: true },
      client.TlsClientAuth(),
      { [client.customFetch]: withCertificate },
    );
    expect(config.serverMetadata().mtls_endpoint_aliases).toEqual({
      token_endpoint: `${alias}/oauth/token`,
      revocation_endpoint: `${alias}/oauth/revoke`,
      introspection_endpoint: `${alias}/oauth/introspect`,
    });
    fetched.length = 0;
    const tokens = await client.clientCredentialsGrant(config, { audience: API });
    expect(fetched).toEqual([`${alias}/oauth/token`]);
    expect(tokens.token_type).toBe('bearer');
    await expectBound(tokens.access_token);
  });

  it('oauth4webapi: TlsClientAuth with useMtlsAlias', async () => {
    const issuer = new URL(base);
    const as = await oauth
      .discoveryRequest(issuer, { [oauth.customFetch]: withCertificate })
      .then((response) => oauth.processDiscoveryResponse(issuer, response));
    fetched.length = 0;
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      { client_id: 'worker', use_mtls_endpoint_aliases: true },
      oauth.TlsClientAuth(),
      { audience: API },
      { [oauth.customFetch]: withCertificate },
    );
    expect(fetched).toEqual([`${alias}/oauth/token`]);
    const tokens = await oauth.processClientCredentialsResponse(as, { client_id: 'worker' }, response);
    await expectBound(tokens.access_token);
  });
});
