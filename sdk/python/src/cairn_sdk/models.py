"""The REST shapes of Cairn's gateway as pydantic models (snake_case here, camelCase on the wire).

Each model mirrors one component of ``apps/gateway/openapi.json``; ``tests/test_models_openapi.py``
compares their JSON Schemas field by field with the committed document and fails on any drift.
Unknown fields a newer server adds are ignored, never an error.
"""

from __future__ import annotations

import base64
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

ErrorCode = Literal[
    "E_INPUT",
    "E_POLICY_DENIED",
    "E_RUNTIME_ABSENT",
    "E_IMAGE_PULL",
    "E_SANDBOX_START",
    "E_TIMEOUT",
    "E_MEM_LIMIT",
    "E_PROC_LIMIT",
    "E_DISK_LIMIT",
    "E_BUDGET",
    "E_WORKER_LOST",
    "E_SECRET_SEEN",
    "E_GATE_FAIL",
    "E_NO_APPROVAL",
    "E_CHAIN_BROKEN",
    "E_EGRESS",
    "E_UNKNOWN_STATE",
    "E_UNAUTHORIZED",
    "E_FORBIDDEN",
    "E_NOT_FOUND",
    "E_SEALED",
    "E_CONFLICT",
    "E_IDEMPOTENCY_MISMATCH",
    "E_TOO_LARGE",
    "E_RATE_LIMITED",
    "E_CAPACITY",
    "E_UNAVAILABLE",
    "E_INTERNAL",
]
RunState = Literal[
    "SUBMITTED", "AWAITING_APPROVAL", "SCHEDULED", "RUNNING", "EXECUTED", "VERIFIED", "GRADED", "SEALED", "FAILED", "ROLLBACK", "REJECTED", "CANCELLED"
]
FINAL_RUN_STATES: frozenset[str] = frozenset({"SEALED", "FAILED", "ROLLBACK", "REJECTED", "CANCELLED"})
Verdict = Literal["SUPPORTS", "INCONCLUSIVE", "REJECTED"]
SandboxState = Literal["PENDING", "READY", "DESTROYED", "REJECTED", "FAILED"]
DestroyReason = Literal["deleted", "ttl", "idle", "limit", "worker_lost", "failed"]
ExecLimitHit = Literal["E_TIMEOUT", "E_MEM_LIMIT", "E_PROC_LIMIT", "E_DISK_LIMIT"]
QueueWait = Literal["slots", "memory", "disk", "pids", "cpu", "runtime", "image"]
ApiKeyScope = Literal["admin", "approve", "metrics:read", "runs:read", "runs:write", "secrets:use", "secrets:write"]


class Model(BaseModel):
    """camelCase on the wire, snake_case in Python; extra fields ignored; immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class ErrorBody(Model):
    code: ErrorCode
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class SubmitAccepted(Model):
    run_id: str
    state: Literal["SUBMITTED"]
    duplicate: bool


class ImageBase(Model):
    """A base image a build used: as its FROM names it, and its id."""

    ref: str
    id: str


class ImageBuild(Model):
    """An image built from a Dockerfile (docs/missions.md): the RunSpec's ``imageBuild``; ``cached`` when it was found built."""

    digest: str
    dockerfile_sha256: str
    bases: list[ImageBase]
    image_id: str
    cached: bool


class HarborSubmitAccepted(Model):
    """A Harbor task accepted (``POST /v1/missions/harbor``): the run, and the image a worker built for it (docs/adr/0038)."""

    run_id: str
    state: Literal["SUBMITTED"]
    duplicate: bool
    image: str
    image_build: ImageBuild
    worker_id: str


class ImageBuilt(Model):
    """An image a worker built from a Dockerfile, or found built (``POST /v1/images/builds``, docs/adr/0038)."""

    image: str
    tag: str
    image_build: ImageBuild
    duration_ms: int
    worker_id: str


class QueueSpot(Model):
    """Where work waiting in the placement queue stands: ``position`` of ``length``, what it waits for (docs/sandboxes.md)."""

    position: int
    length: int
    waiting_for: QueueWait
    since: str
    until: str | None


class Run(Model):
    run_id: str
    tenant: str
    name: str | None
    state: RunState
    error_code: ErrorCode | None
    verdict: Verdict | None
    score: float | None
    max_score: float | None
    upper_bound: float | None
    created_at: str
    updated_at: str
    event_count: int
    head_hash: str
    sealed: bool
    # Absent on the wire unless it waits in the placement queue (None here then).
    queue: QueueSpot | SkipJsonSchema[None] = None
    # The W3C trace id the run was submitted in (32 lower-case hex); absent when it was submitted untraced.
    trace_id: str | SkipJsonSchema[None] = None

    @property
    def final(self) -> bool:
        """The run will not change state again (its chain may still gain its seal)."""
        return self.state in FINAL_RUN_STATES


