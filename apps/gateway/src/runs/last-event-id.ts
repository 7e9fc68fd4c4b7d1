import { CairnError, LastEventIdSchema } from '@cairn/contracts';

/**
 * Where an event stream of a chain (a run's or a sandbox's) resumes: after the seq in
 * `Last-Event-ID` (`<chain id>:<seq>`, what the stream sent as `id:`), else after `?after=`, else
 * from the start. An id of another chain is E_INPUT.
 */
export function resumeAfter(chainId: string, lastEventId: string | undefined, after: number | undefined): number {
  if (lastEventId !== undefined && lastEventId !== '') {
    const match = LastEventIdSchema.safeParse(lastEventId);
    const [chain, seq] = match.success ? match.data.split(':') : [];
    if (chain === undefined || seq === undefined) throw new CairnError('E_INPUT', 'Last-Event-ID: expected <chain id>:<seq>', { field: 'Last-Event-ID' });
    if (chain !== chainId) throw new CairnError('E_INPUT', `Last-Event-ID: names chain ${chain}, not ${chainId}`, { field: 'Last-Event-ID' });
    return Number(seq);
  }
  return after ?? 0;
}
