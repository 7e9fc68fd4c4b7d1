import type { ChainCheck } from '../chain/verify-chain.js';

export type BadgeState = { kind: 'checking' } | { kind: 'unavailable' } | { kind: 'checked'; check: ChainCheck; serverHeadHash: string | null };

/**
 * The chain badge: green only when this browser recomputed every receipt's hash from genesis
 * (and, when the server's projection has as many receipts, its head hash agrees); red at the first
 * receipt that does not hold. `data-chain` carries the state for tests and scripts.
 */
export function ChainBadge({ state }: { state: BadgeState }) {
  if (state.kind === 'checking') {
    return (
      <span className="badge badge-muted" data-chain="checking" role="status">
        Checking chain…
      </span>
    );
  }
  if (state.kind === 'unavailable') {
    return (
      <span className="badge badge-muted" data-chain="unavailable" role="status" title="WebCrypto needs HTTPS or localhost">
        Chain not checked: this page is not in a secure context (use HTTPS or localhost)
      </span>
    );
  }
  const { check, serverHeadHash } = state;
  if (!check.ok) {
    return (
      <span className="badge badge-bad" data-chain="broken" role="alert" title={check.message}>
        <span aria-hidden="true">✗</span> Chain broken at receipt #{check.firstBadSeq}: {check.reason.replace(/_/g, ' ')} — {check.message}
      </span>
    );
  }
  if (serverHeadHash !== null && serverHeadHash !== check.headHash) {
    return (
      <span className="badge badge-bad" data-chain="head-mismatch" role="alert">
        <span aria-hidden="true">✗</span> The receipts verify, but the server reports another head hash ({serverHeadHash.slice(0, 12)}…)
      </span>
    );
  }
  return (
    <span className="badge badge-ok" data-chain="verified" role="status" title={`head ${check.headHash}`}>
      <span aria-hidden="true">✓</span> Chain verified in this browser: {check.count} receipts, head {check.headHash.slice(0, 12)}…
    </span>
  );
}
