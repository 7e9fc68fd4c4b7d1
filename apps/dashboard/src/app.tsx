import { useEffect, useState } from 'react';
import { setUnauthorizedHandler } from './api/cairn.js';
import { forgetApiKey, storedApiKey } from './api/session.js';
import { ApprovalsPage } from './pages/approvals-page.js';
import { KeysPage } from './pages/keys-page.js';
import { PolicyPage } from './pages/policy-page.js';
import { RunPage } from './pages/run-page.js';
import { RunsPage } from './pages/runs-page.js';
import { SandboxPage } from './pages/sandbox-page.js';
import { SandboxesPage } from './pages/sandboxes-page.js';
import { SignInPage } from './pages/sign-in-page.js';
import { VerifyPage } from './pages/verify-page.js';
import { WorkersPage } from './pages/workers-page.js';
import { Link, navigate, useLocation } from './router.js';

const NAV = [
  { to: 'runs', label: 'Runs' },
  { to: 'approvals', label: 'Approvals' },
  { to: 'sandboxes', label: 'Sandboxes' },
  { to: 'workers', label: 'Workers' },
  { to: 'policy', label: 'Policy' },
  { to: 'keys', label: 'Keys' },
  { to: 'verify', label: 'Verify a bundle' },
] as const;

function Page({ path }: { path: string }) {
  const [section, id] = path.split('/', 2);
  switch (section) {
    case '':
    case 'runs':
      return id === undefined || id === '' ? <RunsPage /> : <RunPage runId={id} />;
    case 'approvals':
      return <ApprovalsPage />;
    case 'sandboxes':
      return id === undefined || id === '' ? <SandboxesPage /> : <SandboxPage sandboxId={id} />;
    case 'workers':
      return <WorkersPage />;
    case 'policy':
      return <PolicyPage />;
    case 'keys':
      return <KeysPage />;
    case 'verify':
      return <VerifyPage />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            There is no page <code>{path}</code>. <Link to="runs">Go to the runs</Link>.
          </p>
        </section>
      );
  }
}

export function App() {
  const [signedIn, setSignedIn] = useState(() => storedApiKey() !== null);
  const { path } = useLocation();
  useEffect(() => setUnauthorizedHandler(() => setSignedIn(false)), []);

  // Each page names itself, so the tab and history read well and screen readers announce it.
  useEffect(() => {
    const section = path.split('/', 1)[0] ?? '';
    const label = NAV.find((item) => item.to === section)?.label ?? (section === '' ? 'Runs' : 'Cairn');
    const id = path.split('/')[1];
    document.title = signedIn || section === 'verify' ? `${id === undefined || id === '' ? label : id} · Cairn` : 'Sign in · Cairn';
  }, [path, signedIn]);

  const section = path.split('/', 1)[0] || 'runs';
  // Anyone can check a bundle: that page needs no key.
  if (!signedIn && section === 'verify') {
    return (
      <main id="main" className="standalone">
        <VerifyPage />
        <p className="small">
          <Link to="">Sign in</Link> to see this deployment&apos;s runs.
        </p>
      </main>
    );
  }
  if (!signedIn) return <SignInPage onSignedIn={() => setSignedIn(true)} />;
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="runs" className="brand">
          <span aria-hidden="true">◭</span> Cairn
        </Link>
        <nav aria-label="Sections">
          <ul>
            {NAV.map((item) => (
              <li key={item.to}>
                <Link to={item.to} aria-current={section === item.to ? 'page' : undefined}>
                  {item.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <button
          type="button"
          className="button button-quiet"
          onClick={() => {
            forgetApiKey();
            setSignedIn(false);
            navigate('', { replace: true });
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        <Page path={path} />
      </main>
    </>
  );
}
