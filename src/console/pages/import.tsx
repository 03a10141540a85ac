/**
 * Moving in from another server (docs/management.md, `tessera import`): the operator gives the other server's
 * export, POST /admin/v1/imports maps it to an apply file and a report (nothing written), the page shows the report
 * and the plan (POST /admin/v1/apply with dry_run), and Apply applies it through the same call, under the rule of
 * every apply through the API (no caller gives what it does not hold). The new clients' secrets are shown once.
 */
import { useState } from 'preact/hooks';
import { api, type ApiError } from '../api';
import { OnceValue, PageTitle } from '../components';
import { Done, ErrorMessage, fieldError, SelectField, TextField, useId } from '../forms';
import { useAction } from '../load';
import { useSession } from '../session';

type Source = 'auth0' | 'keycloak' | 'hydra';

const SOURCES: { value: Source; label: string; hint: string }[] = [
  {
    value: 'auth0',
    label: 'Auth0 (Deploy CLI export)',
    hint: 'The tenant.yaml of `a0deploy export --format yaml`, or the same as JSON',
  },
  {
    value: 'keycloak',
    label: 'Keycloak (realm export)',
    hint: 'The realm-export.json of a partial or full realm export',
  },
  {
    value: 'hydra',
    label: 'Ory Hydra (clients)',
    hint: 'What `hydra list oauth2-clients --format json` or `hydra get oauth2-client …` prints',
  },
];

/** One line of the import's report: where in the source, what became of it, and why. */
interface ReportLine {
  place: string;
  outcome: 'mapped' | 'left_out' | 'changed';
  detail: string;
}

interface Imported {
  apply_file: Record<string, unknown>;
  report: ReportLine[];
}

/** POST /apply's answer (`tessera apply --json`'s document, and its plan in words). */
interface Applied {
  dry_run: boolean;
  applied: boolean;
  summary: { create: number; update: number; delete: number };
  kept: { audiences: number; clients: number; grants: number };
  lines: string[];
  secrets: { client_id: string; client_secret: string }[];
}

const OUTCOMES: { outcome: ReportLine['outcome']; title: string }[] = [
  { outcome: 'mapped', title: 'Mapped' },
  { outcome: 'changed', title: 'Changed on the way' },
  { outcome: 'left_out', title: 'Left out' },
];

/**
 * Lines of `NAME=VALUE` (keywords) or `CLIENTID=URL` (audiences) as an object; a line without `=` is refused next
 * to its field.
 */
