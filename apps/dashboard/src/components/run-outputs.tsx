import type { OutputStream } from '@cairn/contracts';
import { isCairnError } from '@cairn/sdk/client';
import type { Bytes } from '@cairn/sdk/client';
import { useState } from 'react';
import { cairn, checksHere } from '../api/cairn.js';
import { formatBytes } from './ui.js';

/*
 * What a run printed and wrote, read on demand through @cairn/sdk: the gateway serves only bytes
 * that hash to the sha256 on the chain, and this page checks them again (WebCrypto) before showing
 * them. Text is shown as text (never as HTML); other bytes are offered as a download.
 */

/** The most shown in the page; a larger output is cut to `cairn logs` / a download. */
const SHOW_MAX_BYTES = 4 * 1024 * 1024;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

type Loaded = { state: 'idle' } | { state: 'loading' } | { state: 'ok'; read: Bytes; text: string | null } | { state: 'error'; message: string };

function describe(error: unknown): string {
  if (isCairnError(error)) return error.code === 'E_INTERNAL' ? `${error.code}: refused — ${error.message}` : `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : 'could not be read';
}

function textOf(bytes: Uint8Array): string | null {
  try {
    return UTF8.decode(bytes);
  } catch {
    return null;
  }
}

function download(name: string, read: Bytes): void {
  const url = URL.createObjectURL(new Blob([read.bytes as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name.split('/').pop() ?? 'artifact';
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function Shown({ loaded, name }: { loaded: Loaded; name: string }) {
  if (loaded.state === 'idle') return null;
  if (loaded.state === 'loading') return <p className="muted small">reading…</p>;
  if (loaded.state === 'error') {
    return (
      <p className="text-bad small" role="alert" data-output-error="true">
        {loaded.message}
      </p>
    );
  }
  const check = checksHere ? `sha256 ${loaded.read.sha256.slice(0, 12)}… checked in this browser` : 'checked by the gateway (no WebCrypto here to check again)';
  return (
    <div className="output" data-output-loaded="true">
      <p className="muted small">
        {formatBytes(loaded.read.bytes.byteLength)} · {check}
      </p>
      {loaded.text === null ? (
        <button type="button" className="button" onClick={() => download(name, loaded.read)}>
          Download (not text)
        </button>
      ) : loaded.text === '' ? (
        <p className="muted small">(empty)</p>
      ) : (
        <pre className="output-text">{loaded.text}</pre>
      )}
    </div>
  );
}

function useRead(read: () => Promise<Bytes>): [Loaded, () => void] {
  const [loaded, setLoaded] = useState<Loaded>({ state: 'idle' });
  const load = () => {
    if (loaded.state === 'loading' || loaded.state === 'ok') return;
    setLoaded({ state: 'loading' });
    read().then(
      (bytes) => setLoaded({ state: 'ok', read: bytes, text: textOf(bytes.bytes) }),
      (error: unknown) => setLoaded({ state: 'error', message: describe(error) }),
    );
  };
  return [loaded, load];
}

/** One step's stream, read when its disclosure is opened. */
export function StepStream({ runId, step, stream, sha256 }: { runId: string; step: number; stream: OutputStream; sha256: string | null }) {
  const [loaded, load] = useRead(() => cairn.runs.output(runId, step, stream, { maxBytes: SHOW_MAX_BYTES, ...(sha256 === null ? {} : { expectedSha256: sha256 }) }));
  return (
    <details className="output-stream" data-step-output={`${step}.${stream}`} onToggle={(event) => (event.currentTarget.open ? load() : undefined)}>
      <summary>{stream}</summary>
      <Shown loaded={loaded} name={`step-${step}.${stream}`} />
    </details>
  );
}

/** A collected file, read when asked for. */
export function ArtifactView({ runId, path, sha256 }: { runId: string; path: string; sha256: string }) {
  const [loaded, load] = useRead(() => cairn.runs.artifact(runId, path, { maxBytes: SHOW_MAX_BYTES, expectedSha256: sha256 }));
  return (
    <details className="output-stream" data-artifact-output={path} onToggle={(event) => (event.currentTarget.open ? load() : undefined)}>
      <summary>show</summary>
      <Shown loaded={loaded} name={path} />
    </details>
  );
}
