"""The synchronous client: ``Cairn(url, api_key)``, with ``runs``, ``sandboxes``, ``secrets`` and ``keys``."""

from __future__ import annotations

import json
import os
import time
from contextlib import closing
from collections.abc import Callable, Iterator
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


class Cairn:
    """A Cairn gateway. Without arguments: ``CAIRN_URL``/``CAIRN_API_KEY``, else the local stack."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        retries: int = c.DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        conn = c.resolve_connection(url, api_key)
        self.url = conn.url
        self._retries = retries
        self._http = httpx.Client(base_url=conn.url, headers=c.default_headers(conn.api_key), timeout=timeout, transport=transport)
        self.runs = Runs(self)
        self.images = Images(self)
        self.sandboxes = Sandboxes(self)
        self.secrets = Secrets(self)
        self.keys = Keys(self)
        self.tlog = Tlog(self)

    def __enter__(self) -> Cairn:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def health(self) -> Health:
        return Health.model_validate(self.request("GET", "/v1/health").json())

    def seal_keys(self) -> SealKeys:
        """The deployment's seal verification keys (``GET /.well-known/cairn/keys``, public), the current one
        first: each ``run.sealed`` carries an Ed25519 ``signature`` by one of them. Pin one rather than
        trusting whatever a gateway answers at verification time (docs/proofs.md)."""
        return SealKeys.model_validate(self.request("GET", "/.well-known/cairn/keys").json())

    def sandbox(self, spec: dict[str, Any] | None = None, *, idempotency_key: str | None = None, **fields: Any) -> SandboxSession:
        """A new sandbox, destroyed when the ``with`` block ends: ``with client.sandbox(image=…) as sbx:``."""
        return self.sandboxes.create(spec, idempotency_key=idempotency_key, **fields)

    # -- the wire ------------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; a 429/503 that names ``Retry-After`` is tried again after it (up to ``retries`` times)."""
        for attempt in range(self._retries + 1):
            response = self._http.request(method, path, **kwargs)
            wait = c.retry_after(response)
            if wait is None or attempt == self._retries:
                break
            time.sleep(wait)
        c.raise_for_error(response)
        return response

    def _stream(self, method: str, path: str, **kwargs: Any) -> Iterator[httpx.Response]:
        for attempt in range(self._retries + 1):
            with self._http.stream(method, path, **kwargs) as response:
                wait = c.retry_after(response)
                if wait is None or attempt == self._retries:
                    if response.status_code >= 400:
                        c.raise_for_error(response, response.read())
                    yield response
                    return
            time.sleep(wait)

    def _read_bytes(self, path: str, *, expected_sha256: str | None, max_bytes: int) -> bytes:
        """Served bytes (a step's stream, a collected file, an exec's output), hashed here: they must match
        ``X-Cairn-Sha256`` and, when given, ``expected_sha256``; a mismatch raises ``E_INTERNAL``, never returns."""
        what = f"GET {path}"
        with closing(self._stream("GET", path, headers={"accept": "*/*"})) as responses:
            for response in responses:
                named = c.named_sha256(response, what)
                c.check_expected(named, expected_sha256, what)
                announced = c.check_announced(response, max_bytes, what)
                buffer = c.BoundedBuffer(max_bytes, what)
                for chunk in response.iter_bytes():
                    buffer.add(chunk)
                return c.checked_bytes(buffer.bytes(announced), named, what)
        raise cairn_error("E_UNAVAILABLE", f"{what}: no answer")

    def _chain_events(self, base: str, chain_id: str, after: int, follow: bool) -> Iterator[Receipt]:
        if not follow:
            while True:
                page = EventPage.model_validate(self.request("GET", f"{base}/events", params={"after": after, "limit": 1000}).json())
                yield from page.items
                if page.next_after is None:
                    return
                after = page.next_after
        last = after
        while True:
            headers = {"accept": "text/event-stream"}
            if last > 0:
                headers["last-event-id"] = f"{chain_id}:{last}"
            sealed = False
            try:
                for response in self._stream("GET", f"{base}/events/stream", headers=headers, timeout=httpx.Timeout(None, connect=30.0)):
                    parser = c.SseParser()
                    for line in response.iter_lines():
                        event = parser.feed(line)
                        if event is None or event[1] != "receipt":
                            continue
                        receipt = Receipt.model_validate(json.loads(event[2]))
                        last = receipt.seq
                        yield receipt
                        if receipt.type == "run.sealed":
                            sealed = True
                            return
            except (httpx.TransportError, httpx.StreamError):
                # Dropped: resume after the last receipt seen (Last-Event-ID), as a browser would.
                time.sleep(0.5)
                continue
            if sealed:
                return
            # The stream ended without the seal: the chain was sealed before `last`, or it is picked up again.
            if c.sealed_at_or_before(self.request("GET", base).json(), last):
                return
            time.sleep(0.2)


