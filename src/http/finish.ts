import type { Socket } from 'node:net';

/** Request durations, observed by the metrics (AppDeps.metrics). */
export interface RequestObserver {
  observeRequest(method: string, route: string, statusCode: number, seconds: number): void;
}

/**
 * What every answer gets as it is written, whichever path writes it (Fastify's onSend hook, the token lane): the
 * audit events recorded so far put on the spool first (one spool write for a whole batch of answers, and a token
 * answered has its event on disk: audit/recorder.ts), the security headers, `Connection: close` while the server
 * drains (RFC 9112 §9.6: a keep-alive client moves to another instance), and the request's duration observed.
 */
export class AnswerFinish {
  constructor(
    /** Headers on every answer (app.ts, securityHeaders). */
    readonly security: Readonly<Record<string, string>>,
    private readonly deps: {
      persistAudit?: (() => void) | undefined;
      /** Whether this answer is to close its connection (the server drains). */
      closesConnection(socket: Socket): boolean;
      metrics?: RequestObserver | undefined;
    },
  ) {}

  /** Before an answer on `socket` is written: the audit persisted; whether the answer closes its connection. */
  beforeWrite(socket: Socket): boolean {
    this.deps.persistAudit?.();
    return this.deps.closesConnection(socket);
  }

  /** An answer written, after `seconds`. */
  observe(method: string, route: string, status: number, seconds: number): void {
    this.deps.metrics?.observeRequest(method, route, status, seconds);
  }
}
