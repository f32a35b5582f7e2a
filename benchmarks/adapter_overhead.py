"""What the adapter costs: added latency at low load, and CPU per request at high load.

Run: ``.venv/bin/python benchmarks/adapter_overhead.py`` (about two minutes; prints a table).

1. **Added latency.** One real digits function process (``python -m functions.serve``) on
   loopback. 300 sequential requests go straight to it, then 300 through the adapter (which sends
   each as a batch of one: at this load nothing else is queued). The difference of the latency
   percentiles is what the adapter adds.
2. **CPU per request.** The adapter runs alone in its own process in front of a no-op upstream
   (``httpx.MockTransport`` answering at once, so only the adapter's own work is measured), and
   the open-loop replayer, in another process, offers a fixed rate; once with every request sent
   alone (``max_wait_ms: 0``) and once with the default wait for company (SLO 1 s). The adapter
   process's CPU seconds divided by the requests answered give the CPU per request; 1 / that is
   the most the adapter could serve per core.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapter.app import create_app  # noqa: E402
from adapter.config import parse_config  # noqa: E402
from adapter.platform_view import StaticView  # noqa: E402
from knative.gateway import serve_in_loop  # noqa: E402

CONFIG = {
    "functions": {
        "digits": {"model": "digits", "slo_ms": 1000, "max_batch": 64,
                   "container_concurrency": 4},
    },
    # work-conserving (max_wait_ms 0) so the added latency is the adapter's own work, not a
    # deliberate wait for company (by default a lone request may wait until SLO − P95)
    "adapter": {"aimd": {"initial": 64}, "max_wait_ms": 0},
}  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _sequential(url: str, body: bytes, n: int) -> np.ndarray:
    out = []
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(20):  # warm-up
            await client.post(url, content=body, headers={"content-type": "application/json"})
        for _ in range(n):
            start = time.perf_counter()
            r = await client.post(url, content=body, headers={"content-type": "application/json"})
            out.append((time.perf_counter() - start) * 1000.0)
            assert r.status_code == 200, r.text
    return np.array(out)


async def added_latency(n: int = 300) -> dict[str, float]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "functions.serve", "--model", "digits", "--port", str(port)],
        cwd=ROOT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(trust_env=False) as c:
            for _ in range(600):
                try:
                    if (await c.get(f"{base}/v1/models/digits")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        body = json.dumps({"instances": [[0.0] * 64]}).encode()
        direct = await _sequential(f"{base}/v1/models/digits:predict", body, n)
        app = create_app(parse_config(CONFIG), view=StaticView({"digits": base}))
        server, task, adapter_port = await serve_in_loop(app, "127.0.0.1", 0)
        try:
            url = f"http://127.0.0.1:{adapter_port}/v1/models/digits:predict"
            through = await _sequential(url, body, n)
        finally:
            server.should_exit = True
            await task
    finally:
        proc.terminate()
        proc.wait()
    return {
        "direct_p50_ms": float(np.percentile(direct, 50)),
        "direct_p99_ms": float(np.percentile(direct, 99)),
        "adapter_p50_ms": float(np.percentile(through, 50)),
        "adapter_p99_ms": float(np.percentile(through, 99)),
    }


NOOP_SERVER = """
import sys, json, httpx, uvicorn
sys.path.insert(0, {root!r})
from adapter.app import create_app
from adapter.config import parse_config
from adapter.platform_view import StaticView
def noop(request):
    n = len(json.loads(request.content)["instances"])
    return httpx.Response(200, content=b'{{"predictions":[' + b",".join([b"0"] * n) + b"]}}",
                          headers={{"content-type": "application/json", "x-compute-ms": "0"}})
app = create_app(parse_config({config!r}), view=StaticView({{"digits": "http://noop"}}),
                 transport=httpx.MockTransport(noop))
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""


def cpu_per_request(
    rate: float, config: dict[str, object], seconds: float = 15.0
) -> dict[str, float]:
    port = _free_port()
    code = NOOP_SERVER.format(root=str(ROOT), config=config, port=port)
    adapter = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        for _ in range(200):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        trace = Path(os.environ.get("TMPDIR", "/tmp")) / f"flat-{os.getpid()}.txt"
        trace.write_text("1\n" * int(seconds))
        records = trace.with_suffix(".jsonl")
        proc = psutil.Process(adapter.pid)
        before = proc.cpu_times()
        subprocess.run(
            [sys.executable, "-m", "loadtests.replay", "--trace", str(trace),
             "--trace-format", "autoscale", "--duration-s", str(seconds), "--max-rps", str(rate),
             "--target", f"http://127.0.0.1:{port}", "--function", "digits",
             "--model", "digits", "--records", str(records), "--progress-s", "1000"],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        after = proc.cpu_times()
        rows = [json.loads(line) for line in records.read_text().splitlines()]
        ok = [r for r in rows if r["status"] == 200]
        cpu_s = (after.user - before.user) + (after.system - before.system)
        lat = np.array([r["latency"] * 1000.0 for r in ok])
        batches = [int(r["headers"].get("x-batch-size", 1)) for r in ok]
        return {
            "offered_rps": rate,
            "answered": len(ok),
            "cpu_ms_per_request": 1000.0 * cpu_s / max(1, len(ok)),
            "p50_ms": float(np.percentile(lat, 50)),
            "p99_ms": float(np.percentile(lat, 99)),
            "mean_batch": float(np.mean(batches)),
        }
    finally:
        adapter.terminate()
        adapter.wait()


def main() -> None:
    lat = asyncio.run(added_latency())
    print("added latency at low load (sequential requests, digits, batch of one):")
    print(f"  direct to the function: p50 {lat['direct_p50_ms']:.2f} ms, "
          f"p99 {lat['direct_p99_ms']:.2f} ms")  # fmt: skip
    print(f"  through the adapter:    p50 {lat['adapter_p50_ms']:.2f} ms, "
          f"p99 {lat['adapter_p99_ms']:.2f} ms")  # fmt: skip
    print(f"  added: p50 {lat['adapter_p50_ms'] - lat['direct_p50_ms']:.2f} ms, "
          f"p99 {lat['adapter_p99_ms'] - lat['direct_p99_ms']:.2f} ms")  # fmt: skip
    batching = {**CONFIG, "adapter": {"aimd": {"initial": 64}}}  # default: wait for company
    for label, config in (("alone (max_wait_ms 0)", CONFIG), ("batched (default wait)", batching)):
        print(f"\nadapter CPU per request, no-op upstream, open-loop load, requests {label}:")
        print(f"  {'offered':>8} {'answered':>8} {'cpu_ms/req':>10} {'max_rps/core':>12} "
              f"{'p50_ms':>7} {'p99_ms':>7} {'batch':>6}")  # fmt: skip
        for rate in (200.0, 400.0, 800.0):
            r = cpu_per_request(rate, config)
            print(f"  {r['offered_rps']:>8.0f} {r['answered']:>8} "
                  f"{r['cpu_ms_per_request']:>10.3f} {1000.0 / r['cpu_ms_per_request']:>12.0f} "
                  f"{r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['mean_batch']:>6.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
