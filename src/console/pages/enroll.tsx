import { useLocation } from 'preact-iso';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, request } from '../api';
import { BASE } from '../session';
import { formatTime, PageTitle } from '../components';
import { ChangeForm, ErrorMessage, fieldError, TextField } from '../forms';
import { asApiError, Loading, useAction } from '../load';

/** The token of an enrollment link: in the fragment, which the browser never sends to any server. */
function tokenOf(hash: string): string {
  return new URLSearchParams(hash.replace(/^#/, '')).get('token') ?? '';
}

/** Where an operator sets their password, once, within 24 hours of the link being made. */
export function EnrollPage() {
  const { route } = useLocation();
  const [token] = useState(() => tokenOf(window.location.hash));
  const [who, setWho] = useState<{ email: string; role: string; expires_at: string } | ApiError>();
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const { run, error, busy } = useAction();

  useEffect(() => {
    // The link's secret leaves the address bar (and the history) at once.
    if (window.location.hash) history.replaceState(null, '', window.location.pathname);
    request<{ email: string; role: string; expires_at: string }>('POST', '/console/api/enrollment/lookup', {
      body: { token },
      handleSessionEnd: false,
    }).then(
      (answer) => setWho(answer.body),
      (e) => setWho(asApiError(e)),
    );
  }, [token]);

  const submit = async (event: Event) => {
    event.preventDefault();
    const done = await run(async () => {
      if (password !== again) throw fieldError('again', 'the two passwords differ');
      return request('POST', '/console/api/enrollment', {
        body: { token, password },
        handleSessionEnd: false,
      });
    });
    if (done) route(`${BASE}/login?enrolled=1`);
  };

  if (who === undefined) return <Loading what="your enrollment link" />;
  if (who instanceof ApiError)
    return (
      <div class="panel">
        <PageTitle title="Set your password" />
        <ErrorMessage error={who} />
        <p>
          <a href={`${BASE}/login`}>Go to the login page</a>
        </p>
      </div>
    );
  return (
    <div class="panel">
      <PageTitle title="Set your password">
        For <strong>{who.email}</strong> ({who.role}). This link works once, until{' '}
        {formatTime(who.expires_at)}.
      </PageTitle>
      <ChangeForm
        onSubmit={submit}
        action={{ error, busy }}
        fields={['password', 'again']}
        submit="Set password"
      >
        <input type="email" name="email" autocomplete="username" value={who.email} hidden readOnly />
        <TextField
          label="New password"
          name="password"
          type="password"
          autocomplete="new-password"
          required
          hint="At least 12 characters."
          error={error}
          value={password}
          onValue={setPassword}
        />
        <TextField
          label="The same password again"
          name="again"
          type="password"
          autocomplete="new-password"
          required
          error={error}
          value={again}
          onValue={setAgain}
        />
      </ChangeForm>
    </div>
  );
}
