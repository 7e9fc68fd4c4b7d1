"""Helpers shared by the tests. Stack tests run against the gateway named by CAIRN_URL/CAIRN_API_KEY (what
`npm run test:python` sets for an isolated stack it starts), else the local stack of `cairn up`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
NODE = REPO / "node_modules" / ".bin" / "node"
JS = Path(__file__).resolve().parent / "js"
BUSYBOX = "cairn/sandbox-busybox:1"


def run_node(script: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    """Runs one of tests/js/*.mjs on the project's Node 24 against the built TypeScript."""
    done = subprocess.run([str(NODE), str(JS / script), *args], input=stdin, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    if done.returncode != 0:
        raise AssertionError(f"{script} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def cairn_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real `cairn` CLI (apps/cli, built), with this test run's stack environment."""
    return subprocess.run([str(NODE), str(REPO / "apps" / "cli" / "bin" / "cairn.js"), *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env={**os.environ, "NO_COLOR": "1"})


