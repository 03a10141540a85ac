import { subjectClientOf } from '../token-profiles.js';
import { invalidRequest, unacceptableToken, unauthorizedClient, unsupportedGrantType } from '../errors.js';
import type { KnownClient } from '../known-client.js';
import { activeNow, dpopKeyOf, readOwnToken, type OwnTokenClaims, type OwnTokenDeps } from '../own-tokens.js';
import { present } from '../token-request.js';
import {
  accessTokenClaims,
  grantedAudience,
  requestedAudience,
  scopeOf,
  type ActClaim,
  type GrantHandler,
  type GrantResult,
} from './grant.js';

/** RFC 8693 §2.1. */
export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** RFC 8693 §3: the only token type Tessera takes and issues. */
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** RFC 8693 §3: a JWT; Tessera's access tokens are JWTs, so it is taken as access_token (docs/interface.md). */
const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

/**
 * The most actors a token's chain holds (docs/interface.md: "Chains stop at 5 actors"). The depth of a token is the
 * number of `act` levels it nests: 0 for a client credentials token, 1 for one exchanged once (`act: {sub}`),
 * and so on. An exchange makes a token one deeper than its subject token, so it is allowed while the new depth
 * is at most 5: a subject token whose `act` already nests 5 actors is refused.
 */
const MAX_ACTORS = 5;

/**
 * The actors of an `act` claim, the one that acted last first (RFC 8693 §4.1: the outermost `act` is the current
 * actor); [] for none; undefined when it is not a chain of `{sub}` objects or is longer than MAX_ACTORS (no
 * token of this server is: refused without walking further).
 */
function actorsOf(act: unknown): string[] | undefined {
  const actors: string[] = [];
  let level = act;
  while (level !== undefined) {
    if (actors.length === MAX_ACTORS) return undefined;
    if (typeof level !== 'object' || level === null || Array.isArray(level)) return undefined;
    const { sub, act: inner } = level as { sub?: unknown; act?: unknown };
    if (typeof sub !== 'string' || sub === '') return undefined;
    actors.push(sub);
    level = inner;
  }
  return actors;
}

/** The `act` claim of the new token: the acting client, nesting the subject token's actors as they were. */
function actClaim(actor: string, before: readonly string[]): ActClaim {
  const chain: ActClaim = { sub: actor };
  let at = chain;
  for (const sub of before) {
    const next: ActClaim = { sub };
    at.act = next;
    at = next;
  }
  return chain;
}

/**
 * RFC 8693 §2.1 subject_token_type and actor_token_type: required with their token; access_token, or jwt taken
 * as it; anything else is an invalid_request (docs/interface.md).
 */
function checkTokenType(value: string | undefined, param: 'subject_token_type' | 'actor_token_type'): void {
  if (value === undefined) throw invalidRequest(`${param} is required`);
  if (value !== ACCESS_TOKEN_TYPE && value !== JWT_TOKEN_TYPE)
    throw invalidRequest(`${param} must be ${ACCESS_TOKEN_TYPE}`);
}

/** Whether `clientId` is a resource server (`resource_server_client_ids`) of one of the token's audiences. */
function servesAudienceOf(
  aud: string | string[],
  clientId: string,
  findAudience: (url: string) => { resourceServers: ReadonlySet<string> } | undefined,
): boolean {
  if (typeof aud === 'string') return findAudience(aud)?.resourceServers.has(clientId) === true;
  return aud.some((url) => findAudience(url)?.resourceServers.has(clientId) === true);
}

const INACTIVE_SUBJECT = 'subject_token is not an active access token of this server';
const INACTIVE_ACTOR = 'actor_token is not an active access token of this server';

/** The subject token's claims if it is a genuine token of this server (signature, iss, typ), active or not. */
function genuineSubject(token: string, deps: OwnTokenDeps): OwnTokenClaims {
  const claims = readOwnToken(token, deps);
  if (typeof claims === 'string') throw unacceptableToken('subject_token', INACTIVE_SUBJECT, claims);
  return claims;
}

