import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

/** An RFC 3339 time as the console shows it: UTC, to the second. */
export function formatTime(value: string | null | undefined): string {
  if (!value) return '—';
  return value.replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC');
}

export function Time({ value }: { value: string | null | undefined }) {
  if (!value) return <span class="muted">—</span>;
  return <time dateTime={value}>{formatTime(value)}</time>;
}

/** A duration in seconds as people read it (`1800 s (30 min)`). */
export function formatSeconds(seconds: number | null | undefined, none = 'default'): string {
  if (seconds === null || seconds === undefined) return none;
  const units: [number, string][] = [
    [86_400, 'd'],
    [3600, 'h'],
    [60, 'min'],
  ];
  for (const [size, unit] of units)
    if (seconds >= size && seconds % size === 0) return `${seconds} s (${seconds / size} ${unit})`;
  return `${seconds} s`;
}

/** Loads something when the component mounts (and when `deps` change); `reload` loads it again. */
export function useLoad<T>(
  load: () => Promise<T>,
  deps: unknown[] = [],
): { data: T | undefined; error: ApiError | undefined; reload: () => Promise<void>; loading: boolean } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const latest = useRef(0);
  const reload = useCallback(async () => {
    const call = ++latest.current;
    setLoading(true);
    try {
      const value = await load();
      if (call === latest.current) {
        setData(value);
        setError(undefined);
      }
    } catch (e) {
      if (call === latest.current) setError(asApiError(e));
    } finally {
      if (call === latest.current) setLoading(false);
    }
  }, deps);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, reload, loading };
}

export const asApiError = (e: unknown): ApiError =>
  e instanceof ApiError ? e : new ApiError(0, 'client', e instanceof Error ? e.message : String(e));

