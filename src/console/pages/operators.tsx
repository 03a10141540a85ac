import { useState } from 'preact/hooks';
import { api, seg, type Operator, type Page } from '../api';
import { useSession } from '../session';
import { OnceValue, PageTitle, TableBox, Time, useConfirm } from '../components';
import { ErrorMessage, SelectField, TextField, ToolbarForm } from '../forms';
import { Loaded, useAction, useLoad } from '../load';

/** The console's operators (admins only): add with a one-time link, change role, disable, reset, remove. */
export function OperatorsPage() {
  const { can, session } = useSession();
  const list = useLoad(async () => (await api.get<Page<Operator>>('/operators?limit=500')).body.items);
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<'admin' | 'viewer'>('viewer');
  const [link, setLink] = useState<{ email: string; url: string }>();
  const add = useAction();
  const change = useAction();
  const { dialog, ask } = useConfirm();

  if (!can('operators:read'))
    return (
      <>
        <PageTitle title="Operators" />
        <p class="notice">Only admins see the operators.</p>
      </>
    );

  const submit = async (event: Event) => {
    event.preventDefault();
    setLink(undefined);
    const answer = await add.run(() => api.post<Operator>('/operators', { email, role }));
    if (answer) {
      setLink({ email: answer.body.email, url: answer.body.enrollment_url! });
      setEmail('');
      await list.reload();
    }
  };

  const update = async (o: Operator, patch: { role?: string; enabled?: boolean }) => {
    if (patch.enabled === false) {
      const yes = await ask({
        title: 'Disable this operator?',
        body: (
          <p>
            <strong>{o.email}</strong> is logged out everywhere at once and cannot log in until enabled again.
          </p>
        ),
        confirm: 'Disable operator',
      });
      if (!yes) return;
    }
    const done = await change.run(() => api.patch<Operator>(`/operators/${seg(o.id)}`, patch));
    if (done) await list.reload();
  };

  const reset = async (o: Operator) => {
    const yes = await ask({
      title: 'Reset this operator?',
      body: (
        <p>
          The password of <strong>{o.email}</strong> is cleared and their sessions end. You get a new
          enrollment link to give them.
        </p>
      ),
      confirm: 'Reset operator',
    });
    if (!yes) return;
    setLink(undefined);
    const answer = await change.run(() => api.post<Operator>(`/operators/${seg(o.id)}/reset`));
    if (answer) {
      setLink({ email: answer.body.email, url: answer.body.enrollment_url! });
      await list.reload();
    }
  };

  const remove = async (o: Operator) => {
    const yes = await ask({
      title: 'Remove this operator?',
      body: (
        <p>
          <strong>{o.email}</strong> is removed and logged out everywhere.
        </p>
      ),
      confirm: 'Remove operator',
    });
    if (!yes) return;
    const done = await change.run(() => api.delete(`/operators/${seg(o.id)}`));
    if (done !== undefined) await list.reload();
  };

  const writable = can('operators:write');
  return (
    <>
      <PageTitle title="Operators">
        People who manage Tessera here. Admins change anything; viewers see everything but this page, and
        change nothing.
      </PageTitle>
      {link && (
        <OnceValue
          label={`Enrollment link for ${link.email}`}
          value={link.url}
          note="It works once, for 24 hours: give it to them through a channel you trust. It is not shown again."
        />
      )}
      <section class="panel" aria-labelledby="op-list">
        <h2 id="op-list">Operators</h2>
        <ErrorMessage error={change.error} />
        <Loaded state={list} what="operators">
          {(data) => (
            <TableBox
              label="Operators"
              columns={['Email', 'Role', 'Status', 'Last login', writable && 'Actions']}
            >
              {data.map((o) => (
                <tr key={o.id}>
                  <td>
                    {o.email}
                    {o.id === session.operator.id && <span class="muted"> (you)</span>}
                  </td>
                  <td>
                    {writable ? (
                      <select
                        aria-label={`Role of ${o.email}`}
                        value={o.role}
                        onChange={(e) => update(o, { role: e.currentTarget.value })}
                      >
                        <option value="admin">admin</option>
                        <option value="viewer">viewer</option>
                      </select>
                    ) : (
                      o.role
                    )}
                  </td>
                  <td>
                    <span class={`badge ${o.enabled ? 'on' : 'off'}`}>
                      {o.enabled ? 'enabled' : 'disabled'}
                    </span>{' '}
                    {!o.enrolled && (
                      <span class="muted">
                        {o.enrollment_expires_at ? (
                          <>
                            link until <Time value={o.enrollment_expires_at} />
                          </>
                        ) : (
                          'no password'
                        )}
                      </span>
                    )}
                  </td>
                  <td class="nowrap">{o.last_login_at ? <Time value={o.last_login_at} /> : 'never'}</td>
                  {writable && (
                    <td class="nowrap">
                      <div class="actions">
                        {o.enabled ? (
                          <button
                            type="button"
                            onClick={() => update(o, { enabled: false })}
                            aria-label={`Disable ${o.email}`}
                          >
                            Disable…
                          </button>
                        ) : (
                          <button
                            type="button"
                            onClick={() => update(o, { enabled: true })}
                            aria-label={`Enable ${o.email}`}
                          >
                            Enable
                          </button>
                        )}
                        <button type="button" onClick={() => reset(o)} aria-label={`Reset ${o.email}`}>
                          Reset…
                        </button>
                        <button
                          type="button"
                          class="danger"
                          onClick={() => remove(o)}
                          aria-label={`Remove ${o.email}`}
                        >
                          Remove…
                        </button>
                      </div>
                    </td>
                  )}
                </tr>
              ))}
            </TableBox>
          )}
        </Loaded>
      </section>
      {writable && (
        <section class="panel" aria-labelledby="op-new">
          <h2 id="op-new">Add an operator</h2>
          <ToolbarForm onSubmit={submit} action={add} fields={['email', 'role']} submit="Add operator">
            <TextField
              label="Email"
              name="email"
              type="email"
              error={add.error}
              value={email}
              onValue={setEmail}
            />
            <SelectField
              label="Role"
              name="role"
              error={add.error}
              value={role}
              onValue={(r) => setRole(r as 'admin' | 'viewer')}
              options={[
                { value: 'viewer', label: 'viewer' },
                { value: 'admin', label: 'admin' },
              ]}
            />
          </ToolbarForm>
        </section>
      )}
      {dialog}
    </>
  );
}
