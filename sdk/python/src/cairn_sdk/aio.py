"""The asynchronous client: ``AsyncCairn``, the same surface as ``Cairn`` with ``await`` (and ``async with``)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from . import _common as c
from .errors import CairnError, cairn_error, error_from_body
from .jcs import parse_json
from .models import (
    ApprovalAccepted,
    CancelAccepted,
    EventPage,
    ExecOutput,
    ExecResult,
    ExecStreamError,
    ExecStreamResult,
    FileWritten,
    HarborSubmitAccepted,
    Health,
    ImageBuilt,
    Key,
    KeyCreated,
    KeyList,
    ProofBundle,
    Receipt,
    RegradeAccepted,
    Run,
    RunArtifacts,
    RunList,
    Sandbox,
    SandboxList,
    SealKeys,
    SecretDeleted,
    SecretGrants,
    SecretList,
    SecretStored,
    SubmitAccepted,
    TlogCheckpoint,
    TlogConsistencyProof,
    TlogInclusionProof,
)
from .verify import ChainVerification, verify_bundle

OutputCallback = Callable[[str, bytes], None]


class AsyncCairn:
    """A Cairn gateway, for asyncio code. Without arguments: ``CAIRN_URL``/``CAIRN_API_KEY``, else the local stack."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = c.DEFAULT_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        conn = c.resolve_connection(url, api_key)
        self.url = conn.url
        self._retries = retries
        self._http = httpx.AsyncClient(base_url=conn.url, headers=c.default_headers(conn.api_key), timeout=timeout, transport=transport)
        self.runs = AsyncRuns(self)
        self.images = AsyncImages(self)
        self.sandboxes = AsyncSandboxes(self)
        self.secrets = AsyncSecrets(self)
        self.keys = AsyncKeys(self)
        self.tlog = AsyncTlog(self)

    async def __aenter__(self) -> AsyncCairn:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def health(self) -> Health:
        return Health.model_validate((await self.request("GET", "/v1/health")).json())

    async def seal_keys(self) -> SealKeys:
        """The deployment's seal verification keys (``GET /.well-known/cairn/keys``, public), the current one first."""
        return SealKeys.model_validate((await self.request("GET", "/.well-known/cairn/keys")).json())

    def sandbox(self, spec: dict[str, Any] | None = None, *, idempotency_key: str | None = None, **fields: Any) -> _SandboxContext:
        """``async with client.sandbox(image=…) as sbx:`` — created on entry, destroyed on exit."""
        return _SandboxContext(self, spec, idempotency_key, fields)

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        for attempt in range(self._retries + 1):
            response = await self._http.request(method, path, **kwargs)
            wait = c.retry_after(response)
            if wait is None or attempt == self._retries:
                break
            await asyncio.sleep(wait)
        c.raise_for_error(response)
        return response

    @asynccontextmanager
    async def _stream(self, method: str, path: str, **kwargs: Any) -> AsyncIterator[httpx.Response]:
        for attempt in range(self._retries + 1):
            async with self._http.stream(method, path, **kwargs) as response:
                wait = c.retry_after(response)
                if wait is None or attempt == self._retries:
                    if response.status_code >= 400:
                        c.raise_for_error(response, await response.aread())
                    yield response
                    return
            await asyncio.sleep(wait)

    async def _read_bytes(self, path: str, *, expected_sha256: str | None, max_bytes: int) -> bytes:
        """Served bytes, hashed here against ``X-Cairn-Sha256`` (and ``expected_sha256``): a mismatch raises ``E_INTERNAL``."""
        what = f"GET {path}"
        async with self._stream("GET", path, headers={"accept": "*/*"}) as response:
            named = c.named_sha256(response, what)
            c.check_expected(named, expected_sha256, what)
            announced = c.check_announced(response, max_bytes, what)
            buffer = c.BoundedBuffer(max_bytes, what)
            async for chunk in response.aiter_bytes():
                buffer.add(chunk)
            return c.checked_bytes(buffer.bytes(announced), named, what)

    async def _chain_events(self, base: str, chain_id: str, after: int, follow: bool) -> AsyncIterator[Receipt]:
        if not follow:
            while True:
                page = EventPage.model_validate((await self.request("GET", f"{base}/events", params={"after": after, "limit": 1000})).json())
                for item in page.items:
                    yield item
                if page.next_after is None:
                    return
                after = page.next_after
        last = after
        while True:
            headers = {"accept": "text/event-stream"}
            if last > 0:
                headers["last-event-id"] = f"{chain_id}:{last}"
            try:
                async with self._stream("GET", f"{base}/events/stream", headers=headers, timeout=httpx.Timeout(None, connect=30.0)) as response:
                    parser = c.SseParser()
                    async for line in response.aiter_lines():
                        event = parser.feed(line)
                        if event is None or event[1] != "receipt":
                            continue
                        receipt = Receipt.model_validate(json.loads(event[2]))
                        last = receipt.seq
                        yield receipt
                        if receipt.type == "run.sealed":
                            return
            except (httpx.TransportError, httpx.StreamError):
                await asyncio.sleep(0.5)
                continue
            if c.sealed_at_or_before((await self.request("GET", base)).json(), last):
                return
            await asyncio.sleep(0.2)


