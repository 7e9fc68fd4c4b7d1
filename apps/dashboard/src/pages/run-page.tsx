import { useMemo, useState } from 'react';
import { cairn } from '../api/cairn.js';
import { errorText, queueText } from '../api/error-codes.js';
import type { Run } from '../api/api-types.js';
import { useLiveChain } from '../chain/use-live-chain.js';
import { ApprovalActions } from '../components/approval-actions.js';
import { ChainBadge } from '../components/chain-badge.js';
import { ProofPanel } from '../proofs/proof-panel.js';
import { LiveIndicator, ReceiptTimeline } from '../components/receipt-timeline.js';
import { ArtifactView, StepStream } from '../components/run-outputs.js';
import { Argv, Card, EmptyState, ErrorBanner, formatBytes, Hash, PageHeader, StatePill, Time } from '../components/ui.js';
import { artifacts, earlierAttempts, formatDuration, lifecycle, pendingApprovals, steps, verification } from '../runs/run-model.js';
import { Link } from '../router.js';

const serverHead = (run: Run) => ({ count: run.eventCount, hash: run.headHash, sealed: run.sealed });

/**
 * A run: its receipts loaded from `/events`, then followed live over SSE until `run.sealed`;
 * the chain re-verified in this browser after every receipt; the run's projection re-read as
 * receipts arrive (state, verdict, grade).
 */
