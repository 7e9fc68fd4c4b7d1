"""The offline chain verifier: recomputes every receipt's hash from genesis, trusting no server.

The same checks, in the same order, as ``libs/evidence``'s ``ChainVerifier`` (and so ``cairn verify``):
each receipt is an object with string ``prev_hash`` and ``hash``; its ``seq`` is the next one; its
``run_id`` is the chain's; its ``prev_hash`` is the previous receipt's hash (genesis: 64 zeros); and
``hash == sha256(prev_hash + "\\n" + RFC8785(receipt without prev_hash and hash))``. The first
receipt that fails stops the check and is named by its seq and the reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .jcs import CanonicalJsonError, canonicalize, parse_json

__all__ = [
    "BUNDLE_FORMAT",
    "GENESIS_HASH",
    "ChainBroken",
    "ChainOk",
    "ChainVerifier",
    "receipt_hash",
    "verify_bundle",
    "verify_chain",
    "verify_file",
]

GENESIS_HASH = "0" * 64
BUNDLE_FORMAT = "cairn.bundle/v1"
_BUNDLE_PREFIX = "cairn.bundle/"

ChainBreakReason = Literal[
    "malformed",
    "seq_out_of_order",
    "chain_id_mismatch",
    "prev_hash_mismatch",
    "hash_mismatch",
    "not_canonicalisable",
    "empty",
    # A proof bundle whose own claims disagree with its receipts.
    "run_id_mismatch",
    "head_mismatch",
]


@dataclass(frozen=True)
class ChainOk:
    chain_id: str | None
    count: int
    head_hash: str
    head_seq: int
    ok: Literal[True] = True


@dataclass(frozen=True)
class ChainBroken:
    first_bad_seq: int
    reason: ChainBreakReason
    message: str
    verified: int
    ok: Literal[False] = False
    code: Literal["E_CHAIN_BROKEN"] = "E_CHAIN_BROKEN"


ChainVerification = ChainOk | ChainBroken


def receipt_hash(prev_hash: str, body: dict[str, Any]) -> str:
    """``sha256(prev_hash + "\\n" + RFC8785(body))`` as lower-case hex (I-4)."""
    return hashlib.sha256(f"{prev_hash}\n{canonicalize(body)}".encode("utf-8")).hexdigest()


def _json_repr(value: Any) -> str:
    """A value as JSON.stringify would show it in a message (numbers as JavaScript prints them)."""
    try:
        return canonicalize(value)
    except CanonicalJsonError:
        return "undefined"


class ChainVerifier:
    """Checks receipts one at a time, in constant memory; stops at the first bad one."""

    def __init__(self, *, chain_id: str | None = None, require_non_empty: bool = False) -> None:
        self._head = GENESIS_HASH
        self._count = 0
        self._chain_id = chain_id
        self._require_non_empty = require_non_empty
        self._failure: ChainBroken | None = None

    def push(self, receipt: Any) -> bool:
        if self._failure is not None:
            return False
        expected = self._count + 1
        if not isinstance(receipt, dict):
            return self._fail(expected, "malformed", "a receipt must be a JSON object")
        if not isinstance(receipt.get("hash"), str) or not isinstance(receipt.get("prev_hash"), str):
            return self._fail(expected, "malformed", "a receipt needs string prev_hash and hash")
        seq = receipt.get("seq")
        if isinstance(seq, bool) or not isinstance(seq, (int, float)) or seq != expected:
            return self._fail(expected, "seq_out_of_order", f"expected seq {expected}, found {_json_repr(seq) if 'seq' in receipt else 'undefined'}")
        run_id = receipt.get("run_id") if isinstance(receipt.get("run_id"), str) else None
        if self._chain_id is None and self._count == 0:
            self._chain_id = run_id
        if run_id != self._chain_id:
            shown = _json_repr(receipt["run_id"]) if "run_id" in receipt else "undefined"
            return self._fail(expected, "chain_id_mismatch", f"run_id {shown} is not this chain's {_json_repr(self._chain_id)}")
        if receipt["prev_hash"] != self._head:
            return self._fail(expected, "prev_hash_mismatch", f"prev_hash {receipt['prev_hash']} does not match the previous hash {self._head}")
        body = {key: value for key, value in receipt.items() if key not in ("prev_hash", "hash")}
        try:
            recomputed = receipt_hash(receipt["prev_hash"], body)
        except CanonicalJsonError as error:
            return self._fail(expected, "not_canonicalisable", str(error))
        if recomputed != receipt["hash"]:
            return self._fail(expected, "hash_mismatch", f"hash {receipt['hash']} does not match the recomputed {recomputed}")
        self._head = recomputed
        self._count = expected
        return True

    def break_here(self, reason: ChainBreakReason, message: str) -> None:
        if self._failure is None:
            self._fail(self._count + 1, reason, message)

    def result(self) -> ChainVerification:
        if self._failure is not None:
            return self._failure
        if self._count == 0 and self._require_non_empty:
            return ChainBroken(first_bad_seq=1, reason="empty", message="the chain holds no receipt", verified=0)
        return ChainOk(chain_id=self._chain_id, count=self._count, head_hash=self._head, head_seq=self._count)

    def _fail(self, seq: int, reason: ChainBreakReason, message: str) -> bool:
        self._failure = ChainBroken(first_bad_seq=seq, reason=reason, message=message, verified=self._count)
        return False


def verify_chain(receipts: Iterable[Any], *, chain_id: str | None = None, require_non_empty: bool = False) -> ChainVerification:
    """Recomputes every hash from genesis. Pass receipts as parsed JSON (``parse_json``, or a bundle's)."""
    verifier = ChainVerifier(chain_id=chain_id, require_non_empty=require_non_empty)
    for receipt in receipts:
        if not verifier.push(receipt):
            break
    return verifier.result()


def verify_bundle(document: Any) -> ChainVerification:
    """A proof bundle (``cairn.bundle/v1``): its receipts verified, and the head it names checked against them."""
    if not isinstance(document, dict) or document.get("format") != BUNDLE_FORMAT:
        shown = document.get("format") if isinstance(document, dict) else None
        raise ValueError(f"not a {BUNDLE_FORMAT} proof bundle (format {shown!r})")
    receipts = document.get("receipts")
    if not isinstance(receipts, list):
        raise ValueError("a proof bundle needs a receipts array")
    result = verify_chain(receipts, require_non_empty=True)
    if not isinstance(result, ChainOk):
        return result
    # What the bundle says of itself must be what its receipts say (as `cairn verify` checks).
    run_id, head = document.get("runId"), document.get("headHash")
    if isinstance(run_id, str) and result.chain_id is not None and run_id != result.chain_id:
        message = f"the bundle names run {run_id}, but its receipts are the chain of {result.chain_id}"
        return ChainBroken(first_bad_seq=1, reason="run_id_mismatch", message=message, verified=result.count)
    if isinstance(head, str) and head != result.head_hash:
        message = f"the bundle names head {head}, but its receipts recompute to {result.head_hash}"
        return ChainBroken(first_bad_seq=result.count, reason="head_mismatch", message=message, verified=result.count)
    return result


def verify_file(path: str | Path) -> ChainVerification:
    """A chain file (JSON Lines, lines ending at ``\\n`` only) or a proof bundle, as ``cairn verify <file>`` reads them."""
    data = Path(path).read_bytes()
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            whole = parse_json(text)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("format"), str) and whole["format"].startswith(_BUNDLE_PREFIX):
            return verify_bundle(whole)
    verifier = ChainVerifier(require_non_empty=True)
    # A line ends at "\n" only; a "\r" right before it is dropped. U+2028/U+2029 are text.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first_blank = 0
    for number, raw in enumerate(lines, start=1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if line.strip() == "":
            first_blank = first_blank or number
            continue
        if first_blank:
            verifier.break_here("malformed", f"line {first_blank} is blank: a chain file holds one receipt per line")
            break
        try:
            receipt = parse_json(line)
        except ValueError as error:
            verifier.break_here("malformed", f"line {number} is not JSON: {error}")
            break
        if not verifier.push(receipt):
            break
    return verifier.result()