class RunList(Model):
    items: list[Run]
    next_cursor: str | None


class CancelAccepted(Model):
    run_id: str
    state: RunState


class RegradeAccepted(Model):
    run_id: str
    duplicate: bool


class ApprovalAccepted(Model):
    run_id: str
    decision: Literal["approve", "reject"]
    state: RunState
    duplicate: bool


class Receipt(BaseModel):
    """One receipt of a chain, as stored: snake_case fields; ``raw`` is what its hash covers."""

    model_config = ConfigDict(extra="allow", frozen=True)

    v: Literal[1]
    run_id: str
    seq: int
    type: str
    ts: str
    tenant: str
    actor: str
    causation: str | None
    prev_hash: str
    hash: str

    @property
    def raw(self) -> dict[str, Any]:
        """The receipt as a plain dict, every field included (what a verifier hashes)."""
        return self.model_dump(mode="json")


class EventPage(Model):
    items: list[Receipt]
    next_after: int | None


class Grade(Model):
    score: float
    max_score: float
    upper_bound: float


class ProofBundle(Model):
    format: Literal["cairn.bundle/v1"]
    run_id: str
    receipts: list[Receipt]
    artifacts: dict[str, str]
    verdict: Verdict | None
    grade: Grade | None
    head_hash: str


class RecordedStream(Model):
    """A step's stdout or stderr as its ``step.completed`` records it: what was kept (``bytes``, None when
    the store no longer holds it), what the program wrote (``written_bytes``), and whether it was cut."""

    sha256: str
    bytes: int | None
    written_bytes: int
    truncated: bool


class StepOutputs(Model):
    index: int
    name: str | None
    exit_code: int | None
    stdout: RecordedStream
    stderr: RecordedStream


class ArtifactEntry(Model):
    """A collected file: its recorded path, sha256 and size as stored (None when the store lacks it)."""

    path: str
    sha256: str
    bytes: int | None


class RunArtifacts(Model):
    """What a run printed and wrote, as its chain records it (docs/outputs.md)."""

    run_id: str
    steps: list[StepOutputs]
    items: list[ArtifactEntry]


class SealKey(Model):
    """A seal verification key, c2sp.org/signed-note's ``<name>+<key id>+<base64>`` (docs/proofs.md)."""

    key: str
    name: str
    key_id: str
    status: Literal["current", "retired"]


class SealKeys(Model):
    keys: list[SealKey]


class TlogCheckpoint(Model):
    """The latest signed checkpoint of the log of seal heads (``GET /v1/tlog/checkpoint``): the signed note as
    signed (c2sp.org/tlog-checkpoint in a c2sp.org/signed-note), and its origin, size and base64 root read from it.
    Check the note's signature against a key you pinned before trusting the rest (docs/proofs.md)."""

    checkpoint: str
    origin: str
    size: int
    root_hash: str


class TlogInclusionProof(Model):
    """A sealed chain's leaf in the log (``GET /v1/tlog/proof/inclusion``): its index, the tree size, the leaf
    hash H(0x00 ‖ seal statement), the RFC 6962 path (base64) and the signed checkpoint it leads to."""

    chain_id: str
    leaf_index: int
    tree_size: int
    leaf_hash: str
    hashes: list[str]
    checkpoint: str


class TlogConsistencyProof(Model):
    """That the tree of ``from_size`` leaves is a prefix of the tree of ``to_size`` (``GET /v1/tlog/proof/consistency``)."""

    from_size: int = Field(alias="from")
    to_size: int = Field(alias="to")
    hashes: list[str]


