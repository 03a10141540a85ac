import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { api, query, request, type AuditEvent, type Page } from '../api';
import { PageTitle, TableBox, Time } from '../components';
import { SelectField, TextField } from '../forms';
import { Loaded, useLoad } from '../load';

const FILTERS = ['type', 'outcome', 'client_id', 'audience', 'since', 'until'] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** The event types, from the API's own description (the OpenAPI document), so this page never lags behind it. */
async function eventTypes(): Promise<string[]> {
  const doc = (
    await request<{
      paths: Record<
        string,
        Record<string, { parameters?: { name: string; schema?: { enum?: string[] } }[] }>
      >;
    }>('GET', '/admin/v1/openapi.json')
  ).body;
  return doc.paths['/audit-events']?.get?.parameters?.find((p) => p.name === 'type')?.schema?.enum ?? [];
}

/** A datetime-local value (read as UTC) as RFC 3339, and back. */
const toRfc3339 = (local: string): string => (local ? `${local.length === 16 ? `${local}:00` : local}Z` : '');
const toLocal = (rfc: string | undefined): string => (rfc ? rfc.replace(/(\.\d+)?Z$/, '').slice(0, 19) : '');

/**
 * Who an event names: an actor as the API names it, `kind:name` (`client:`, `operator:`, `cli:`) with its kind
 * set apart, or the server itself (`tessera`); a token request's client id is only what the caller presented.
 */
function Who({ event: e }: { event: AuditEvent }) {
  if (e.actor) {
    const at = e.actor.indexOf(':');
    if (at < 0) return <span title="the server itself">{e.actor}</span>;
    return (
      <>
        <span class="muted">{e.actor.slice(0, at + 1)}</span>
        {e.actor.slice(at + 1)}
      </>
    );
  }
  if (e.client_id)
    return (
      <>
        {e.client_id} <span class="muted">(presented)</span>
      </>
    );
  return <>—</>;
}

/** The audit trail, newest first: token events and every change, with filters and paging. */
export function AuditPage() {
  const { query: params, route } = useLocation();
  const filters: Filters = Object.fromEntries(FILTERS.filter((f) => params[f]).map((f) => [f, params[f]]));
  const key = JSON.stringify(filters);
  const [draft, setDraft] = useState<Filters>(filters);
  // The cursors of the pages before this one (newest first): paging back pops one.
  const [cursors, setCursors] = useState<{ key: string; list: (string | undefined)[] }>({
    key,
    list: [undefined],
  });
  const list = cursors.key === key ? cursors.list : [undefined];
  const after = list[list.length - 1];
  const types = useLoad(eventTypes);
  const page = useLoad(
    async () =>
      (await api.get<Page<AuditEvent>>(`/audit-events${query({ limit: 50, ...filters, after })}`)).body,
    [key, after],
  );

  const apply = (event: Event) => {
    event.preventDefault();
    setCursors({ key: '', list: [undefined] });
    route(`/console/audit${query(draft)}`);
  };
  const set = (name: keyof Filters, value: string) => setDraft({ ...draft, [name]: value || undefined });

  return (
    <>
      <PageTitle title="Audit trail">
        Every token issued or refused, and every change, newest first. Times in UTC.
      </PageTitle>
      <section class="panel" aria-labelledby="audit-filters">
        <h2 id="audit-filters">Filters</h2>
        <form onSubmit={apply} noValidate>
          <div class="grid">
            <SelectField
              label="Type"
              name="type"
              error={page.error}
              value={draft.type ?? ''}
              onValue={(v) => set('type', v)}
              options={[
                { value: '', label: 'Any type' },
                ...(types.data ?? (draft.type ? [draft.type] : [])).map((t) => ({ value: t, label: t })),
              ]}
            />
            <SelectField
              label="Outcome of token requests"
              name="outcome"
              error={page.error}
              value={draft.outcome ?? ''}
              onValue={(v) => set('outcome', v)}
              options={[
                { value: '', label: 'Any' },
                { value: 'issued', label: 'Issued' },
                { value: 'refused', label: 'Refused or throttled' },
              ]}
            />
            <TextField
              label="Client id"
              name="client_id"
              error={page.error}
              value={draft.client_id ?? ''}
              onValue={(v) => set('client_id', v)}
            />
            <TextField
              label="Audience"
              name="audience"
              hint="The audience URL"
              error={page.error}
              value={draft.audience ?? ''}
              onValue={(v) => set('audience', v)}
            />
            <TextField
              label="From (UTC)"
              name="since"
              type="datetime-local"
              step={1}
              error={page.error}
              value={toLocal(draft.since)}
              onValue={(v) => set('since', toRfc3339(v))}
            />
            <TextField
              label="Until (UTC)"
              name="until"
              type="datetime-local"
              step={1}
              error={page.error}
              value={toLocal(draft.until)}
              onValue={(v) => set('until', toRfc3339(v))}
            />
          </div>
          <div class="actions">
            <button type="submit" class="primary">
              Apply filters
            </button>
            <a href="/console/audit">Clear filters</a>
          </div>
        </form>
      </section>
      <section class="panel" aria-labelledby="audit-events">
        <h2 id="audit-events">Events</h2>
        <Loaded state={page} what="events" fields={[...FILTERS]}>
          {(data) =>
            data.items.length === 0 ? (
              <p class="muted">No event matches.</p>
            ) : (
              <TableBox
                label="Audit events"
                columns={['Time', 'Type', 'Who', 'Audience', 'Target', 'From', 'Details']}
              >
                {data.items.map((e) => (
                  <tr key={e.id}>
                    <td class="nowrap">
                      <Time value={e.time} />
                    </td>
                    <td class="nowrap">
                      <code>{e.type}</code>
                      {e.count !== null && <span class="muted"> ×{e.count}</span>}
                    </td>
                    <td class="mono">
                      <Who event={e} />
                    </td>
                    <td>{e.audience ?? ''}</td>
                    <td class="mono">{e.target ?? ''}</td>
                    <td class="mono">{e.source ?? ''}</td>
                    <td>
                      {e.reason && <span>{e.reason}</span>}
                      {e.changes && (
                        <details>
                          <summary>Changes</summary>
                          <pre>{JSON.stringify(e.changes, null, 2)}</pre>
                        </details>
                      )}
                    </td>
                  </tr>
                ))}
              </TableBox>
            )
          }
        </Loaded>
        <div class="pager">
          {list.length > 1 && (
            <button type="button" onClick={() => setCursors({ key, list: list.slice(0, -1) })}>
              Newer events
            </button>
          )}
          {page.data?.next && (
            <button type="button" onClick={() => setCursors({ key, list: [...list, page.data!.next!] })}>
              Older events
            </button>
          )}
        </div>
      </section>
    </>
  );
}