class Images:
    def __init__(self, client: Cairn) -> None:
        self._c = client

    def build(self, dockerfile: str, files: dict[str, bytes | str] | None = None, *, timeout_seconds: int | None = None, timeout: float = c.HARBOR_SUBMIT_TIMEOUT_SECONDS) -> ImageBuilt:
        """Has a worker build ``dockerfile`` with ``files`` (path → bytes or text) as its context, offline (every FROM an
        image on that worker), cached by digest (``image_build.cached``); answers the image by id, as a RunSpec names it."""
        body = c.image_build_body(dockerfile, files, timeout_seconds)
        return ImageBuilt.model_validate(self._c.request("POST", "/v1/images/builds", json=body, timeout=timeout).json())


class Runs:
    def __init__(self, client: Cairn) -> None:
        self._c = client

    def submit(self, spec: dict[str, Any], *, idempotency_key: str | None = None) -> SubmitAccepted:
        """Submits a RunSpec. The same key and spec give the same run (a random key unless given)."""
        key = idempotency_key or c.new_idempotency_key()
        response = self._c.request("POST", "/v1/runs", json=spec, headers={"idempotency-key": key})
        return SubmitAccepted.model_validate(response.json())

    def submit_harbor_task(
        self,
        task_dir: str | os.PathLike[str],
        *,
        oracle: bool = False,
        agent: list[str] | None = None,
        job: str | None = None,
        idempotency_key: str | None = None,
        timeout: float = c.HARBOR_SUBMIT_TIMEOUT_SECONDS,
    ) -> HarborSubmitAccepted:
        """Submits a Harbor task directory (task.toml, instruction.md, environment/, tests/, solution/) as a run,
        with its oracle (``oracle=True``: solution/solve.sh) or an agent's argv. A worker builds
        environment/Dockerfile (every FROM an image on it; cached by digest) with the tests in the image's
        read-only root, and the gateway maps the task as ``cairn run <task-dir>`` does (docs/missions.md); the
        answer names the image (``image_build``). A build can take minutes: the call waits up to ``timeout``
        seconds. A bad task is E_INPUT, here or from the gateway, and no run is made."""
        body = c.harbor_task_body(task_dir, oracle=oracle, agent=agent, job=job)
        key = idempotency_key or c.new_idempotency_key()
        response = self._c.request("POST", "/v1/missions/harbor", json=body, headers={"idempotency-key": key}, timeout=timeout)
        return HarborSubmitAccepted.model_validate(response.json())

    def get(self, run_id: str) -> Run:
        return Run.model_validate(self._c.request("GET", f"/v1/runs/{c.segment(run_id)}").json())

    def list(self, *, limit: int | None = None, state: str | None = None, cursor: str | None = None) -> RunList:
        params = {k: v for k, v in {"limit": limit, "state": state, "cursor": cursor}.items() if v is not None}
        return RunList.model_validate(self._c.request("GET", "/v1/runs", params=params).json())

    def events(self, run_id: str, *, after: int = 0, follow: bool = True) -> Iterator[Receipt]:
        """The run's receipts in chain order; ``follow`` keeps going (server-sent events, resumed) until ``run.sealed``."""
        return self._c._chain_events(f"/v1/runs/{c.segment(run_id)}", run_id, after, follow)

    def wait(self, run_id: str, *, timeout: float | None = None, on_receipt: Callable[[Receipt], None] | None = None) -> Run:
        """Follows the run until it is sealed and returns its view as the projection holds it then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for receipt in self.events(run_id):
            if on_receipt is not None:
                on_receipt(receipt)
            if deadline is not None and time.monotonic() > deadline:
                raise cairn_error("E_TIMEOUT", f"run {run_id} was not sealed within {timeout} s", {"runId": run_id})
        while True:
            run = self.get(run_id)
            if run.sealed:
                return run
            if deadline is not None and time.monotonic() > deadline:
                raise cairn_error("E_TIMEOUT", f"run {run_id} was not sealed within {timeout} s", {"runId": run_id})
            time.sleep(0.1)

    def bundle(self, run_id: str) -> ProofBundle:
        return ProofBundle.model_validate(self._c.request("GET", f"/v1/runs/{c.segment(run_id)}/bundle").json())

    def artifacts(self, run_id: str) -> RunArtifacts:
        """What the run printed and wrote, as its chain records it: each completed step's streams, each collected file."""
        return RunArtifacts.model_validate(self._c.request("GET", f"/v1/runs/{c.segment(run_id)}/artifacts").json())

    def stdout(self, run_id: str, step: int, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        """Step ``step``'s stdout exactly as kept (redacted, bounded by the caps), checked against its sha256."""
        return self.output(run_id, step, "stdout", expected_sha256=expected_sha256, max_bytes=max_bytes)

    def stderr(self, run_id: str, step: int, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        return self.output(run_id, step, "stderr", expected_sha256=expected_sha256, max_bytes=max_bytes)

    def output(
        self, run_id: str, step: int, stream: str, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES, attempt: int | None = None
    ) -> bytes:
        """Step ``step``'s ``stream`` of the current attempt, or of ``attempt`` (1 the first) of a run retried after a lost worker."""
        return self._c._read_bytes(c.step_output_path(run_id, step, stream, attempt), expected_sha256=expected_sha256, max_bytes=max_bytes)

    def artifact(self, run_id: str, path: str, *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        """A collected file's bytes by its recorded path (``/out/report.json``), checked against its sha256
        (``X-Cairn-Sha256``, and ``expected_sha256`` from the listing when given)."""
        return self._c._read_bytes(c.artifact_path(run_id, path), expected_sha256=expected_sha256, max_bytes=max_bytes)

    def verify(self, run_id: str) -> ChainVerification:
        """Fetches the proof bundle and recomputes every hash here, trusting nothing the server says."""
        return verify_bundle(parse_json(self._c.request("GET", f"/v1/runs/{c.segment(run_id)}/bundle").content))

    def cancel(self, run_id: str, *, reason: str | None = None) -> CancelAccepted:
        body = {} if reason is None else {"reason": reason}
        return CancelAccepted.model_validate(self._c.request("POST", f"/v1/runs/{c.segment(run_id)}/cancel", json=body).json())

    def regrade(self, run_id: str, *, reason: str | None = None) -> RegradeAccepted:
        """Grades again a verified run whose grading failed (a judge's failure); its steps are not run again."""
        body = {} if reason is None else {"reason": reason}
        return RegradeAccepted.model_validate(self._c.request("POST", f"/v1/runs/{c.segment(run_id)}/regrade", json=body).json())

    def approve(self, run_id: str, *, reject: bool = False, comment: str | None = None, approval_id: str | None = None) -> ApprovalAccepted:
        body: dict[str, Any] = {"decision": "reject" if reject else "approve"}
        if comment is not None:
            body["comment"] = comment
        if approval_id is not None:
            body["approvalId"] = approval_id
        return ApprovalAccepted.model_validate(self._c.request("POST", f"/v1/runs/{c.segment(run_id)}/approvals", json=body).json())


class Sandboxes:
    def __init__(self, client: Cairn) -> None:
        self._c = client

    def create(self, spec: dict[str, Any] | None = None, *, idempotency_key: str | None = None, **fields: Any) -> SandboxSession:
        """Starts a sandbox (a SandboxSpec: ``image``, ``caps``, ``network``, ``secrets``, ``env``, ``files``, ``ttlSeconds``, ``idleSeconds``)."""
        body = {**(spec or {}), **fields}
        headers = {} if idempotency_key is None else {"idempotency-key": idempotency_key}
        view = Sandbox.model_validate(self._c.request("POST", "/v1/sandboxes", json=body, headers=headers).json())
        return SandboxSession(self._c, view)

    def get(self, sandbox_id: str) -> Sandbox:
        return Sandbox.model_validate(self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}").json())

    def attach(self, sandbox_id: str) -> SandboxSession:
        """A session object for a sandbox that exists (its view read now)."""
        return SandboxSession(self._c, self.get(sandbox_id))

    def list(self, *, limit: int | None = None, state: str | None = None, cursor: str | None = None) -> SandboxList:
        params = {k: v for k, v in {"limit": limit, "state": state, "cursor": cursor}.items() if v is not None}
        return SandboxList.model_validate(self._c.request("GET", "/v1/sandboxes", params=params).json())

    def events(self, sandbox_id: str, *, after: int = 0, follow: bool = False) -> Iterator[Receipt]:
        return self._c._chain_events(f"/v1/sandboxes/{c.segment(sandbox_id)}", sandbox_id, after, follow)

    def bundle(self, sandbox_id: str) -> ProofBundle:
        return ProofBundle.model_validate(self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}/bundle").json())

    def verify(self, sandbox_id: str) -> ChainVerification:
        return verify_bundle(parse_json(self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}/bundle").content))

    def exec(
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
        """Runs one program and waits. ``on_output(stream, bytes)`` hears its output as it is written (NDJSON)."""
        body = c.exec_body(argv, env=env, workdir=workdir, stdin=stdin, timeout=timeout)
        if on_output is None:
            return ExecResult.model_validate(self._c.request("POST", f"/v1/sandboxes/{c.segment(sandbox_id)}/exec", json=body).json())
        out: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        result: ExecStreamResult | None = None
        for line in self._exec_lines(sandbox_id, body):
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
    ) -> Iterator[ExecOutput | ExecStreamResult]:
        """The exec's output lines as they come, then its result (an ``error`` line raises)."""
        return self._exec_lines(sandbox_id, c.exec_body(argv, env=env, workdir=workdir, stdin=stdin, timeout=timeout))

    def _exec_lines(self, sandbox_id: str, body: dict[str, Any]) -> Iterator[ExecOutput | ExecStreamResult]:
        path = f"/v1/sandboxes/{c.segment(sandbox_id)}/exec"
        for response in self._c._stream("POST", path, json=body, headers={"accept": "application/x-ndjson"}):
            ended = False
            for text in response.iter_lines():
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

    def write_file(self, sandbox_id: str, path: str, data: bytes | str, *, mode: int | None = None) -> FileWritten:
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        c.check_file_bytes(content)
        response = self._c.request(
            "PUT",
            f"/v1/sandboxes/{c.segment(sandbox_id)}/files",
            params=c.file_query(path, mode),
            content=content,
            headers={"content-type": "application/octet-stream"},
        )
        return FileWritten.model_validate(response.json())

    def read_file(self, sandbox_id: str, path: str) -> bytes:
        """A file's bytes, checked against the sha256 its receipt records."""
        response = self._c.request("GET", f"/v1/sandboxes/{c.segment(sandbox_id)}/files", params={"path": path})
        return c.checked_file(response, path)

    def exec_output(self, sandbox_id: str, exec_id: str, stream: str = "stdout", *, expected_sha256: str | None = None, max_bytes: int = c.DEFAULT_MAX_READ_BYTES) -> bytes:
        """A completed exec's whole stdout or stderr (its ``exec_id``), as its receipt records it, also after the sandbox is gone."""
        return self._c._read_bytes(c.exec_output_path(sandbox_id, exec_id, stream), expected_sha256=expected_sha256, max_bytes=max_bytes)

    def destroy(self, sandbox_id: str) -> Sandbox:
        """Destroys it and seals its chain; idempotent (a destroyed sandbox answers its view)."""
        return Sandbox.model_validate(self._c.request("DELETE", f"/v1/sandboxes/{c.segment(sandbox_id)}").json())


class SandboxSession:
    """One sandbox: ``exec``, ``write_file``, ``read_file``, ``destroy``; destroyed on leaving a ``with`` block."""

    def __init__(self, client: Cairn, view: Sandbox) -> None:
        self._c = client
        self.view = view
        self.id = view.id

    def __enter__(self) -> SandboxSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.destroy()

    def __repr__(self) -> str:
        return f"SandboxSession({self.id!r}, state={self.view.state!r})"

    def exec(self, argv: list[str], **options: Any) -> ExecResult:
        return self._c.sandboxes.exec(self.id, argv, **options)

    def exec_stream(self, argv: list[str], **options: Any) -> Iterator[ExecOutput | ExecStreamResult]:
        return self._c.sandboxes.exec_stream(self.id, argv, **options)

    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> FileWritten:
        return self._c.sandboxes.write_file(self.id, path, data, mode=mode)

    def read_file(self, path: str) -> bytes:
        return self._c.sandboxes.read_file(self.id, path)

    def exec_output(self, exec_id: str, stream: str = "stdout", **options: Any) -> bytes:
        return self._c.sandboxes.exec_output(self.id, exec_id, stream, **options)

    def refresh(self) -> Sandbox:
        self.view = self._c.sandboxes.get(self.id)
        return self.view

    def destroy(self) -> Sandbox:
        self.view = self._c.sandboxes.destroy(self.id)
        return self.view

    def bundle(self) -> ProofBundle:
        return self._c.sandboxes.bundle(self.id)

    def verify(self) -> ChainVerification:
        return self._c.sandboxes.verify(self.id)


class Secrets:
    """The tenant's secret store: write-only values, names and grants readable (docs/secrets.md)."""

    def __init__(self, client: Cairn) -> None:
        self._c = client

    def set(self, name: str, value: str, *, grants: list[str] | tuple[str, ...] = ()) -> SecretStored:
        """Stores ``value`` (never echoed back); granted to the setting key and to each of ``grants``."""
        response = self._c.request(
            "PUT", f"/v1/secrets/{c.segment(name)}", params=[("grant", g) for g in grants], content=value.encode("utf-8"), headers={"content-type": "text/plain; charset=utf-8"}
        )
        return SecretStored.model_validate(response.json())

    def list(self) -> SecretList:
        return SecretList.model_validate(self._c.request("GET", "/v1/secrets").json())

    def delete(self, name: str) -> SecretDeleted:
        return SecretDeleted.model_validate(self._c.request("DELETE", f"/v1/secrets/{c.segment(name)}").json())

    def grants(self, name: str) -> SecretGrants:
        return SecretGrants.model_validate(self._c.request("GET", f"/v1/secrets/{c.segment(name)}/grants").json())

    def grant(self, name: str, *grantees: str) -> SecretGrants:
        response = self._c.request("POST", f"/v1/secrets/{c.segment(name)}/grants", json={"grantees": list(grantees)})
        return SecretGrants.model_validate(response.json())

    def revoke(self, name: str, grantee: str) -> SecretGrants:
        return SecretGrants.model_validate(self._c.request("DELETE", f"/v1/secrets/{c.segment(name)}/grants/{c.segment(grantee)}").json())


class Keys:
    """The tenant's API keys (an admin key; the operator, an admin key of tenant ``default``, may name another tenant)."""

    def __init__(self, client: Cairn) -> None:
        self._c = client

    def create(self, scopes: list[str], *, expires_at: str | None = None, tenant: str | None = None, idempotency_key: str | None = None) -> KeyCreated:
        """A new key; its whole secret is in this answer only (``.key``)."""
        body: dict[str, Any] = {"scopes": list(scopes), **({} if expires_at is None else {"expiresAt": expires_at}), **({} if tenant is None else {"tenant": tenant})}
        response = self._c.request("POST", "/v1/keys", json=body, headers={"idempotency-key": idempotency_key or c.new_idempotency_key()})
        return KeyCreated.model_validate(response.json())

    def list(self, *, tenant: str | None = None) -> KeyList:
        return KeyList.model_validate(self._c.request("GET", "/v1/keys", params={} if tenant is None else {"tenant": tenant}).json())

    def rotate(self, key_id: str, *, grace_seconds: int | None = None) -> KeyCreated:
        """A new secret for the same key; the old one stops at once, or after ``grace_seconds``."""
        response = self._c.request("POST", f"/v1/keys/{c.segment(key_id)}/rotate", json={} if grace_seconds is None else {"graceSeconds": grace_seconds})
        return KeyCreated.model_validate(response.json())

    def revoke(self, key_id: str, *, reason: str | None = None) -> Key:
        response = self._c.request("POST", f"/v1/keys/{c.segment(key_id)}/revoke", json={} if reason is None else {"reason": reason})
        return Key.model_validate(response.json())


class Tlog:
    """The deployment's log of seal heads (docs/proofs.md): its signed checkpoint, a sealed chain's inclusion proof,
    the consistency proof between two tree sizes. Check them against a key you pinned (``cairn verify --key``);
    :mod:`cairn_sdk.tlog` checks the tree math offline."""

    def __init__(self, client: Cairn) -> None:
        self._c = client

    def checkpoint(self) -> TlogCheckpoint:
        """The latest signed checkpoint (one is signed on demand when none is yet)."""
        return TlogCheckpoint.model_validate(self._c.request("GET", "/v1/tlog/checkpoint").json())

    def inclusion(self, chain_id: str) -> TlogInclusionProof:
        """The inclusion proof of a sealed run's or sandbox's seal, with the checkpoint it leads to (404 ``E_NOT_FOUND``
        with ``details["reason"]`` ``not_sealed`` or ``not_logged`` before it is in the log)."""
        return TlogInclusionProof.model_validate(self._c.request("GET", "/v1/tlog/proof/inclusion", params={"chain": chain_id}).json())

    def consistency(self, from_size: int, to_size: int) -> TlogConsistencyProof:
        """The consistency proof from the tree of ``from_size`` leaves to the tree of ``to_size``."""
        response = self._c.request("GET", "/v1/tlog/proof/consistency", params={"from": str(from_size), "to": str(to_size)})
        return TlogConsistencyProof.model_validate(response.json())
