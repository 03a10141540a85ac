import type { DpopVerifier } from '../dpop.js';
import { invalidDpopProof, OAuthError } from '../errors.js';
import type { AttemptLimiter } from '../limits.js';
import type { Binding, PossessionProof } from './index.js';

/**
 * DPoP at the token endpoint (RFC 9449 §5): a request with a proof, from a client bound to DPoP
 * (dpop_bound_access_tokens), or for a grant that requires it (a DPoP-bound subject token: the acting client's own
 * proof) gets a token bound to the proof's key (`cnf.jkt`, §6.1), of type DPoP. A refused proof is a failed attempt,
 * as a wrong credential is; use_dpop_nonce is not one (a client's first proof has no nonce yet).
 */
export function dpopPossession(
  /** Without it, a request with a proof, or one that requires it, gets no token. */
  verifier: DpopVerifier | undefined,
  attempts: AttemptLimiter,
): PossessionProof {
  return {
    applies: (request, client, decided) =>
      request.dpop !== undefined || client.dpopBound === true || decided.dpopRequired === true,
    async prove(request, client, decided, now): Promise<Binding> {
      try {
        if (request.dpop === undefined)
          throw invalidDpopProof(
            decided.dpopRequired === true
              ? 'the subject_token is bound to a DPoP key: a DPoP proof of the acting client is required'
              : 'a DPoP proof is required for this client (dpop_bound_access_tokens)',
          );
        if (verifier === undefined) throw invalidDpopProof('DPoP proofs are not accepted here');
        const jkt = await verifier.verify(request.dpop, now);
        return { member: 'jkt', value: jkt, tokenType: 'DPoP' };
      } catch (error) {
        if (error instanceof OAuthError && error.error === 'invalid_dpop_proof')
          void attempts.failed(client.id, request.source);
        throw error;
      }
    },
  };
}
