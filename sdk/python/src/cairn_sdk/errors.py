"""Cairn's error codes as exceptions: one class per code of the closed union in
``libs/contracts/src/error-codes.ts`` (a test fails when a code is added there and not here).

Every error crosses the wire as ``{code, message, details}``; ``error_from_body`` turns one into the
exception of its code. Catch a code's class (``except NotFound``), or ``CairnError`` and read ``.code``.
"""

from __future__ import annotations

from typing import Any, cast

__all__ = [
    "API_ERROR_CODES",
    "ERROR_CLASSES",
    "ERROR_CODES",
    "TAXONOMY_ERROR_CODES",
    "CairnError",
    "cairn_error",
    "error_from_body",
]

TAXONOMY_ERROR_CODES: tuple[str, ...] = (
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
)

API_ERROR_CODES: tuple[str, ...] = (
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
)

ERROR_CODES: tuple[str, ...] = TAXONOMY_ERROR_CODES + API_ERROR_CODES


class CairnError(Exception):
    """An error Cairn answered (or this SDK decided), identified by its code.

    ``retry_after``: the seconds a refusal asks to wait before trying again (``Retry-After``, else
    ``details.retryAfterSeconds``: ``E_RATE_LIMITED``, ``E_CAPACITY``), None when it names none.
    """

    code: str = "E_INTERNAL"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: dict[str, Any] | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details: dict[str, Any] = details or {}
        self.status = status
        named = self.details.get("retryAfterSeconds")
        if retry_after is None and isinstance(named, (int, float)) and not isinstance(named, bool) and named > 0:
            retry_after = float(named)
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def _class_name(code: str) -> str:
    return "".join(part.capitalize() for part in code[2:].split("_"))


class _CapacityError(CairnError):
    """Cairn's E_CAPACITY (503): no live worker has room now. ``resource`` says what ran out first
    (``slots``, ``memory``, ``disk``, ``pids`` or ``cpu``), ``retry_after`` when to try again; or
    ask to wait in the placement queue instead (a sandbox's ``waitSeconds``)."""

    @property
    def resource(self) -> str | None:
        value = self.details.get("resource")
        return value if isinstance(value, str) else None


# Codes whose class carries more than the code (still one class per code, named as the others).
_BASES: dict[str, type[CairnError]] = {"E_CAPACITY": _CapacityError}

# One subclass per code: E_NOT_FOUND → NotFound, E_POLICY_DENIED → PolicyDenied, …
ERROR_CLASSES: dict[str, type[CairnError]] = {}
for _code in ERROR_CODES:
    _base = _BASES.get(_code, CairnError)
    _doc = _base.__doc__ if _base is not CairnError else f"Cairn's {_code}."
    _cls = type(_class_name(_code), (_base,), {"code": _code, "__doc__": _doc, "__module__": __name__})
    ERROR_CLASSES[_code] = _cls
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
del _code, _cls, _base, _doc

# Named here too so that editors and type checkers see them.
Input = ERROR_CLASSES["E_INPUT"]
PolicyDenied = ERROR_CLASSES["E_POLICY_DENIED"]
RuntimeAbsent = ERROR_CLASSES["E_RUNTIME_ABSENT"]
SandboxStart = ERROR_CLASSES["E_SANDBOX_START"]
Timeout = ERROR_CLASSES["E_TIMEOUT"]
ChainBrokenError = ERROR_CLASSES["E_CHAIN_BROKEN"]
Unauthorized = ERROR_CLASSES["E_UNAUTHORIZED"]
Forbidden = ERROR_CLASSES["E_FORBIDDEN"]
NotFound = ERROR_CLASSES["E_NOT_FOUND"]
Sealed = ERROR_CLASSES["E_SEALED"]
Conflict = ERROR_CLASSES["E_CONFLICT"]
TooLarge = ERROR_CLASSES["E_TOO_LARGE"]
RateLimited = ERROR_CLASSES["E_RATE_LIMITED"]
Capacity = cast("type[_CapacityError]", ERROR_CLASSES["E_CAPACITY"])
Unavailable = ERROR_CLASSES["E_UNAVAILABLE"]
Internal = ERROR_CLASSES["E_INTERNAL"]
__all__.append("ChainBrokenError")


def error_from_body(body: Any, status: int | None = None, retry_after: float | None = None) -> CairnError:
    """The exception for an error body; a code this SDK does not know (a newer server) is a plain CairnError.
    ``retry_after``: the answer's ``Retry-After`` in seconds, if it had one."""
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        return ERROR_CLASSES["E_INTERNAL"](f"an error answer without a Cairn error body (HTTP {status})", status=status, retry_after=retry_after)
    code = body["code"]
    message = body.get("message") if isinstance(body.get("message"), str) else code
    details = body.get("details") if isinstance(body.get("details"), dict) else None
    cls = ERROR_CLASSES.get(code)
    if cls is None:
        return CairnError(message, code=code, details=details, status=status, retry_after=retry_after)
    return cls(message, details=details, status=status, retry_after=retry_after)


def cairn_error(code: str, message: str, details: dict[str, Any] | None = None) -> CairnError:
    """An error of this SDK's own making, as the class of its code (what the server would have answered)."""
    cls = ERROR_CLASSES.get(code)
    return cls(message, details=details) if cls is not None else CairnError(message, code=code, details=details)
