import { useEffect, useRef, useState } from 'react';
import type { KeyboardEvent } from 'react';
import { cairn } from '../api/cairn.js';
import { errorText, queueText } from '../api/error-codes.js';
import { RUN_STATES } from '../api/api-types.js';
import type { ListRunsQuery, Run, RunState } from '../api/api-types.js';
import { EmptyState, ErrorBanner, PageHeader, StatePill, Time } from '../components/ui.js';
import { navigate, useLocation } from '../router.js';
import { useAsync, useInterval } from '../use-async.js';

const WINDOWS = [
  { value: '', label: 'Any time' },
  { value: '1h', label: 'Last hour' },
  { value: '24h', label: 'Last 24 hours' },
  { value: '7d', label: 'Last 7 days' },
  { value: 'custom', label: 'Between…' },
] as const;
const WINDOW_MS: Readonly<Record<string, number>> = { '1h': 3_600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 };

/** `datetime-local` (the browser's local time) → the API's UTC instant. */
function toInstant(local: string | null): string | undefined {
  if (local === null || local === '') return undefined;
  const time = new Date(local).getTime();
  return Number.isNaN(time) ? undefined : new Date(time).toISOString();
}

/**
 * The filter in the URL (so a filtered view can be shared and survives reload) → the API's query.
 * A state the contracts do not name is sent on as it is: the SDK refuses it (E_INPUT), as the API would.
 */
function filterFrom(search: URLSearchParams): Partial<ListRunsQuery> {
  const window = search.get('window') ?? '';
  const span = WINDOW_MS[window];
  const state = search.get('state');
  const createdAfter = span !== undefined ? new Date(Date.now() - span).toISOString() : window === 'custom' ? toInstant(search.get('from')) : undefined;
  const createdBefore = window === 'custom' ? toInstant(search.get('to')) : undefined;
  return {
    ...(state === null || state === '' ? {} : { state: state as RunState }),
    ...(createdAfter === undefined ? {} : { createdAfter }),
    ...(createdBefore === undefined ? {} : { createdBefore }),
  };
}

function grade(run: Run): string {
  // No criteria (max 0) is no grade, not a zero.
  if (run.score === null || run.maxScore === null || run.maxScore === 0) return '—';
  return `${run.score} / ${run.maxScore}`;
}

export function RunsPage() {
  const { search } = useLocation();
  const key = search.toString();
  const [pages, setPages] = useState<Run[][]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const first = useAsync(() => cairn.runs.list({ ...filterFrom(search), limit: 50 }), [key]);
  // Auto-refresh the first page only: once older pages are loaded, a refresh would drop them.
  useInterval(first.reload, pages.length > 1 ? null : 5000);
  useEffect(() => {
    if (first.data !== undefined) {
      setPages([first.data.items]);
      setCursor(first.data.nextCursor);
    }
  }, [first.data]);
  const runs = pages.flat();

  const setParam = (name: string, value: string) => {
    const next = new URLSearchParams(search);
    if (value === '') next.delete(name);
    else next.set(name, value);
    navigate(`runs${next.toString() === '' ? '' : `?${next.toString()}`}`, { replace: true });
  };

  const loadMore = async () => {
    if (cursor === null) return;
    const page = await cairn.runs.list({ ...filterFrom(search), cursor, limit: 50 });
    setPages((previous) => [...previous, page.items]);
    setCursor(page.nextCursor);
  };

  return (
    <section aria-labelledby="runs-title">
      <PageHeader title={<span id="runs-title">Runs</span>}>
        <span className="muted small" aria-live="polite">
          {first.loading ? 'Refreshing…' : `${runs.length} shown · refreshes every 5 s`}
        </span>
      </PageHeader>
      <form className="filters" role="search" aria-label="Filter runs" onSubmit={(event) => event.preventDefault()}>
        <label>
          State
          <select value={search.get('state') ?? ''} onChange={(event) => setParam('state', event.target.value)} name="state">
            <option value="">All states</option>
            {RUN_STATES.map((state) => (
              <option key={state} value={state}>
                {state.replace(/_/g, ' ')}
              </option>
            ))}
          </select>
        </label>
        <label>
          Created
          <select value={search.get('window') ?? ''} onChange={(event) => setParam('window', event.target.value)} name="window">
            {WINDOWS.map((w) => (
              <option key={w.value} value={w.value}>
                {w.label}
              </option>
            ))}
          </select>
        </label>
        {search.get('window') === 'custom' ? (
          <>
            <label>
              From
              <input type="datetime-local" value={search.get('from') ?? ''} onChange={(event) => setParam('from', event.target.value)} />
            </label>
            <label>
              To
              <input type="datetime-local" value={search.get('to') ?? ''} onChange={(event) => setParam('to', event.target.value)} />
            </label>
          </>
        ) : null}
        <p className="muted small">The runs of this key's tenant. ↑/↓ or j/k move between rows, Enter opens one.</p>
      </form>
      <ErrorBanner error={first.error} />
      {runs.length === 0 && !first.loading ? <EmptyState title="No runs match">Submit one with the CLI: <code>cairn run spec.json</code>.</EmptyState> : <RunsTable runs={runs} />}
      {cursor === null ? null : (
        <button type="button" className="button" onClick={() => void loadMore()}>
          Load older runs
        </button>
      )}
    </section>
  );
}

