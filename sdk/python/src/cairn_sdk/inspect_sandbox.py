"""Cairn as an Inspect AI sandbox: ``sandbox="cairn"`` (or ``("cairn", CairnSandboxConfig(...))``).

Each sample gets its own Cairn sandbox session — a hardened container whose every exec and file
transfer is a receipt on the session's hash chain (``sbx_…``). The chain id is written into the
sample's transcript (an ``InfoEvent`` from source ``cairn``) and its store (``cairn_sandbox_id``), so
the log says which chain to check: ``cairn verify sbx_…``.

How Inspect's calls map to Cairn's (sdk/python/README.md has the whole table):

- ``exec(cmd, input, cwd, env, timeout)``: ``POST /v1/sandboxes/{id}/exec``; the exec's own timeout
  kills the program and its session (``TimeoutError``), the sandbox lives on. ``user`` other than the
  default raises ``SandboxUserUnsupportedError``: every command runs as the sandbox user (uid 65520)
  under ``no-new-privileges``. Stdin over Cairn's 512 KiB, and argv over what a receipt holds, are
  staged as files first (each a receipt), then fed to the program by a fixed wrapper.
- ``read_file`` / ``write_file``: ``GET``/``PUT …/files``; relative paths land in the working
  directory (``/work``); files over Cairn's 16 MiB per transfer move in 16 MiB parts.
- the config: ``image``, ``caps``, ``network`` (egress allowlist), ``secrets``, ``env``, ``ttl_seconds``,
  ``idle_seconds``, as in a SandboxSpec.
"""

from __future__ import annotations

import json
import os
import posixpath
import secrets as _secrets
from pathlib import Path
from typing import Any, Literal, Union, overload

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict, Field

from . import _common as c
from .aio import AsyncCairn, AsyncSandboxSession
from .errors import CairnError

try:  # present in every Inspect that has self_check; kept optional for older ones
    from inspect_ai.util import SandboxUnavailableError
except ImportError:  # pragma: no cover
    SandboxUnavailableError = RuntimeError  # type: ignore[misc,assignment]

__all__ = ["CairnSandboxConfig", "CairnSandboxEnvironment"]

DEFAULT_IMAGE = "cairn/sandbox-busybox:1"
WORKDIR = "/work"
#: Cairn keeps 1 MiB of each output stream; past it the answer says `truncated`.
KEPT_OUTPUT = "1 MiB"
#: An argument longer than this, or an argv longer than ARGV_STAGE_TOTAL in all, is staged as files.
ARGV_STAGE_ARG = 16 * 1024
ARGV_STAGE_TOTAL = 128 * 1024

# Fixed wrappers (the paths and arguments are their arguments, never inside the scripts: I-3).
_STDIN_WRAPPER = 'f=$1; shift; "$@" < "$f"; s=$?; rm -f "$f"; exit $s'
_ARGV_WRAPPER = "\n".join(
    [
        'd=$1; shift; n=$#; i=0',
        'while [ "$i" -lt "$n" ]; do x=$1; shift; case $x in',
        '  =*) set -- "$@" "${x#=}";;',
        '  @*) a=$(cat "$d/${x#@}"; printf x); set -- "$@" "${a%x}";;',
        'esac; i=$((i+1)); done',
        'rm -rf "$d"',
        'exec "$@"',
    ]
)
_APPEND = 'cat "$2" >> "$1" && rm -f "$2"'
_SLICE = 'tail -c +"$(($2 + 1))" "$1" | head -c "$3" > "$4"'


