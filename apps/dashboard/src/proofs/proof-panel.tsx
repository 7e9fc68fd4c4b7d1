import { useEffect, useState } from 'react';
import { cairn, errorLine, isCairnError } from '../api/cairn.js';
import { webCryptoAvailable } from '../chain/verify-chain.js';
import { Link } from '../router.js';
import { assembleBundleV2, BUNDLE_V2_FORMAT, checkBundle, parseTrustedKeys } from './bundle-check.js';
import type { BundleCheck } from './bundle-check.js';
import { DownloadBundle, ProofLines } from './proof-lines.js';

/*
 * The proof panel of a sealed run or sandbox: its cairn.bundle/v2 put together from the gateway's
 * parts (the bundle, the inclusion proof with its checkpoint, the published seal keys — what
 * `cairn export --bundle` fetches), then checked here, line by line. The keys are the ones this
 * deployment publishes: the panel shows the deployment is consistent with itself; an auditor pins
 * a key (the "Verify a bundle" page, or `cairn verify --key`).
 */

/** A seal is appended to the log shortly after it is written: a not-yet-logged chain is asked again. */
const NOT_LOGGED_RETRIES = 30;
const RETRY_MS = 1000;

type PanelState =
  | { kind: 'checking' }
  | { kind: 'unavailable'; message: string }
  | { kind: 'error'; message: string }
  | { kind: 'checked'; check: BundleCheck; document: Record<string, unknown>; keys: string[] };

function notLogged(error: unknown): boolean {
  return isCairnError(error) && error.code === 'E_NOT_FOUND' && error.details?.reason === 'not_logged';
}

async function inclusionOf(chainId: string, stopped: () => boolean): Promise<unknown> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await cairn.tlog.inclusion(chainId);
    } catch (error) {
      if (!notLogged(error) || attempt >= NOT_LOGGED_RETRIES || stopped()) throw error;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

async function loadAndCheck(chainId: string, stopped: () => boolean): Promise<PanelState> {
  const [bundle, published] = await Promise.all([cairn.chains.bundle(chainId), cairn.operator.sealKeys()]);
  const receipts = bundle.receipts as unknown[];
  const seal = receipts.at(-1) as Record<string, unknown> | undefined;
  if (seal?.type === 'run.sealed' && seal.signature === undefined) {
    return { kind: 'unavailable', message: 'The seal is not signed (the grader had no seal key): there is no log proof for this chain.' };
  }
  const inclusion = await inclusionOf(chainId, stopped);
  const keys = published.keys.map((k) => k.key);
  const document = assembleBundleV2(bundle as unknown as Record<string, unknown>, inclusion, keys);
  const trusted = await parseTrustedKeys(keys);
  return { kind: 'checked', check: await checkBundle(document, trusted.verifiers), document, keys };
}

export function ProofPanel({ chainId, sealed }: { chainId: string; sealed: boolean }) {
  const [state, setState] = useState<PanelState>({ kind: 'checking' });
  useEffect(() => {
    if (!sealed) return undefined;
    if (!webCryptoAvailable()) {
      setState({ kind: 'unavailable', message: 'Not checked: this page is not in a secure context (use HTTPS or localhost).' });
      return undefined;
    }
    let stopped = false;
    setState({ kind: 'checking' });
    loadAndCheck(chainId, () => stopped).then(
      (next) => !stopped && setState(next),
      (error: unknown) => !stopped && setState({ kind: 'error', message: errorLine(error) }),
    );
    return () => {
      stopped = true;
    };
  }, [chainId, sealed]);

  if (!sealed) return null;
  const dataProof = state.kind === 'checked' ? (state.check.ok ? 'verified' : 'failed') : state.kind;
  return (
    <section className="panel" aria-labelledby="proof-title" data-proof={dataProof}>
      <h2 id="proof-title">Proof ({BUNDLE_V2_FORMAT}), checked in this browser</h2>
      {state.kind === 'checking' ? <p className="muted">Fetching the bundle, the inclusion proof and the seal keys…</p> : null}
      {state.kind === 'unavailable' ? <p className="muted">{state.message}</p> : null}
      {state.kind === 'error' ? (
        <p className="banner banner-bad" role="alert">
          {state.message}
        </p>
      ) : null}
      {state.kind !== 'checked' ? null : (
        <>
          <ProofLines check={state.check} />
          <p className="small muted">
            Against the keys this deployment publishes ({state.keys.length === 0 ? 'none' : state.keys.map((k) => k.split('+', 2).join('+')).join(', ')}). To check against a key you pinned, save the
            bundle and open it in <Link to="verify">Verify a bundle</Link>, or run <code>cairn verify --key &lt;key&gt; {chainId}.bundle.json</code>.
          </p>
          <DownloadBundle document={state.document} name={`${chainId}.bundle.json`} />
        </>
      )}
    </section>
  );
}
