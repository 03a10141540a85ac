import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Session } from './api';

/** Where the console lives: every page's path starts here. */
export const BASE = '/console';

export interface SessionState {
  session: Session;
  /** Whether the operator's role gives this admin scope (the server checks it again on every request). */
  can: (scope: string) => boolean;
}

/** The signed-in operator's session, provided by the app's shell to every page under its layout. */
export const SessionContext = createContext<SessionState | undefined>(undefined);

/** The signed-in operator's session; pages under the layout always have one. */
export function useSession(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error('useSession outside a session');
  return state;
}

/** Where a login goes afterwards: a console page, never another site. */
export function safeNext(next: string | undefined): string {
  return next && next.startsWith(`${BASE}/`) && !next.startsWith('//') && !next.includes('\\')
    ? next
    : `${BASE}/`;
}