class CairnSandboxConfig(BaseModel):
    """What a Cairn sandbox for a sample is made of (a SandboxSpec), and where the gateway is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = DEFAULT_IMAGE
    #: ``wallSeconds``, ``memoryMiB``, ``pids``, ``diskMiB``, ``cpus`` — granted by policy, never above its maxima.
    caps: dict[str, float] | None = None
    #: Hosts the sandbox may reach through Cairn's egress proxy (``host:port``; the policy must allow them).
    egress: list[str] = Field(default_factory=list)
    #: Secrets mounted under /run/secrets/NAME (the key needs ``secrets:use`` and a grant of each).
    secrets: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    ttl_seconds: int | None = None
    idle_seconds: int | None = None
    #: The gateway and the key; default ``CAIRN_URL``/``CAIRN_API_KEY``, else the local stack.
    url: str | None = None
    api_key_env: str = "CAIRN_API_KEY"

    def __hash__(self) -> int:  # Inspect keys its sandbox cache by the config: dicts and lists hashed by value
        return hash(json.dumps(self.model_dump(), sort_keys=True))

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"image": self.image}
        if self.caps:
            spec["caps"] = {k: (int(v) if k != "cpus" else v) for k, v in self.caps.items()}
        if self.egress:
            spec["network"] = {"egress": list(self.egress)}
        if self.secrets:
            spec["secrets"] = list(self.secrets)
        if self.env:
            spec["env"] = dict(self.env)
        if self.ttl_seconds is not None:
            spec["ttlSeconds"] = self.ttl_seconds
        if self.idle_seconds is not None:
            spec["idleSeconds"] = self.idle_seconds
        return spec


def _config_of(config: SandboxEnvironmentConfigType | None) -> CairnSandboxConfig:
    if config is None:
        return CairnSandboxConfig()
    if isinstance(config, CairnSandboxConfig):
        return config
    if isinstance(config, str):
        text = Path(config).read_text("utf-8")
        if config.endswith((".yaml", ".yml")):
            import yaml  # Inspect depends on PyYAML

            return CairnSandboxConfig.model_validate(yaml.safe_load(text) or {})
        return CairnSandboxConfig.model_validate(json.loads(text))
    if isinstance(config, BaseModel):
        return CairnSandboxConfig.model_validate(config.model_dump())
    raise ValueError(f"a cairn sandbox config is a CairnSandboxConfig or a JSON/YAML file, not {type(config).__name__}")


def _client(config: CairnSandboxConfig) -> AsyncCairn:
    return AsyncCairn(url=config.url, api_key=os.environ.get(config.api_key_env))


@sandboxenv(name="cairn")
class CairnSandboxEnvironment(SandboxEnvironment):
    """One sample's Cairn sandbox session."""

    def __init__(self, client: AsyncCairn, session: AsyncSandboxSession) -> None:
        super().__init__()
        self.client = client
        self.session = session
        caps = session.view.caps
        self._wall_seconds = caps.wall_seconds if caps is not None else None

    @property
    def sandbox_id(self) -> str:
        return self.session.id

    # -- lifecycle -------------------------------------------------------------------------------

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return CairnSandboxConfig.model_validate(config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        # Fail the task at once when the gateway is not there (rather than every sample).
        async with _client(_config_of(config)) as client:
            await client.health()

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        cfg = _config_of(config)
        client = _client(cfg)
        try:
            session = await client.sandboxes.create(cfg.spec())
        except BaseException:
            await client.aclose()
            raise
        _record_chain(session)
        return {"default": cls(client, session)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for environment in environments.values():
            env = environment.as_type(CairnSandboxEnvironment)
            try:
                await env.session.destroy()
            except CairnError:
                pass  # already ended (a cap, its TTL): its chain says so
            finally:
                await env.client.aclose()

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        return None  # every sample's sandbox is destroyed at the sample's end

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        # `inspect sandbox cleanup cairn sbx_…`; without an id, TTLs and idle limits reap what is left.
        if id is None:
            return
        async with AsyncCairn() as client:
            await client.sandboxes.destroy(id)

    # -- operations ------------------------------------------------------------------------------

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        if user is not None:
            raise SandboxUserUnsupportedError(
                f"a Cairn sandbox runs every command as its sandbox user (uid 65520) under no-new-privileges: it cannot run as {user!r}"
            )
        workdir = _resolve(cwd) if cwd is not None else WORKDIR
        argv = list(cmd)
        stdin: bytes | None = None if input is None else (input.encode("utf-8") if isinstance(input, str) else bytes(input))
        if _needs_argv_staging(argv):
            argv = await self._stage_argv(argv)
        if stdin is not None and len(stdin) > c.MAX_STDIN_BYTES:
            staged = f"{WORKDIR}/.cairn-stdin-{_token()}"
            await self._write(staged, stdin)
            argv = ["/bin/sh", "-c", _STDIN_WRAPPER, "cairn-stdin", staged, *argv]
            stdin = None
        own = self._own_timeout(timeout)
        try:
            result = await self.session.exec(argv, env=env, workdir=workdir, stdin=stdin, timeout=own)
        except CairnError as error:
            raise _os_error(error, workdir) from error
        if result.limit_hit is not None:
            if result.sandbox_state == "READY":
                raise TimeoutError(f"the command did not end within {own} s: it and its session were killed")
            raise SandboxUnavailableError(f"the command hit the sandbox's {result.limit_hit} cap: Cairn destroyed sandbox {self.sandbox_id}")
        if result.truncated:
            raise OutputLimitExceededError(KEPT_OUTPUT, truncated_output=result.stdout)
        code = result.exit_code if result.exit_code is not None else 137
        if code == 126 and "permission denied" in result.stderr.lower():
            raise PermissionError(result.stderr.strip())
        return ExecResult(success=code == 0, returncode=code, stdout=result.stdout, stderr=result.stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)
        await self._write(_resolve(file), data, shown=file)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        path = _resolve(file)
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        try:
            data = await self.session.read_file(path)
        except CairnError as error:
            if error.code != "E_TOO_LARGE":
                raise _os_error(error, file) from error
            data = await self._read_in_parts(path, file, limit)
        if len(data) > limit:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None)
        return data.decode("utf-8") if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        return SandboxConnection(type="cairn", command=f"npx --no-install cairn sandbox exec {self.sandbox_id} -- sh -c '<command>'", container=self.sandbox_id)

    # -- helpers ---------------------------------------------------------------------------------

    def _own_timeout(self, timeout: int | None) -> int | None:
        # Below the wall cap, a timeout kills only the command; at the cap the sandbox would go too.
        if self._wall_seconds is None or self._wall_seconds <= 1:
            return timeout
        ceiling = self._wall_seconds - 1
        return ceiling if timeout is None else max(1, min(int(timeout), ceiling))

    async def _write(self, path: str, data: bytes, *, shown: str | None = None) -> None:
        try:
            await self.session.write_file(path, data[: c.MAX_FILE_BYTES])
            for start in range(c.MAX_FILE_BYTES, len(data), c.MAX_FILE_BYTES):
                part = f"/tmp/.cairn-part-{_token()}"
                await self.session.write_file(part, data[start : start + c.MAX_FILE_BYTES])
                appended = await self.session.exec(["/bin/sh", "-c", _APPEND, "cairn-append", path, part])
                if appended.exit_code != 0:
                    raise OSError(f"{shown or path}: appending a part failed: {appended.stderr.strip()}")
        except CairnError as error:
            raise _os_error(error, shown or path) from error

    async def _read_in_parts(self, path: str, shown: str, limit: int) -> bytes:
        sized = await self.session.exec(["/bin/sh", "-c", 'exec stat -c %s "$1"', "cairn-size", path])
        if sized.exit_code != 0:
            raise OSError(f"{shown}: {sized.stderr.strip()}")
        size = int(sized.stdout.strip())
        if size > limit:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, truncated_output=None)
        parts = []
        for start in range(0, size, c.MAX_FILE_BYTES):
            part = f"/tmp/.cairn-part-{_token()}"
            cut = await self.session.exec(["/bin/sh", "-c", _SLICE, "cairn-slice", path, str(start), str(c.MAX_FILE_BYTES), part])
            if cut.exit_code != 0:
                raise OSError(f"{shown}: reading a part failed: {cut.stderr.strip()}")
            parts.append(await self.session.read_file(part))
            await self.session.exec(["/bin/sh", "-c", 'exec rm -f "$1"', "cairn-rm", part])
        return b"".join(parts)

    async def _stage_argv(self, argv: list[str]) -> list[str]:
        directory = f"/tmp/.cairn-argv-{_token()}"
        specs = []
        for index, arg in enumerate(argv):
            if len(arg.encode("utf-8")) > 1024:
                name = f"{index:06d}"
                await self._write(f"{directory}/{name}", arg.encode("utf-8"))
                specs.append(f"@{name}")
            else:
                specs.append(f"={arg}")
        return ["/bin/sh", "-c", _ARGV_WRAPPER, "cairn-argv", directory, *specs]


