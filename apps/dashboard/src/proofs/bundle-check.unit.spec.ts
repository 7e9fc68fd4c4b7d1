import * as evidence from '@cairn/evidence';
import { formatVerifierKey, fromBase64, fromHex, generateSigner, leafHash, MerkleTree, openNote, parseSignerKey, parseVerifierKey, sealLeafHash, signCheckpoint, signSealStatement, toBase64, verifyInclusion } from '@cairn/transparency';
import type { NoteSigner, SealStatement } from '@cairn/transparency';
import { describe, expect, it } from 'vitest';
import { assembleBundleV2, checkBundle, parseBundleText, parseTrustedKeys } from './bundle-check.js';
import type { BundleCheck } from './bundle-check.js';

/*
 * The browser's bundle check (what the proof panel and "Verify a bundle" run), on a chain made as
 * the services make one: its receipts hashed by libs/evidence, its seal signed and logged by
 * @cairn/transparency, then each guarantee broken in turn.
 */

/* golang.org/x/mod/sumdb/note's test key and signature, and transparency-dev/merkle's vectors: known answers from elsewhere. */
const PETER_SIGNER = 'PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz';
const PETER = 'PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW';
const NOTE = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
const LEAVES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'];
const ROOT_8 = '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328';
const PATH_6_OF_8 = ['bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b', 'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0', 'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7'];

const CHAIN = 'run_01jbrowsercheck0000000000';

/** `between`: receipt bodies added after the step, before the seal. */
async function sealedChain(signer: NoteSigner, between: readonly Record<string, unknown>[] = []): Promise<{ receipts: Record<string, unknown>[]; statement: SealStatement }> {
  const receipts: Record<string, unknown>[] = [];
  let prev = '0'.repeat(64);
  const add = (body: Record<string, unknown>) => {
    const receipt = evidence.sealReceipt(prev, { v: 1, seq: receipts.length + 1, run_id: CHAIN, ts: '2026-12-02T12:00:00.000Z', actor: 'test', ...body });
    receipts.push(receipt);
    prev = receipt.hash;
  };
  add({ type: 'run.submitted', name: 'browser check' });
  add({ type: 'step.completed', index: 0, exit_code: 0 });
  for (const body of between) add(body);
  const statement: SealStatement = { chainId: CHAIN, headSeq: receipts.length, headHash: prev, evidenceDigest: 'e'.repeat(64), finalState: 'SEALED' };
  add({ type: 'run.sealed', final_state: 'SEALED', evidence_digest: statement.evidenceDigest, signature: await signSealStatement(statement, signer) });
  return { receipts, statement };
}

/** A v2 bundle whose seal is leaf 2 of a log of 5, as the gateway's parts make it. */
async function bundleV2(signer: NoteSigner, between: readonly Record<string, unknown>[] = []): Promise<Record<string, unknown>> {
  const { receipts, statement } = await sealedChain(signer, between);
  const tree = new MerkleTree();
  for (let i = 0; i < 5; i++) {
    await tree.append(i === 2 ? await sealLeafHash(statement) : await leafHash(new TextEncoder().encode(`another seal ${i}`)));
  }
  const inclusion = { chainId: CHAIN, leafIndex: 2, treeSize: 5, leafHash: toBase64(tree.leaf(2)), hashes: (await tree.inclusionProof(2)).map(toBase64), checkpoint: await signCheckpoint(5, await tree.root(), signer) };
  const v1 = { format: 'cairn.bundle/v1', runId: CHAIN, headHash: receipts.at(-1)?.hash, verdict: null, grade: null, artifacts: {}, receipts };
  return assembleBundleV2(v1, inclusion, [PETER]);
}

const statuses = (check: BundleCheck) => Object.fromEntries(Object.entries(check.lines).map(([name, line]) => [name, line.status === 'failed' ? line.reason : line.status]));
const flip = (base64: string, at = 0) => {
  const raw = fromBase64(base64);
  raw[at] = raw[at]! ^ 1;
  return toBase64(raw);
};

