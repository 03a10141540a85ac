import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { request, type Session } from '../api';
import { safeNext } from '../app';
import { ErrorMessage, Field, PageTitle, useAction } from '../components';

/** Email and password; a wrong email and a wrong password get the same answer. */
export function LoginPage({ onSignedIn }: { onSignedIn: (session: Session) => void }) {
  const { query, route } = useLocation();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const { run, error, busy } = useAction();

  const submit = async (event: Event) => {
    event.preventDefault();
    const answer = await run(() =>
      request<Session>('POST', '/console/api/session', {
        body: { email, password },
        handleSessionEnd: false,
      }),
    );
    if (!answer) return;
    onSignedIn(answer.body);
    route(safeNext(query.next), true);
  };

  return (
    <div class="panel">
      <PageTitle title="Log in">Tessera console</PageTitle>
      {query.ended && <p class="notice">Your session has ended. Log in again to go on.</p>}
      {query.signed_out && <p class="notice success">You are logged out.</p>}
      {query.enrolled && <p class="notice success">Your password is set. Log in with it.</p>}
      <form onSubmit={submit} noValidate>
        <Field label="Email" name="email" error={error}>
          {(props) => (
            <input
              {...props}
              type="email"
              autocomplete="username"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Password" name="password" error={error}>
          {(props) => (
            <input
              {...props}
              type="password"
              autocomplete="current-password"
              required
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          )}
        </Field>
        <ErrorMessage error={error} fields={['email', 'password']} />
        <div class="actions">
          <button type="submit" class="primary" disabled={busy}>
            {busy ? 'Logging in…' : 'Log in'}
          </button>
        </div>
      </form>
      <p class="hint">
        No password yet? Use the enrollment link an admin gave you (<code>tessera operator add</code> or{' '}
        <code>tessera operator reset</code> makes one).
      </p>
    </div>
  );
}
