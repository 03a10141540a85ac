/** Reading from the server and sending changes to it, with what a page shows meanwhile. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';
import { ErrorMessage } from './forms';

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

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" role="status">
      Loading {what}…
    </p>
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
