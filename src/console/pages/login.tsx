import { useLocation } from 'preact-iso';
import { useState } from 'preact/hooks';
import { request, type Session } from '../api';
import { safeNext } from '../session';
import { PageTitle } from '../components';
import { ChangeForm, Done, TextField } from '../forms';
import { useAction } from '../load';

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
      {query.signed_out && <Done>You are logged out.</Done>}
      {query.enrolled && <Done>Your password is set. Log in with it.</Done>}
      <ChangeForm
        onSubmit={submit}
        action={{ error, busy }}
        fields={['email', 'password']}
        submit={busy ? 'Logging in…' : 'Log in'}
      >
        <TextField
          label="Email"
          name="email"
          type="email"
          autocomplete="username"
          required
          error={error}
          value={email}
          onValue={setEmail}
        />
        <TextField
          label="Password"
          name="password"
          type="password"
          autocomplete="current-password"
          required
          error={error}
          value={password}
          onValue={setPassword}
        />
      </ChangeForm>
      <p class="hint">
        No password yet? Use the enrollment link an admin gave you (<code>tessera operator add</code> or{' '}
        <code>tessera operator reset</code> makes one).
      </p>
    </div>
  );
}
