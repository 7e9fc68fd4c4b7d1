"""The log of seal heads, checked offline (docs/proofs.md): RFC 6962 / RFC 9162 §2.1 tree math, the
C2SP checkpoint body, and the leaf a seal makes, in plain Python (hashlib only).

What this module checks: that an inclusion proof's path leads from a leaf to a checkpoint's root,
that a consistency proof holds between two tree sizes, and that the log's leaf is a given seal's
statement (so the leaf is the chain's head). What it does not: the Ed25519 signatures of the seal
and of the checkpoint note — check those against a key you pinned with ``cairn verify --key``
(or any c2sp.org/signed-note verifier) before trusting a root this module compares against.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import Any

from .errors import cairn_error

HASH_SIZE = 32
SEAL_STATEMENT_HEADER = "cairn.seal/v1"
_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]+$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SIZE = re.compile(r"^(0|[1-9][0-9]*)$")
_MAX_SAFE = 2**53 - 1


def leaf_hash(data: bytes) -> bytes:
    """H(0x00 ‖ data)."""
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """H(0x01 ‖ left ‖ right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _check_size(value: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > _MAX_SAFE:
        raise cairn_error("E_INPUT", f"{what} must be a non-negative integer below 2^53, not {value!r}", {})


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes | None:
    """The root an inclusion proof leads to (RFC 9162 §2.1.3.2), or None when it cannot be one for these sizes."""
    _check_size(index, "the leaf index")
    _check_size(size, "the tree size")
    if index >= size or len(leaf) != HASH_SIZE or any(len(p) != HASH_SIZE for p in proof):
        return None
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return None
        if fn % 2 == 1 or fn == sn:
            r = node_hash(p, r)
            while fn % 2 == 0 and fn != 0:
                fn //= 2
                sn //= 2
        else:
            r = node_hash(r, p)
        fn //= 2
        sn //= 2
    return r if sn == 0 else None


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    computed = root_from_inclusion_proof(index, size, leaf, proof)
    return computed is not None and computed == root


def verify_consistency(size1: int, size2: int, proof: list[bytes], root1: bytes, root2: bytes) -> bool:
    """RFC 9162 §2.1.4.2: whether ``proof`` shows the tree of ``size1`` (root1) is a prefix of the tree of ``size2`` (root2)."""
    _check_size(size1, "the first size")
    _check_size(size2, "the second size")
    if size2 < size1:
        return False
    if size1 == size2:
        return not proof and root1 == root2
    if size1 == 0:
        return not proof
    if not proof or any(len(p) != HASH_SIZE for p in proof) or len(root1) != HASH_SIZE or len(root2) != HASH_SIZE:
        return False
    path = [root1, *proof] if size1 & (size1 - 1) == 0 else list(proof)
    fn, sn = size1 - 1, size2 - 1
    while fn % 2 == 1:
        fn //= 2
        sn //= 2
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while fn % 2 == 0 and fn != 0:
                fn //= 2
                sn //= 2
        else:
            sr = node_hash(sr, c)
        fn //= 2
        sn //= 2
    return fr == root1 and sr == root2 and sn == 0


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise cairn_error("E_INPUT", f"{what} is not standard base64", {}) from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise cairn_error("E_INPUT", f"{what} is not canonical base64", {})
    return raw


@dataclass(frozen=True)
class Checkpoint:
    """A c2sp.org/tlog-checkpoint body: origin, tree size, root hash, extension lines."""

    origin: str
    size: int
    root_hash: bytes
    extensions: tuple[str, ...] = ()


def parse_checkpoint(note: str) -> Checkpoint:
    """The body of a signed checkpoint note (its text before the last blank line), strictly; its signature is NOT checked."""
    split = note.rfind("\n\n")
    text = note[: split + 1] if split != -1 else note
    if not text.endswith("\n"):
        raise cairn_error("E_INPUT", "not a checkpoint: the text does not end in a newline", {})
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise cairn_error("E_INPUT", "not a checkpoint: fewer than three lines", {})
    origin, size_text, root_text, *extensions = lines
    if origin == "":
        raise cairn_error("E_INPUT", "not a checkpoint: the origin line is empty", {})
    if not _SIZE.match(size_text) or int(size_text) > _MAX_SAFE:
        raise cairn_error("E_INPUT", f"not a checkpoint: the size line {size_text!r} is not a decimal without leading zeroes", {})
    root = _b64(root_text, "the root hash line")
    if len(root) != HASH_SIZE:
        raise cairn_error("E_INPUT", f"not a checkpoint: the root hash is {len(root)} bytes, not {HASH_SIZE}", {})
    if any(line == "" for line in extensions):
        raise cairn_error("E_INPUT", "not a checkpoint: an extension line is empty", {})
    return Checkpoint(origin, int(size_text), root, tuple(extensions))


def seal_statement_text(receipt: dict[str, Any]) -> str:
    """The statement a ``run.sealed`` receipt makes (what its signature covers and its log leaf hashes)."""
    if receipt.get("type") != "run.sealed":
        raise cairn_error("E_INPUT", "a seal statement comes from a run.sealed receipt", {})
    chain, seq, head = receipt.get("run_id"), receipt.get("seq"), receipt.get("prev_hash")
    digest, state, code = receipt.get("evidence_digest"), receipt.get("final_state"), receipt.get("error_code")
    if not all(isinstance(t, str) and _TOKEN.match(t) for t in (chain, state)) or (code is not None and not (isinstance(code, str) and _TOKEN.match(code))):
        raise cairn_error("E_INPUT", "a seal statement names its chain, state and error code as single tokens", {})
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 2:
        raise cairn_error("E_INPUT", f"a seal covers a head seq of at least 1, not {seq!r}", {})
    if not (isinstance(head, str) and _HEX64.match(head) and isinstance(digest, str) and _HEX64.match(digest)):
        raise cairn_error("E_INPUT", "a seal statement holds SHA-256 hex digests", {})
    lines = [SEAL_STATEMENT_HEADER, f"chain {chain}", f"head {seq - 1} {head}", f"digest {digest}", f"state {state}" + ("" if code is None else f" {code}")]
    return "".join(f"{line}\n" for line in lines)


def seal_leaf_hash(receipt: dict[str, Any]) -> bytes:
    """The leaf a seal makes in the log: H(0x00 ‖ its statement)."""
    return leaf_hash(seal_statement_text(receipt).encode("utf-8"))


@dataclass(frozen=True)
class InclusionCheck:
    ok: bool
    reason: str | None
    message: str


def check_inclusion(proof: Any, seal: dict[str, Any] | None = None) -> InclusionCheck:
    """That ``proof`` (a :class:`~cairn_sdk.models.TlogInclusionProof`) leads from its leaf to the root of the
    checkpoint it carries, and, given the chain's ``seal`` receipt, that the leaf is that seal's statement.
    The checkpoint's signature is not checked here (see the module's docstring)."""
    if seal is not None:
        if proof.chain_id != seal.get("run_id"):
            return InclusionCheck(False, "proof_chain_mismatch", f"the inclusion proof is for {proof.chain_id}, not {seal.get('run_id')}")
        if seal_leaf_hash(seal) != _b64(proof.leaf_hash, "the leaf hash"):
            return InclusionCheck(False, "leaf_mismatch", f"the log's leaf {proof.leaf_index} is not this seal's statement")
    checkpoint = parse_checkpoint(proof.checkpoint)
    if proof.tree_size != checkpoint.size:
        return InclusionCheck(False, "tree_size_mismatch", f"the proof is for a tree of {proof.tree_size}, the checkpoint is of {checkpoint.size}")
    path = [_b64(h, "a proof hash") for h in proof.hashes]
    if not verify_inclusion(proof.leaf_index, proof.tree_size, _b64(proof.leaf_hash, "the leaf hash"), path, checkpoint.root_hash):
        return InclusionCheck(False, "inclusion_invalid", f"the proof does not lead from leaf {proof.leaf_index} to the checkpoint's root of tree size {proof.tree_size}")
    return InclusionCheck(True, None, f"leaf {proof.leaf_index} of {proof.tree_size}")
