import { invalidRequest } from '../errors.js';
import type { Binding, PossessionProof } from './index.js';

const needsCertificate = () =>
  invalidRequest(
    "a TLS client certificate is required: this client's tokens are bound to its certificate (tls_client_certificate_bound_access_tokens)",
  );

/**
 * Certificate-bound tokens (RFC 8705 §3): a client registered with tls_client_certificate_bound_access_tokens gets
 * tokens bound to the certificate it asked with, `cnf: {"x5t#S256": …}` (§3.1), whatever method authenticated it;
 * without a certificate, no token. For the binding alone the certificate need not chain to any CA: it proves only
 * that the caller holds its private key (the TLS handshake did that, or the proxy that terminated it). The token
 * stays of type Bearer (§3); with a DPoP proof as well, `cnf` carries both members and the type is DPoP
 * (dpop.ts's binding decides it).
 */
export const certificatePossession: PossessionProof = {
  applies: (_request, client) => client.certificateBound === true,
  prove(request): Promise<Binding> {
    const certificate = request.certificate;
    if (certificate === undefined) return Promise.reject(needsCertificate());
    return Promise.resolve({ member: 'x5t#S256', value: certificate.thumbprint, tokenType: 'Bearer' });
  },
};
