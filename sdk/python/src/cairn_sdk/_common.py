"""What the sync and the async clients share: where the gateway is, the key, requests, errors, retries."""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from .errors import cairn_error, error_from_body

#: Cairn's own bounds, as the gateway enforces them (a request over them is refused before it is sent).
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_STDIN_BYTES = 512 * 1024
#: Retries of a refusal that says when to come back (429/503 with Retry-After), and the longest wait honoured.
DEFAULT_RETRIES = 3
MAX_RETRY_AFTER_SECONDS = 30.0
USER_AGENT = "cairn-sdk-python/0.1.0"

_RETRYABLE_STATUS = frozenset({429, 503})


@dataclass(frozen=True)
class Connection:
    url: str
    api_key: str


def _stack_home() -> Path:
    return Path(os.environ.get("CAIRN_HOME") or Path.home() / ".cairn")


def resolve_connection(url: str | None, api_key: str | None) -> Connection:
    """The arguments, else ``CAIRN_URL`` / ``CAIRN_API_KEY``, else the local stack ``cairn up`` started."""
    url = url or os.environ.get("CAIRN_URL")
    api_key = api_key or os.environ.get("CAIRN_API_KEY")
    if url is None or api_key is None:
        home = _stack_home()
        try:
            stack = json.loads((home / "stack.json").read_text("utf-8"))
        except (OSError, ValueError):
            stack = None
        if url is None and isinstance(stack, dict) and isinstance(stack.get("url"), str):
            url = stack["url"]
        if api_key is None:
            key_file = Path(stack["keyFile"]) if isinstance(stack, dict) and isinstance(stack.get("keyFile"), str) else home / "api-key"
            try:
                api_key = key_file.read_text("utf-8").strip()
            except OSError:
                api_key = None
    if url is None:
        raise cairn_error("E_UNAVAILABLE", "no gateway: pass url=, set CAIRN_URL, or start a stack with `cairn up`")
    if not api_key:
        raise cairn_error("E_UNAUTHORIZED", "no API key: pass api_key=, set CAIRN_API_KEY, or start a stack with `cairn up`")
    return Connection(url=url.rstrip("/"), api_key=api_key)


def default_headers(api_key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {api_key}", "user-agent": USER_AGENT}


def new_idempotency_key() -> str:
    return f"py-{secrets.token_urlsafe(24)}"


def segment(value: str) -> str:
    """A path segment: ids are Cairn's own grammar, but nothing a caller passes may add a path."""
    return quote(value, safe="")


def retry_after(response: httpx.Response) -> float | None:
    """Seconds a 429/503 asks the caller to wait (``Retry-After``: seconds), or None: not retryable."""
    if response.status_code not in _RETRYABLE_STATUS:
        return None
    named = _retry_after_header(response)
    return None if named is None else min(named, MAX_RETRY_AFTER_SECONDS)


def _retry_after_header(response: httpx.Response) -> float | None:
    header = response.headers.get("retry-after")
    if header is None or not re.fullmatch(r"\d{1,6}(\.\d+)?", header.strip()):
        return None
    return float(header)


def raise_for_error(response: httpx.Response, body: bytes | None = None) -> None:
    """Cairn's ``{code, message, details}`` as the exception of its code."""
    if response.status_code < 400:
        return
    raw = body if body is not None else response.content
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    raise error_from_body(parsed, response.status_code, _retry_after_header(response))


def exec_body(
    argv: list[str],
    *,
    env: dict[str, str] | None,
    workdir: str | None,
    stdin: str | bytes | None,
    timeout: int | None,
) -> dict[str, Any]:
    if isinstance(argv, str):
        raise cairn_error("E_INPUT", "argv must be a list of strings, not a shell string (I-3)", {"field": "argv"})
    body: dict[str, Any] = {"argv": list(argv)}
    if env is not None:
        body["env"] = dict(env)
    if workdir is not None:
        body["workdir"] = workdir
    if stdin is not None:
        data = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin)
        if len(data) > MAX_STDIN_BYTES:
            raise cairn_error("E_TOO_LARGE", f"stdin: at most {MAX_STDIN_BYTES} bytes", {"field": "stdin"})
        # Always as bytes: text and binary alike reach the program exactly.
        body["stdinBase64"] = base64.b64encode(data).decode("ascii")
    if timeout is not None:
        body["timeoutSeconds"] = int(timeout)
    return body


def file_query(path: str, mode: int | None = None) -> dict[str, str]:
    query = {"path": path}
    if mode is not None:
        query["mode"] = format(mode, "04o")
    return query


def check_file_bytes(data: bytes) -> None:
    if len(data) > MAX_FILE_BYTES:
        raise cairn_error("E_TOO_LARGE", f"a file is at most {MAX_FILE_BYTES} bytes", {"bytes": len(data)})


