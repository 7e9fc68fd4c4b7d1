import type { ReactNode } from 'react';
import { errorLine } from '../api/cairn.js';

/** Small building blocks shared by the pages. */

const STATE_TONE: Readonly<Record<string, string>> = {
  SUBMITTED: 'info',
  AWAITING_APPROVAL: 'warn',
  SCHEDULED: 'info',
  RUNNING: 'info',
  EXECUTED: 'info',
  VERIFIED: 'info',
  GRADED: 'info',
  SEALED: 'ok',
  FAILED: 'bad',
  ROLLBACK: 'bad',
  REJECTED: 'bad',
  CANCELLED: 'muted',
  READY: 'ok',
  PENDING: 'info',
  DESTROYED: 'muted',
  SUPPORTS: 'ok',
  INCONCLUSIVE: 'warn',
};

export function StatePill({ state, title }: { state: string; title?: string }) {
  return (
    <span className={`pill pill-${STATE_TONE[state] ?? 'muted'}`} title={title} data-state={state}>
      {state.replace(/_/g, ' ')}
    </span>
  );
}

/** A time as "3 min ago", with the exact UTC instant on hover and for screen readers. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (iso === null || iso === undefined) return <span className="muted">—</span>;
  return (
    <time dateTime={iso} title={iso}>
      {relativeTime(iso)}
    </time>
  );
}

export function relativeTime(iso: string, now = Date.now()): string {
  const seconds = Math.round((now - Date.parse(iso)) / 1000);
  const future = seconds < 0;
  const s = Math.abs(seconds);
  const text = s < 5 ? 'just now' : s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min` : s < 86_400 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 86_400)} d`;
  return text === 'just now' ? text : future ? `in ${text}` : `${text} ago`;
}

/** A sha256 shown short, whole on hover and when copied. */
export function Hash({ value }: { value: string | null | undefined }) {
  if (value === null || value === undefined) return <span className="muted">—</span>;
  return (
    <code className="hash" title={value}>
      {value.replace(/^sha256:/, '').slice(0, 12)}…
    </code>
  );
}

export function Argv({ argv }: { argv: readonly string[] }) {
  return <code className="argv">{argv.map((arg) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`)).join(' ')}</code>;
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty" role="status">
      <p className="empty-title">{title}</p>
      {children}
    </div>
  );
}

export function ErrorBanner({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  const text = errorLine(error, (other) => (other instanceof Error ? other.message : 'something went wrong'));
  return (
    <div className="banner banner-bad" role="alert">
      {text}
    </div>
  );
}

export function PageHeader({ title, children }: { title: ReactNode; children?: ReactNode }) {
  return (
    <header className="page-header">
      <h1>{title}</h1>
      {children === undefined ? null : <div className="page-actions">{children}</div>}
    </header>
  );
}

export function Card({ label, children, tone }: { label: string; children: ReactNode; tone?: string }) {
  return (
    <div className={`card${tone === undefined ? '' : ` card-${tone}`}`}>
      <div className="card-label">{label}</div>
      <div className="card-value">{children}</div>
    </div>
  );
}

export function formatBytes(bytes: number | null): string {
  if (bytes === null) return '—';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
