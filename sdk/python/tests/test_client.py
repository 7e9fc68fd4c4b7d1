"""The sync and async clients against the real stack: runs, sandboxes as context managers, secrets, keys,
errors as classes, and the generic Retry-After handling (on a transport of the test's own)."""

from __future__ import annotations

import asyncio
import hashlib
import time

import httpx
import pytest

from cairn_sdk import AsyncCairn, Cairn, ChainOk, errors
from cairn_sdk.models import ExecOutput, ExecStreamResult
from helpers import BUSYBOX

SPEC = {
    "name": "python sdk: echo",
    "image": BUSYBOX,
    "steps": [{"name": "say", "argv": ["sh", "-c", "echo out-$((6*7)); echo err-line >&2"]}],
    "caps": {"wallSeconds": 30, "memoryMiB": 64, "pids": 32, "diskMiB": 16, "cpus": 1},
    "checks": [{"id": "says", "source": "steps[0].stdout", "op": "contains", "value": "out-42", "weight": 1}],
}
SANDBOX = {"image": BUSYBOX, "caps": {"memoryMiB": 128, "diskMiB": 64, "wallSeconds": 60}, "ttlSeconds": 300}


def test_a_run_submitted_followed_waited_and_verified(client: Cairn) -> None:
    key = f"py-run-{time.time_ns()}"
    accepted = client.runs.submit(SPEC, idempotency_key=key)
    assert accepted.state == "SUBMITTED" and not accepted.duplicate
    # The same key and spec: the same run, nothing new.
    again = client.runs.submit(SPEC, idempotency_key=key)
    assert again.run_id == accepted.run_id and again.duplicate
    with pytest.raises(errors.IdempotencyMismatch):
        client.runs.submit({**SPEC, "name": "another"}, idempotency_key=key)

    followed = [r.type for r in client.runs.events(accepted.run_id)]
    assert followed[0] == "run.submitted" and followed[-1] == "run.sealed"
    run = client.runs.wait(accepted.run_id, timeout=60)
    assert (run.state, run.sealed, run.verdict, run.score) == ("SEALED", True, "INCONCLUSIVE", 1)
    assert run.event_count == len(followed)

    # Events resume after a seq (the SSE Last-Event-ID); a page read gives the same chain.
    resumed = list(client.runs.events(accepted.run_id, after=3))
    assert [r.seq for r in resumed] == list(range(4, len(followed) + 1))
    paged = list(client.runs.events(accepted.run_id, follow=False))
    assert [r.hash for r in paged] == [r.hash for r in client.runs.events(accepted.run_id)]

    verified = client.runs.verify(accepted.run_id)
    assert isinstance(verified, ChainOk) and verified.count == run.event_count and verified.head_hash == run.head_hash
    bundle = client.runs.bundle(accepted.run_id)
    assert bundle.head_hash == run.head_hash and "steps[0].stdout" in bundle.artifacts
    assert any(r.run_id == accepted.run_id for r in client.runs.list(limit=50).items)


def test_errors_arrive_as_their_classes(client: Cairn) -> None:
    with pytest.raises(errors.NotFound) as missing:
        client.runs.get("run_doesnotexist0000")
    assert missing.value.status == 404 and missing.value.code == "E_NOT_FOUND"
    with pytest.raises(errors.Input) as bad:
        client.runs.submit({"name": "x", "steps": [{"argv": "rm -rf /"}]})
    assert "argv" in bad.value.message
    with pytest.raises(errors.Unauthorized):
        Cairn(url=client.url, api_key="cairn_nope_nope").runs.list()
    with pytest.raises(errors.Input):
        client.sandboxes.exec("sbx_whatever", "echo hi")  # type: ignore[arg-type]


def test_a_sandbox_as_a_context_manager(client: Cairn) -> None:
    with client.sandbox(SANDBOX) as sbx:
        assert sbx.view.state == "READY" and sbx.id.startswith("sbx_")
        written = sbx.write_file("/work/data.bin", b"\x00\xffbytes\n", mode=0o640)
        assert written.sha256 == hashlib.sha256(b"\x00\xffbytes\n").hexdigest()
        assert sbx.read_file("/work/data.bin") == b"\x00\xffbytes\n"
        result = sbx.exec(["sh", "-c", "cat; echo; pwd; echo $GREETING; echo oops >&2; exit 3"], stdin=b"in\x00put", env={"GREETING": "hi"}, workdir="/tmp")
        assert result.exit_code == 3 and result.stdout == "in\x00put\n/tmp\nhi\n" and result.stderr == "oops\n"
        heard: list[tuple[str, bytes]] = []
        streamed = sbx.exec(["sh", "-c", "echo one; sleep 0.3; echo two >&2"], on_output=lambda stream, data: heard.append((stream, data)))
        assert b"".join(d for s, d in heard if s == "stdout") == b"one\n" and ("stderr", b"two\n") in heard
        assert streamed.stdout == "one\n" and streamed.stderr == "two\n"
        lines = list(sbx.exec_stream(["echo", "streamed"]))
        assert isinstance(lines[0], ExecOutput) and lines[0].bytes == b"streamed\n" and isinstance(lines[-1], ExecStreamResult)
        # Its own timeout kills the program and leaves the sandbox READY.
        timed = sbx.exec(["sleep", "30"], timeout=1)
        assert timed.timed_out and timed.sandbox_state == "READY"
        assert sbx.exec(["true"]).exit_code == 0
        with pytest.raises(errors.NotFound):
            sbx.read_file("/work/none")
        with pytest.raises(errors.Forbidden) as denied:
            sbx.exec(["sh", "-c", "echo x > /work/ro && chmod 000 /work/ro"])
            sbx.read_file("/work/ro")
        assert denied.value.details["reason"] == "permission"
        with pytest.raises(errors.TooLarge):
            sbx.write_file("/work/big", b"x" * (16 * 1024 * 1024 + 1))
    assert sbx.view.state == "DESTROYED"
    with pytest.raises(errors.Conflict):
        sbx.exec(["true"])
    verified = sbx.verify()
    assert isinstance(verified, ChainOk) and verified.chain_id == sbx.id
    types = [r.type for r in client.sandboxes.events(sbx.id)]
    assert types[0] == "sandbox.requested" and "sandbox.file.written" in types and "sandbox.destroyed" in types