describe('the known answers, through the code the page bundles', () => {
  it("opens the note package's signed note with its key, and not once one byte changed", async () => {
    const peter = await parseVerifierKey(PETER);
    expect(await openNote(NOTE, [peter])).toMatchObject({ ok: true });
    expect(await openNote(NOTE.replace('answer', 'Answer'), [peter])).toMatchObject({ ok: false, reason: 'invalid_signature' });
  });

  it('verifies the RFC 6962 inclusion proof of leaf 6 in the tree of 8 (transparency-dev/merkle)', async () => {
    const leaf = await leafHash(fromHex(LEAVES[5]!));
    expect(await verifyInclusion(5, 8, leaf, PATH_6_OF_8.map((h) => fromHex(h)), fromHex(ROOT_8))).toBe(true);
    expect(await verifyInclusion(4, 8, leaf, PATH_6_OF_8.map((h) => fromHex(h)), fromHex(ROOT_8))).toBe(false);
  });
});

describe('a proof bundle checked in the browser', () => {
  it('verifies every line of a sealed, logged chain against the pinned key', async () => {
    const signer = await parseSignerKey(PETER_SIGNER);
    const document = await bundleV2(signer);
    const { verifiers } = await parseTrustedKeys([PETER]);
    const check = await checkBundle(document, verifiers);
    expect(statuses(check)).toEqual({ chain: 'verified', signature: 'verified', checkpoint: 'verified', leaf: 'verified', inclusion: 'verified' });
    expect(check).toMatchObject({ ok: true, format: 'cairn.bundle/v2', chainId: CHAIN });
    // The bundle it saves reads back as the same bundle.
    const reread = parseBundleText(JSON.stringify(document));
    expect(reread.ok && (await checkBundle(reread.document, verifiers)).ok).toBe(true);
  });

  it('turns the one line whose guarantee broke, with its reason', async () => {
    const signer = await parseSignerKey(PETER_SIGNER);
    const document = await bundleV2(signer);
    const { verifiers } = await parseTrustedKeys([PETER]);
    const inclusion = document.inclusion as { hashes: string[]; checkpoint: string; leafHash: string };
    const ok = 'verified';
    const run = async (changed: Record<string, unknown>, keys = verifiers) => {
      const check = await checkBundle({ ...document, ...changed }, keys);
      expect(check.ok).toBe(false);
      return statuses(check);
    };

    expect(await run({ inclusion: { ...inclusion, hashes: [flip(inclusion.hashes[0]!, 7), ...inclusion.hashes.slice(1)] } })).toEqual({ chain: ok, signature: ok, checkpoint: ok, leaf: ok, inclusion: 'inclusion_invalid' });
    const lines = inclusion.checkpoint.split('\n');
    lines[2] = flip(lines[2]!, 3);
    expect(await run({ inclusion: { ...inclusion, checkpoint: lines.join('\n') } })).toEqual({ chain: ok, signature: ok, checkpoint: 'checkpoint_signature_invalid', leaf: ok, inclusion: 'skipped' });
    expect(await run({ inclusion: { ...inclusion, leafHash: flip(inclusion.leafHash) } })).toEqual({ chain: ok, signature: ok, checkpoint: ok, leaf: 'leaf_mismatch', inclusion: 'skipped' });
    expect(await run({ sealSignature: { ...(document.sealSignature as object), signature: flip((document.sealSignature as { signature: string }).signature, 20) } })).toMatchObject({ signature: 'bundle_signature_mismatch' });
    // Another key than the one pinned signed it all.
    const { signer: other } = await generateSigner('PeterNeumann');
    const stranger = await parseTrustedKeys([await formatVerifierKey(other.name, other.publicKey)]);
    expect(await run({}, stranger.verifiers)).toEqual({ chain: ok, signature: 'seal_key_unknown', checkpoint: 'checkpoint_key_unknown', leaf: ok, inclusion: 'skipped' });
    expect(await run({}, [])).toMatchObject({ chain: ok, signature: 'no_trusted_key', checkpoint: 'no_trusted_key' });

    // A receipt changed: the chain breaks, and nothing after it is checked.
    const receipts = (document.receipts as Record<string, unknown>[]).map((r) => (r.seq === 2 ? { ...r, exit_code: 1 } : r));
    expect(await run({ receipts })).toEqual({ chain: 'hash_mismatch', signature: 'skipped', checkpoint: 'skipped', leaf: 'skipped', inclusion: 'skipped' });
    expect((await run({ headHash: 'f'.repeat(64) })).chain).toBe('head_mismatch');
    expect((await run({ runId: 'run_01jsomeoneelse000000000000' })).chain).toBe('run_id_mismatch');
    expect((await run({ receipts: [] })).chain).toBe('malformed');
  });

  it('fails the chain line of a bundle whose receipts verify but record that the chain was broken (ADR 0033), as cairn verify does', async () => {
    const signer = await parseSignerKey(PETER_SIGNER);
    const { verifiers } = await parseTrustedKeys([PETER]);
    const message = 'the message at stream seq 7 on cairn.evidence.run_01jbrowsercheck0000000000.step.completed, after seq 2, is not a receipt (not JSON)';
    const alert = { type: 'alert.raised', severity: 'critical', error_code: 'E_CHAIN_BROKEN', message };
    const document = await bundleV2(signer, [alert, { type: 'run.failed', error_code: 'E_CHAIN_BROKEN', message }]);
    expect(evidence.verifyChain(document.receipts as unknown[])).toMatchObject({ ok: true, count: 5 });
    const check = await checkBundle(document, verifiers);
    expect(check.ok).toBe(false);
    expect(statuses(check)).toEqual({ chain: 'break_recorded', signature: 'skipped', checkpoint: 'skipped', leaf: 'skipped', inclusion: 'skipped' });
    expect(check.lines.chain.message).toBe(`the receipts verify, but receipt #3 records that the chain was broken: ${message}`);
    // A warning alert is no recorded break: every line verifies.
    expect((await checkBundle(await bundleV2(signer, [{ ...alert, severity: 'warning' }]), verifiers)).ok).toBe(true);
  });

  it('checks a v1 bundle as far as it goes, and says it carries no log proof', async () => {
    const signer = await parseSignerKey(PETER_SIGNER);
    const { format: _v2, inclusion: _i, sealSignature: _s, sealKeys: _k, ...v1 } = await bundleV2(signer);
    const check = await checkBundle({ ...v1, format: 'cairn.bundle/v1' }, (await parseTrustedKeys([PETER])).verifiers);
    expect(statuses(check)).toEqual({ chain: 'verified', signature: 'verified', checkpoint: 'skipped', leaf: 'skipped', inclusion: 'skipped' });
    expect(check.ok).toBe(false);
    expect(check.lines.inclusion.message).toContain('no log proof');
  });

  it('refuses what is not a bundle, and keys that do not parse', async () => {
    expect(parseBundleText('{')).toMatchObject({ ok: false });
    expect(parseBundleText('[]')).toMatchObject({ ok: false, message: 'a proof bundle is one JSON object' });
    expect(parseBundleText('{"format":"cairn.bundle/v9","receipts":[]}')).toMatchObject({ ok: false });
    expect(parseBundleText('{"format":"cairn.bundle/v2"}')).toMatchObject({ ok: false, message: 'a proof bundle needs a receipts array' });
    expect(parseBundleText('\uFEFF{"format":"cairn.bundle/v1","receipts":[]}')).toMatchObject({ ok: true });
    const keys = await parseTrustedKeys(['# pinned', '', PETER, PETER.replace('c74f20a3', 'c74f20a4'), 'nonsense']);
    expect(keys.verifiers.map((v) => v.name)).toEqual(['PeterNeumann']);
    expect(keys.errors).toHaveLength(2);
  });
});
