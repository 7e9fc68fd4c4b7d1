import type { AppendInput, AppendOptions, EvidenceLog } from '@cairn/evidence-log';

export interface RaceOptions {
  /** Race after the handler's chain reads (default) or after its appends. */
  after?: 'read' | 'append';
  /** Which one of those the race follows (1: the first, default). */
  nth?: number;
}

/**
 * The log as a handler driven directly sees it, with `race` run once: right after the handler's
 * `nth` chain read (or append) — another writer moving the head between the handler's read and
 * the append it decided from. Everything else goes to `log` itself (its own head reads are not
 * counted).
 */
export function racingLog(log: EvidenceLog, race: (chainId: string) => Promise<unknown>, options: RaceOptions = {}): EvidenceLog {
  const after = options.after ?? 'read';
  const nth = options.nth ?? 1;
  let seen = 0;
  const counted = async (chainId: string): Promise<void> => {
    seen += 1;
    if (seen === nth) await race(chainId);
  };
  return new Proxy(log, {
    get(target, prop) {
      if (after === 'read' && prop === 'readChain') {
        return async function* (chainId: string) {
          yield* target.readChain(chainId);
          await counted(chainId);
        };
      }
      if (after === 'append' && prop === 'append') {
        return async (chainId: string, input: AppendInput, appendOptions?: AppendOptions) => {
          const result = await target.append(chainId, input, appendOptions);
          await counted(chainId);
          return result;
        };
      }
      const value = Reflect.get(target, prop) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