#: The most bytes an output is read into memory at once unless told otherwise (as @cairn/sdk's default).
DEFAULT_MAX_READ_BYTES = 64 * 1024 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")


def checked_file(response: httpx.Response, path: str) -> bytes:
    """A sandbox file's bytes, checked against the sha256 the gateway names (``X-Cairn-Sha256``)."""
    return checked_bytes(response.content, named_sha256(response, path), path)


def named_sha256(response: httpx.Response, what: str) -> str:
    """The sha256 the gateway names for the bytes it serves; an answer naming none is refused."""
    named = response.headers.get("x-cairn-sha256")
    if named is None or not _SHA256.fullmatch(named):
        raise cairn_error("E_INTERNAL", f"{what}: the gateway named no sha256 for these bytes", {"reason": "sha256_missing"})
    return named


def check_expected(named: str, expected: str | None, what: str) -> None:
    """The sha256 the gateway names is the one the caller holds (from the listing or a receipt)."""
    if expected is not None and named != expected:
        raise cairn_error(
            "E_INTERNAL", f"{what}: the gateway named sha256 {named}, not the {expected} the chain records", {"sha256": named, "expected": expected, "reason": "sha256_mismatch"}
        )


def check_announced(response: httpx.Response, max_bytes: int, what: str) -> int | None:
    """The announced size (Content-Length), refused before anything is read when over ``max_bytes``."""
    length = response.headers.get("content-length")
    if "content-encoding" in response.headers:  # the length of what is sent, not of the bytes
        length = None
    announced = int(length) if length is not None and length.isdigit() else None
    if announced is not None and announced > max_bytes:
        raise cairn_error("E_TOO_LARGE", f"{what}: {announced} bytes, more than the {max_bytes} this client reads at once", {"bytes": announced, "maxBytes": max_bytes})
    return announced


class BoundedBuffer:
    """Chunks as they arrive, refused (E_TOO_LARGE) once past ``max_bytes``."""

    def __init__(self, max_bytes: int, what: str) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._max = max_bytes
        self._what = what

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._max:
            raise cairn_error("E_TOO_LARGE", f"{self._what}: more than the {self._max} bytes this client reads at once", {"maxBytes": self._max})
        self._chunks.append(chunk)

    def bytes(self, announced: int | None) -> bytes:
        content = b"".join(self._chunks)
        if announced is not None and len(content) != announced:
            raise cairn_error("E_INTERNAL", f"{self._what}: {len(content)} bytes arrived of the {announced} announced", {"reason": "short_read"})
        return content


def checked_bytes(content: bytes, named: str, what: str) -> bytes:
    """The bytes, only if they hash here to the sha256 the gateway named: a mismatch raises, never returns."""
    import hashlib

    actual = hashlib.sha256(content).hexdigest()
    if actual != named:
        raise cairn_error("E_INTERNAL", f"{what}: the bytes received hash to {actual}, but the gateway named {named}", {"sha256": actual, "named": named, "reason": "sha256_mismatch"})
    return content


def step_output_path(run_id: str, step: int, stream: str, attempt: int | None = None) -> str:
    """``attempt``: that attempt's output (1 the first) of a run retried after a lost worker; None, the current one's."""
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= 63:
        raise cairn_error("E_INPUT", "step: an index 0..63", {"field": "step"})
    if stream not in ("stdout", "stderr"):
        raise cairn_error("E_INPUT", "stream: stdout or stderr", {"field": "stream"})
    if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int) or not 1 <= attempt <= 4):
        raise cairn_error("E_INPUT", "attempt: 1..4", {"field": "attempt"})
    path = f"/v1/runs/{segment(run_id)}/steps/{step}/{stream}"
    return path if attempt is None else f"{path}?attempt={attempt}"


def artifact_path(run_id: str, path: str) -> str:
    """``/out/report.json`` → ``…/artifacts/out/report.json``, each segment percent-encoded."""
    parts = path.split("/")
    if not path.startswith("/") or any(p in ("", ".", "..") for p in parts[1:]):
        raise cairn_error("E_INPUT", f"path: a collected file's absolute path, as the listing names it (not {path!r})", {"field": "path"})
    return f"/v1/runs/{segment(run_id)}/artifacts/" + "/".join(segment(p) for p in parts[1:])


def exec_output_path(sandbox_id: str, exec_id: str, stream: str) -> str:
    if stream not in ("stdout", "stderr"):
        raise cairn_error("E_INPUT", "stream: stdout or stderr", {"field": "stream"})
    return f"/v1/sandboxes/{segment(sandbox_id)}/execs/{segment(exec_id)}/{stream}"