def _needs_argv_staging(argv: list[str]) -> bool:
    sizes = [len(arg.encode("utf-8")) for arg in argv]
    return len(argv) > 4096 or any(size > ARGV_STAGE_ARG for size in sizes) or sum(sizes) > ARGV_STAGE_TOTAL


def _token() -> str:
    return _secrets.token_hex(8)


def _resolve(file: str) -> str:
    """Relative paths land in the working directory, as Inspect expects; `.`/`..` are resolved here."""
    path = file if file.startswith("/") else f"{WORKDIR}/{file}"
    return posixpath.normpath(path)


def _os_error(error: CairnError, shown: str) -> Exception:
    """Cairn's refusal of a file operation as the OSError Inspect's callers expect."""
    reason = error.details.get("reason") if isinstance(error.details, dict) else None
    message = f"{shown}: {error.message}"
    if error.code == "E_NOT_FOUND" and "path" in (error.details or {}):
        return FileNotFoundError(message)
    if error.code == "E_INPUT" and reason == "directory":
        return IsADirectoryError(f"{shown}: is a directory")
    if (error.code == "E_FORBIDDEN" and reason == "permission") or (error.code == "E_INPUT" and "path" in (error.details or {})):
        return PermissionError(message)
    if error.code == "E_CONFLICT":
        return SandboxUnavailableError(f"{error.message} (Cairn {error.code})")
    return error


def _record_chain(session: AsyncSandboxSession) -> None:
    """Puts the sample's chain id in the Inspect log: its transcript and its store."""
    try:
        from inspect_ai.log import transcript

        transcript().info({"cairn_sandbox_id": session.id, "verify": f"cairn verify {session.id}"}, source="cairn")
    except Exception:  # noqa: BLE001 - outside a sample (self_check), there is no transcript to write to
        pass
    try:
        from inspect_ai.util import store

        store().set("cairn_sandbox_id", session.id)
    except Exception:  # noqa: BLE001
        pass
