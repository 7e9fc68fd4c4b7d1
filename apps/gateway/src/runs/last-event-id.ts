import { CairnError } from '@cairn/contracts';
import { LastEventIdSchema } from '../http/api.schemas.js';

/**
 * Where an event stream resumes: after the seq in `Last-Event-ID` (`<run id>:<seq>`, what the
 * stream sent as `id:`), else after `?after=`, else from the start. An id of another run is E_INPUT.
 */
export function resumeAfter(runId: string, lastEventId: string | undefined, after: number | undefined): number {
  if (lastEventId !== undefined && lastEventId !== '') {
    const match = LastEventIdSchema.safeParse(lastEventId);
    const [chain, seq] = match.success ? match.data.split(':') : [];
    if (chain === undefined || seq === undefined) throw new CairnError('E_INPUT', 'Last-Event-ID: expected <run id>:<seq>', { field: 'Last-Event-ID' });
    if (chain !== runId) throw new CairnError('E_INPUT', `Last-Event-ID: names run ${chain}, not ${runId}`, { field: 'Last-Event-ID' });
    return Number(seq);
  }
  return after ?? 0;
}
