/**
 * The console's forms: labelled fields whose errors come from the API's answer, the forms that send a change,
 * an error in words, and how a field's text becomes the API's value.
 */
import type { ComponentChildren, JSX } from 'preact';
import { useRef } from 'preact/hooks';
import { ApiError } from './api';

let fieldIds = 0;
/** An id for an element, the same at every render of the component. */
export const useId = (prefix: string): string => {
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
function Field({ label, name, error, hint, children }: FieldProps) {
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
export function TextField({ value, onValue, multiline, type = 'text', ...rest }: TextFieldProps) {
  const { label, name, error, hint, ...input } = rest;
  return (
    <Field label={label} name={name} error={error} hint={hint}>
      {(props) =>
        multiline ? (
          <textarea {...props} value={value} onInput={(e) => onValue(e.currentTarget.value)} />
        ) : (
          // The union of input types is wider than Preact's per-type props can name at once.
          <input
            {...props}
            {...input}
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
  value,
  onValue,
  options,
  ...field
}: ValueFieldProps & { options: readonly { value: string; label: string }[] }) {
  return (
    <Field {...field}>
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

/** A labelled checkbox whose value is the caller's state, with its hint and, from the API's answer, its error. */
export function CheckField({
  label,
  name,
  error,
  hint,
  checked,
  onChecked,
}: Omit<ValueFieldProps, 'value' | 'onValue'> & { checked: boolean; onChecked: (checked: boolean) => void }) {
  const id = useId(`f-${name.replace(/[^a-z0-9_-]/gi, '')}`);
  const message = error?.forField(name);
  const described = [hint ? `${id}-hint` : '', message ? `${id}-error` : ''].filter(Boolean).join(' ');
  return (
    <div class={`field check${message ? ' invalid' : ''}`}>
      <label for={id}>
        <input
          type="checkbox"
          id={id}
          name={name}
          checked={checked}
          onChange={(e) => onChecked(e.currentTarget.checked)}
          {...(message ? { 'aria-invalid': 'true' as const } : {})}
          {...(described ? { 'aria-describedby': described } : {})}
        />
        {label}
      </label>
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

/** A short confirmation that a change was made, read out by screen readers. */
export function Done({ children }: { children: ComponentChildren }) {
  return (
    <p class="notice success" role="status">
      {children}
    </p>
  );
}

/** What a form shows of its change: the error of the last attempt, and whether one is under way. */
export type Action = { error: ApiError | undefined; busy: boolean };

/** A form's submit button, disabled while its change is under way. */
function SubmitButton({ action, children }: { action: Action; children: ComponentChildren }) {
  return (
    <button type="submit" class="primary" disabled={action.busy}>
      {children}
    </button>
  );
}

/**
 * A form that sends a change: its fields (the children), the error of the last attempt in words (the `fields`
 * named show theirs next to them), what it did (`done`), and its submit button, disabled while it is under way.
 */
export function ChangeForm({
  id,
  onSubmit,
  action,
  fields,
  done,
  submit,
  children,
}: {
  id?: string;
  onSubmit: (event: Event) => void;
  action: Action;
  fields: string[];
  done?: ComponentChildren;
  submit: ComponentChildren;
  children: ComponentChildren;
}) {
  return (
    <form id={id} onSubmit={onSubmit} noValidate>
      {children}
      <ErrorMessage error={action.error} fields={fields} />
      {done}
      <div class="actions">
        <SubmitButton action={action}>{submit}</SubmitButton>
      </div>
    </form>
  );
}

/** A change form of a field or two that stand in one row with its submit button, after an `intro`. */
export function ToolbarForm({
  onSubmit,
  action,
  fields,
  intro,
  done,
  submit,
  children,
}: {
  onSubmit: (event: Event) => void;
  action: Action;
  fields: string[];
  intro?: ComponentChildren;
  done?: ComponentChildren;
  submit: ComponentChildren;
  children: ComponentChildren;
}) {
  return (
    <form onSubmit={onSubmit} noValidate>
      {intro}
      <div class="toolbar">
        {children}
        <SubmitButton action={action}>{submit}</SubmitButton>
      </div>
      <ErrorMessage error={action.error} fields={fields} />
      {done}
    </form>
  );
}

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
function describe(error: ApiError): string {
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
