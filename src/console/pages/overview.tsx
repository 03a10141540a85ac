import { useEffect } from 'preact/hooks';
import { api, type Key, type Page, type Stats } from '../api';
import { TokenChart } from '../chart';
import { PageTitle } from '../components';
import { Loaded, useLoad } from '../load';
import { KeyTimeline } from '../timeline';

/** The chart is refreshed this often, as a background request (it does not keep the session alive). */
const REFRESH_MS = 30_000;

export function OverviewPage() {
  const stats = useLoad(async () => (await api.get<Stats>('/stats', true)).body);
  const keys = useLoad(async () => (await api.get<Page<Key>>('/keys?limit=500', true)).body);

  useEffect(() => {
    const timer = setInterval(() => void stats.reload(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [stats.reload]);

  const issued = stats.data?.tokens.reduce((n, m) => n + m.issued, 0) ?? 0;
  const refused = stats.data?.tokens.reduce((n, m) => n + m.refused, 0) ?? 0;

  return (
    <>
      <PageTitle title="Overview">
        Tokens in the last hour, what is registered, and the signing keys.
      </PageTitle>
      <Loaded state={stats} what="the figures">
        {(data) => (
          <>
            <div class="cards">
              <div class="card issued">
                <span class="figure">{issued.toLocaleString('en')}</span> tokens issued in the last hour
              </div>
              <div class="card refused">
                <span class="figure">{refused.toLocaleString('en')}</span> requests refused in the last hour
              </div>
              <div class="card">
                <span class="figure">{data.clients.toLocaleString('en')}</span>{' '}
                <a href="/console/clients">clients</a>
              </div>
              <div class="card">
                <span class="figure">{data.audiences.toLocaleString('en')}</span>{' '}
                <a href="/console/audiences">audiences</a>
                <span class="card-note">including Tessera's own admin API (its clients' admin scopes)</span>
              </div>
            </div>
            <section class="panel" aria-labelledby="tokens-title">
              <h2 id="tokens-title">Tokens per minute, last hour (UTC)</h2>
              <TokenChart
                minutes={data.tokens}
                label={`Tokens per minute over the last hour: ${issued} issued, ${refused} refused`}
              />
              <ul class="legend" aria-hidden="true">
                <li>
                  <span class="swatch issued" />
                  issued
                </li>
                <li>
                  <span class="swatch refused" />
                  refused or throttled
                </li>
              </ul>
            </section>
          </>
        )}
      </Loaded>
      <section class="panel" aria-labelledby="keys-title">
        <h2 id="keys-title">Signing keys</h2>
        <Loaded state={keys} what="the keys">
          {(data) => <KeyTimeline keys={data.items} />}
        </Loaded>
        <p class="hint">
          Light blue: published before it signs. Green: signing. Amber: superseded, still published. Grey:
          retired. <a href="/console/keys">Manage keys</a>
        </p>
      </section>
    </>
  );
}
