import type { Config } from '../config/index.js';
import type { Store } from '../store/types.js';

/** What every management operation runs against. Each face makes one per call (CLI) or per process (API). */
export interface ManagementContext {
  store: Store;
  config: Config;
  /** The clock (tests set it). */
  now?: () => number;
}

export const nowOf = (ctx: ManagementContext): number => (ctx.now ?? Date.now)();
