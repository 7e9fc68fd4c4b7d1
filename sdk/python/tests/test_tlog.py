"""The log of seal heads from Python: ``tlog.checkpoint()``, ``tlog.inclusion()``, ``tlog.consistency()`` (sync and
async) against the real stack, and ``cairn_sdk.tlog``'s offline tree math held to the RFC 6962 known answers."""

from __future__ import annotations

import asyncio
import base64
import time

import pytest

from cairn_sdk import AsyncCairn, Cairn, errors
from cairn_sdk.models import TlogInclusionProof
from cairn_sdk.tlog import check_inclusion, leaf_hash, parse_checkpoint, root_from_inclusion_proof, seal_leaf_hash, seal_statement_text, verify_consistency, verify_inclusion
from helpers import BUSYBOX

# transparency-dev/merkle (Apache-2.0): testonly/constants.go leaf inputs and roots, proof/verify_test.go proofs.
LEAVES = [bytes.fromhex(h) for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"]]
ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
INCLUSION = [
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (3, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (2, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
]
CONSISTENCY = [
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f", "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
]
SPEC = {"name": "python sdk: logged", "image": BUSYBOX, "steps": [{"argv": ["echo", "logged"]}], "caps": {"wallSeconds": 30, "memoryMiB": 64, "pids": 32, "diskMiB": 16, "cpus": 0.5}}


def hexes(values: list[str]) -> list[bytes]:
    return [bytes.fromhex(v) for v in values]


def flip(b64: str, at: int = 0) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def test_the_tree_math_gives_the_rfc_6962_known_answers() -> None:
    leaves = [leaf_hash(d) for d in LEAVES]
    for index, size, proof in INCLUSION:
        root = bytes.fromhex(ROOTS[size])
        assert verify_inclusion(index - 1, size, leaves[index - 1], hexes(proof), root)
        assert root_from_inclusion_proof(index - 1, size, leaves[index - 1], hexes(proof)) == root
        # Another leaf, another index, a changed hash: each fails.
        assert not verify_inclusion(index - 1, size, leaves[index % 8], hexes(proof), root)
        assert not verify_inclusion((index % size), size, leaves[index - 1], hexes(proof), root)
        if proof:
            changed = hexes(proof)
            changed[0] = bytes([changed[0][0] ^ 1]) + changed[0][1:]
            assert not verify_inclusion(index - 1, size, leaves[index - 1], changed, root)
    for size1, size2, proof in CONSISTENCY:
        assert verify_consistency(size1, size2, hexes(proof), bytes.fromhex(ROOTS[size1]), bytes.fromhex(ROOTS[size2]))
        assert not verify_consistency(size1, size2, hexes(proof)[1:], bytes.fromhex(ROOTS[size1]), bytes.fromhex(ROOTS[size2]))
        assert not verify_consistency(size1, size2, hexes(proof), bytes.fromhex(ROOTS[size2]), bytes.fromhex(ROOTS[size1]))
    assert not verify_consistency(8, 6, [], bytes.fromhex(ROOTS[8]), bytes.fromhex(ROOTS[6]))
    with pytest.raises(errors.Input):
        verify_inclusion(-1, 8, leaves[0], [], bytes(32))


def test_checkpoints_and_seal_statements_read_as_the_formats_say() -> None:
    # c2sp.org/tlog-checkpoint's example, signed note and all.
    note = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
    checkpoint = parse_checkpoint(note)
    assert (checkpoint.origin, checkpoint.size, base64.b64encode(checkpoint.root_hash).decode()) == ("example.com/behind-the-sofa", 20852163, "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
    for bad in ["origin\n007\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "origin\n1\nAAAA\n", "origin\n1\n", "\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"]:
        with pytest.raises(errors.Input):
            parse_checkpoint(bad)
    # The same five lines libs/transparency writes (seal-statement.unit.spec.ts).
    seal = {"type": "run.sealed", "run_id": "run_01jdemo", "seq": 18, "prev_hash": "a" * 64, "evidence_digest": "a" * 64, "final_state": "FAILED", "error_code": "E_TIMEOUT"}
    assert seal_statement_text(seal) == f"cairn.seal/v1\nchain run_01jdemo\nhead 17 {'a' * 64}\ndigest {'a' * 64}\nstate FAILED E_TIMEOUT\n"
    with pytest.raises(errors.Input):
        seal_statement_text({**seal, "run_id": "run with space"})


def inclusion_when_logged(client: Cairn, chain_id: str) -> TlogInclusionProof:
    """The grader appends a seal to the log just after writing it: ``not_logged`` is asked again, briefly."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return client.tlog.inclusion(chain_id)
        except errors.NotFound as error:
            if error.details.get("reason") != "not_logged" or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_sealed_runs_inclusion_checkpoint_and_consistency_from_the_stack(client: Cairn) -> None:
    first = client.runs.submit(SPEC).run_id
    second = client.runs.submit(SPEC).run_id
    for run_id in (first, second):
        assert client.runs.wait(run_id, timeout=90).state == "SEALED"
    seals = {run_id: [r for r in client.runs.events(run_id, follow=False) if r.type == "run.sealed"][-1].raw for run_id in (first, second)}

    proofs = {run_id: inclusion_when_logged(client, run_id) for run_id in (first, second)}
    # The later of the two leaves is not the log's first: its path has at least one hash.
    later, earlier = sorted((first, second), key=lambda run_id: proofs[run_id].leaf_index, reverse=True)
    proof = proofs[later]
    assert proof.chain_id == later and 1 <= proof.leaf_index < proof.tree_size and proof.hashes
    assert base64.b64decode(proof.leaf_hash) == seal_leaf_hash(seals[later])
    assert check_inclusion(proof, seals[later]).ok and check_inclusion(proofs[earlier], seals[earlier]).ok
    # A changed path hash, another run's seal, a proof for another size: each with its own reason.
    assert check_inclusion(proof.model_copy(update={"hashes": [flip(proof.hashes[0]), *proof.hashes[1:]]}), seals[later]).reason == "inclusion_invalid"
    assert check_inclusion(proof, {**seals[earlier], "run_id": later}).reason == "leaf_mismatch"
    assert check_inclusion(proof, seals[earlier]).reason == "proof_chain_mismatch"
    assert check_inclusion(proof.model_copy(update={"tree_size": proof.tree_size + 1})).reason == "tree_size_mismatch"

    # The latest checkpoint extends the one the proof came with.
    latest = client.tlog.checkpoint()
    assert latest.size >= proof.tree_size and parse_checkpoint(latest.checkpoint).size == latest.size
    older = parse_checkpoint(proof.checkpoint)
    consistency = client.tlog.consistency(older.size, latest.size)
    assert (consistency.from_size, consistency.to_size) == (older.size, latest.size)
    hashes = [base64.b64decode(h) for h in consistency.hashes]
    assert verify_consistency(older.size, latest.size, hashes, older.root_hash, base64.b64decode(latest.root_hash))
    assert consistency.model_dump(by_alias=True)["from"] == older.size

    with pytest.raises(errors.Input):
        client.tlog.consistency(2, 1)
    with pytest.raises(errors.NotFound):
        client.tlog.consistency(0, latest.size + 1000)
    with pytest.raises(errors.NotFound):
        client.tlog.inclusion("run_01jnosuchrun0000000000000")

    async def the_same_async() -> None:
        async with AsyncCairn() as aclient:
            served = await aclient.tlog.inclusion(later)
            assert (served.chain_id, served.leaf_index, served.leaf_hash) == (later, proof.leaf_index, proof.leaf_hash)
            assert check_inclusion(served, seals[later]).ok
            again = await aclient.tlog.checkpoint()
            assert again.size >= latest.size
            assert (await aclient.tlog.consistency(older.size, latest.size)) == consistency

    asyncio.run(the_same_async())
