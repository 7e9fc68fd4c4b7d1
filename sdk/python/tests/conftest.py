"""Shared fixtures (the helpers are in helpers.py)."""

from __future__ import annotations

import json

import pytest

from helpers import REPO


@pytest.fixture(scope="session")
def client():
    from cairn_sdk import Cairn

    with Cairn() as c:
        health = c.health()
        assert health.status == "ok", f"the stack is not healthy: {health}"
        yield c


@pytest.fixture(scope="session")
def openapi() -> dict:
    return json.loads((REPO / "apps" / "gateway" / "openapi.json").read_text("utf-8"))