def sealed_at_or_before(view: Any, last: int) -> bool:
    """A chain view (a run's or a sandbox's) says it is sealed, and ``last`` is its head: nothing more will come."""
    if not isinstance(view, dict) or view.get("sealed") is not True:
        return False
    head = view.get("headSeq", view.get("eventCount"))
    return isinstance(head, int) and last >= head


class SseParser:
    """Server-sent events, fed line by line: yields ``(id, event, data)`` for each event."""

    def __init__(self) -> None:
        self._id: str | None = None
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str | None, str, str] | None:
        if line == "":
            if not self._data:
                self._event = None
                return None
            event = (self._id, self._event or "message", "\n".join(self._data))
            self._event = None
            self._data = []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "id":
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None


#: A Harbor task sent over REST (``POST /v1/missions/harbor``): at most this many files and decoded bytes.
MAX_HARBOR_TASK_FILES = 256
MAX_HARBOR_TASK_BYTES = 768 * 1024
#: How long ``submit_harbor_task`` waits by default: a worker builds the task's environment first (at most 10 minutes by default).
HARBOR_SUBMIT_TIMEOUT_SECONDS = 900.0
_HARBOR_PARTS = ("environment", "tests", "solution")


def harbor_task_body(task_dir: str | os.PathLike[str], *, oracle: bool, agent: list[str] | None, job: str | None) -> dict[str, Any]:
    """A Harbor task directory as the body of ``POST /v1/missions/harbor``: task.toml, instruction.md,
    environment/, tests/ and solution/, regular files only (a symlink, device or socket is E_INPUT), within
    the REST limits. The gateway checks and maps it exactly as ``cairn run <task-dir>`` does."""
    if oracle == (agent is not None):
        raise cairn_error("E_INPUT", "give oracle=True (run solution/solve.sh) or agent=[argv…], exactly one")
    if agent is not None and (not isinstance(agent, list) or not agent or not all(isinstance(a, str) for a in agent)):
        raise cairn_error("E_INPUT", "agent is an argv: a non-empty list of strings, never a shell string (I-3)")
    root = Path(task_dir)
    if not (root / "task.toml").is_file() or (root / "task.toml").is_symlink():
        raise cairn_error("E_INPUT", f"{root}/task.toml is missing: a Harbor task has task.toml", {"path": "task.toml"})
    found: list[tuple[str, Path]] = [(name, root / name) for name in ("task.toml", "instruction.md") if (root / name).exists() or (root / name).is_symlink()]
    for part in _HARBOR_PARTS:
        base = root / part
        if not base.exists() and not base.is_symlink():
            continue
        if base.is_symlink() or not base.is_dir():
            raise cairn_error("E_INPUT", f"{base}: a task's {part}/ must be a directory (not a symlink)", {"path": part})
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames) + [d for d in dirnames if Path(dirpath, d).is_symlink()]:
                full = Path(dirpath, name)
                found.append((full.relative_to(root).as_posix(), full))
    files: list[dict[str, Any]] = []
    total = 0
    for relative, full in found:
        info = full.lstat()
        if not stat.S_ISREG(info.st_mode):
            raise cairn_error("E_INPUT", f"{full}: only regular files may be in a task (not a symlink, device or socket)", {"path": relative})
        total += info.st_size
        if len(files) + 1 > MAX_HARBOR_TASK_FILES or total > MAX_HARBOR_TASK_BYTES:
            raise cairn_error("E_INPUT", f"{root}: a task may have at most {MAX_HARBOR_TASK_FILES} files and {MAX_HARBOR_TASK_BYTES} bytes", {"limit": MAX_HARBOR_TASK_BYTES})
        files.append({"path": relative, "content": base64.b64encode(full.read_bytes()).decode("ascii"), "mode": 0o755 if info.st_mode & 0o111 else 0o644})
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", root.resolve().name).lstrip("._-")[:128] or "harbor-task"
    body: dict[str, Any] = {"files": files, "name": name}
    if oracle:
        body["oracle"] = True
    else:
        body["agent"] = list(agent or [])
    if job is not None:
        body["job"] = job
    return body


def image_build_body(dockerfile: str, files: dict[str, bytes | str] | None, timeout_seconds: int | None) -> dict[str, Any]:
    """The body of ``POST /v1/images/builds``: the Dockerfile's text, the context's files (path → bytes or
    UTF-8 text; a path ending in ``.sh`` is sent executable), the build's time limit."""
    body: dict[str, Any] = {"dockerfile": dockerfile}
    if files:
        body["files"] = [
            {"path": path, "content": base64.b64encode(content.encode("utf-8") if isinstance(content, str) else content).decode("ascii"), "mode": 0o755 if path.endswith(".sh") else 0o644}
            for path, content in sorted(files.items())
        ]
    if timeout_seconds is not None:
        body["timeoutSeconds"] = timeout_seconds
    return body
