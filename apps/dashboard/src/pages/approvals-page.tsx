import { useState } from 'react';
import { allReceipts, cairn } from '../api/cairn.js';
import type { Run } from '../api/api-types.js';
import { ApprovalActions } from '../components/approval-actions.js';
import { EmptyState, ErrorBanner, PageHeader, Time } from '../components/ui.js';
import { pendingApprovals } from '../runs/run-model.js';
import type { PendingApproval } from '../runs/run-model.js';
import { Link } from '../router.js';
import { useAsync, useInterval } from '../use-async.js';

interface HeldRun {
  run: Run;
  pending: PendingApproval[];
}

/** The queue: the tenant's runs in AWAITING_APPROVAL, each with what its chain says it awaits. */
async function loadQueue(): Promise<HeldRun[]> {
  const held: Run[] = [];
  let cursor: string | undefined;
  do {
    const page = await cairn.runs.list({ state: 'AWAITING_APPROVAL', limit: 200, ...(cursor === undefined ? {} : { cursor }) });
    held.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined && held.length < 1000);
  // Oldest first: the one waiting longest is decided first.
  held.reverse();
  return Promise.all(held.map(async (run) => ({ run, pending: pendingApprovals(await allReceipts(run.runId)) })));
}

export function ApprovalsPage() {
  const queue = useAsync(loadQueue, []);
  useInterval(queue.reload, 5000);
  const items = queue.data ?? [];
  /** What was decided on this page, newest first: a decided run leaves the queue, its notice stays. */
  const [notices, setNotices] = useState<string[]>([]);
  const decided = (notice: string) => {
    setNotices((previous) => [notice, ...previous].slice(0, 5));
    queue.reload();
  };
  return (
    <section aria-labelledby="approvals-title">
      <PageHeader title={<span id="approvals-title">Approvals</span>}>
        <span className="muted small" aria-live="polite">
          {items.length} waiting · refreshes every 5 s
        </span>
      </PageHeader>
      <p className="muted">
        Runs held by policy until a person decides. The key that submitted a run cannot approve it; a rejection ends the run CANCELLED (E_NO_APPROVAL). Every decision is recorded on the run's chain with
        the deciding key.
      </p>
      <ErrorBanner error={queue.error} />
      <div className="notices" role="status" aria-live="polite">
        {notices.map((notice, index) => (
          <p key={`${index}-${notice}`} className="banner banner-ok">
            {notice}
          </p>
        ))}
      </div>
      {items.length === 0 && !queue.loading ? (
        <EmptyState title="Nothing awaits approval" />
      ) : (
        <ul className="queue" aria-label="Runs awaiting approval">
          {items.map(({ run, pending }) => (
            <li key={run.runId} className="panel" data-run-id={run.runId}>
              <div className="queue-head">
                <Link to={`runs/${run.runId}`}>
                  <strong>{run.name ?? run.runId}</strong>
                </Link>
                <code className="small muted">{run.runId}</code>
                <span className="muted small">
                  submitted <Time iso={run.createdAt} />
                </span>
              </div>
              {pending.length === 0 ? <p className="muted small">Its approval request is not on the chain yet.</p> : null}
              {pending.map((approval) => (
                <div key={approval.approvalId} className="pending">
                  <p>
                    <strong>{approval.approvalId}</strong> ({approval.scope}
                    {approval.stepIndex === null ? '' : ` step ${approval.stepIndex}`}) — {approval.reason}{' '}
                    {approval.expiresAt === null ? null : (
                      <span className="muted small">
                        expires <Time iso={approval.expiresAt} />
                      </span>
                    )}
                  </p>
                  <ApprovalActions runId={run.runId} approvalId={approval.approvalId} onDecided={decided} />
                </div>
              ))}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