def test_the_async_client_and_async_with(client: Cairn) -> None:
    async def scenario() -> None:
        async with AsyncCairn() as aclient:
            assert (await aclient.health()).status == "ok"
            async with aclient.sandbox(SANDBOX) as sbx:
                await sbx.write_file("/work/a.txt", "from asyncio")
                result = await sbx.exec(["cat", "/work/a.txt"])
                assert result.stdout == "from asyncio"
                heard: list[bytes] = []
                await sbx.exec(["echo", "live"], on_output=lambda _s, d: heard.append(d))
                assert b"".join(heard) == b"live\n"
                assert await sbx.read_file("/work/a.txt") == b"from asyncio"
            assert sbx.view.state == "DESTROYED"
            accepted = await aclient.runs.submit(SPEC)
            run = await aclient.runs.wait(accepted.run_id, timeout=60)
            assert run.state == "SEALED"
            assert isinstance(await aclient.runs.verify(accepted.run_id), ChainOk)
            seen = [r.type async for r in aclient.runs.events(accepted.run_id)]
            assert seen[-1] == "run.sealed"

    asyncio.run(scenario())


def test_secrets_set_listed_granted_revoked_removed(client: Cairn) -> None:
    name = f"PY_SDK_{time.time_ns()}"
    stored = client.secrets.set(name, "s3cr3t-value-0042\n", grants=["scope:secrets:use"])
    assert stored.created and stored.last_four == "0042"
    entry = next(e for e in client.secrets.list().items if e.name == name)
    assert {g.grantee for g in entry.grants} >= {"scope:secrets:use"}
    assert "s3cr3t" not in client.secrets.list().model_dump_json()
    granted = client.secrets.grant(name, "scope:approve")
    assert "scope:approve" in {g.grantee for g in granted.grants}
    revoked = client.secrets.revoke(name, "scope:approve")
    assert "scope:approve" not in {g.grantee for g in revoked.grants}
    with pytest.raises(errors.NotFound):
        client.secrets.revoke(name, "scope:approve")
    assert client.secrets.delete(name).deleted is True
    with pytest.raises(errors.NotFound):
        client.secrets.delete(name)


def test_keys_created_used_rotated_revoked(client: Cairn) -> None:
    made = client.keys.create(["runs:read"])
    assert made.key.startswith(f"cairn_{made.prefix}_") and (made.status, made.scopes, made.rotations) == ("active", ["runs:read"], 0)
    listed = next(k for k in client.keys.list().items if k.id == made.id)
    assert listed.last_four == made.key[-4:] and made.key not in client.keys.list().model_dump_json()
    with Cairn(api_key=made.key) as reader:
        reader.runs.list()
        with pytest.raises(errors.Forbidden):
            reader.keys.list()
    rotated = client.keys.rotate(made.id)
    assert rotated.id == made.id and rotated.rotations == 1 and rotated.key != made.key
    with Cairn(api_key=made.key) as old, pytest.raises(errors.Unauthorized):
        old.runs.list()
    with pytest.raises(errors.Input):
        client.keys.rotate(made.id, grace_seconds=3601)

    async def revoke() -> None:
        async with AsyncCairn() as aclient:
            assert any(k.id == made.id for k in (await aclient.keys.list()).items)
            assert (await aclient.keys.revoke(made.id, reason="python sdk test")).status == "revoked"

    asyncio.run(revoke())
    with Cairn(api_key=rotated.key) as gone, pytest.raises(errors.Unauthorized):
        gone.runs.list()
    with pytest.raises(errors.Conflict):
        client.keys.rotate(made.id)


def test_a_refusal_with_retry_after_is_tried_again() -> None:
    # 503 E_CAPACITY / 429 E_RATE_LIMITED with Retry-After: waited out and sent again, generically.
    calls: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return httpx.Response(503, headers={"retry-after": "1"}, json={"code": "E_CAPACITY", "message": "no slot free"})
        if len(calls) == 2:
            return httpx.Response(429, headers={"retry-after": "0"}, json={"code": "E_RATE_LIMITED", "message": "slow down"})
        return httpx.Response(200, json={"items": [], "nextCursor": None})

    with Cairn(url="http://cairn.test", api_key="k", transport=httpx.MockTransport(answer)) as mock:
        assert mock.runs.list().items == []
    assert len(calls) == 3 and calls[1] - calls[0] >= 0.9

    # Without Retry-After (or past the retries) the refusal is the caller's, as its class.
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json={"code": "E_RATE_LIMITED", "message": "slow down"})

    with Cairn(url="http://cairn.test", api_key="k", transport=httpx.MockTransport(refuse)) as mock, pytest.raises(errors.RateLimited):
        mock.runs.list()
