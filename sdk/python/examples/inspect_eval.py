"""An Inspect AI eval whose samples run in Cairn sandboxes — offline, with Inspect's mock model.

The "model" (``mockllm/model`` with a scripted ``custom_outputs``) asks for one ``bash()`` tool call
per sample, then answers. Each sample gets its own Cairn sandbox session; every command the tool
runs and every file the scorer reads is a receipt on that session's hash chain, whose id the log
carries (the sample's store, ``cairn_sandbox_id``, and an ``InfoEvent`` from ``cairn``)::

    npx --no-install cairn up                       # a stack (once)
    .venv/bin/python sdk/python/examples/inspect_eval.py
    npx --no-install cairn verify sbx_…             # each sample's chain, recomputed offline

Inspect's ``bash()`` tool runs ``bash --login -c …``: the image needs a bash. ``cairn/sandbox-debian:1``
has one (``npx --no-install cairn images build debian``, a few minutes once); set CAIRN_INSPECT_IMAGE
to use another image the stack's policy allows.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from inspect_ai import Task, eval, task
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

from cairn_sdk.inspect_sandbox import CairnSandboxConfig

IMAGE = os.environ.get("CAIRN_INSPECT_IMAGE", "cairn/sandbox-debian:1")

SAMPLES = [
    Sample(id="multiply", input="Run `echo $((6 * 7)) > answer.txt` and report.", target="42"),
    Sample(id="write", input="Run `printf cairn > answer.txt && cat answer.txt` and report.", target="cairn"),
]


def scripted(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
    """The mock model: the command between backticks as a bash() call, then an answer with what it printed."""
    if isinstance(messages[-1], ChatMessageTool):
        output = ModelOutput.from_content(model="mockllm/model", content=f"Done; the tool said: {messages[-1].text.strip()!r}")
    else:
        prompt = next(m for m in messages if m.role == "user").text
        command = re.search(r"`([^`]+)`", prompt)
        assert command is not None, prompt
        output = ModelOutput.for_tool_call(model="mockllm/model", tool_name="bash", tool_arguments={"command": command.group(1)})
    # Usage given, so the mock model counts no tokens (that would fetch a tokenizer from the network).
    output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return output


@scorer(metrics=[accuracy()])
def answer_file():
    """Reads /work/answer.txt back from the sample's sandbox (a receipt of its own) and compares."""

    async def score(state: TaskState, target: Target) -> Score:
        written = (await sandbox().read_file("answer.txt")).strip()
        return Score(value=CORRECT if written == target.text else INCORRECT, answer=written)

    return score


@task
def cairn_demo(image: str = IMAGE) -> Task:
    config = CairnSandboxConfig(image=image, caps={"memoryMiB": 128, "diskMiB": 64, "wallSeconds": 120}, ttl_seconds=600)
    return Task(dataset=SAMPLES, solver=[use_tools(bash(timeout=60)), generate()], scorer=answer_file(), sandbox=("cairn", config))


def run(log_dir: str = "logs", image: str = IMAGE) -> EvalLog:
    [log] = eval(cairn_demo(image), model=get_model("mockllm/model", custom_outputs=scripted), log_dir=log_dir, display="none")
    return log


def sandbox_ids(log: EvalLog) -> dict[str, str]:
    """Each sample's Cairn chain id, as the log records it."""
    return {str(sample.id): sample.store["cairn_sandbox_id"] for sample in log.samples or []}


if __name__ == "__main__":
    log = run()
    print(f"status {log.status}  accuracy {log.results.scores[0].metrics['accuracy'].value if log.results else '-'}  log {log.location}")
    for sample_id, chain in sandbox_ids(log).items():
        print(f"  {sample_id:<10} {chain}   npx --no-install cairn verify {chain}")
    sys.exit(0 if log.status == "success" else 1)
