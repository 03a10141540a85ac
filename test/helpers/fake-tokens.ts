import type { TokenService } from '../../src/domain/token-service.js';
import type { TokenRequest } from '../../src/domain/token-request.js';

/**
 * A token service that issues `a.b.c` to anyone and pushes `issue <client_id>` to `events`, for tests of the
 * HTTP layer's order of work (issues, then answers). No DPoP nonces: no hook of their own on the answers.
 */
export function recordingTokens(events: string[]): TokenService {
  return {
    issue: async (request: TokenRequest) => {
      events.push(`issue ${request.params.client_id}`);
      return {
        response: { access_token: 'a.b.c', token_type: 'Bearer', expires_in: 1800 },
        clientId: request.params.client_id!,
        audience: 'https://api.example',
        jti: 'j',
      };
    },
    dpopNonce: () => undefined,
  } as unknown as TokenService;
}
