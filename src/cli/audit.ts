import { Option, type Command } from 'commander';
import { audit, views } from '../management/index.js';
import type { AuditOutcome } from '../management/audit.js';
import { AUDIT_EVENT_TYPES, type AuditEventType } from '../store/types.js';
import { action, parseLimit, parseTime, withJson } from './common.js';
import { formatTable, print, printJson } from './output.js';

interface AuditOptions {
  client?: string;
  audience?: string;
  type?: AuditEventType[];
  outcome?: AuditOutcome;
  since?: string;
  until?: string;
  limit?: number;
  format?: 'table' | 'json' | 'ndjson';
}

/** `tessera audit`: a table, one JSON document, or a stream of any length (ndjson). */
export function auditCommand(program: Command): void {
  withJson(
    program
      .command('audit')
      .description('the audit trail (issued tokens, refused and throttled requests, changes), newest first')
      .option('--client <client-id>', 'only this client')
      .option('--audience <url>', 'only this audience')
      .addOption(
        new Option('--type <type>', 'only this type of event (repeatable)')
          .choices(AUDIT_EVENT_TYPES)
          .argParser((value: string, previous: AuditEventType[] | undefined) => [
            ...(previous ?? []),
            value as AuditEventType,
          ]),
      )
      .addOption(
        new Option(
          '--outcome <outcome>',
          'issued (token.issued, token.exchanged) or refused (token.refused, token.throttled)',
        ).choices(['issued', 'refused']),
      )
      .option('--since <time>', 'from this time: ISO 8601, or a duration ago such as 15m, 12h, 7d', parseTime)
      .option('--until <time>', 'before this time: ISO 8601, or a duration ago', parseTime)
      .option(
        '--limit <n>',
        'at most this many events (default 100; no limit with --format ndjson)',
        parseLimit,
      )
      .addOption(
        new Option(
          '--format <format>',
          'table, json (one document, as --json) or ndjson (one event per line, streamed: any number of events)',
        ).choices(['table', 'json', 'ndjson']),
      ),
  ).action(
    action(async (ctx, json, options: AuditOptions) => {
      const format = options.format ?? (json ? 'json' : 'table');
      const query = {
        clientId: options.client,
        audience: options.audience,
        types: options.type,
        outcome: options.outcome,
        since: options.since,
        until: options.until,
      };
      if (format === 'ndjson') {
        // Waits for stdout to drain (a slow pipe, `| gzip`) between pages: constant memory.
        for await (const page of audit.exportAudit(ctx, query, options.limit)) {
          const text = page.map((e) => JSON.stringify(views.auditEventJson(e)) + '\n').join('');
          if (!process.stdout.write(text))
            await new Promise((resolve) => process.stdout.once('drain', resolve));
        }
        return;
      }
      const events = await audit.queryAudit(ctx, query, options.limit);
      if (format === 'json') printJson(events.map(views.auditEventJson));
      else
        print(
          formatTable(
            ['time', 'type', 'client_id', 'audience', 'jti', 'reason', 'source', 'count', 'actor', 'changes'],
            events.map((e) => [
              e.at,
              e.type,
              e.clientId,
              e.audience,
              e.jti,
              e.reason,
              e.source,
              e.count,
              e.actor,
              e.changes === null ? null : JSON.stringify(e.changes),
            ]),
          ),
        );
    }),
  );
}
