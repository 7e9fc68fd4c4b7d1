"""The example eval (examples/inspect_eval.py) end to end: Inspect's mock model calls bash() in each
sample's Cairn sandbox, the scorer reads the file back, and the log names each sample's chain —
which `cairn verify` (and this SDK) then recompute, finding every command the tool ran on it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from cairn_sdk import Cairn, ChainOk
from helpers import REPO, cairn_cli

sys.path.insert(0, str(REPO / "sdk" / "python" / "examples"))
import inspect_eval  # noqa: E402


@pytest.fixture(scope="module")
def image() -> str:
    # The runner builds an image with a bash (Inspect's bash() needs one); see tools/src/python-tests.ts.
    name = os.environ.get("CAIRN_TEST_INSPECT_IMAGE")
    assert name, "run through `npm run test:python`, which builds the eval's image and allows it in the stack's policy"
    return name


def test_the_mock_model_eval_runs_in_cairn_and_its_chains_verify(client: Cairn, image: str, tmp_path: Path) -> None:
    log = inspect_eval.run(log_dir=str(tmp_path), image=image)
    assert log.status == "success", log.error
    assert log.results is not None and log.results.scores[0].metrics["accuracy"].value == 1.0

    # The log on disk — not only the object in memory — names each sample's chain, twice.
    stored = read_eval_log(log.location)
    chains = inspect_eval.sandbox_ids(stored)
    assert set(chains) == {"multiply", "write"} and len(set(chains.values())) == 2
    for sample in stored.samples or []:
        infos = [e for e in sample.events if e.event == "info" and e.source == "cairn"]
        assert [i.data["cairn_sandbox_id"] for i in infos] == [chains[str(sample.id)]]

    for sample_id, chain in chains.items():
        receipts = list(client.sandboxes.events(chain, follow=True))  # until the grader seals it
        assert receipts[-1].type == "run.sealed"
        execs = [r for r in receipts if r.type == "sandbox.exec.completed"]
        assert any(r.raw["argv"][:3] == ["bash", "--login", "-c"] and r.raw["exit_code"] == 0 for r in execs), sample_id
        assert any(r.type == "sandbox.file.read" and r.raw["path"] == "/work/answer.txt" for r in receipts)
        verified = cairn_cli("verify", chain, "--json")
        assert verified.returncode == 0, verified.stderr
        ts = json.loads(verified.stdout)
        ours = client.sandboxes.verify(chain)
        assert isinstance(ours, ChainOk) and ts["ok"] is True
        assert (ts["chainId"], ts["count"], ts["headHash"]) == (chain, ours.count, ours.head_hash) == (chain, len(receipts), receipts[-1].hash)
