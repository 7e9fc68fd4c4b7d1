import { useState } from 'react';
import type { FormEvent } from 'react';
import { api, ApiError } from '../api/api-client.js';
import type { CreatedApiKey } from '../api/api-types.js';
import { EmptyState, ErrorBanner, PageHeader, Time } from '../components/ui.js';
import { useAsync } from '../use-async.js';

const SCOPES = ['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'metrics:read', 'admin'] as const;
const EXPIRY_DAYS = [{ days: 0, label: 'never' }, { days: 7, label: '7 days' }, { days: 30, label: '30 days' }, { days: 90, label: '90 days' }, { days: 365, label: '1 year' }] as const;

/**
 * The tenant's API keys (needs an admin key): list, create (the secret shown once, here, and never
 * again) and revoke; for the operator (an admin key of tenant `default`) the tenants too. Every
 * act is a receipt on the tenant's admin chain (`adm_<tenant>`).
 */
export function KeysPage() {
  const keys = useAsync(() => api.keys(), []);
  // Only the operator may list tenants: anyone else's 403 just hides the section.
  const tenants = useAsync(async () => {
    try {
      return await api.tenants();
    } catch (error) {
      if (error instanceof ApiError && error.status === 403) return null;
      throw error;
    }
  }, []);
  const [scopes, setScopes] = useState<string[]>(['runs:read']);
  const [days, setDays] = useState(0);
  const [created, setCreated] = useState<CreatedApiKey | null>(null);
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ tone: 'ok' | 'bad'; text: string } | null>(null);

  const toggle = (scope: string) => setScopes((now) => (now.includes(scope) ? now.filter((s) => s !== scope) : [...now, scope]));
  const create = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setMessage(null);
    try {
      const expiresAt = days === 0 ? undefined : new Date(Date.now() + days * 86_400_000).toISOString();
      const key = await api.createKey({ scopes, ...(expiresAt === undefined ? {} : { expiresAt }) });
      setCreated(key);
      keys.reload();
    } catch (error) {
      setMessage({ tone: 'bad', text: error instanceof ApiError ? `${error.code}: ${error.message}` : String(error) });
    } finally {
      setBusy(false);
    }
  };
  const revoke = async (id: string) => {
    if (!window.confirm(`Revoke key ${id}? It is refused from its very next request.`)) return;
    try {
      await api.revokeKey(id);
      setMessage({ tone: 'ok', text: `Revoked ${id}.` });
      keys.reload();
    } catch (error) {
      setMessage({ tone: 'bad', text: error instanceof ApiError ? `${error.code}: ${error.message}` : String(error) });
    }
  };

  const items = keys.data?.items ?? [];
  return (
    <section aria-labelledby="keys-title">
      <PageHeader title={<span id="keys-title">API keys</span>}>
        <span className="muted small">{items.length} keys · each change recorded on the admin chain</span>
      </PageHeader>
      <ErrorBanner error={keys.error} />

      <form className="card key-create" aria-label="Create a key" onSubmit={(event) => void create(event)}>
        <fieldset>
          <legend>Scopes</legend>
          {SCOPES.map((scope) => (
            <label key={scope} className="check">
              <input type="checkbox" name="scope" value={scope} checked={scopes.includes(scope)} onChange={() => toggle(scope)} /> <code>{scope}</code>
            </label>
          ))}
        </fieldset>
        <label>
          Expires{' '}
          <select name="expires" value={days} onChange={(event) => setDays(Number(event.target.value))}>
            {EXPIRY_DAYS.map((option) => (
              <option key={option.days} value={option.days}>
                {option.label}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" className="button button-ok" disabled={busy || scopes.length === 0}>
          Create key
        </button>
      </form>

      {created === null ? null : (
        <div className="card secret-once" role="status" aria-label="New key">
          <p>
            Key <code>{created.id}</code> created. Copy it now: <strong>it is shown this once</strong> and never again.
          </p>
          <pre>
            <code data-secret="">{created.key}</code>
          </pre>
          <button type="button" className="button button-quiet" onClick={() => setCreated(null)}>
            I have stored it
          </button>
        </div>
      )}
      {message === null ? null : (
        <p className={`small ${message.tone === 'ok' ? 'text-ok' : 'text-bad'}`} role={message.tone === 'bad' ? 'alert' : 'status'}>
          {message.text}
        </p>
      )}

      {items.length === 0 && !keys.loading ? (
        <EmptyState title="No keys">Create one above.</EmptyState>
      ) : (
        <table className="table" aria-label="Keys">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Status</th>
              <th scope="col">Scopes</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Rotations</th>
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {items.map((key) => (
              <tr key={key.id} data-key-id={key.id}>
                <td>
                  <code title={key.id}>
                    cairn_{key.prefix}_…{key.lastFour ?? '????'}
                  </code>
                </td>
                <td>
                  <span className={`pill pill-${key.status === 'active' ? 'ok' : key.status === 'pending' ? 'warn' : 'bad'}`}>{key.status}</span>
                </td>
                <td className="small">{key.scopes.join(', ')}</td>
                <td>
                  <Time iso={key.createdAt} />
                </td>
                <td>{key.expiresAt === null ? <span className="muted">never</span> : <Time iso={key.expiresAt} />}</td>
                <td className="num">{key.rotations}</td>
                <td>
                  {key.status === 'revoked' ? null : (
                    <button type="button" className="button button-bad" onClick={() => void revoke(key.id)}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      {tenants.data === null || tenants.data === undefined ? null : (
        <section aria-labelledby="tenants-title">
          <h2 id="tenants-title">Tenants</h2>
          <ErrorBanner error={tenants.error} />
          <table className="table" aria-label="Tenants">
            <thead>
              <tr>
                <th scope="col">Tenant</th>
                <th scope="col">Admin chain</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {tenants.data.items.map((tenant) => (
                <tr key={tenant.id} data-tenant-id={tenant.id}>
                  <td>
                    <code>{tenant.id}</code>
                  </td>
                  <td>
                    <code>{tenant.chainId}</code>
                  </td>
                  <td>
                    <Time iso={tenant.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </section>
  );
}
