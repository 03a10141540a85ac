import type { FastifyRequest } from 'fastify';
import type { Config } from '../../config/index.js';
import type { ManagementContext } from '../../management/index.js';
import type { Cursors } from './paging.js';

/** What every admin route handler gets: the list cursors, the settings, and the management context of its request. */
export interface AdminRouteContext {
  cursors: Cursors;
  config: Config;
  /** The management context of a request (its caller is the actor, its address the source). */
  context(request: FastifyRequest): ManagementContext;
}
