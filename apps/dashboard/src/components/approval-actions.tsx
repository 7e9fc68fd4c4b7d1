import { useState } from 'react';
import { cairn, errorLine } from '../api/cairn.js';

/**
 * Approve or reject what a held run awaits (one approval, or all of them), with an optional comment.
 * A refusal is shown here; a decision is handed to `onDecided` as a sentence, for the page to show
 * (this control goes away once the run no longer awaits it).
 */
export function ApprovalActions({ runId, approvalId, onDecided }: { runId: string; approvalId?: string; onDecided: (notice: string) => void }) {
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ tone: 'ok' | 'bad'; text: string } | null>(null);
  const decide = async (decision: 'approve' | 'reject') => {
    setBusy(true);
    setMessage(null);
    try {
      const result = await cairn.runs.decide(runId, { decision, ...(approvalId === undefined ? {} : { approvalId }), ...(comment.trim() === '' ? {} : { comment: comment.trim() }) });
      const text = `${decision === 'approve' ? 'Approved' : 'Rejected'} ${approvalId ?? 'every approval'} of ${runId}: the run is ${result.state}${result.duplicate ? ' (already decided)' : ''}.`;
      setMessage({ tone: 'ok', text });
      onDecided(text);
    } catch (error) {
      setMessage({ tone: 'bad', text: errorLine(error) });
    } finally {
      setBusy(false);
    }
  };
  const id = `comment-${runId}-${approvalId ?? 'all'}`;
  return (
    <div className="approval-actions">
      <label htmlFor={id} className="visually-hidden">
        Comment (optional)
      </label>
      <input id={id} type="text" placeholder="Comment (optional)" maxLength={1024} value={comment} onChange={(event) => setComment(event.target.value)} />
      <button type="button" className="button button-ok" disabled={busy} onClick={() => void decide('approve')}>
        Approve
      </button>
      <button type="button" className="button button-bad" disabled={busy} onClick={() => void decide('reject')}>
        Reject
      </button>
      {message === null ? null : (
        <span className={`small ${message.tone === 'ok' ? 'text-ok' : 'text-bad'}`} role={message.tone === 'bad' ? 'alert' : 'status'}>
          {message.text}
        </span>
      )}
    </div>
  );
}