class AsyncImages:
    def __init__(self, client: AsyncCairn) -> None:
        self._c = client

    async def build(self, dockerfile: str, files: dict[str, bytes | str] | None = None, *, timeout_seconds: int | None = None, timeout: float = c.HARBOR_SUBMIT_TIMEOUT_SECONDS) -> ImageBuilt:
        """Has a worker build an image (see ``Cairn.images.build``)."""
        body = c.image_build_body(dockerfile, files, timeout_seconds)
        return ImageBuilt.model_validate((await self._c.request("POST", "/v1/images/builds", json=body, timeout=timeout)).json())


class AsyncRuns:
    def __init__(self, client: AsyncCairn) -> None:
        self._c = client

    async def submit(self, spec: dict[str, Any], *, idempotency_key: str | None = None) -> SubmitAccepted:
        key = idempotency_key or c.new_idempotency_key()
        return SubmitAccepted.model_validate((await self._c.request("POST", "/v1/runs", json=spec, headers={"idempotency-key": key})).json())

    async def submit_harbor_task(
        self,
        task_dir: str | os.PathLike[str],
        *,
        oracle: bool = False,
        agent: list[str] | None = None,
        job: str | None = None,
        idempotency_key: str | None = None,
        timeout: float = c.HARBOR_SUBMIT_TIMEOUT_SECONDS,
    ) -> HarborSubmitAccepted:
        """Submits a Harbor task directory as a run (see ``Cairn.runs.submit_harbor_task``)."""
        body = c.harbor_task_body(task_dir, oracle=oracle, agent=agent, job=job)
        key = idempotency_key or c.new_idempotency_key()
        response = await self._c.request("POST", "/v1/missions/harbor", json=body, headers={"idempotency-key": key}, timeout=timeout)
        return HarborSubmitAccepted.model_validate(response.json())

    async def get(self, run_id: str) -> Run:
        return Run.model_validate((await self._c.request("GET", f"/v1/runs/{c.segment(run_id)}")).json())

    async def list(self, *, limit: int | None = None, state: str | None = None, cursor: str | None = None) -> RunList:
        params = {k: v for k, v in {"limit": limit, "state": state, "cursor": cursor}.items() if v is not None}
        return RunList.model_validate((await self._c.request("GET", "/v1/runs", params=params)).json())

    def events(self, run_id: str, *, after: int = 0, follow: bool = True) -> AsyncIterator[Receipt]:
        return self._c._chain_events(f"/v1/runs/{c.segment(run_id)}", run_id, after, follow)

    async def wait(self, run_id: str, *, timeout: float | None = None) -> Run:
        deadline = None if timeout is None else time.monotonic() + timeout

        def late() -> CairnError:
            return cairn_error("E_TIMEOUT", f"run {run_id} was not sealed within {timeout} s", {"runId": run_id})

        async for _ in self.events(run_id):
            if deadline is not None and time.monotonic() > deadline:
                raise late()
        while True:
            run = await self.get(run_id)
            if run.sealed:
                return run
            if deadline is not None and time.monotonic() > deadline:
                raise late()
            await asyncio.sleep(0.1)

    async def bundle(self, run_id: str) -> ProofBundle:
        return ProofBundle.model_validate((await self._c.request("GET", f"/v1/runs/{c.segment(run_id)}/bundle")).json())

    async def artifacts(self, run_id: str) -> RunArtifacts:
        return RunArtifacts.model_validate((await self._c.request("GET", f"/v1/runs/{c.segment(run_id)}/artifacts")).json())

    async def stdout(self, run_id: str, step: int, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        return await self.output(run_id, step, "stdout", expected_sha256=expected_sha256, max_bytes=max_bytes)

    async def stderr(self, run_id: str, step: int, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        return await self.output(run_id, step, "stderr", expected_sha256=expected_sha256, max_bytes=max_bytes)

    async def output(
        self, run_id: str, step: int, stream: str, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES, attempt: int | None = None
    ) -> bytes:
        return await self._c._read_bytes(c.step_output_path(run_id, step, stream, attempt), expected_sha256=expected_sha256, max_bytes=max_bytes)

    async def artifact(self, run_id: str, path: str, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        return await self._c._read_bytes(c.artifact_path(run_id, path), expected_sha256=expected_sha256, max_bytes=max_bytes)

    async def verify(self, run_id: str) -> ChainVerification:
        return verify_bundle(parse_json((await self._c.request("GET", f"/v1/runs/{c.segment(run_id)}/bundle")).content))

    async def cancel(self, run_id: str, *, reason: str | None = None) -> CancelAccepted:
        body = {} if reason is None else {"reason": reason}
        return CancelAccepted.model_validate((await self._c.request("POST", f"/v1/runs/{c.segment(run_id)}/cancel", json=body)).json())

    async def regrade(self, run_id: str, *, reason: str | None = None) -> RegradeAccepted:
        body = {} if reason is None else {"reason": reason}
        return RegradeAccepted.model_validate((await self._c.request("POST", f"/v1/runs/{c.segment(run_id)}/regrade", json=body)).json())

    async def approve(self, run_id: str, *, reject: bool = False, comment: str | None = None, approval_id: str | None = None) -> ApprovalAccepted:
        body: dict[str, Any] = {"decision": "reject" if reject else "approve"}
        if comment is not None:
            body["comment"] = comment
        if approval_id is not None:
            body["approvalId"] = approval_id
        return ApprovalAccepted.model_validate((await self._c.request("POST", f"/v1/runs/{c.segment(run_id)}/approvals", json=body)).json())


class AsyncSandboxes:
    def __init__(self, client: AsyncCairn) -> None:
        self._c = client

    async def create(self, spec: dict[str, Any] | None = None, *, idempotency_key: str | None = None, **fields: Any) -> AsyncSandboxSession:
        body = {**(spec or {}), **fields}
        headers = {} if idempotency_key is None else {"idempotency-key": idempotency_key}
        view = Sandbox.model_validate((await self._c.request("POST", "/v1/sandboxes", json=body, headers=headers)).json())
        return AsyncSandboxSession(self._c, view)

    async def get(self, sandbox_id: str) -> Sandbox:
        return Sandbox.model_validate((await self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}")).json())

    async def list(self, *, limit: int | None = None, state: str | None = None, cursor: str | None = None) -> SandboxList:
        params = {k: v for k, v in {"limit": limit, "state": state, "cursor": cursor}.items() if v is not None}
        return SandboxList.model_validate((await self._c.request("GET", "/v1/sandboxes", params=params)).json())

    def events(self, sandbox_id: str, *, after: int = 0, follow: bool = False) -> AsyncIterator[Receipt]:
        return self._c._chain_events(f"/v1/sandboxes/{c.segment(sandbox_id)}", sandbox_id, after, follow)

    async def bundle(self, sandbox_id: str) -> ProofBundle:
        return ProofBundle.model_validate((await self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}/bundle")).json())

    async def verify(self, sandbox_id: str) -> ChainVerification:
        return verify_bundle(parse_json((await self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}/bundle")).content))

    async def exec(
        self,
        sandbox_id: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        stdin: str | bytes | None = None,
        timeout: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> ExecResult:
        body = c.exec_body(argv, env=env, workdir=workdir, stdin=stdin, timeout=timeout)
        if on_output is None:
            return ExecResult.model_validate((await self._c.request("POST", f"/v1/sandboxes/{c.segment(sandbox_id)}/exec", json=body)).json())
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        result: ExecStreamResult | None = None
        async for line in self._exec_lines(sandbox_id, body):
            if isinstance(line, ExecOutput):
                data = line.bytes
                out[line.stream].append(data)
                on_output(line.stream, data)
            else:
                result = line
        assert result is not None
        return ExecResult(**result.model_dump(exclude={"type"}), stdout=b"".join(out["stdout"]).decode("utf-8", "replace"), stderr=b"".join(out["stderr"]).decode("utf-8", "replace"))

    def exec_stream(
        self,
        sandbox_id: str,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        stdin: str | bytes | None = None,
        timeout: int | None = None,
    ) -> AsyncIterator[ExecOutput | ExecStreamResult]:
        return self._exec_lines(sandbox_id, c.exec_body(argv, env=env, workdir=workdir, stdin=stdin, timeout=timeout))

    async def _exec_lines(self, sandbox_id: str, body: dict[str, Any]) -> AsyncIterator[ExecOutput | ExecStreamResult]:
        path = f"/v1/sandboxes/{c.segment(sandbox_id)}/exec"
        async with self._c._stream("POST", path, json=body, headers={"accept": "application/x-ndjson"}) as response:
            ended = False
            async for text in response.aiter_lines():
                if text == "":
                    continue
                line = json.loads(text)
                if line.get("type") == "output":
                    yield ExecOutput.model_validate(line)
                elif line.get("type") == "result":
                    ended = True
                    yield ExecStreamResult.model_validate(line)
                elif line.get("type") == "error":
                    error = ExecStreamError.model_validate(line)
                    raise error_from_body({"code": error.code, "message": error.message}, response.status_code)
            if not ended:
                raise cairn_error("E_UNAVAILABLE", f"the exec stream of {sandbox_id} ended without a result", {"sandboxId": sandbox_id})

    async def write_file(self, sandbox_id: str, path: str, data: bytes | str, *, mode: int | None = None) -> FileWritten:
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        c.check_file_bytes(content)
        response = await self._c.request(
            "PUT",
            f"/v1/sandboxes/{c.segment(sandbox_id)}/files",
            params=c.file_query(path, mode),
            content=content,
            headers={"content-type": "application/octet-stream"},
        )
        return FileWritten.model_validate(response.json())

    async def read_file(self, sandbox_id: str, path: str) -> bytes:
        response = await self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}/files", params={"path": path})
        return c.checked_file(response, path)

    async def exec_output(self, sandbox_id: str, exec_id: str, stream: str = "stdout", *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        return await self._c._read_bytes(c.exec_output_path(sandbox_id, exec_id, stream), expected_sha256=expected_sha256, max_bytes=max_bytes)

    async def destroy(self, sandbox_id: str) -> Sandbox:
        return Sandbox.model_validate((await self._c.request("DELETE", f"/v1/sandboxes/{c.segment(sandbox_id)}")).json())


class AsyncSandboxSession:
    """One sandbox, for asyncio code; ``async with`` destroys it on exit."""

    def __init__(self, client: AsyncCairn, view: Sandbox) -> None:
        self._c = client
        self.view = view
        self.id = view.id

    async def __aenter__(self) -> AsyncSandboxSession:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.destroy()

    def __repr__(self) -> str:
        return f"AsyncSandboxSession({self.id!r}, state={self.view.state!r})"

    async def exec(self, argv: list[str], **options: Any) -> ExecResult:
        return await self._c.sandboxes.exec(self.id, argv, **options)

    def exec_stream(self, argv: list[str], **options: Any) -> AsyncIterator[ExecOutput | ExecStreamResult]:
        return self._c.sandboxes.exec_stream(self.id, argv, **options)

    async def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> FileWritten:
        return await self._c.sandboxes.write_file(self.id, path, data, mode=mode)

    async def read_file(self, path: str) -> bytes:
        return await self._c.sandboxes.read_file(self.id, path)

    async def exec_output(self, exec_id: str, stream: str = "stdout", **options: Any) -> bytes:
        return await self._c.sandboxes.exec_output(self.id, exec_id, stream, **options)

    async def refresh(self) -> Sandbox:
        self.view = await self._c.sandboxes.get(self.id)
        return self.view

    async def destroy(self) -> Sandbox:
        self.view = await self._c.sandboxes.destroy(self.id)
        return self.view

    async def bundle(self) -> ProofBundle:
        return await self._c.sandboxes.bundle(self.id)

    async def verify(self) -> ChainVerification:
        return await self._c.sandboxes.verify(self.id)


class _SandboxContext:
    """What ``AsyncCairn.sandbox`` returns: awaitable (a session) and an async context manager."""

    def __init__(self, client: AsyncCairn, spec: dict[str, Any] | None, key: str | None, fields: dict[str, Any]) -> None:
        self._args = (client, spec, key, fields)
        self._session: AsyncSandboxSession | None = None

    def __await__(self):  # type: ignore[no-untyped-def]
        client, spec, key, fields = self._args
        return client.sandboxes.create(spec, idempotency_key=key, **fields).__await__()

    async def __aenter__(self) -> AsyncSandboxSession:
        client, spec, key, fields = self._args
        self._session = await client.sandboxes.create(spec, idempotency_key=key, **fields)
        return self._session

    async def __aexit__(self, *_: object) -> None:
        if self._session is not None:
            await self._session.destroy()


class AsyncSecrets:
    def __init__(self, client: AsyncCairn) -> None:
        self._c = client

    async def set(self, name: str, value: str, *, grants: list[str] | tuple[str, ...] = ()) -> SecretStored:
        response = await self._c.request(
            "PUT", f"/v1/secrets/{c.segment(name)}", params=[("grant", g) for g in grants], content=value.encode("utf-8"), headers={"content-type": "text/plain; charset=utf-8"}
        )
        return SecretStored.model_validate(response.json())

    async def list(self) -> SecretList:
        return SecretList.model_validate((await self._c.request("GET", "/v1/secrets")).json())

    async def delete(self, name: str) -> SecretDeleted:
        return SecretDeleted.model_validate((await self._c.request("DELETE", f"/v1/secrets/{c.segment(name)}")).json())

    async def grants(self, name: str) -> SecretGrants:
        return SecretGrants.model_validate((await self._c.request("GET", f"/v1/secrets/{c.segment(name)}/grants")).json())

    async def grant(self, name: str, *grantees: str) -> SecretGrants:
        return SecretGrants.model_validate((await self._c.request("POST", f"/v1/secrets/{c.segment(name)}/grants", json={"grantees": list(grantees)})).json())

    async def revoke(self, name: str, grantee: str) -> SecretGrants:
        return SecretGrants.model_validate((await self._c.request("DELETE", f"/v1/secrets/{c.segment(name)}/grants/{c.segment(grantee)}")).json())


class AsyncKeys:
    """The tenant's API keys (an admin key; the operator, an admin key of tenant ``default``, may name another tenant)."""

    def __init__(self, client: AsyncCairn) -> None:
        self._c = client

    async def create(self, scopes: list[str], *, expires_at: str | None = None, tenant: str | None = None, idempotency_key: str | None = None) -> KeyCreated:
        """A new key; its whole secret is in this answer only (``.key``)."""
        body: dict[str, Any] = {"scopes": list(scopes), **({} if expires_at is None else {"expiresAt": expires_at}), **({} if tenant is None else {"tenant": tenant})}
        response = await self._c.request("POST", "/v1/keys", json=body, headers={"idempotency-key": idempotency_key or c.new_idempotency_key()})
        return KeyCreated.model_validate(response.json())

    async def list(self, *, tenant: str | None = None) -> KeyList:
        return KeyList.model_validate((await self._c.request("GET", "/v1/keys", params={} if tenant is None else {"tenant": tenant})).json())

    async def rotate(self, key_id: str, *, grace_seconds: int | None = None) -> KeyCreated:
        """A new secret for the same key; the old one stops at once, or after ``grace_seconds``."""
        response = await self._c.request("POST", f"/v1/keys/{c.segment(key_id)}/rotate", json={} if grace_seconds is None else {"graceSeconds": grace_seconds})
        return KeyCreated.model_validate(response.json())

    async def revoke(self, key_id: str, *, reason: str | None = None) -> Key:
        response = await self._c.request("POST", f"/v1/keys/{c.segment(key_id)}/revoke", json={} if reason is None else {"reason": reason})
        return Key.model_validate(response.json())


class AsyncTlog:
    """The deployment's log of seal heads, for asyncio code (see :class:`cairn_sdk.client.Tlog`)."""

    def __init__(self, client: AsyncCairn) -> None:
        self._c = client

    async def checkpoint(self) -> TlogCheckpoint:
        return TlogCheckpoint.model_validate((await self._c.request("GET", "/v1/tlog/checkpoint")).json())

    async def inclusion(self, chain_id: str) -> TlogInclusionProof:
        return TlogInclusionProof.model_validate((await self._c.request("GET", "/v1/tlog/proof/inclusion", params={"chain": chain_id})).json())

    async def consistency(self, from_size: int, to_size: int) -> TlogConsistencyProof:
        response = await self._c.request("GET", "/v1/tlog/proof/consistency", params={"from": str(from_size), "to": str(to_size)})
        return TlogConsistencyProof.model_validate(response.json())