class GrantedCaps(BaseModel):
    """Caps as policy granted them (snake_case on the wire, as on the chain)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    wall_seconds: int
    memory_mib: int
    pids: int
    disk_mib: int
    cpus: float


class EgressNetwork(Model):
    egress: list[str]


class Sandbox(Model):
    id: str
    tenant: str
    state: SandboxState
    image: str | None
    image_id: str | None
    caps: GrantedCaps | None
    network: Union[Literal["none"], EgressNetwork]
    worker_id: str | None
    created_at: str
    ready_at: str | None
    expires_at: str | None
    idle_seconds: int | None
    last_activity_at: str
    operations: int
    destroy_reason: DestroyReason | None
    error_code: ErrorCode | None
    head_seq: int
    head_hash: str
    sealed: bool
    # Absent on the wire unless a create with waitSeconds waits in the placement queue.
    queue: QueueSpot | SkipJsonSchema[None] = None


class SandboxList(Model):
    items: list[Sandbox]
    next_cursor: str | None


class ExecSummary(Model):
    exec_id: str
    exit_code: int | None
    stdout_bytes: int
    stderr_bytes: int
    stdout_sha256: str
    stderr_sha256: str
    truncated: bool
    duration_ms: int
    limit_hit: ExecLimitHit | None
    error_code: ErrorCode | None
    seq: int
    sandbox_state: SandboxState


class ExecResult(ExecSummary):
    """An exec's answer: its output as UTF-8 text (invalid bytes replaced), at most 1 MiB per stream."""

    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        """Its own timeout killed it (the sandbox lives on) or the wall cap did (the sandbox is gone)."""
        return self.limit_hit == "E_TIMEOUT"


class ExecOutput(Model):
    """One ``output`` line of a streamed exec: a piece of stdout or stderr as it was written."""

    type: Literal["output"]
    stream: Literal["stdout", "stderr"]
    data: str

    @property
    def bytes(self) -> bytes:
        return base64.b64decode(self.data)


class ExecStreamResult(ExecSummary):
    type: Literal["result"]


class ExecStreamError(Model):
    type: Literal["error"]
    code: ErrorCode
    message: str


class FileWritten(Model):
    path: str
    bytes: int
    sha256: str
    seq: int


class SecretGrant(Model):
    grantee: str = Field(description="key:<key id> (one key of the tenant) or scope:<scope> (every key of the tenant holding it).")
    granted_by: str
    granted_at: str


class SecretEntry(Model):
    name: str
    last_four: str | None
    key_id: str
    set_by: str | None
    grants: list[SecretGrant]
    created_at: str
    updated_at: str


class SecretList(Model):
    items: list[SecretEntry]


class SecretStored(Model):
    name: str
    created: bool
    last_four: str
    created_at: str
    updated_at: str


class SecretDeleted(Model):
    name: str
    deleted: Literal[True]


class SecretGrants(Model):
    name: str
    grants: list[SecretGrant]


class Key(Model):
    """An API key's view (never its secret or hash): docs/adr/0012-admin-chains.md."""

    id: str
    tenant: str
    prefix: str
    last_four: str | None
    scopes: list[ApiKeyScope]
    status: Literal["active", "expired", "revoked", "pending"]
    created_at: str
    created_by: str | None
    expires_at: str | None
    revoked_at: str | None
    rotations: int
    rotated_at: str | None
    previous_valid_until: str | None


class KeyCreated(Key):
    key: str = Field(description="The whole key, cairn_<prefix>_<secret>: in this response only.")


class KeyList(Model):
    items: list[Key]


class HealthChecks(Model):
    nats: Literal["ok", "down"]
    postgres: Literal["ok", "down"]
    services: dict[str, Literal["ok", "missing"]]


class Health(Model):
    status: Literal["ok", "degraded"]
    checks: HealthChecks


# Which model stands for which component of openapi.json (what the drift test compares).
OPENAPI_COMPONENTS: dict[str, type[BaseModel]] = {
    "Error": ErrorBody,
    "SubmitAccepted": SubmitAccepted,
    "HarborSubmitAccepted": HarborSubmitAccepted,
    "ImageBuilt": ImageBuilt,
    "Run": Run,
    "RunList": RunList,
    "CancelAccepted": CancelAccepted,
    "RegradeAccepted": RegradeAccepted,
    "ApprovalAccepted": ApprovalAccepted,
    "EventPage": EventPage,
    "ProofBundle": ProofBundle,
    "RunArtifacts": RunArtifacts,
    "SealKeys": SealKeys,
    "TlogCheckpoint": TlogCheckpoint,
    "TlogInclusionProof": TlogInclusionProof,
    "TlogConsistencyProof": TlogConsistencyProof,
    "Sandbox": Sandbox,
    "SandboxList": SandboxList,
    "ExecResult": ExecResult,
    "FileWritten": FileWritten,
    "SecretList": SecretList,
    "SecretStored": SecretStored,
    "SecretDeleted": SecretDeleted,
    "SecretGrants": SecretGrants,
    "Key": Key,
    "KeyCreated": KeyCreated,
    "KeyList": KeyList,
    "Health": Health,
}
