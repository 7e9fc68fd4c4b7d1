"""Cairn's Python SDK: runs, sandboxes, secrets and keys over the REST gateway, and an offline chain verifier.

    from cairn_sdk import Cairn
    with Cairn() as client, client.sandbox(image="cairn/sandbox-busybox:1") as sbx:
        print(sbx.exec(["echo", "hello"]).stdout)
"""

from . import errors
from .aio import AsyncCairn, AsyncSandboxSession
from .client import Cairn, SandboxSession
from .errors import CairnError, error_from_body
from .jcs import CanonicalJsonError, canonicalize, parse_json
from .verify import BUNDLE_FORMAT, GENESIS_HASH, ChainBroken, ChainOk, ChainVerifier, receipt_hash, verify_bundle, verify_chain, verify_file

__version__ = "0.1.0"

__all__ = [
    "BUNDLE_FORMAT",
    "GENESIS_HASH",
    "AsyncCairn",
    "AsyncSandboxSession",
    "Cairn",
    "CairnError",
    "CanonicalJsonError",
    "ChainBroken",
    "ChainOk",
    "ChainVerifier",
    "SandboxSession",
    "canonicalize",
    "error_from_body",
    "errors",
    "parse_json",
    "receipt_hash",
    "verify_bundle",
    "verify_chain",
    "verify_file",
]
