import { invalidRequest } from '../errors.js';
import type { Binding, PossessionProof } from './index.js';

const needsCertificate = (exchange: boolean) =>
  invalidRequest(
    exchange
      ? 'the subject_token is bound to a TLS client certificate: the acting client must ask with its own certificate'
      : "a TLS client certificate is required: this client's tokens are bound to its certificate (tls_client_certificate_bound_access_tokens)",
  );

/**
 * Certificate-bound tokens (RFC 8705 §3): a client registered with tls_client_certificate_bound_access_tokens gets
 * tokens bound to the certificate it asked with, `cnf: {"x5t#S256": …}` (§3.1), whatever method authenticated it;
 * without a certificate, no token. For the binding alone the certificate need not chain to any CA: it proves only
 * that the caller holds its private key (the TLS handshake did that, or the proxy that terminated it). The token
 * stays of type Bearer (§3); with a DPoP proof as well, `cnf` carries both members and the type is DPoP
 * (dpop.ts's binding decides it). A token exchanged for a certificate-bound subject token is bound likewise, to the
 * acting client's certificate: a sender-constrained token never becomes a bearer token (docs/interface.md).
 */
export const certificatePossession: PossessionProof = {
  applies: (_request, client, decided) =>
    client.certificateBound === true || decided.certificateRequired === true,
  prove(request, client, decided): Promise<Binding> {
    const certificate = request.certificate;
    if (certificate === undefined)
      return Promise.reject(
        needsCertificate(client.certificateBound !== true && decided.certificateRequired === true),
      );
    return Promise.resolve({ member: 'x5t#S256', value: certificate.thumbprint, tokenType: 'Bearer' });
  },
};
