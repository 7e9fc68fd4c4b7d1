"""Cairn from Python in a minute: a sandbox, a run, and both chains verified offline.

    npm run quickstart                              # a stack, and .venv with this SDK
    .venv/bin/python sdk/python/examples/quickstart.py
"""

from cairn_sdk import Cairn, ChainOk

IMAGE = "cairn/sandbox-busybox:1"

with Cairn() as client:
    with client.sandbox(image=IMAGE, caps={"memoryMiB": 128, "diskMiB": 64}, ttlSeconds=300) as sbx:
        sbx.write_file("/work/poem.txt", "stones stacked by strangers\nmark the way across the moor at dusk\n")
        words = sbx.exec(["wc", "-w", "/work/poem.txt"])
        print(f"sandbox {sbx.id}: {words.stdout.split()[0]} words (exec receipt seq {words.seq})")
        sbx.exec(["sh", "-c", "for i in 1 2 3; do echo tick $i; sleep 0.2; done"], on_output=lambda stream, data: print(f"  {stream}: {data.decode().rstrip()}"))
    print(f"  destroyed; chain verified here: {sbx.verify()}")

    spec = {
        "name": "python quickstart",
        "image": IMAGE,
        "steps": [{"argv": ["sh", "-c", "echo hello from a run | tee /out/hello.txt"]}],
        "outputs": ["/out"],
        "checks": [{"id": "greets", "source": "steps[0].stdout", "op": "contains", "value": "hello", "weight": 1}],
    }
    accepted = client.runs.submit(spec)
    run = client.runs.wait(accepted.run_id, timeout=120, on_receipt=lambda r: print(f"  {r.seq:>3} {r.type}"))
    print(f"run {run.run_id}: {run.state}, verdict {run.verdict}, score {run.score}/{run.max_score}")
    verified = client.runs.verify(run.run_id)
    assert isinstance(verified, ChainOk)
    print(f"  {verified.count} receipts, head {verified.head_hash[:12]}…, recomputed offline from genesis")
    # What it printed and wrote, each read hashed here against the sha256 on its chain.
    outputs = client.runs.artifacts(run.run_id)
    print(f"  step 0 printed {client.runs.stdout(run.run_id, 0).decode()!r}")
    for item in outputs.items:
        data = client.runs.artifact(run.run_id, item.path, expected_sha256=item.sha256)
        print(f"  {item.path}: {len(data)} bytes, sha256 {item.sha256[:12]}…")
    print(f"  sealed by {[k.key_id for k in client.seal_keys().keys if k.status == 'current']} (GET /.well-known/cairn/keys)")
