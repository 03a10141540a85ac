/** The pieces of a page: times and durations, its title, tables, a value shown once, a confirmation, panels. */
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ErrorMessage, useId, type Action } from './forms';

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

/** A resource's Delete panel: what deleting it does (the children), the last attempt's error, and its button. */
export function DeletePanel({
  id,
  action,
  onDelete,
  label,
  children,
}: {
  id: string;
  action: Action;
  onDelete: () => void;
  label: string;
  children?: ComponentChildren;
}) {
  return (
    <section class="panel" aria-labelledby={id}>
      <h2 id={id}>Delete</h2>
      {children}
      <ErrorMessage error={action.error} />
      <button type="button" class="danger" onClick={onDelete} disabled={action.busy}>
        {label}
      </button>
    </section>
  );
}

/** The signing algorithms an audience or a rotation may name. */
export const ALGS = ['ES256', 'RS256', 'PS256', 'EdDSA'] as const;

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

function CopyButton({ value, label }: { value: string; label: string }) {
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

/** What a confirmation asks: its title, what it says, and the label of the button that confirms. */
export interface Question {
  title: string;
  body: ComponentChildren;
  confirm: string;
}

/** Asks the operator a question; resolves with whether they confirmed. */
export type Ask = (question: Question) => Promise<boolean>;

/**
 * A confirmation in a modal dialog (the native <dialog>: focus stays in it, Escape cancels). `ask` resolves
 * with whether the operator confirmed.
 */
export function useConfirm(): { dialog: JSX.Element; ask: Ask } {
  const ref = useRef<HTMLDialogElement>(null);
  const [question, setQuestion] = useState<Question>();
  const resolver = useRef<((answer: boolean) => void) | undefined>(undefined);
  const close = (answer: boolean) => {
    ref.current?.close();
    resolver.current?.(answer);
    resolver.current = undefined;
  };
  const ask = (q: Question) =>
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
 * The actions cell of a row that can be changed and removed: an Edit link-button and a button that asks first
 * (its text ends in an ellipsis). `what` names the row for screen readers (`Edit grant of …`).
 */
export function EditRemoveCell({
  what,
  onEdit,
  onRemove,
  remove,
}: {
  what: string;
  onEdit: () => void;
  onRemove: () => void;
  /** The removing verb as the button shows it: `Remove`, `Withdraw`. */
  remove: string;
}) {
  return (
    <td class="nowrap">
      <button type="button" class="link" onClick={onEdit} aria-label={`Edit ${what}`}>
        Edit
      </button>{' '}
      <button type="button" onClick={onRemove} aria-label={`${remove} ${what}`}>
        {remove}…
      </button>
    </td>
  );
}
