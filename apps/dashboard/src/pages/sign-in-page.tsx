import { useState } from 'react';
import type { FormEvent } from 'react';
import { checkKey, errorLine } from '../api/cairn.js';
import { API_KEY_PATTERN, storeApiKey } from '../api/session.js';

/** Asks for an API key, checks it with one keyed read, and keeps it for this tab only. */
export function SignInPage({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const trimmed = key.trim();
    if (!API_KEY_PATTERN.test(trimmed)) {
      setError('That is not a Cairn API key: it looks like cairn_<8 characters>_<43 characters>.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await checkKey(trimmed);
      storeApiKey(trimmed);
      setKey('');
      onSignedIn();
    } catch (failure) {
      setError(errorLine(failure, (other) => `The gateway did not answer: ${String(other)}`));
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="sign-in" id="main">
      <form onSubmit={(event) => void submit(event)} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">
          <span aria-hidden="true">◭</span> Cairn
        </h1>
        <p className="muted">Sign in with an API key. It is kept in this tab only (sessionStorage) and sent to this gateway alone.</p>
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          spellCheck={false}
          autoFocus
          value={key}
          onChange={(event) => setKey(event.target.value)}
          aria-invalid={error !== null}
          aria-describedby={error === null ? undefined : 'sign-in-error'}
          placeholder="cairn_…"
        />
        {error === null ? null : (
          <p id="sign-in-error" className="field-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" className="button button-primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
