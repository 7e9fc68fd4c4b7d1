import { useMemo } from 'react';
import { cairn } from '../api/cairn.js';
import { errorText, queueText } from '../api/error-codes.js';
import type { Sandbox } from '../api/api-types.js';
import { useLiveChain } from '../chain/use-live-chain.js';
import { ChainBadge } from '../components/chain-badge.js';
import { ProofPanel } from '../proofs/proof-panel.js';
import { LiveIndicator, ReceiptTimeline } from '../components/receipt-timeline.js';
import { Argv, Card, EmptyState, ErrorBanner, formatBytes, Hash, PageHeader, StatePill, Time } from '../components/ui.js';
import { execs, fileOperations, formatDuration } from '../runs/run-model.js';
import { Link } from '../router.js';

const serverHead = (sandbox: Sandbox) => ({ count: sandbox.headSeq, hash: sandbox.headHash, sealed: sandbox.sealed });

/** An interactive sandbox: its execs and file operations, its chain verified in the browser, followed live. */
export function SandboxPage({ sandboxId }: { sandboxId: string }) {
  const { head: sandbox, receipts, error, live, badge } = useLiveChain<Sandbox>({
    chain: sandboxId,
    loadHead: () => cairn.sandboxes.get(sandboxId),
    serverHead,
  });
  const model = useMemo(() => ({ execs: execs(receipts), files: fileOperations(receipts) }), [receipts]);

  if (error !== undefined) {
    return (
      <section>
        <PageHeader title={sandboxId} />
        <ErrorBanner error={error} />
        <Link to="sandboxes">Back to the sandboxes</Link>
      </section>
    );
  }
  return (
    <section aria-labelledby="sandbox-title">
      <nav className="breadcrumbs" aria-label="Breadcrumbs">
        <Link to="sandboxes">Sandboxes</Link> <span aria-hidden="true">/</span> <code>{sandboxId}</code>
      </nav>
      <PageHeader title={<span id="sandbox-title">{sandboxId}</span>}>
        {sandbox === null ? null : <StatePill state={sandbox.state} />}
        <LiveIndicator status={live} />
      </PageHeader>
      <div className="badge-row">
        <ChainBadge state={badge} />
      </div>
      {sandbox === null ? null : (
        <div className="cards">
          <Card label="Image">{sandbox.image === null ? <span className="muted">not decided</span> : <code>{sandbox.image}</code>}</Card>
          <Card label="Worker">{sandbox.workerId === null ? <span className="muted">none yet</span> : <code className="small">{sandbox.workerId}</code>}</Card>
          <Card label="Operations">{sandbox.operations}</Card>
          <Card label="Created">
            <Time iso={sandbox.createdAt} />
          </Card>
          <Card label={sandbox.state === 'DESTROYED' ? 'Ended' : 'Expires'}>
            {sandbox.state === 'DESTROYED' ? (sandbox.destroyReason ?? '—') : <Time iso={sandbox.expiresAt} />}
          </Card>
          <Card label="Error" tone={sandbox.errorCode === null ? undefined : 'bad'}>
            {sandbox.errorCode === null ? <span className="muted">none</span> : <span title={errorText(sandbox.errorCode)}>{sandbox.errorCode}</span>}
          </Card>
          {sandbox.queue === undefined ? null : (
            <Card label="Queued" tone="warn">
              {queueText(sandbox.queue)}
            </Card>
          )}
        </div>
      )}

      <section aria-labelledby="execs-title">
        <h2 id="execs-title">Execs</h2>
        {model.execs.length === 0 ? (
          <EmptyState title="Nothing has run in this sandbox yet" />
        ) : (
          <table className="table" aria-label="Execs">
            <thead>
              <tr>
                <th scope="col">Command</th>
                <th scope="col">Exit</th>
                <th scope="col">Duration</th>
                <th scope="col">Limits hit</th>
                <th scope="col">Output</th>
              </tr>
            </thead>
            <tbody>
              {model.execs.map((exec) => (
                <tr key={exec.execId} data-exec-id={exec.execId}>
                  <td>
                    <Argv argv={exec.argv} />
                  </td>
                  <td data-exit-code={exec.exitCode === null ? 'none' : String(exec.exitCode)}>
                    {!exec.completed ? <span className="muted">running…</span> : exec.exitCode === null ? <span className="text-bad">killed</span> : <span className={exec.exitCode === 0 ? 'text-ok' : 'text-bad'}>{exec.exitCode}</span>}
                    {exec.errorCode === null ? null : <code className="small error-code">{exec.errorCode}</code>}
                  </td>
                  <td>{formatDuration(exec.durationMs)}</td>
                  <td>{exec.limitsHit.length === 0 ? <span className="muted">none</span> : exec.limitsHit.map((limit) => <span key={limit} className="pill pill-bad">{limit}</span>)}</td>
                  <td className="small">
                    out {formatBytes(exec.stdoutBytes)} · err {formatBytes(exec.stderrBytes)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>

      {model.files.length === 0 ? null : (
        <section aria-labelledby="files-title">
          <h2 id="files-title">Files</h2>
          <table className="table" aria-label="Files">
            <thead>
              <tr>
                <th scope="col">Path</th>
                <th scope="col">Direction</th>
                <th scope="col" className="num">
                  Bytes
                </th>
                <th scope="col">sha256</th>
              </tr>
            </thead>
            <tbody>
              {model.files.map((file) => (
                <tr key={file.seq}>
                  <td>
                    <code>{file.path}</code>
                  </td>
                  <td>{file.direction === 'written' ? 'written in' : 'read out'}</td>
                  <td className="num">{file.bytes ?? '—'}</td>
                  <td>
                    <Hash value={file.sha256} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}

      <ProofPanel chainId={sandboxId} sealed={sandbox?.sealed === true} />

      <section aria-labelledby="sandbox-timeline-title">
        <h2 id="sandbox-timeline-title">Timeline</h2>
        <ReceiptTimeline receipts={receipts} />
      </section>
    </section>
  );
}
