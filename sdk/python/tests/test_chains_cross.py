"""The Python verifier and the TypeScript one (`cairn verify`'s own code) on the same files: real
chains exported with `cairn export` and real proof bundles, valid and tampered in every way a
verifier must catch. Both must reach the same verdict — ok with the same head, or broken at the
same seq for the same reason — on every one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn_sdk import Cairn, ChainBroken, ChainOk, receipt_hash, verify_file
from helpers import BUSYBOX, cairn_cli, run_node

RUN_SPEC = {
    # Text a canonicalizer must get right, on the chain: quotes, U+2028, an astral character, controls.
    "name": 'python cross-check: "quoted" \u2028 line-sep \U0001f600 end',
    "image": BUSYBOX,
    "steps": [{"name": "hello", "argv": ["sh", "-c", "printf 'caf\\303\\251\\n'"], "env": {"NOTE": "é ☃ \u2029"}}],
    "caps": {"wallSeconds": 30, "memoryMiB": 64, "pids": 32, "diskMiB": 16, "cpus": 0.5},
    "checks": [{"id": "ran", "source": "steps[0].exit_code", "op": "eq", "value": 0, "weight": 1.5}],
}


def _export(chain_id: str, path: Path) -> list[str]:
    done = cairn_cli("export", chain_id, "-o", str(path), "--json")
    assert done.returncode == 0, done.stderr
    return path.read_text("utf-8").split("\n")[:-1]


def _write(path: Path, lines: list[str], ending: str = "\n") -> Path:
    path.write_text("".join(f"{line}{ending}" for line in lines), "utf-8")
    return path


def _edit(line: str, change) -> str:  # noqa: ANN001 - a function of the parsed receipt
    receipt = json.loads(line)
    change(receipt)
    return json.dumps(receipt, ensure_ascii=False, separators=(",", ":"))


@pytest.fixture(scope="module")
def chains(client: Cairn, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("chains")
    run_id = client.runs.submit(RUN_SPEC).run_id
    assert client.runs.wait(run_id, timeout=90).state == "SEALED"
    with client.sandbox(image=BUSYBOX, caps={"memoryMiB": 64, "diskMiB": 32}, env={"MOOD": "ok \u2028"}) as sbx:
        sbx.write_file("/work/n.txt", "naïve \U0001f600\n")
        sbx.exec(["cat", "/work/n.txt"])
        sbx.exec(["sleep", "5"], timeout=1)
    sandbox_id = sbx.id
    # The seal comes from the grader once the sandbox has ended.
    for receipt in client.sandboxes.events(sandbox_id, follow=True):
        pass

    files: dict[str, Path] = {}
    for label, chain_id in (("run", run_id), ("sbx", sandbox_id)):
        lines = _export(chain_id, out / f"{label}.jsonl")
        assert len(lines) >= 6
        files[f"{label}-valid"] = out / f"{label}.jsonl"
        bundle_text = client.request("GET", f"/v1/{'runs' if label == 'run' else 'sandboxes'}/{chain_id}/bundle").text
        files[f"{label}-bundle"] = out / f"{label}.bundle.json"
        files[f"{label}-bundle"].write_text(bundle_text, "utf-8")
        bundle = json.loads(bundle_text)

        files[f"{label}-crlf"] = _write(out / f"{label}.crlf.jsonl", lines, "\r\n")
        # U+2028/U+2029 raw rather than escaped, and a number spelled 3.0: the same receipts, the same hashes.
        files[f"{label}-raw-separators"] = _write(out / f"{label}.raw.jsonl", [line.replace("\\u2028", "\u2028").replace("\\u2029", "\u2029") for line in lines])
        files[f"{label}-respelled-number"] = _write(out / f"{label}.num.jsonl", [re.sub(r'"seq":(\d+)', r'"seq":\1.0', line) for line in lines])
        files[f"{label}-edited"] = _write(out / f"{label}.edited.jsonl", [*lines[:2], _edit(lines[2], lambda r: r.update(ts="2000-01-01T00:00:00.000Z")), *lines[3:]])
        files[f"{label}-dropped"] = _write(out / f"{label}.dropped.jsonl", [lines[0], *lines[2:]])
        files[f"{label}-swapped"] = _write(out / f"{label}.swapped.jsonl", [lines[0], lines[2], lines[1], *lines[3:]])
        files[f"{label}-prev-hash"] = _write(out / f"{label}.prev.jsonl", [*lines[:3], _edit(lines[3], lambda r: r.update(prev_hash="f" * 64)), *lines[4:]])

        def rehash(r: dict) -> None:  # an edit whose own hash is recomputed: the next link breaks
            r["actor"] = "someone-else"
            r["hash"] = receipt_hash(r["prev_hash"], {k: v for k, v in r.items() if k not in ("prev_hash", "hash")})

        files[f"{label}-rehashed"] = _write(out / f"{label}.rehashed.jsonl", [*lines[:2], _edit(lines[2], rehash), *lines[3:]])
        files[f"{label}-other-chain"] = _write(out / f"{label}.chain.jsonl", [lines[0], _edit(lines[1], lambda r: r.update(run_id="run_someoneelse")), *lines[2:]])
        files[f"{label}-surrogate"] = _write(out / f"{label}.surrogate.jsonl", [lines[0], lines[1].replace('"tenant":"', '"tenant":"\\ud800', 1), *lines[2:]])
        files[f"{label}-infinity"] = _write(out / f"{label}.inf.jsonl", [lines[0], lines[1].replace('"v":1', '"v":1e400', 1), *lines[2:]])
        files[f"{label}-not-json"] = _write(out / f"{label}.garbage.jsonl", [*lines[:2], lines[2][:-7], *lines[3:]])
        files[f"{label}-blank-line"] = _write(out / f"{label}.blank.jsonl", [*lines[:2], "", *lines[2:]])
        files[f"{label}-truncated"] = _write(out / f"{label}.truncated.jsonl", lines[:-2])

        def bundle_file(name: str, change) -> None:  # noqa: ANN001
            doc = json.loads(bundle_text)
            change(doc)
            files[f"{label}-bundle-{name}"] = out / f"{label}.bundle-{name}.json"
            files[f"{label}-bundle-{name}"].write_text(json.dumps(doc, ensure_ascii=False), "utf-8")

        bundle_file("head", lambda d: d.update(headHash="0" * 64))
        bundle_file("run-id", lambda d: d.update(runId="run_notthisone"))
        bundle_file("receipt", lambda d: d["receipts"][1].update(tenant="mallory"))
        bundle_file("reordered", lambda d: d["receipts"].reverse())
        assert bundle["runId"] == chain_id
    (out / "empty.jsonl").write_text("", "utf-8")
    files["empty"] = out / "empty.jsonl"
    return files


def _python(path: Path) -> dict:
    result = verify_file(path)
    if isinstance(result, ChainOk):
        return {"ok": True, "chainId": result.chain_id, "count": result.count, "headHash": result.head_hash}
    assert isinstance(result, ChainBroken)
    return {"ok": False, "reason": result.reason, "firstBadSeq": result.first_bad_seq}


def test_both_verifiers_agree_on_every_file(chains: dict[str, Path]) -> None:
    names = sorted(chains)
    typescript = [json.loads(line) for line in run_node("verify-files.mjs", *(str(chains[n]) for n in names)).splitlines()]
    assert len(typescript) == len(names)
    verdicts = {}
    for name, ts in zip(names, typescript):
        ours = _python(chains[name])
        theirs = {k: ts[k] for k in ours if k in ts}
        assert ours == theirs, f"{name}: Python {ours}, TypeScript {ts}"
        verdicts[name] = ours
    for label in ("run", "sbx"):
        valid = verdicts[f"{label}-valid"]
        assert valid["ok"] is True
        # The bundle, CRLF, raw separators and re-spelled numbers verify to the very same head.
        for same in ("bundle", "crlf", "raw-separators", "respelled-number"):
            assert verdicts[f"{label}-{same}"] == valid, same
        expected_breaks = {
            "edited": ("hash_mismatch", 3),
            "dropped": ("seq_out_of_order", 2),
            "swapped": ("seq_out_of_order", 2),
            "prev-hash": ("prev_hash_mismatch", 4),
            "rehashed": ("prev_hash_mismatch", 4),
            "other-chain": ("chain_id_mismatch", 2),
            "surrogate": ("not_canonicalisable", 2),
            "infinity": ("not_canonicalisable", 2),
            "not-json": ("malformed", 3),
            "blank-line": ("malformed", 3),
            "bundle-head": ("head_mismatch", valid["count"]),
            "bundle-run-id": ("run_id_mismatch", 1),
            "bundle-receipt": ("hash_mismatch", 2),
            "bundle-reordered": ("seq_out_of_order", 1),
        }
        for variant, (reason, seq) in expected_breaks.items():
            assert verdicts[f"{label}-{variant}"] == {"ok": False, "reason": reason, "firstBadSeq": seq}, variant
        # A chain cut short still verifies (as far as it goes), to an earlier head.
        assert verdicts[f"{label}-truncated"]["ok"] is True and verdicts[f"{label}-truncated"]["count"] == valid["count"] - 2
    assert verdicts["empty"] == {"ok": False, "reason": "empty", "firstBadSeq": 1}


def test_the_cli_verifies_the_exported_chains_and_refuses_a_tampered_one(chains: dict[str, Path]) -> None:
    for name in ("run-valid", "sbx-valid", "sbx-bundle"):
        done = cairn_cli("verify", str(chains[name]), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["ok"] is True
    refused = cairn_cli("verify", str(chains["sbx-edited"]), "--json")
    assert refused.returncode == 1 and "E_CHAIN_BROKEN" in refused.stdout + refused.stderr