function pairs(field: string, text: string): Record<string, string> {
  const found: Record<string, string> = {};
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    const at = line.indexOf('=');
    if (at <= 0) throw fieldError(field, `line ${i + 1} is not NAME=VALUE`);
    found[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return found;
}

/**
 * An export as the imports call takes it: JSON parsed here (the report's places are then JSON pointers), anything
 * else as its text, which the server reads as YAML (an Auth0 Deploy CLI tenant.yaml: places are `line:column`).
 */
function exportOf(text: string): unknown {
  try {
    return JSON.parse(text.replace(/^\uFEFF/, '')) as unknown;
  } catch {
    return text;
  }
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;

/** What the store has and the file does not, kept: `1 client, 2 audiences`. */
function keptText(kept: Applied['kept']): string {
  return [
    kept.audiences && plural(kept.audiences, 'audience'),
    kept.clients && plural(kept.clients, 'client'),
    kept.grants && plural(kept.grants, 'grant'),
  ]
    .filter(Boolean)
    .join(', ');
}

/** The report, grouped by outcome, each line with its place in the source. */
function Report({ report }: { report: ReportLine[] }) {
  return (
    <>
      {OUTCOMES.map(({ outcome, title }) => {
        const lines = report.filter((l) => l.outcome === outcome);
        if (lines.length === 0) return null;
        return (
          <section key={outcome} class={`report report-${outcome}`} aria-label={title}>
            <h3>
              {title} <span class="muted">({lines.length})</span>
            </h3>
            <ul>
              {lines.map((l, i) => (
                <li key={i}>
                  <code class="place">{l.place || '(the export)'}</code> {l.detail}
                </li>
              ))}
            </ul>
          </section>
        );
      })}
      {report.length === 0 && <p class="muted">The report is empty: the export had nothing to map.</p>}
    </>
  );
}

/** A plan in words, one change a line (`+` create, `~` update, `-` delete). */
function PlanLines({ plan }: { plan: Applied }) {
  const { create, update, delete: deleted } = plan.summary;
  const kept = keptText(plan.kept);
  return (
    <>
      {plan.lines.length === 0 ? (
        <p>No changes: the server already has everything in the export.</p>
      ) : (
        <>
          <ul class="plan-lines" aria-label="The plan">
            {plan.lines.map((line, i) => (
              <li
                key={i}
                class={`plan-${line[0] === '+' ? 'create' : line[0] === '-' ? 'delete' : 'update'}`}
              >
                <code>{line}</code>
              </li>
            ))}
          </ul>
          <p>
            Plan: {create} to create, {update} to update, {deleted} to delete.
          </p>
        </>
      )}
      {kept && <p class="muted">Not in the export, kept as they are: {kept}.</p>}
    </>
  );
}

/**
 * An error of a request in words, and every place it names: a pointer under `/file` is a place in the file sent
 * (the export, or the apply file made of it), shown as that file's path; the fields of the form show their own.
 */
function Problem({
  error,
  file,
  fields = [],
}: {
  error: ApiError | undefined;
  file: string;
  fields?: string[];
}) {
  if (!error) return null;
  // `/file` itself is the form's field for an error found on the page; the server's are places in the file.
  const own = (pointer: string) =>
    (pointer === '/file' && error.code === 'invalid_field') ||
    fields.some((f) => pointer === `/${f}` || pointer.startsWith(`/${f}/`));
  const places = error.errors.filter((e) => !own(e.pointer));
  // Only errors of the form's own fields: they say so next to them.
  if (places.length === 0 && error.errors.length > 0)
    return <ErrorMessage error={error} fields={[...fields, 'file']} />;
  const text = error.message.charAt(0).toUpperCase() + error.message.slice(1);
  return (
    <div class="notice error-notice" role="alert">
      <p>
        {text}
        {/[.!?]$/.test(text) ? '' : '.'}
        {error.status === 403 && ' Ask an operator whose role holds these scopes.'}
      </p>
      {places.length > 0 && (
        <ul class="places" aria-label={`Errors in ${file}`}>
          {places.map((e, i) => (
            <li key={i}>
              <code class="place">
                {e.pointer.startsWith('/file/')
                  ? e.pointer.slice('/file/'.length)
                  : e.pointer === '/file'
                    ? file
                    : e.pointer.slice(1) || file}
              </code>{' '}
              {e.detail}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function ImportPage() {
  const { can } = useSession();
  const mayApply = can('audiences:write') && can('clients:write');
  const fileId = useId('f-file');
  const [source, setSource] = useState<Source>('auth0');
  const [file, setFile] = useState<File | undefined>(undefined);
  const [keywords, setKeywords] = useState('');
  const [audiences, setAudiences] = useState('');
  const [imported, setImported] = useState<Imported>();
  const [plan, setPlan] = useState<Applied>();
  const [applied, setApplied] = useState<Applied>();
  const reading = useAction();
  const planning = useAction();
  const applying = useAction();
  const fileError =
    reading.error?.code === 'invalid_field'
      ? reading.error.errors.find((e) => e.pointer === '/file')?.detail
      : undefined;

  const read = async (event: Event) => {
    event.preventDefault();
    setImported(undefined);
    setPlan(undefined);
    setApplied(undefined);
    planning.clear();
    applying.clear();
    const answer = await reading.run(async () => {
      if (!file) throw fieldError('file', 'choose the export file');
      const body = {
        source,
        file: exportOf(await file.text()),
        ...(source === 'auth0' ? { keywords: pairs('keywords', keywords) } : {}),
        ...(source === 'keycloak' ? { audiences: pairs('audiences', audiences) } : {}),
      };
      return (await api.post<Imported>('/imports', body)).body;
    });
    if (!answer) return;
    setImported(answer);
    const dry = await planning.run(
      async () => (await api.post<Applied>('/apply', { file: answer.apply_file, dry_run: true })).body,
    );
    if (dry) setPlan(dry);
  };

  const apply = async () => {
    if (!imported) return;
    const answer = await applying.run(
      async () => (await api.post<Applied>('/apply', { file: imported.apply_file })).body,
    );
    if (answer) setApplied(answer);
  };

  return (
    <>
      <PageTitle title="Import">
        Move in from Auth0, Keycloak or Ory Hydra: their machine clients, APIs and grants, read from their own
        export. Nothing is changed until you apply the plan.
      </PageTitle>
      <section class="panel" aria-labelledby="im-source">
        <h2 id="im-source">1. The export</h2>
        <form onSubmit={read} noValidate>
          <div class="grid">
            <SelectField
              label="Import from"
              name="source"
              error={reading.error}
              value={source}
              onValue={(value) => setSource(value as Source)}
              options={SOURCES}
              hint={SOURCES.find((s) => s.value === source)?.hint}
            />
            <div class={`field${fileError ? ' invalid' : ''}`}>
              <label for={fileId}>Export file</label>
              <input
                id={fileId}
                name="file"
                type="file"
                accept=".json,.yaml,.yml,application/json"
                aria-describedby={`${fileId}-hint${fileError ? ` ${fileId}-error` : ''}`}
                {...(fileError ? { 'aria-invalid': 'true' as const } : {})}
                onChange={(e) => setFile(e.currentTarget.files?.[0])}
              />
              <p class="hint" id={`${fileId}-hint`}>
                Read in this browser and sent to the server, which keeps nothing of it until you apply
              </p>
              {fileError && (
                <p class="error" id={`${fileId}-error`} role="alert">
                  {fileError}
                </p>
              )}
            </div>
          </div>
          {source === 'auth0' && (
            <TextField
              label="Keywords"
              name="keywords"
              multiline
              hint="The Deploy CLI's ##NAME## placeholders, one NAME=VALUE a line"
              error={reading.error}
              value={keywords}
              onValue={setKeywords}
            />
          )}
          {source === 'keycloak' && (
            <TextField
              label="Audiences of Keycloak clients"
              name="audiences"
              multiline
              hint="For an audience mapper that names a client without a root or base URL: one CLIENTID=URL a line"
              error={reading.error}
              value={audiences}
              onValue={setAudiences}
            />
          )}
          <Problem error={reading.error} file="the export" fields={['keywords', 'audiences', 'source']} />
          <div class="actions">
            <button type="submit" class="primary" disabled={reading.busy}>
              Read the export
            </button>
          </div>
        </form>
      </section>
      {imported && (
        <section class="panel" aria-labelledby="im-report">
          <h2 id="im-report">2. The report</h2>
          <p class="muted">What became of each thing in the export, with its place in it.</p>
          <Report report={imported.report} />
          <details>
            <summary>The apply file (keep it in git: `tessera apply -f` takes it)</summary>
            <pre>{JSON.stringify(imported.apply_file, null, 2)}</pre>
          </details>
        </section>
      )}
      {imported && (
        <section class="panel" aria-labelledby="im-plan">
          <h2 id="im-plan">3. The plan</h2>
          {planning.busy && (
            <p class="muted" role="status">
              Loading the plan…
            </p>
          )}
          <Problem error={planning.error} file="the apply file" />
          {plan && <PlanLines plan={plan} />}
          {plan && !applied && plan.lines.length > 0 && (
            <>
              <Problem error={applying.error} file="the apply file" />
              {mayApply ? (
                <div class="actions">
                  <button type="button" class="primary" onClick={apply} disabled={applying.busy}>
                    Apply the plan
                  </button>
                </div>
              ) : (
                <p class="notice">Your role can see the plan but not apply it.</p>
              )}
            </>
          )}
          {applied && (
            <>
              <Done>
                Applied: {applied.summary.create} created, {applied.summary.update} updated,{' '}
                {applied.summary.delete} deleted.
              </Done>
              {applied.secrets.length > 0 && (
                <>
                  <p>
                    <strong>The new clients' secrets, shown this once.</strong> Only a digest is stored: copy
                    each now, and give it to the client's owner.
                  </p>
                  {applied.secrets.map((s) => (
                    <OnceValue
                      key={s.client_id}
                      label={`Secret of ${s.client_id}`}
                      value={s.client_secret}
                      note="This is the only time it is shown: copy it now."
                    />
                  ))}
                </>
              )}
            </>
          )}
        </section>
      )}
    </>
  );
}
