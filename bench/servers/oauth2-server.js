/* global Buffer, URLSearchParams */
// @node-oauth/oauth2-server (the maintained successor of oauth2-server) behind bare node:http, with an
// in-memory model that authenticates the client in constant time and issues RFC 9068 ES256 JWTs with
// Tessera's header and claims, signed by jose with a key imported once (as a typical model would).
import { createServer } from 'node:http';
import OAuth2Server from '@node-oauth/oauth2-server';
import { SignJWT } from 'jose';
import { authenticate, claims, es256Key, readBody, settings, TOKEN_HEADERS } from './common.js';

const { Request, Response } = OAuth2Server;
const key = es256Key();

const model = {
  async getClient(clientId, clientSecret) {
    if (!authenticate(clientId, clientSecret)) return false;
    return { id: clientId, grants: ['client_credentials'], audience: settings.audience };
  },
  async getUserFromClient(client) {
    return { id: client.id };
  },
  async generateAccessToken(client) {
    return new SignJWT(claims(client.id, client.audience))
      .setProtectedHeader({ alg: 'ES256', kid: key.kid, typ: 'at+jwt' })
      .sign(key.privateKey);
  },
  async saveToken(token, client, user) {
    return { ...token, client, user };
  },
};

const oauth = new OAuth2Server({ model, accessTokenLifetime: settings.ttl, allowEmptyState: true });

async function token(req, res) {
  const body = Object.fromEntries(new URLSearchParams(await readBody(req)));
  const request = new Request({ method: req.method, headers: req.headers, query: {}, body });
  const response = new Response();
  try {
    await oauth.token(request, response, { requireClientAuthentication: { client_credentials: true } });
  } catch (error) {
    response.status = error.code ?? 500;
    response.body = { error: error.name ?? 'server_error', error_description: error.message };
  }
  const text = JSON.stringify(response.body);
  // With its length, as every server here answers (not chunked).
  res.writeHead(response.status, {
    ...response.headers,
    ...TOKEN_HEADERS,
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

createServer((req, res) => {
  if (req.url === '/oauth/token' && req.method === 'POST') {
    token(req, res).catch(() => {
      res.writeHead(500);
      res.end();
    });
  } else if (req.url === '/.well-known/jwks.json' && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(key.jwks);
  } else {
    res.writeHead(404);
    res.end();
  }
}).listen(settings.port, settings.host);
