import { cairn } from '../api/cairn.js';
import { Card, ErrorBanner, Hash, PageHeader, Time } from '../components/ui.js';
import { Link } from '../router.js';
import { useAsync } from '../use-async.js';

/* The policy document in force (`GET /v1/policy`), laid out as tables rather than its JSON. */

const CAP_LABELS: Readonly<Record<string, [string, string]>> = {
  wallSeconds: ['Wall time', 's'],
  memoryMiB: ['Memory', 'MiB'],
  pids: ['Processes', ''],
  diskMiB: ['Disk', 'MiB'],
  cpus: ['CPUs', ''],
};
const BUDGET_LABELS: Readonly<Record<string, string>> = {
  runsPerJob: 'Runs per job',
  jobMinutes: 'Minutes per job',
  tenantConcurrentRuns: 'Runs in flight per tenant',
  tenantCpuSecondsPerDay: 'CPU-seconds per tenant per day',
  outputBytesPerStep: 'Output bytes per step',
};

type Json = unknown;
const rec = (value: Json): Record<string, Json> => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, Json>) : {});
const arr = (value: Json): Json[] => (Array.isArray(value) ? (value as Json[]) : []);
const text = (value: Json): string => (typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value));

function trigger(when: Json): string {
  if (when === 'egress') return 'a run asks for network egress';
  if (when === 'apply_step') return 'a step is marked apply';
  const image = rec(when).image;
  return typeof image === 'string' ? `a run uses the image ${image}` : text(when);
}

export function PolicyPage() {
  const loaded = useAsync(() => cairn.operator.policy(), []);
  const data = loaded.data;
  const policy = rec(data?.policy);
  const caps = rec(policy.caps);
  const network = rec(policy.network);
  return (
    <section aria-labelledby="policy-title">
      <PageHeader title={<span id="policy-title">Policy in force</span>} />
      <ErrorBanner error={loaded.error} />
      {data === undefined ? null : (
        <>
          <div className="cards">
            <Card label="Version">
              <Hash value={data.version} />
            </Card>
            <Card label="Source">{data.source === 'file' ? <span title="CAIRN_POLICY_FILE">policy file</span> : 'built-in default'}</Card>
            <Card label="Last decision" tone={data.lastDecision !== null && data.lastDecision.version !== data.version ? 'bad' : undefined}>
              {data.lastDecision === null ? (
                <span className="muted">no decision yet</span>
              ) : (
                <span data-policy-match={String(data.lastDecision.version === data.version)}>
                  {data.lastDecision.version === data.version ? 'this version' : <>another version (<Hash value={data.lastDecision.version} />)</>} ·{' '}
                  <Link to={`runs/${data.lastDecision.runId}`}>
                    <Time iso={data.lastDecision.at} />
                  </Link>
                </span>
              )}
            </Card>
            <Card label="Default image">
              <code>{text(policy.defaultImage)}</code>
            </Card>
          </div>

          <h2>Caps</h2>
          <table className="table" aria-label="Caps">
            <thead>
              <tr>
                <th scope="col">Cap</th>
                <th scope="col" className="num">
                  Default
                </th>
                <th scope="col" className="num">
                  Maximum
                </th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(CAP_LABELS).map(([name, [label, unit]]) => (
                <tr key={name}>
                  <th scope="row">{label}</th>
                  <td className="num">
                    {text(rec(caps.defaults)[name])} {unit}
                  </td>
                  <td className="num">
                    {text(rec(caps.max)[name])} {unit}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>

          <h2>Images allowed</h2>
          <table className="table" aria-label="Images allowed">
            <thead>
              <tr>
                <th scope="col">Image</th>
                <th scope="col">Pinned digest</th>
              </tr>
            </thead>
            <tbody>
              {arr(rec(policy.images).allow).map((image) => (
                <tr key={text(rec(image).name)}>
                  <td>
                    <code>{text(rec(image).name)}</code>
                  </td>
                  <td>{typeof rec(image).digest === 'string' ? <Hash value={text(rec(image).digest)} /> : <span className="muted">any (the worker's local image)</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>

          <h2>Network</h2>
          {network.egress === 'deny' ? (
            <p>No egress: sandboxes have no network.</p>
          ) : (
            <>
              <p>Egress only to these hosts{network.allowPrivate === true ? ' (private addresses allowed)' : ''}:</p>
              <ul className="chips">
                {arr(network.allow).map((entry) => (
                  <li key={text(entry)}>
                    <code>{text(entry)}</code>
                  </li>
                ))}
              </ul>
            </>
          )}

          <h2>Approvals</h2>
          {arr(rec(policy.approvals).rules).length === 0 ? (
            <p className="muted">No run is held for approval.</p>
          ) : (
            <table className="table" aria-label="Approval rules">
              <thead>
                <tr>
                  <th scope="col">Held when</th>
                  <th scope="col">Rejected after</th>
                </tr>
              </thead>
              <tbody>
                {arr(rec(policy.approvals).rules).map((rule, index) => (
                  <tr key={index}>
                    <td>{trigger(rec(rule).when)}</td>
                    <td>{typeof rec(rule).timeoutSeconds === 'number' ? `${text(rec(rule).timeoutSeconds)} s` : '24 h (default)'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}

          <h2>Budgets</h2>
          <table className="table" aria-label="Budgets">
            <tbody>
              {Object.entries(rec(policy.budgets)).map(([name, value]) => (
                <tr key={name}>
                  <th scope="row">{BUDGET_LABELS[name] ?? name}</th>
                  <td className="num">{text(value)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}
