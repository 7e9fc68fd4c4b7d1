"""A Harbor task directory submitted through the SDK (``runs.submit_harbor_task``, ``POST /v1/missions/harbor``):
it runs and grades as ``cairn run <task-dir>`` does, and a task with a symlink, a path outside the task or a bad
task.toml is refused (E_INPUT) without a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cairn_sdk import AsyncCairn, Cairn, errors

TASK_TOML = '[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 30.0\n[environment]\ncpus = 1\nmemory_mb = 128\nstorage_mb = 64\n'
TEST_SH = '#!/bin/sh\nif [ "$(cat /work/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n'


@pytest.fixture(scope="module")
def image() -> str:
    # The runner builds a base image of its own (tools/src/python-tests.ts); a worker builds each task's environment on it.
    name = os.environ.get("CAIRN_TEST_HARBOR_IMAGE")
    assert name, "run through `npm run test:python`, which builds the Harbor tasks' image and allows it in the stack's policy"
    return name


def write_task(root: Path, name: str, image: str, *, toml: str = TASK_TOML, solve: str = "echo 42 > /work/answer.txt") -> Path:
    task = root / name
    for relative, content in {
        "task.toml": toml,
        "instruction.md": "Write 42 into /work/answer.txt.\n",
        "environment/Dockerfile": f"FROM {image}\n",
        "tests/test.sh": TEST_SH,
        "solution/solve.sh": f"#!/bin/sh\n{solve}\n",
    }.items():
        path = task / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, "utf-8")
        if relative.endswith(".sh"):
            path.chmod(0o755)
    return task


def test_a_task_directory_runs_with_its_oracle_and_its_reward_is_the_grade(client: Cairn, image: str, tmp_path: Path) -> None:
    task = write_task(tmp_path, "py-passing", image)
    key = f"py-harbor-{time.time_ns()}"
    accepted = client.runs.submit_harbor_task(task, oracle=True, idempotency_key=key)
    assert accepted.state == "SUBMITTED" and not accepted.duplicate
    # A worker built the environment on the image named in FROM; sent again, it is found built.
    assert accepted.image.startswith("cairn/built:") and accepted.image.endswith(f"@{accepted.image_build.image_id}")
    assert [base.ref for base in accepted.image_build.bases] == [image]
    again = client.runs.submit_harbor_task(task, oracle=True, idempotency_key=key)
    assert again.run_id == accepted.run_id and again.duplicate
    assert again.image == accepted.image and again.image_build.cached
    run = client.runs.wait(accepted.run_id, timeout=120)
    assert (run.state, run.score, run.max_score, run.name) == ("SEALED", 1, 1, "harbor: py-passing")
    # An agent that does nothing: sealed, reward 0.
    failed = client.runs.wait(client.runs.submit_harbor_task(task, agent=["true"]).run_id, timeout=120)
    assert (failed.state, failed.score) == ("SEALED", 0)


def test_the_async_client_submits_a_task_directory_too(image: str, tmp_path: Path) -> None:
    import asyncio

    task = write_task(tmp_path, "py-async", image)

    async def go() -> str:
        async with AsyncCairn() as client:
            accepted = await client.runs.submit_harbor_task(task, oracle=True)
            return (await client.runs.wait(accepted.run_id, timeout=120)).state

    assert asyncio.run(go()) == "SEALED"


def test_hostile_or_bad_tasks_are_refused_and_make_no_run(client: Cairn, image: str, tmp_path: Path) -> None:
    before = len(client.runs.list(limit=200).items)
    linked = write_task(tmp_path, "py-symlink", image)
    (linked / "tests" / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(errors.CairnError) as refused:
        client.runs.submit_harbor_task(linked, oracle=True)
    assert refused.value.code == "E_INPUT" and "only regular files" in str(refused.value)

    bad_toml = write_task(tmp_path, "py-bad-toml", image, toml="[environment]\ngpus = 2\n")
    with pytest.raises(errors.CairnError) as refused:
        client.runs.submit_harbor_task(bad_toml, oracle=True)
    assert refused.value.code == "E_INPUT" and "environment.gpus" in str(refused.value)

    with pytest.raises(errors.CairnError) as refused:
        client.runs.submit_harbor_task(bad_toml, oracle=True, agent=["true"])
    assert refused.value.code == "E_INPUT"
    with pytest.raises(errors.CairnError) as refused:
        client.runs.submit_harbor_task(bad_toml, agent="python3 agent.py")  # type: ignore[arg-type]
    assert refused.value.code == "E_INPUT"
    assert len(client.runs.list(limit=200).items) == before


def test_a_worker_builds_an_image_from_a_dockerfile_once_per_digest(client: Cairn, image: str) -> None:
    # FROM the labelled base: the image built inherits the label, and the runner removes it.
    dockerfile = f'FROM {image}\nCOPY note.txt /opt/note.txt\nRUN ["/bin/sh", "-c", "cp /opt/note.txt /opt/note.copy"]\n'
    note = f"py-images-{time.time_ns()}"
    built = client.images.build(dockerfile, {"note.txt": note})
    assert built.image == f"{built.tag}@{built.image_build.image_id}" and built.tag.startswith("cairn/built:")
    assert not built.image_build.cached and [b.ref for b in built.image_build.bases] == [image]
    again = client.images.build(dockerfile, {"note.txt": note})
    assert again.image_build.cached and again.image == built.image and again.worker_id == built.worker_id
    with pytest.raises(errors.CairnError) as refused:
        client.images.build(f"FROM docker.io/library/{note}:latest\nRUN true\n")
    assert refused.value.code == "E_INPUT" and "not an image on this engine" in str(refused.value)