/** The subject token is active now (own-tokens.ts: exp, nbf, denylist, its client's and its caller's standing). */
function checkActiveSubject(claims: OwnTokenClaims, deps: OwnTokenDeps): void {
  const verdict = activeNow(claims, deps);
  if (!verdict.active) throw unacceptableToken('subject_token', INACTIVE_SUBJECT, verdict.reason);
}

/**
 * RFC 8693 §2.1 actor_token: a token of this server that is the acting client's own, and active. Whose it is comes
 * before whether it is active: a client learns nothing of another client's token it presents.
 */
function checkActorToken(token: string, client: KnownClient, deps: OwnTokenDeps): void {
  const claims = readOwnToken(token, deps);
  if (typeof claims === 'string') throw unacceptableToken('actor_token', INACTIVE_ACTOR, claims);
  // The acting client's own token: issued to it (client_id), and for itself (sub), not one it holds for a caller.
  const { client_id: clientId } = claims;
  const sub = subjectClientOf(claims.sub);
  if (clientId !== client.id || sub !== client.id)
    throw unacceptableToken(
      'actor_token',
      'actor_token is not a token of the authenticated client',
      `a token of ${clientId === sub ? clientId : `${clientId} for ${sub}`}`.slice(0, 300),
    );
  const verdict = activeNow(claims, deps);
  if (!verdict.active) throw unacceptableToken('actor_token', INACTIVE_ACTOR, verdict.reason);
}

/**
 * Token exchange (RFC 8693; docs/interface.md, "Token exchange"): a service that received a token for its caller gets
 * a token for the next API it calls, for the same caller (`sub`), narrowed to its own grant, with the chain of
 * who acted in `act`. The checks, in this order, so that nothing is revealed before the caller may know it:
 *
 * 0. (token service) the acting client is authenticated (invalid_client), then grant_type is this one.
 * 1. The request's own parameters, as sent, before any token or audience is looked at (invalid_request):
 *    subject_token; subject_token_type (access_token, or jwt); actor_token_type with actor_token and only with
 *    it (same types); requested_token_type absent or access_token; the target, `audience` or `resource`, one.
 * 2. The subject token is a genuine token of this server: signature, iss, typ, its claims (invalid_request).
 * 3. The acting client is a resource server of (one of) the subject token's audiences: the token was meant for
 *    it (unauthorized_client). Before whether the token is active: a client that holds someone else's token
 *    learns nothing of it (token exchange is no introspection for clients without tokens:introspect), nor of the
 *    target.
 * 4. The subject token is active now: exp, the denylist, its client and its original client (`sub`) existing,
 *    enabled, their tokens not revoked since its iat (invalid_request).
 * 5. The actor token, if sent: a genuine token of the acting client's own, then active (invalid_request).
 * 6. The subject token's chain: at most MAX_ACTORS - 1 actors already, so that the new one has at most
 *    MAX_ACTORS (invalid_request).
 * 7. The target is registered and granted to the acting client (invalid_target).
 * 8. That grant allows token exchange (unauthorized_client).
 * 9. The scopes asked (default: every one of that grant) are within that grant (invalid_scope).
 * (token service) then the DPoP proof if any, the acting client's quota, signing, the answer and the audit.
 *
 * Scopes are bounded by the acting client's grant for the target, as the contract says, and not intersected
 * with the subject token's scopes: those are permissions at the subject token's audience, a different API with
 * its own scope names. Whether the caller may have the call made for it at all is the acting service's decision
 * (it verified the caller's token and its scopes); the narrowing across APIs is the operator's, in that grant.
 */
