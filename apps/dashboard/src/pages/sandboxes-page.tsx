import { cairn, statusOf } from '../api/cairn.js';
import { errorText, queueText } from '../api/error-codes.js';
import { EmptyState, ErrorBanner, PageHeader, StatePill, Time } from '../components/ui.js';
import { Link } from '../router.js';
import { useAsync, useInterval } from '../use-async.js';

/**
 * Interactive sandboxes (`GET /v1/sandboxes`). A gateway without sandbox sessions answers 404 for
 * the route: that is an empty state here, not an error.
 */
export function SandboxesPage() {
  const sandboxes = useAsync(async () => {
    try {
      return { served: true, items: (await cairn.sandboxes.list({ limit: 100 })).items };
    } catch (error) {
      if (statusOf(error) === 404) return { served: false, items: [] };
      throw error;
    }
  }, []);
  useInterval(sandboxes.reload, 5000);
  const items = sandboxes.data?.items ?? [];
  return (
    <section aria-labelledby="sandboxes-title">
      <PageHeader title={<span id="sandboxes-title">Sandboxes</span>}>
        <span className="muted small">{items.filter((s) => s.state === 'READY').length} ready</span>
      </PageHeader>
      <ErrorBanner error={sandboxes.error} />
      {sandboxes.data?.served === false ? (
        <EmptyState title="This gateway serves no interactive sandboxes">It does not offer the /v1/sandboxes routes (an older gateway, or sessions are not enabled).</EmptyState>
      ) : items.length === 0 && !sandboxes.loading ? (
        <EmptyState title="No sandboxes">
          Create one with <code>cairn sandbox create</code>.
        </EmptyState>
      ) : (
        <table className="table" aria-label="Sandboxes">
          <thead>
            <tr>
              <th scope="col">Sandbox</th>
              <th scope="col">State</th>
              <th scope="col">Image</th>
              <th scope="col">Worker</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col" className="num">
                Operations
              </th>
              <th scope="col">Ended</th>
            </tr>
          </thead>
          <tbody>
            {items.map((sandbox) => (
              <tr key={sandbox.id} data-sandbox-id={sandbox.id}>
                <td>
                  <Link to={`sandboxes/${sandbox.id}`}>
                    <code>{sandbox.id}</code>
                  </Link>
                </td>
                <td>
                  <StatePill state={sandbox.state} title={errorText(sandbox.errorCode)} />
                  {sandbox.errorCode === null ? null : <code className="small error-code">{sandbox.errorCode}</code>}
                  {sandbox.queue === undefined ? null : <span className="small muted queue-spot">{queueText(sandbox.queue)}</span>}
                </td>
                <td>{sandbox.image === null ? <span className="muted">—</span> : <code className="small">{sandbox.image}</code>}</td>
                <td>{sandbox.workerId === null ? <span className="muted">—</span> : <code className="small">{sandbox.workerId}</code>}</td>
                <td>
                  <Time iso={sandbox.createdAt} />
                </td>
                <td>{sandbox.state === 'READY' || sandbox.state === 'PENDING' ? <Time iso={sandbox.expiresAt} /> : <span className="muted">—</span>}</td>
                <td className="num">{sandbox.operations}</td>
                <td>{sandbox.destroyReason ?? <span className="muted">—</span>}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
