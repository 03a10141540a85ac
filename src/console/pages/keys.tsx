import { useState } from 'preact/hooks';
import { api, seg, type Key, type Page } from '../api';
import { useSession } from '../session';
import { ALGS, formatTime, PageTitle, ReadOnly, TableBox, Time, useConfirm } from '../components';
import { Done, ErrorMessage, SelectField, ToolbarForm } from '../forms';
import { Loaded, useAction, useLoad } from '../load';
import { KeyTimeline } from '../timeline';

interface Rotation {
  alg: string;
  kid: string | null;
  activates_at: string | null;
  already_scheduled: boolean;
  retiring: string[];
}

const STATUS_HELP: Record<Key['status'], string> = {
  next: 'published, signs from its activation',
  active: 'signs new tokens',
  superseded: 'no longer signs; published while its tokens live',
  retired: 'retired; published while its tokens live',
  expired: 'no token it signed is valid any more',
};

/** The signing keys: next, active and retired, with their dates; rotate; retire after a confirmation. */
export function KeysPage() {
  const { can } = useSession();
  const keys = useLoad(async () => (await api.get<Page<Key>>('/keys?limit=500')).body.items);
  const [alg, setAlg] = useState('');
  const [rotated, setRotated] = useState<Rotation[]>();
  const [retired, setRetired] = useState<string>();
  const rotate = useAction();
  const retire = useAction();
  const { dialog, ask } = useConfirm();

  const submit = async (event: Event) => {
    event.preventDefault();
    setRotated(undefined);
    const answer = await rotate.run(() =>
      api.post<{ items: Rotation[] }>('/keys/rotate', alg ? { alg } : {}),
    );
    if (answer) {
      setRotated(answer.body.items);
      await keys.reload();
    }
  };

  const retireOne = async (key: Key) => {
    const yes = await ask({
      title: 'Retire this key?',
      body: (
        <p>
          <code>{key.kid}</code> ({key.alg}) stops signing now
          {key.status === 'active' ? '; the next key of its algorithm signs instead' : ''}. It stays published
          until the last token it signed has expired.
        </p>
      ),
      confirm: 'Retire key',
    });
    if (!yes) return;
    setRetired(undefined);
    const answer = await retire.run(() =>
      api.post<{ retired: string; signing: string | null }>(`/keys/${seg(key.kid)}/retire`),
    );
    if (answer) {
      setRetired(
        `Key ${answer.body.retired} retired.${answer.body.signing ? ` ${answer.body.signing} signs now.` : ''}`,
      );
      await keys.reload();
    }
  };

  const writable = can('keys:write');
  return (
    <>
      <PageTitle title="Signing keys">
        Every key published at /.well-known/jwks.json. A new key is published before it signs, and an old one
        stays published until its tokens expire.
      </PageTitle>
      <section class="panel" aria-labelledby="keys-line">
        <h2 id="keys-line">Timeline</h2>
        {keys.data && <KeyTimeline keys={keys.data} />}
      </section>
      <section class="panel" aria-labelledby="keys-list">
        <h2 id="keys-list">Keys</h2>
        <Loaded state={keys} what="keys">
          {(data) => (
            <TableBox
              label="Signing keys"
              columns={[
                'Key id',
                'Algorithm',
                'Status',
                'Created',
                'Signs from',
                'Signs until',
                writable && 'Action',
              ]}
            >
              {[...data].reverse().map((k) => (
                <tr key={k.kid}>
                  <td class="mono">{k.kid}</td>
                  <td>{k.alg}</td>
                  <td>
                    <span class={`badge status-${k.status}`} title={STATUS_HELP[k.status]}>
                      {k.status}
                    </span>
                  </td>
                  <td class="nowrap">
                    <Time value={k.created_at} />
                  </td>
                  <td class="nowrap">
                    <Time value={k.activates_at} />
                  </td>
                  <td class="nowrap">{k.retires_at ? <Time value={k.retires_at} /> : '—'}</td>
                  {writable && (
                    <td>
                      {(k.status === 'active' || k.status === 'next') && (
                        <button type="button" onClick={() => retireOne(k)} aria-label={`Retire key ${k.kid}`}>
                          Retire…
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </TableBox>
          )}
        </Loaded>
        <ErrorMessage error={retire.error} />
        {retired && <Done>{retired}</Done>}
      </section>
      <section class="panel" aria-labelledby="keys-rotate">
        <h2 id="keys-rotate">Rotate</h2>
        {writable ? (
          <ToolbarForm
            onSubmit={submit}
            action={rotate}
            fields={['alg']}
            intro={
              <p>
                A new key is made and published now; it signs once the publish-ahead time has passed, and the
                current key retires then.
              </p>
            }
            done={
              rotated && (
                <div class="notice success" role="status">
                  <ul>
                    {rotated.map((r) => (
                      <li key={r.alg}>
                        {r.alg}:{' '}
                        {r.kid
                          ? `${r.already_scheduled ? 'already scheduled' : 'new key'} ${r.kid}, signs from ${formatTime(r.activates_at)}`
                          : 'nothing to do'}
                      </li>
                    ))}
                  </ul>
                </div>
              )
            }
            submit="Rotate keys"
          >
            <SelectField
              label="Algorithm"
              name="alg"
              error={rotate.error}
              value={alg}
              onValue={setAlg}
              options={[
                { value: '', label: 'Every algorithm' },
                ...ALGS.map((a) => ({ value: a, label: a })),
              ]}
            />
          </ToolbarForm>
        ) : (
          <ReadOnly what="keys" />
        )}
      </section>
      {dialog}
    </>
  );
}