export const tokenExchange: GrantHandler = (params, client, deps) => {
  const own = deps.ownTokens;
  // Without this server's tokens in memory the grant type is not offered (the token service's table has it only
  // when ownTokens is given); a handler called without it refuses as if it were unknown.
  if (own === undefined) throw unsupportedGrantType('client_credentials');

  // 1. The parameters as sent.
  const subjectToken = present(params.subject_token);
  if (subjectToken === undefined) throw invalidRequest('subject_token is required');
  checkTokenType(present(params.subject_token_type), 'subject_token_type');
  const actorToken = present(params.actor_token);
  const actorTokenType = present(params.actor_token_type);
  // RFC 8693 §2.1: actor_token_type is REQUIRED with actor_token and MUST NOT be sent without it.
  if (actorToken !== undefined) checkTokenType(actorTokenType, 'actor_token_type');
  else if (actorTokenType !== undefined)
    throw invalidRequest('actor_token_type is sent only with actor_token');
  const requested = present(params.requested_token_type);
  if (requested !== undefined && requested !== ACCESS_TOKEN_TYPE)
    throw invalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  const target = requestedAudience(params);

  // 2. The subject token is this server's.
  const subject = genuineSubject(subjectToken, own);
  // 3. It was meant for the acting client.
  if (!servesAudienceOf(subject.aud, client.id, deps.findAudience))
    throw unauthorizedClient("this client is not a resource server of the subject_token's audience");
  // 4. It is active.
  checkActiveSubject(subject, own);
  // 5. The actor token.
  if (actorToken !== undefined) checkActorToken(actorToken, client, own);
  // 6. The chain so far.
  const before = actorsOf(subject.act);
  if (before === undefined || before.length >= MAX_ACTORS)
    throw unacceptableToken(
      'subject_token',
      `subject_token already nests ${MAX_ACTORS} actors (act); a chain stops at ${MAX_ACTORS}`,
      before === undefined ? 'act is malformed or nests more than 5 actors' : 'act nests 5 actors',
    );
  // 7. The target.
  const { audience, granted } = grantedAudience(target, client, deps);
  // 8. Exchange allowed into it.
  if (!granted.tokenExchange)
    throw unauthorizedClient(
      "token exchange is not enabled on this client's grant for the requested audience",
    );
  // 9. The scopes, within the acting client's grant.
  const scope = scopeOf(granted, present(params.scope));

  // RFC 9068 §2.2 with RFC 8693 §4.1: the caller stays the subject; the acting client is the client and the
  // current actor. Never outlives the subject token.
  // The caller by its client id, whatever the subject token's profile wrote (auth0: `<client_id>@clients`); the
  // new token's audience writes it as its own profile says.
  const caller = subjectClientOf(subject.sub);
  const claims = accessTokenClaims(deps, client, audience, caller, subject.exp);
  if (scope !== undefined) claims.scope = scope;
  claims.act = actClaim(client.id, before);
  // docs/interface.md (DPoP): a DPoP-bound subject token is exchanged only with the acting client's own proof, and the
  // new token is bound to that client's key: a sender-constrained token never becomes a bearer token. A
  // certificate-bound one likewise, by the acting client's certificate.
  const decided: GrantResult = {
    claims,
    audience,
    grant: granted,
    type: 'token.exchanged',
    note: exchangeNote(client.id, before, caller),
    // RFC 8693 §2.2.1: an exchange's answer says what it issued.
    answer: ISSUED_ACCESS_TOKEN,
  };
  if (dpopKeyOf(subject) !== undefined) decided.dpopRequired = true;
  // The same for a certificate-bound one (RFC 8705 §3): the acting client's certificate, and the new token bound to it.
  if (subject.cnf?.['x5t#S256'] !== undefined) decided.certificateRequired = true;
  return decided;
};

const ISSUED_ACCESS_TOKEN = { issued_token_type: ACCESS_TOKEN_TYPE } as const;

/**
 * What the audit trail says of an exchanged token (its `reason`): the original caller and the actors in the
 * order they acted, the acting client last: `sub A act B>C`.
 */
function exchangeNote(actor: string, before: readonly string[], sub: string): string {
  return `sub ${sub} act ${[...before].reverse().join('>')}${before.length ? '>' : ''}${actor}`;
}
