import { useState } from 'react';
import { PROOF_LINES } from './bundle-check.js';
import type { BundleCheck, BundleLine, ProofLineName } from './bundle-check.js';

export const PROOF_LINE_LABELS: Record<ProofLineName, string> = {
  chain: 'Chain',
  signature: 'Seal signature',
  checkpoint: 'Checkpoint signature',
  leaf: "The log's leaf is this chain's head",
  inclusion: 'Inclusion in the log',
};

function Line({ name, line }: { name: ProofLineName; line: BundleLine }) {
  const tone = line.status === 'verified' ? 'text-ok' : line.status === 'failed' ? 'text-bad' : 'muted';
  const mark = line.status === 'verified' ? '✓' : line.status === 'failed' ? '✗' : '–';
  return (
    <li data-proof-line={name} data-status={line.status} data-reason={line.status === 'failed' ? line.reason : undefined} className={tone}>
      <span aria-hidden="true">{mark}</span> {PROOF_LINE_LABELS[name]}:{' '}
      {line.status === 'verified' ? 'verified' : line.status === 'failed' ? <strong>{line.reason.replace(/_/g, ' ')}</strong> : 'not checked'}
      <span className="small muted"> — {line.message}</span>
    </li>
  );
}

/** One line for each guarantee; `data-proof-line` / `data-status` / `data-reason` carry them for tests and scripts. */
export function ProofLines({ check }: { check: BundleCheck }) {
  return (
    <ul className="checks" aria-label="Proof checks">
      {PROOF_LINES.map((name) => (
        <Line key={name} name={name} line={check.lines[name]} />
      ))}
    </ul>
  );
}

/** Saves a bundle this page holds as a file, for `cairn verify <file>` or this page's offline check. */
export function DownloadBundle({ document, name }: { document: Record<string, unknown>; name: string }) {
  const [saved, setSaved] = useState(false);
  const save = () => {
    const url = URL.createObjectURL(new Blob([`${JSON.stringify(document)}\n`], { type: 'application/json' }));
    const anchor = window.document.createElement('a');
    anchor.href = url;
    anchor.download = name;
    anchor.click();
    window.setTimeout(() => URL.revokeObjectURL(url), 1000);
    setSaved(true);
  };
  return (
    <button type="button" className="button" onClick={save}>
      {saved ? 'Saved' : 'Download the bundle'} <span className="small muted">({name})</span>
    </button>
  );
}