/**
 * A table whose rows are links for the keyboard: one row is in the tab order (roving tabindex);
 * arrows, j/k, Home/End move between rows and Enter opens the run.
 */
function RunsTable({ runs }: { runs: Run[] }) {
  const [active, setActive] = useState(0);
  const rows = useRef<(HTMLTableRowElement | null)[]>([]);
  const focusRow = (index: number) => {
    const next = Math.max(0, Math.min(runs.length - 1, index));
    setActive(next);
    rows.current[next]?.focus();
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTableRowElement>, index: number, runId: string) => {
    const moves: Record<string, number> = { ArrowDown: index + 1, j: index + 1, ArrowUp: index - 1, k: index - 1, Home: 0, End: runs.length - 1, PageDown: index + 10, PageUp: index - 10 };
    const target = moves[event.key];
    if (target !== undefined) {
      event.preventDefault();
      focusRow(target);
    } else if (event.key === 'Enter' || event.key === ' ') {
      event.preventDefault();
      navigate(`runs/${runId}`);
    }
  };
  return (
    <table className="table runs-table" aria-label="Runs">
      <thead>
        <tr>
          <th scope="col">Run</th>
          <th scope="col">State</th>
          <th scope="col">Verdict</th>
          <th scope="col">Grade</th>
          <th scope="col">Created</th>
          <th scope="col">Updated</th>
          <th scope="col" className="num">
            Receipts
          </th>
        </tr>
      </thead>
      <tbody>
        {runs.map((run, index) => (
          <tr
            key={run.runId}
            ref={(element) => {
              rows.current[index] = element;
            }}
            tabIndex={index === Math.min(active, runs.length - 1) ? 0 : -1}
            className="clickable"
            data-run-id={run.runId}
            aria-label={`${run.name ?? run.runId}, ${run.state}`}
            onClick={() => navigate(`runs/${run.runId}`)}
            onFocus={() => setActive(index)}
            onKeyDown={(event) => onKeyDown(event, index, run.runId)}
          >
            <td>
              <div className="strong">{run.name ?? <span className="muted">unnamed</span>}</div>
              <code className="small muted">{run.runId}</code>
            </td>
            <td>
              <StatePill state={run.state} title={errorText(run.errorCode) ?? run.errorCode ?? undefined} />
              {run.errorCode === null ? null : <code className="small error-code">{run.errorCode}</code>}
              {run.queue === undefined ? null : <span className="small muted queue-spot">{queueText(run.queue)}</span>}
            </td>
            <td>{run.verdict === null ? <span className="muted">—</span> : <StatePill state={run.verdict} />}</td>
            <td>{grade(run)}</td>
            <td>
              <Time iso={run.createdAt} />
            </td>
            <td>
              <Time iso={run.updatedAt} />
            </td>
            <td className="num">{run.eventCount}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