/** Runs a change; keeps its error (for the form) and whether it is under way (for the button). */
export function useAction(): {
  run: <T>(action: () => Promise<T>) => Promise<T | undefined>;
  error: ApiError | undefined;
  busy: boolean;
  clear: () => void;
} {
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (e) {
      setError(asApiError(e));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { run, error, busy, clear: () => setError(undefined) };
}

let fieldIds = 0;
const useId = (prefix: string): string => {
  const ref = useRef<string | undefined>(undefined);
  ref.current ??= `${prefix}-${++fieldIds}`;
  return ref.current;
};

interface FieldProps {
  label: string;
  /** The API's name of the field: its error (pointer `/name`) is shown here. */
  name: string;
  error?: ApiError | undefined;
  hint?: ComponentChildren;
  children: (props: {
    id: string;
    name: string;
    'aria-invalid'?: 'true';
    'aria-describedby'?: string;
  }) => JSX.Element;
}

/** A labelled form field with its hint and, from the API's answer, its error next to it. */
export function Field({ label, name, error, hint, children }: FieldProps) {
  const id = useId(`f-${name.replace(/[^a-z0-9_-]/gi, '')}`);
  const message = error?.forField(name);
  const described = [hint ? `${id}-hint` : '', message ? `${id}-error` : ''].filter(Boolean).join(' ');
  return (
    <div class={`field${message ? ' invalid' : ''}`}>
      <label for={id}>{label}</label>
      {children({
        id,
        name,
        ...(message ? { 'aria-invalid': 'true' as const } : {}),
        ...(described ? { 'aria-describedby': described } : {}),
      })}
      {hint && (
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      {message && (
        <p class="error" id={`${id}-error`} role="alert">
          {message}
        </p>
      )}
    </div>
  );
}

/** A field whose value is the caller's state, and whose error comes from the API's answer. */
interface ValueFieldProps {
  label: string;
  name: string;
  error?: ApiError | undefined;
  hint?: ComponentChildren;
  value: string;
  onValue: (value: string) => void;
}

interface TextFieldProps extends ValueFieldProps {
  type?: 'text' | 'email' | 'password' | 'url' | 'search' | 'datetime-local';
  /** A textarea (JSON documents). */
  multiline?: boolean;
  autocomplete?: string;
  required?: boolean;
  inputMode?: 'numeric' | 'text';
  step?: number;
}

/** A labelled text input (or textarea) whose value is the caller's state. */
export function TextField({
  label,
  name,
  error,
  hint,
  value,
  onValue,
  multiline,
  type = 'text',
  ...rest
}: TextFieldProps) {
  return (
    <Field label={label} name={name} error={error} hint={hint}>
      {(props) =>
        multiline ? (
          <textarea {...props} value={value} onInput={(e) => onValue(e.currentTarget.value)} />
        ) : (
          // The union of input types is wider than Preact's per-type props can name at once.
          <input
            {...props}
            {...rest}
            type={type as 'text'}
            value={value}
            onInput={(e) => onValue(e.currentTarget.value)}
          />
        )
      }
    </Field>
  );
}

/** A labelled select whose value is the caller's state. */
export function SelectField({
  label,
  name,
  error,
  hint,
  value,
  onValue,
  options,
}: ValueFieldProps & { options: readonly { value: string; label: string }[] }) {
  return (
    <Field label={label} name={name} error={error} hint={hint}>
      {(props) => (
        <select {...props} value={value} onChange={(e) => onValue(e.currentTarget.value)}>
          {options.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** A short confirmation that a change was made, read out by screen readers. */
export function Done({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice success" role="status">
      {children}
    </p>
  );
}

/** The signing algorithms an audience or a rotation may name. */
export const ALGS = ['ES256', 'RS256', 'PS256', 'EdDSA'] as const;

/** Why a request failed, in words: the problem's detail, and the errors of fields a form does not show. */
export function ErrorMessage({ error, fields = [] }: { error: ApiError | undefined; fields?: string[] }) {
  if (!error) return null;
  const shown = (pointer: string) => fields.some((f) => pointer === `/${f}` || pointer.startsWith(`/${f}/`));
  const others = error.errors.filter((e) => !shown(e.pointer));
  const onlyFields = error.errors.length > 0 && others.length === 0;
  return (
    <div class="notice error-notice" role="alert">
      <p>{onlyFields ? 'Please correct the fields marked above.' : describe(error)}</p>
      {others.length > 0 && (
        <ul>
          {others.map((e) => (
            <li key={e.pointer}>
              <code>{e.pointer.slice(1) || 'request'}</code> {e.detail}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** An error in words, with what to do about it where the status says. */
export function describe(error: ApiError): string {
  if (error.status === 403 && error.code === 'insufficient_scope')
    return 'Your role does not allow this change. Ask an admin.';
  if (error.status === 412)
    return 'Someone changed this meanwhile. Reload the page to see their change, then try again.';
  if (error.status === 429)
    return `${error.message}${error.retryAfter ? ` (in ${error.retryAfter} s)` : ''}.`.replace(/\.\.$/, '.');
  return (
    error.message.charAt(0).toUpperCase() + error.message.slice(1) + (/[.!?]$/.test(error.message) ? '' : '.')
  );
}

/** A value shown once (a secret, an enrollment link), with a button that copies it. */
export function OnceValue({ label, value, note }: { label: string; value: string; note: string }) {
  const id = useId('once');
  return (
    <div class="notice once" role="status">
      <p>
        <strong>{label}</strong> {note}
      </p>
      <div class="once-value">
        <output id={id} class="mono" aria-label={label}>
          {value}
        </output>
        <CopyButton value={value} label={`Copy ${label.toLowerCase()}`} />
      </div>
    </div>
  );
}

export function CopyButton({ value, label }: { value: string; label: string }) {
  const [copied, setCopied] = useState<'yes' | 'no' | undefined>(undefined);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      setCopied('no');
    }
  };
  return (
    <span class="copy">
      <button type="button" onClick={copy} aria-label={label}>
        Copy
      </button>
      <span aria-live="polite" class="muted">
        {copied === 'yes' ? 'Copied.' : copied === 'no' ? 'Select the text and copy it.' : ''}
      </span>
    </span>
  );
}

/**
 * A confirmation in a modal dialog (the native <dialog>: focus stays in it, Escape cancels). `ask` resolves
 * with whether the operator confirmed.
 */
export function useConfirm(): {
  dialog: JSX.Element;
  ask: (question: { title: string; body: ComponentChildren; confirm: string }) => Promise<boolean>;
} {
  const ref = useRef<HTMLDialogElement>(null);
  const [question, setQuestion] = useState<{ title: string; body: ComponentChildren; confirm: string }>();
  const resolver = useRef<((answer: boolean) => void) | undefined>(undefined);
  const close = (answer: boolean) => {
    ref.current?.close();
    resolver.current?.(answer);
    resolver.current = undefined;
  };
  const ask = (q: { title: string; body: ComponentChildren; confirm: string }) =>
    new Promise<boolean>((resolve) => {
      resolver.current = resolve;
      setQuestion(q);
      // Opened after the render that puts the question in it.
      requestAnimationFrame(() => ref.current?.showModal());
    });
  const dialog = (
    <dialog ref={ref} class="confirm" aria-labelledby="confirm-title" onCancel={() => close(false)}>
      <h2 id="confirm-title">{question?.title}</h2>
      <div>{question?.body}</div>
      <div class="actions">
        <button type="button" onClick={() => close(false)} autofocus>
          Cancel
        </button>
        <button type="button" class="danger" onClick={() => close(true)}>
          {question?.confirm}
        </button>
      </div>
    </dialog>
  );
  return { dialog, ask };
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
  );
}

/** A page's title (also the document's) and what it is about. */
export function PageTitle({ title, children }: { title: string; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · Tessera console`;
  }, [title]);
  return (
    <header class="page-title">
      <h1>{title}</h1>
      {children && <p class="muted">{children}</p>}
    </header>
  );
}

/** Shown instead of a form to a role that cannot use it. */
export function ReadOnly({ what }: { what: string }) {
  return <p class="notice">Your role can see {what} but not change them.</p>;
}

/**
 * A table of `columns` (a falsy entry is a column left out, e.g. actions for a role that has none) whose rows
 * are the children; it scrolls sideways on a narrow screen instead of overflowing the page.
 */
export function TableBox({
  label,
  columns,
  children,
}: {
  label: string;
  columns: readonly (string | false)[];
  children: ComponentChildren;
}) {
  return (
    <div class="table-box" role="region" aria-label={label} tabIndex={0}>
      <table>
        <thead>
          <tr>
            {columns.filter(Boolean).map((column) => (
              <th scope="col" key={column as string}>
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/**
 * What a loaded value shows: the error in words, the value once it is there (`children`), "Loading…" until
 * then.
 */
export function Loaded<T>({
  state,
  what,
  fields,
  children,
}: {
  state: { data: T | undefined; error: ApiError | undefined };
  what: string;
  /** Fields of the page's form that show their own errors (a filter, a search). */
  fields?: string[];
  children: (data: T) => ComponentChildren;
}) {
  if (state.error) return <ErrorMessage error={state.error} fields={fields} />;
  if (state.data === undefined) return <Loading what={what} />;
  return <>{children(state.data)}</>;
}

/** An optional number field's value: null when empty. */
export const numberOrNull = (text: string): number | null | string =>
  text.trim() === '' ? null : /^\d+$/.test(text.trim()) ? Number(text.trim()) : text.trim();

/** An error found before asking the server, shaped as the API's, so the form shows it next to its field. */
export const fieldError = (field: string, detail: string): ApiError =>
  new ApiError(400, 'invalid_field', `${field} is not valid`, [{ pointer: `/${field}`, detail }]);

/** A JSON object field's value: null when empty; refused (next to the field) when it is not JSON. */
export function jsonOrNull(field: string, text: string): unknown {
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    throw fieldError(field, 'is not valid JSON, e.g. {"tenant_id": "acme"}');
  }
}

/** A JSON value as a form field shows it: pretty-printed, empty for none. */
export const jsonText = (value: unknown): string =>
  value === null || value === undefined ? '' : JSON.stringify(value, null, 2);
