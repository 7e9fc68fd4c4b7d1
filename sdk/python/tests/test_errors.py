"""Every error code of libs/contracts has its exception class here, in the same order: a code added
in TypeScript and not here fails this test (as does one in openapi.json's Error that is not here)."""

from __future__ import annotations

import json
import typing

import pytest

from cairn_sdk import errors
from cairn_sdk.errors import API_ERROR_CODES, ERROR_CLASSES, ERROR_CODES, TAXONOMY_ERROR_CODES, CairnError, error_from_body
from cairn_sdk.models import ErrorCode
from helpers import run_node


@pytest.fixture(scope="module")
def typescript() -> dict:
    return json.loads(run_node("error-codes.mjs"))


def test_the_codes_are_the_typescript_union(typescript: dict) -> None:
    assert list(TAXONOMY_ERROR_CODES) == typescript["taxonomy"]
    assert list(API_ERROR_CODES) == typescript["api"]
    assert set(typescript["status"]) == set(ERROR_CODES)


def test_the_codes_are_the_rest_contract(openapi: dict) -> None:
    assert openapi["components"]["schemas"]["Error"]["properties"]["code"]["enum"] == list(ERROR_CODES)
    assert list(typing.get_args(ErrorCode)) == list(ERROR_CODES)


def test_each_code_has_its_own_class() -> None:
    assert set(ERROR_CLASSES) == set(ERROR_CODES)
    assert len({cls for cls in ERROR_CLASSES.values()}) == len(ERROR_CODES)
    for code, cls in ERROR_CLASSES.items():
        error = error_from_body({"code": code, "message": "m", "details": {"field": "x"}}, 400)
        assert type(error) is cls and isinstance(error, CairnError)
        assert (error.code, error.message, error.details, error.status) == (code, "m", {"field": "x"}, 400)
        assert getattr(errors, cls.__name__) is cls
    assert errors.NotFound.code == "E_NOT_FOUND" and errors.PolicyDenied.code == "E_POLICY_DENIED"


def test_a_code_from_a_newer_server_is_still_an_error() -> None:
    error = error_from_body({"code": "E_FROM_A_NEWER_SERVER", "message": "new"}, 418)
    assert type(error) is CairnError and error.code == "E_FROM_A_NEWER_SERVER" and str(error) == "E_FROM_A_NEWER_SERVER: new"
    assert error_from_body("<html>", 502).code == "E_INTERNAL"


def test_a_full_fleet_says_what_ran_out_and_when_to_come_back() -> None:
    body = {"code": "E_CAPACITY", "message": "no worker has room", "details": {"resource": "memory", "retryAfterSeconds": 5}}
    error = error_from_body(body, 503)
    assert type(error) is errors.Capacity and isinstance(error, CairnError)
    assert (error.status, error.resource, error.retry_after) == (503, "memory", 5.0)
    # The Retry-After header, when the answer had one, is what counts.
    assert error_from_body(body, 503, retry_after=7).retry_after == 7
    assert error_from_body({"code": "E_CAPACITY", "message": "m"}, 503).resource is None
    limited = error_from_body({"code": "E_RATE_LIMITED", "message": "m", "details": {"retryAfterSeconds": 2}}, 429)
    assert type(limited) is errors.RateLimited and limited.retry_after == 2.0
    assert error_from_body({"code": "E_NOT_FOUND", "message": "m"}, 404).retry_after is None
