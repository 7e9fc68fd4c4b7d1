"""Outputs on the real stack: a run that prints known text and writes /out files, read back exactly through
the sync and async clients (the listing, each step's streams, each collected file, a sandbox exec's output),
every read hashed here; bytes that do not hash to what the gateway names (or to what the caller expects)
raise and are never returned. And the deployment's seal keys, which sign each seal."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time

import httpx
import pytest

from cairn_sdk import AsyncCairn, Cairn, errors
from helpers import BUSYBOX

STDOUT = "hello from the run\nzwei: größer\n"
STDERR = "a warning\n"
# printf's octal escapes: the file holds the bytes 00 ff fe 0a, not valid UTF-8.
FILES = {
    "/out/report.json": b'{"ok":true,"n":42}\n',
    "/out/blob.bin": b"\x00\xff\xfe\n",
    "/out/sub dir/notes ä.txt": b"nested, with a space\n",
}
SCRIPT = (
    "printf 'hello from the run\\nzwei: gr\\303\\266\\303\\237er\\n'; printf 'a warning\\n' >&2; "
    "printf '{\"ok\":true,\"n\":42}\\n' > /out/report.json; printf '\\000\\377\\376\\n' > /out/blob.bin; "
    "mkdir -p '/out/sub dir' && f=$(printf '/out/sub dir/notes \\303\\244.txt') && printf 'nested, with a space\\n' > \"$f\""
)
SPEC = {
    "name": "python sdk: outputs",
    "image": BUSYBOX,
    "steps": [{"name": "write", "argv": ["sh", "-c", SCRIPT]}, {"name": "quiet", "argv": ["true"]}],
    "outputs": ["/out"],
    "caps": {"wallSeconds": 30, "memoryMiB": 64, "pids": 32, "diskMiB": 16, "cpus": 1},
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def run_id(client: Cairn) -> str:
    accepted = client.runs.submit(SPEC)
    run = client.runs.wait(accepted.run_id, timeout=90)
    assert run.state == "SEALED", run
    return accepted.run_id


def test_a_runs_outputs_listed_and_read_back_exactly(client: Cairn, run_id: str) -> None:
    listed = client.runs.artifacts(run_id)
    assert listed.run_id == run_id and [(s.index, s.name, s.exit_code) for s in listed.steps] == [(0, "write", 0), (1, "quiet", 0)]
    first = listed.steps[0]
    assert (first.stdout.sha256, first.stdout.bytes, first.stdout.written_bytes, first.stdout.truncated) == (sha(STDOUT.encode()), len(STDOUT.encode()), len(STDOUT.encode()), False)
    assert (first.stderr.sha256, first.stderr.bytes) == (sha(STDERR.encode()), len(STDERR))
    assert {i.path: (i.sha256, i.bytes) for i in listed.items} == {p: (sha(b), len(b)) for p, b in FILES.items()}

    assert client.runs.stdout(run_id, 0) == STDOUT.encode()
    assert client.runs.stderr(run_id, 0) == STDERR.encode()
    assert client.runs.stdout(run_id, 1) == b"" and client.runs.output(run_id, 1, "stderr") == b""
    for path, data in FILES.items():
        assert client.runs.artifact(run_id, path) == data
    # The listing's sha256, passed on, is checked as well.
    for item in listed.items:
        assert client.runs.artifact(run_id, item.path, expected_sha256=item.sha256) == FILES[item.path]
    assert client.runs.stdout(run_id, 0, expected_sha256=first.stdout.sha256) == STDOUT.encode()
    # A run never retried is on its attempt 1: asked for by number, the same bytes (ADR 0035).
    assert client.runs.output(run_id, 0, "stdout", attempt=1) == STDOUT.encode()


def test_outputs_that_are_not_there_or_too_large_are_refused(client: Cairn, run_id: str) -> None:
    with pytest.raises(errors.NotFound):
        client.runs.artifact(run_id, "/out/none.txt")
    with pytest.raises(errors.NotFound):
        client.runs.stdout(run_id, 7)
    with pytest.raises(errors.NotFound):
        client.runs.artifacts("run_doesnotexist0000")
    # Refused here, before anything is sent: not a path the listing could name, not a step index.
    for bad in ("out/report.json", "/out/../etc/passwd", "/out//x", "/out/./report.json"):
        with pytest.raises(errors.Input):
            client.runs.artifact(run_id, bad)
    with pytest.raises(errors.Input):
        client.runs.output(run_id, 0, "stdin")
    with pytest.raises(errors.Input):
        client.runs.stdout(run_id, -1)
    # An attempt the run has not had is not there; one that cannot be is refused before anything is sent.
    with pytest.raises(errors.NotFound):
        client.runs.output(run_id, 0, "stdout", attempt=2)
    for bad_attempt in (0, 5, True):
        with pytest.raises(errors.Input):
            client.runs.output(run_id, 0, "stdout", attempt=bad_attempt)
    with pytest.raises(errors.TooLarge) as large:
        client.runs.artifact(run_id, "/out/report.json", max_bytes=4)
    assert large.value.details == {"bytes": len(FILES["/out/report.json"]), "maxBytes": 4}


def test_bytes_that_do_not_match_raise_and_are_never_returned(client: Cairn, run_id: str) -> None:
    # The caller's sha256 (from a receipt or the listing) is not the one the gateway names.
    with pytest.raises(errors.Internal) as expected:
        client.runs.artifact(run_id, "/out/report.json", expected_sha256="e" * 64)
    assert expected.value.details["reason"] == "sha256_mismatch" and expected.value.details["expected"] == "e" * 64

    # Bytes changed between the gateway and here (a transport of the test's own in front of the real
    # gateway flips one byte of every output it carries, or drops the header that names the sha256).
    def tampering(change: str) -> httpx.BaseTransport:
        real = httpx.HTTPTransport()

        class Tamper(httpx.BaseTransport):
            def handle_request(self, request: httpx.Request) -> httpx.Response:
                response = real.handle_request(request)
                if "x-cairn-sha256" not in response.headers:
                    return response
                body = response.read()
                headers = [(k, v) for k, v in response.headers.multi_items() if not (change == "drop" and k.lower() == "x-cairn-sha256")]
                flipped = body if change == "drop" else bytes([body[0] ^ 1]) + body[1:]
                return httpx.Response(response.status_code, headers=headers, content=flipped)

        return Tamper()

    with Cairn(url=client.url, api_key=client._http.headers["authorization"].removeprefix("Bearer "), transport=tampering("flip")) as tampered:
        assert tampered.runs.artifacts(run_id).run_id == run_id  # JSON answers pass through untouched
        for read in (lambda: tampered.runs.artifact(run_id, "/out/blob.bin"), lambda: tampered.runs.stdout(run_id, 0)):
            with pytest.raises(errors.Internal) as flipped:
                read()
            assert flipped.value.details["reason"] == "sha256_mismatch" and "hash to" in flipped.value.message
    with Cairn(url=client.url, api_key=client._http.headers["authorization"].removeprefix("Bearer "), transport=tampering("drop")) as unnamed:
        with pytest.raises(errors.Internal) as missing:
            unnamed.runs.artifact(run_id, "/out/report.json")
        assert missing.value.details["reason"] == "sha256_missing"


def test_the_async_client_reads_the_same_bytes(run_id: str) -> None:
    async def scenario() -> None:
        async with AsyncCairn() as aclient:
            listed = await aclient.runs.artifacts(run_id)
            assert {i.path for i in listed.items} == set(FILES)
            assert await aclient.runs.stdout(run_id, 0) == STDOUT.encode()
            assert await aclient.runs.stderr(run_id, 0, expected_sha256=sha(STDERR.encode())) == STDERR.encode()
            got = await asyncio.gather(*(aclient.runs.artifact(run_id, i.path, expected_sha256=i.sha256) for i in listed.items))
            assert dict(zip((i.path for i in listed.items), got)) == FILES
            with pytest.raises(errors.Internal):
                await aclient.runs.stdout(run_id, 0, expected_sha256="0" * 64)
            with pytest.raises(errors.TooLarge):
                await aclient.runs.stdout(run_id, 0, max_bytes=1)
            keys = await aclient.seal_keys()
            assert keys.keys[0].status == "current"

    asyncio.run(scenario())


def test_a_sandbox_execs_output_read_back_after_the_sandbox_is_gone(client: Cairn) -> None:
    with client.sandbox(image=BUSYBOX, caps={"memoryMiB": 64, "wallSeconds": 60}) as sbx:
        result = sbx.exec(["sh", "-c", "printf 'exec out\\n'; printf '\\001\\002' >&2"])
    # The gateway reads outputs from the projection, which may trail the exec's answer: once the view
    # says sealed, every receipt before the seal is there.
    deadline = time.monotonic() + 30
    while not client.sandboxes.get(sbx.id).sealed:
        assert time.monotonic() < deadline, "the sandbox's seal never reached its view"
        time.sleep(0.1)
    assert sbx.exec_output(result.exec_id) == b"exec out\n"
    assert client.sandboxes.exec_output(sbx.id, result.exec_id, "stderr", expected_sha256=result.stderr_sha256) == b"\x01\x02"

    async def after() -> bytes:
        async with AsyncCairn() as aclient:
            return await aclient.sandboxes.exec_output(sbx.id, result.exec_id, expected_sha256=result.stdout_sha256)

    assert asyncio.run(after()) == b"exec out\n"


def test_the_seal_keys_name_the_key_that_signed_the_seal(client: Cairn, run_id: str) -> None:
    keys = client.seal_keys().keys
    assert keys and keys[0].status == "current" and all(k.status == "retired" for k in keys[1:])
    for k in keys:
        name, key_id, encoded = k.key.split("+", 2)  # base64 may hold "+" too
        raw = base64.b64decode(encoded)
        assert (name, key_id) == (k.name, k.key_id) and raw[0] == 1 and len(raw) == 33
        # c2sp.org/signed-note: the key id is SHA-256(name ‖ \n ‖ 0x01 ‖ public key)[:4].
        assert hashlib.sha256(name.encode() + b"\n" + raw).hexdigest()[:8] == key_id
    # Public: no API key needed.
    assert httpx.get(f"{client.url}/.well-known/cairn/keys").json() == client.seal_keys().model_dump(by_alias=True)
    seal = [r for r in client.runs.events(run_id, follow=False) if r.type == "run.sealed"][-1].raw
    signature = seal["signature"]
    assert (signature["key_name"], signature["key_id"]) == (keys[0].name, keys[0].key_id)
    assert base64.b64decode(signature["signature"])[:4].hex() == keys[0].key_id