export function RunPage({ runId }: { runId: string }) {
  const { head: run, receipts, error, live, badge, openedUnsealed, reloadHead } = useLiveChain<Run>({
    chain: runId,
    loadHead: () => cairn.runs.get(runId),
    serverHead,
  });

  const [notice, setNotice] = useState<string | null>(null);
  const model = useMemo(
    () => ({
      lifecycle: lifecycle(receipts),
      steps: steps(receipts),
      earlier: earlierAttempts(receipts),
      pending: pendingApprovals(receipts),
      artifacts: artifacts(receipts),
      verification: verification(receipts),
    }),
    [receipts],
  );

  if (error !== undefined) {
    return (
      <section>
        <PageHeader title={runId} />
        <ErrorBanner error={error} />
        <Link to="runs">Back to the runs</Link>
      </section>
    );
  }
  return (
    <section aria-labelledby="run-title" data-opened-unsealed={openedUnsealed === null ? undefined : String(openedUnsealed)}>
      <nav className="breadcrumbs" aria-label="Breadcrumbs">
        <Link to="runs">Runs</Link> <span aria-hidden="true">/</span> <code>{runId}</code>
      </nav>
      <PageHeader title={<span id="run-title">{run?.name ?? runId}</span>}>
        {run === null ? null : <StatePill state={run.state} />}
        <LiveIndicator status={live} />
      </PageHeader>
      <div className="badge-row">
        <ChainBadge state={badge} />
      </div>
      {notice === null ? null : (
        <p className="banner banner-ok" role="status">
          {notice}
        </p>
      )}

      <ol className="lifecycle" aria-label="Lifecycle, as the chain records it">
        {model.lifecycle.map((step) => (
          <li key={step.seq} data-state={step.state}>
            <StatePill state={step.state} />
            <span className="small muted">
              #{step.seq} · <Time iso={step.ts} />
            </span>
          </li>
        ))}
      </ol>

      {run === null ? null : (
        <div className="cards">
          <Card label="Verdict" tone={run.verdict === 'SUPPORTS' ? 'ok' : run.verdict === 'REJECTED' ? 'bad' : undefined}>
            {run.verdict ?? <span className="muted">not yet</span>}
          </Card>
          <Card label="Grade">
            {run.score === null || run.maxScore === 0 ? (
              <span className="muted">not graded</span>
            ) : (
              <>
                {run.score} / {run.maxScore}
                {run.upperBound !== null && run.upperBound !== run.score ? <span className="small muted"> (up to {run.upperBound})</span> : null}
              </>
            )}
          </Card>
          <Card label="Error" tone={run.errorCode === null ? undefined : 'bad'}>
            {run.errorCode === null ? <span className="muted">none</span> : <span title={errorText(run.errorCode)}>{run.errorCode}</span>}
          </Card>
          {run.queue === undefined ? null : (
            <Card label="Queued" tone="warn">
              <span data-queue-position={run.queue.position}>{queueText(run.queue)}</span>
              <span className="small muted">
                {' '}
                since <Time iso={run.queue.since} />
              </span>
            </Card>
          )}
          <Card label="Receipts">{receipts.length}</Card>
          <Card label="Tenant">{run.tenant}</Card>
          <Card label="Trace">
            {/* The id to search the tracing backend for (ADR 0031); a run submitted untraced has none. */}
            {run.traceId === undefined ? (
              <span className="muted" data-trace-id="">
                not traced
              </span>
            ) : (
              <code className="trace-id" data-trace-id={run.traceId} title="W3C trace id: search your tracing backend for it">
                {run.traceId}
              </code>
            )}
          </Card>
          <Card label="Created">
            <Time iso={run.createdAt} />
          </Card>
        </div>
      )}

      {model.pending.length === 0 || run?.sealed === true ? null : (
        <section className="panel panel-warn" aria-labelledby="pending-title">
          <h2 id="pending-title">Awaiting approval</h2>
          {model.pending.map((approval) => (
            <div key={approval.approvalId} className="pending">
              <p>
                <strong>{approval.approvalId}</strong> — {approval.reason} {approval.expiresAt === null ? null : <span className="muted small">(expires <Time iso={approval.expiresAt} />)</span>}
              </p>
              <ApprovalActions runId={runId} approvalId={approval.approvalId} onDecided={(text) => {
                  setNotice(text);
                  reloadHead();
                }} />
            </div>
          ))}
        </section>
      )}

      <section aria-labelledby="steps-title">
        <h2 id="steps-title">Steps</h2>
        {model.steps.length === 0 ? (
          <EmptyState title="No step has run yet" />
        ) : (
          <table className="table" aria-label="Steps">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Command</th>
                <th scope="col">Exit</th>
                <th scope="col">Duration</th>
                <th scope="col">Limits hit</th>
                <th scope="col">Output</th>
              </tr>
            </thead>
            <tbody>
              {model.steps.map((step) => (
                <tr key={step.index} data-step={step.index}>
                  <td>{step.index}</td>
                  <td>
                    <Argv argv={step.argv} />
                    {step.stage === null ? null : <div className="small muted">{step.stage}</div>}
                  </td>
                  <td data-exit-code={step.exitCode === null ? 'none' : String(step.exitCode)}>
                    {!step.completed ? <span className="muted">running…</span> : step.exitCode === null ? <span className="text-bad">killed</span> : <span className={step.exitCode === 0 ? 'text-ok' : 'text-bad'}>{step.exitCode}</span>}
                    {step.errorCode === null ? null : <code className="small error-code">{step.errorCode}</code>}
                  </td>
                  <td>{formatDuration(step.durationMs)}</td>
                  <td>{step.limitsHit.length === 0 ? <span className="muted">none</span> : step.limitsHit.map((limit) => <span key={limit} className="pill pill-bad">{limit}</span>)}</td>
                  <td className="small">
                    out {formatBytes(step.stdoutBytes)} · err {formatBytes(step.stderrBytes)}
                    {step.truncated ? <span className="muted"> (truncated)</span> : null}
                    {!step.completed ? null : (
                      <>
                        <StepStream runId={runId} step={step.index} stream="stdout" sha256={step.stdoutSha256} />
                        <StepStream runId={runId} step={step.index} stream="stderr" sha256={step.stderrSha256} />
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>

      {model.earlier.length === 0 ? null : (
        <section aria-labelledby="earlier-title">
          <h2 id="earlier-title">Earlier attempts</h2>
          <p className="small muted">Lost with their worker and placed again; their receipts stay on the chain, their steps are not the run&apos;s.</p>
          {model.earlier.map((attempt) => (
            <table key={attempt.attempt} className="table" aria-label={`Attempt ${attempt.attempt}`} data-attempt={attempt.attempt}>
              <caption className="small">
                Attempt {attempt.attempt} on worker <code>{attempt.workerId ?? '?'}</code>, lost at #{attempt.retriedSeq} · <Time iso={attempt.retriedTs} />
                {attempt.message === null ? null : <span className="muted"> — {attempt.message}</span>}
              </caption>
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Command</th>
                  <th scope="col">Exit</th>
                  <th scope="col">Duration</th>
                </tr>
              </thead>
              <tbody>
                {attempt.steps.map((step) => (
                  <tr key={step.index} data-step={step.index}>
                    <td>{step.index}</td>
                    <td>
                      <Argv argv={step.argv} />
                    </td>
                    <td>{!step.completed ? <span className="muted">running when lost</span> : step.exitCode === null ? <span className="text-bad">killed</span> : String(step.exitCode)}</td>
                    <td>{formatDuration(step.durationMs)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        </section>
      )}

      {Object.keys(model.artifacts).length === 0 ? null : (
        <section aria-labelledby="artifacts-title">
          <h2 id="artifacts-title">Artifacts</h2>
          <table className="table" aria-label="Artifacts">
            <thead>
              <tr>
                <th scope="col">Path</th>
                <th scope="col">sha256</th>
                <th scope="col">Content</th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(model.artifacts).map(([path, sha]) => (
                <tr key={path}>
                  <td>
                    <code>{path}</code>
                  </td>
                  <td>
                    <Hash value={sha} />
                  </td>
                  <td>
                    <ArtifactView runId={runId} path={path} sha256={sha} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}

      {model.verification === null ? null : (
        <section aria-labelledby="verification-title">
          <h2 id="verification-title">Verification</h2>
          <ul className="checks">
            {model.verification.invariants.map((item) => (
              <li key={`i-${item.id}`} className={item.ok ? 'text-ok' : 'text-bad'}>
                <span aria-hidden="true">{item.ok ? '✓' : '✗'}</span> {item.id.replace(/_/g, ' ')}
                {item.detail === null ? null : <span className="muted small"> — {item.detail}</span>}
              </li>
            ))}
            {model.verification.checks.map((check) => (
              <li key={`c-${check.id}`} className={check.outcome === 'holds' ? 'text-ok' : check.outcome === 'contradicted' ? 'text-bad' : 'text-warn'}>
                <span aria-hidden="true">{check.outcome === 'holds' ? '✓' : check.outcome === 'contradicted' ? '✗' : '?'}</span> check <code>{check.id}</code> {check.outcome}
                {check.detail === null ? null : <span className="muted small"> — {check.detail}</span>}
              </li>
            ))}
          </ul>
        </section>
      )}

      <ProofPanel chainId={runId} sealed={run?.sealed === true} />

      <section aria-labelledby="timeline-title">
        <h2 id="timeline-title">Timeline</h2>
        <ReceiptTimeline receipts={receipts} />
      </section>
    </section>
  );
}
