import { cairn } from '../api/cairn.js';
import { EmptyState, ErrorBanner, PageHeader, Time } from '../components/ui.js';

function mebibytes(value: number): string {
  return value >= 1024 ? `${(value / 1024).toFixed(1)} GiB` : `${value} MiB`;
}
import { useAsync, useInterval } from '../use-async.js';

/** The runtime workers registered now: health, draining (an operator's drain: `cairn workers drain`), slots in use, what is reserved of each capacity, heartbeat. */
export function WorkersPage() {
  const workers = useAsync(() => cairn.operator.workers(), []);
  useInterval(workers.reload, 5000);
  const items = workers.data?.items ?? [];
  const used = items.reduce((sum, w) => sum + w.inFlight, 0);
  const slots = items.reduce((sum, w) => sum + w.slots, 0);
  return (
    <section aria-labelledby="workers-title">
      <PageHeader title={<span id="workers-title">Workers</span>}>
        <span className="muted small">
          {items.length} registered · {used} of {slots} slots in use
        </span>
      </PageHeader>
      <ErrorBanner error={workers.error} />
      {items.length === 0 && !workers.loading ? (
        <EmptyState title="No worker is registered">Start one with <code>cairn up</code>; runs wait in SCHEDULED until a worker takes them.</EmptyState>
      ) : (
        <table className="table" aria-label="Workers">
          <thead>
            <tr>
              <th scope="col">Worker</th>
              <th scope="col">Health</th>
              <th scope="col">Slots in use</th>
              <th scope="col" className="num">
                Memory
              </th>
              <th scope="col" className="num">
                CPUs
              </th>
              <th scope="col" className="num">
                Disk
              </th>
              <th scope="col" className="num">
                Processes
              </th>
              <th scope="col">Heartbeat</th>
              <th scope="col">Images</th>
            </tr>
          </thead>
          <tbody>
            {items.map((worker) => (
              <tr key={worker.workerId} data-worker-id={worker.workerId}>
                <td>
                  <code>{worker.workerId}</code>
                </td>
                <td>
                  <span className={`pill pill-${worker.healthy ? 'ok' : 'bad'}`} title={worker.status}>
                    {worker.healthy ? 'healthy' : worker.status === 'stale' ? 'stale' : 'unhealthy'}
                  </span>
                  {worker.draining ? (
                    <span className="pill pill-warn" title={worker.drain === null ? 'shutting down' : `drained by ${worker.drain.by} since ${worker.drain.since}`}>
                      draining
                    </span>
                  ) : null}
                  {worker.status === 'overloaded' ? <span className="pill pill-warn">full</span> : null}
                </td>
                <td>
                  <div className="meter">
                    <meter min={0} max={Math.max(worker.slots, 1)} value={worker.inFlight} aria-label={`${worker.inFlight} of ${worker.slots} slots in use`} />
                    <span className="small" title={`${worker.runs} runs, ${worker.sandboxes} sandbox sessions`}>
                      {worker.inFlight} / {worker.slots}
                    </span>
                  </div>
                </td>
                <td className="num" title="reserved by its runs and sandboxes (memory caps plus tmpfs) of what it offers">
                  {mebibytes(worker.reserved.memoryMiB)} / {mebibytes(worker.capacity.memoryMiB)}
                </td>
                <td className="num" title={`CPU caps admitted: ${worker.capacity.cpuOversubscription ?? 1}× its CPUs (runs alone ${worker.capacity.runCpuOversubscription ?? worker.capacity.cpuOversubscription ?? 1}×)`}>
                  {worker.reserved.cpus} / {worker.capacity.cpus} × {worker.capacity.cpuOversubscription ?? 1}
                </td>
                <td className="num">
                  {mebibytes(worker.reserved.diskMiB)} / {mebibytes(worker.capacity.diskMiB)}
                </td>
                <td className="num">
                  {worker.reserved.pids} / {worker.capacity.pids ?? '∞'}
                </td>
                <td>
                  <Time iso={worker.lastHeartbeatAt} />
                </td>
                <td className="small">
                  {Object.keys(worker.images).length === 0 ? (
                    <span className="muted">none</span>
                  ) : (
                    Object.entries(worker.images).map(([name, digest]) => (
                      <div key={name}>
                        <code title={digest}>{name}</code>
                      </div>
                    ))
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
