import { describe } from 'vitest';
import { auditEventsContract } from './audit-events.js';
import { audiencesContract } from './audiences.js';
import { certificatesContract } from './certificates.js';
import { changeFeedContract } from './change-feed.js';
import { clientsContract } from './clients.js';
import { grantsContract } from './grants.js';
import { migratePingContract } from './migrate-ping.js';
import { operatorSessionsContract } from './operator-sessions.js';
import { operatorsContract } from './operators.js';
import { revocationContract } from './revocation.js';
import { freshStorePerTest, type OpenStore } from './shared.js';
import { signingKeysContract } from './signing-keys.js';
import { tokenCountsContract } from './token-counts.js';
import { transactionsContract } from './transactions.js';
import { updatesContract } from './updates.js';

export { migrationsAfter, type OpenStore } from './shared.js';
export {
  EVENTS_BEFORE_0004,
  expectAudienceIdsAssigned,
  expectCompactAuditConverted,
  ROWS_BEFORE_0006,
} from './migrations.js';

/**
 * The behaviour every Store implementation shares. Uses only the Store interface, so that it runs unchanged
 * on every engine (SQLite now, PostgreSQL later).
 */
export function storeContract(name: string, open: OpenStore): void {
  describe(`Store contract: ${name}`, () => {
    freshStorePerTest(open);

    migratePingContract(open);
    audiencesContract();
    clientsContract();
    certificatesContract(open);
    grantsContract();
    updatesContract();
    transactionsContract();
    signingKeysContract();
    changeFeedContract();
    auditEventsContract();
    operatorsContract();
    operatorSessionsContract();
    tokenCountsContract();
    revocationContract(open);
  });
}
