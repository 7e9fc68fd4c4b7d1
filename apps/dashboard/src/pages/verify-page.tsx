import { useEffect, useState } from 'react';
import type { DragEvent } from 'react';
import { cairn } from '../api/cairn.js';
import { webCryptoAvailable } from '../chain/verify-chain.js';
import { PageHeader } from '../components/ui.js';
import { checkBundle, MAX_BUNDLE_BYTES, parseBundleText, parseTrustedKeys } from '../proofs/bundle-check.js';
import type { BundleCheck } from '../proofs/bundle-check.js';
import { ProofLines } from '../proofs/proof-lines.js';

/*
 * "Verify a bundle": a proof bundle dropped, chosen or pasted, checked in this tab against the keys
 * in the trust box — nothing is sent anywhere (the one request is this gateway's public seal keys,
 * to fill the box; replace them with the key you pinned). Open to anyone, signed in or not.
 */

type Outcome = { kind: 'idle' } | { kind: 'checking' } | { kind: 'refused'; message: string } | { kind: 'checked'; check: BundleCheck; keyErrors: string[] };

export function VerifyPage() {
  const [keysText, setKeysText] = useState('');
  const [pasted, setPasted] = useState('');
  const [outcome, setOutcome] = useState<Outcome>({ kind: 'idle' });
  const [dragging, setDragging] = useState(false);

  // The box starts with what this gateway publishes (public, no key needed); an auditor pastes their own.
  useEffect(() => {
    let stopped = false;
    cairn.operator.sealKeys().then(
      ({ keys }) => !stopped && setKeysText((current) => (current === '' ? keys.map((k) => k.key).join('\n') : current)),
      () => undefined,
    );
    return () => {
      stopped = true;
    };
  }, []);

  const verify = async (text: string) => {
    if (!webCryptoAvailable()) {
      setOutcome({ kind: 'refused', message: 'This page is not in a secure context (use HTTPS or localhost): WebCrypto is not available.' });
      return;
    }
    setOutcome({ kind: 'checking' });
    const parsed = parseBundleText(text);
    if (!parsed.ok) {
      setOutcome({ kind: 'refused', message: parsed.message });
      return;
    }
    const trusted = await parseTrustedKeys(keysText.split('\n'));
    setOutcome({ kind: 'checked', check: await checkBundle(parsed.document, trusted.verifiers), keyErrors: trusted.errors });
  };

  const readFile = async (file: File | undefined) => {
    if (file === undefined) return;
    if (file.size > MAX_BUNDLE_BYTES) {
      setOutcome({ kind: 'refused', message: `${file.name} is ${file.size} bytes: a bundle read here is at most ${MAX_BUNDLE_BYTES / 1024 / 1024} MiB (use cairn verify)` });
      return;
    }
    await verify(await file.text());
  };

  const onDrop = (event: DragEvent) => {
    event.preventDefault();
    setDragging(false);
    void readFile(event.dataTransfer.files[0]);
  };

  const check = outcome.kind === 'checked' ? outcome.check : null;
  return (
    <section aria-labelledby="verify-title">
      <PageHeader title={<span id="verify-title">Verify a bundle</span>} />
      <p className="muted">
        A <code>cairn.bundle/v2</code> (<code>cairn export --bundle</code>, or a run&apos;s proof panel) is checked here, in this tab: its chain from genesis, the seal&apos;s signature, the checkpoint&apos;s
        signature, that the log&apos;s leaf is the chain&apos;s head, and its inclusion in the log. Nothing is uploaded. A <code>cairn.bundle/v1</code> is checked too, and says what it does not prove.
      </p>
      <label htmlFor="trusted-keys">Trusted seal keys, one a line (<code>name+keyid+base64</code>)</label>
      <textarea id="trusted-keys" className="mono-input" rows={3} spellCheck={false} value={keysText} onChange={(event) => setKeysText(event.target.value)} />
      <p className="small muted">Filled with the keys this gateway publishes. Checking against a key you pinned (from a trust file, or given to you out of band) is what proves who sealed the bundle.</p>

      <div
        className={`dropzone${dragging ? ' dropzone-active' : ''}`}
        data-dropzone=""
        onDragOver={(event) => {
          event.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={onDrop}
      >
        <label htmlFor="bundle-file">Drop a bundle file here, or choose one</label>
        <input id="bundle-file" type="file" accept=".json,application/json" onChange={(event) => void readFile(event.target.files?.[0])} />
      </div>
      <label htmlFor="bundle-text">Or paste the bundle&apos;s JSON</label>
      <textarea id="bundle-text" className="mono-input" rows={4} spellCheck={false} value={pasted} onChange={(event) => setPasted(event.target.value)} />
      <button type="button" className="button button-primary" disabled={pasted.trim() === ''} onClick={() => void verify(pasted)}>
        Check the pasted bundle
      </button>

      <div data-verify-outcome={outcome.kind === 'checked' ? (outcome.check.ok ? 'verified' : 'failed') : outcome.kind}>
        {outcome.kind === 'checking' ? <p className="muted">Checking…</p> : null}
        {outcome.kind === 'refused' ? (
          <p className="banner banner-bad" role="alert">
            Not a bundle this page can check: {outcome.message}
          </p>
        ) : null}
        {check === null ? null : (
          <section className="panel" aria-labelledby="verify-result-title">
            <h2 id="verify-result-title">
              {check.format} of <code>{check.chainId ?? '?'}</code>: {check.ok ? 'verified' : 'not verified'}
            </h2>
            <ProofLines check={check} />
            {outcome.kind === 'checked' && outcome.keyErrors.length > 0 ? (
              <p className="small text-bad">Keys left out: {outcome.keyErrors.join('; ')}</p>
            ) : null}
          </section>
        )}
      </div>
    </section>
  );
}
