import type { ComponentChildren } from 'preact';
import { LocationProvider, Route, Router, useLocation } from 'preact-iso';
import { useEffect, useRef, useState } from 'preact/hooks';
import { request, setCsrfToken, whenSessionEnds, type Session } from './api';
import { PageTitle } from './components';
import { Loading } from './load';
import { AudiencePage, AudiencesPage } from './pages/audiences';
import { AuditPage } from './pages/audit';
import { ClientPage } from './pages/client';
import { ClientsPage } from './pages/clients';
import { EnrollPage } from './pages/enroll';
import { ImportPage } from './pages/import';
import { KeysPage } from './pages/keys';
import { LoginPage } from './pages/login';
import { OperatorsPage } from './pages/operators';
import { OverviewPage } from './pages/overview';
import { BASE, SessionContext, useSession } from './session';

export function App() {
  return (
    <LocationProvider>
      <Shell />
    </LocationProvider>
  );
}

function Shell() {
  const { path, route } = useLocation();
  const isPublic = /^\/console\/(login|enroll)(\/|$)/.test(path);
  const [session, setSession] = useState<Session | null | undefined>(undefined);

  const signedIn = (value: Session | null) => {
    setCsrfToken(value?.csrf_token);
    setSession(value);
  };

  useEffect(() => {
    // Any request that finds the session over (timed out, logged out elsewhere, operator disabled) comes here.
    whenSessionEnds(() => {
      signedIn(null);
      const here = window.location.pathname + window.location.search;
      if (!/^\/console\/(login|enroll)/.test(here))
        route(`${BASE}/login?next=${encodeURIComponent(here)}&ended=1`, true);
    });
  }, [route]);

  useEffect(() => {
    if (isPublic || session) return;
    request<Session>('GET', '/console/api/session', { handleSessionEnd: false }).then(
      (answer) => signedIn(answer.body),
      () => {
        signedIn(null);
        const here = window.location.pathname + window.location.search;
        route(`${BASE}/login?next=${encodeURIComponent(here)}`, true);
      },
    );
  }, [isPublic, session, path, route]);

  if (isPublic)
    return (
      <div class="public">
        <main id="content">
          <Router>
            <Route path="/console/login" component={() => <LoginPage onSignedIn={signedIn} />} />
            <Route path="/console/enroll" component={EnrollPage} />
          </Router>
        </main>
      </div>
    );
  if (!session) return <Loading what="your session" />;
  const can = (scope: string) => session.scopes.includes(scope);
  return (
    <SessionContext.Provider value={{ session, can }}>
      <Layout onSignedOut={() => signedIn(null)}>
        <Router>
          <Route path="/console" component={OverviewPage} />
          <Route path="/console/" component={OverviewPage} />
          <Route path="/console/audiences" component={AudiencesPage} />
          <Route path="/console/audiences/:id" component={AudiencePage} />
          <Route path="/console/clients" component={ClientsPage} />
          <Route path="/console/clients/:id" component={ClientPage} />
          <Route path="/console/keys" component={KeysPage} />
          <Route path="/console/audit" component={AuditPage} />
          <Route path="/console/import" component={ImportPage} />
          <Route path="/console/operators" component={OperatorsPage} />
          <Route default component={NotFound} />
        </Router>
      </Layout>
    </SessionContext.Provider>
  );
}

const NAV: { href: string; label: string; scope?: string }[] = [
  { href: `${BASE}/`, label: 'Overview' },
  { href: `${BASE}/audiences`, label: 'Audiences' },
  { href: `${BASE}/clients`, label: 'Clients' },
  { href: `${BASE}/keys`, label: 'Keys' },
  { href: `${BASE}/audit`, label: 'Audit trail' },
  { href: `${BASE}/import`, label: 'Import', scope: 'clients:read' },
  { href: `${BASE}/operators`, label: 'Operators', scope: 'operators:read' },
];

function Layout({ children, onSignedOut }: { children: ComponentChildren; onSignedOut: () => void }) {
  const { session, can } = useSession();
  const { path, route } = useLocation();
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  const [menuOpen, setMenuOpen] = useState(false);

  // A new page moves the focus to it, as a page load would: a keyboard or screen reader user starts there.
  useEffect(() => {
    setMenuOpen(false);
    if (first.current) {
      first.current = false;
      return;
    }
    main.current?.focus();
  }, [path]);

  const logout = async () => {
    try {
      await request<void>('DELETE', '/console/api/session', { handleSessionEnd: false });
    } finally {
      onSignedOut();
      route(`${BASE}/login?signed_out=1`);
    }
  };

  const current = (href: string) =>
    href === `${BASE}/` ? path === BASE || path === `${BASE}/` : path === href || path.startsWith(`${href}/`);

  return (
    <div class="layout">
      <a class="skip" href="#content">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={`${BASE}/`}>
          Tessera
        </a>
        <button
          type="button"
          class="menu-toggle"
          aria-expanded={menuOpen}
          aria-controls="main-nav"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          Menu
        </button>
        <nav id="main-nav" aria-label="Console" class={menuOpen ? 'open' : ''}>
          <ul>
            {NAV.filter((item) => !item.scope || can(item.scope)).map((item) => (
              <li key={item.href}>
                <a href={item.href} aria-current={current(item.href) ? 'page' : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span class="who-email">{session.operator.email}</span>
          <span class={`badge role-${session.operator.role}`}>{session.operator.role}</span>
          <button type="button" onClick={logout}>
            Log out
          </button>
        </div>
      </header>
      <main id="content" ref={main} tabIndex={-1}>
        {children}
      </main>
    </div>
  );
}

function NotFound() {
  return (
    <>
      <PageTitle title="Not found" />
      <p>
        There is no such page. <a href={`${BASE}/`}>Go to the overview</a>.
      </p>
    </>
  );
}
