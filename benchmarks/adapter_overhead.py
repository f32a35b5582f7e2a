"""What the adapter costs, measured the way users run it: added latency, and CPU per role.

Run: ``make bench`` (``.venv/bin/python benchmarks/adapter_overhead.py``; about three minutes).

Both parts go through ``slackwise serve -c experiments/peers/digits.yaml``: the adapter with its
embedded local platform, which starts the digits replica itself (``--fd``, a socket it bound),
exactly as users run it; nothing is bypassed.

1. **Added latency.** 300 sequential keep-alive requests straight to a digits function process
   (``python -m functions.serve --port``), then 300 through slackwise, with the default
   configuration (no ``max_wait_ms``: whether to wait for company is the adapter's own call).
   The difference of the percentiles is what the adapter and the platform add.
2. **CPU per request, per role.** Open-loop Poisson load from ``benchmarks/loadgen.py`` in its own
   process at several rates; the CPU seconds of the adapter process (the adapter and the embedded
   platform) and of the replica process during the measured window, divided by the requests
   answered. 1 / the adapter's figure is the most one adapter core could serve.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

from functions.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "experiments" / "peers" / "digits.yaml"
URL = "http://127.0.0.1:8700/v1/models/digits"


def _sequential(url: str, body: bytes, n: int) -> np.ndarray:
    out = []
    with httpx.Client(trust_env=False) as client:
        for _ in range(30):  # warm-up
            client.post(url, content=body, headers={"content-type": "application/json"})
        for _ in range(n):
            start = time.perf_counter()
            r = client.post(url, content=body, headers={"content-type": "application/json"})
            out.append((time.perf_counter() - start) * 1000.0)
            assert r.status_code == 200, r.text
    return np.array(out)


def _start_slackwise() -> subprocess.Popen[bytes]:
    slackwise = Path(sys.executable).parent / "slackwise"
    proc = subprocess.Popen([str(slackwise), "serve", "-c", str(CONFIG)], cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            r = httpx.get(URL, timeout=1)
            if r.status_code == 200 and r.json()["replicas"]["ready"] >= 1:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("slackwise serve did not get a ready replica within 120 s")


def added_latency(n: int = 300) -> dict[str, float]:
    body = json.dumps({"instances": [[0.0] * 64]}).encode()
    with ServerProcess("digits") as server, httpx.Client(trust_env=False) as client:
        server.wait_ready(client, timeout_s=120)
        direct = _sequential(server.predict_url, body, n)
    adapter = _start_slackwise()
    try:
        through = _sequential(f"{URL}:predict", body, n)
    finally:
        adapter.terminate()
        adapter.wait()
    return {
        "direct_p50_ms": float(np.percentile(direct, 50)),
        "direct_p99_ms": float(np.percentile(direct, 99)),
        "adapter_p50_ms": float(np.percentile(through, 50)),
        "adapter_p99_ms": float(np.percentile(through, 99)),
    }


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def cpu_per_role(
    serving: subprocess.Popen[bytes], rate: float, seconds: float = 15.0
) -> dict[str, float]:
    adapter = psutil.Process(serving.pid)
    (replica,) = [p for p in adapter.children(recursive=True) if "functions.serve" in p.cmdline()]
    gen = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), "--url", f"{URL}:predict",
         "--model", "digits", "--rate", str(rate), "--warmup-s", "3",
         "--duration-s", str(seconds)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert gen.stdout is not None
    a0 = r0 = a1 = r1 = 0.0
    result: dict[str, float] = {}
    for line in gen.stdout:
        if line.strip() == "measuring":
            a0, r0 = _cpu_s(adapter), _cpu_s(replica)
        elif line.startswith("{"):
            a1, r1 = _cpu_s(adapter), _cpu_s(replica)
            result = json.loads(line)
    gen.wait()
    n = max(1, int(result["ok"]))
    return {
        "offered_rps": rate,
        "answered": n,
        "adapter_ms": 1000.0 * (a1 - a0) / n,
        "replica_ms": 1000.0 * (r1 - r0) / n,
        "p50_ms": result["p50_ms"],
        "p99_ms": result["p99_ms"],
        "mean_batch": result["mean_batch"] or 1.0,
    }


def main() -> None:
    lat = added_latency()
    print("added latency at low load (sequential keep-alive requests, digits, one at a time):")
    print(f"  the function alone (--port):   p50 {lat['direct_p50_ms']:.2f} ms, "
          f"p99 {lat['direct_p99_ms']:.2f} ms")  # fmt: skip
    print(f"  through slackwise serve:       p50 {lat['adapter_p50_ms']:.2f} ms, "
          f"p99 {lat['adapter_p99_ms']:.2f} ms")  # fmt: skip
    print(f"  added: p50 {lat['adapter_p50_ms'] - lat['direct_p50_ms']:.2f} ms, "
          f"p99 {lat['adapter_p99_ms'] - lat['direct_p99_ms']:.2f} ms")  # fmt: skip
    serving = _start_slackwise()
    try:
        print("\nCPU per request by role, open-loop Poisson load, default configuration:")
        print(f"  {'offered':>8} {'answered':>8} {'adapter_ms':>10} {'max_rps/core':>12} "
              f"{'replica_ms':>10} {'p50_ms':>7} {'p99_ms':>7} {'batch':>6}")  # fmt: skip
        for rate in (200.0, 400.0, 800.0, 1200.0):
            r = cpu_per_role(serving, rate)
            print(f"  {r['offered_rps']:>8.0f} {r['answered']:>8} {r['adapter_ms']:>10.3f} "
                  f"{1000.0 / r['adapter_ms']:>12.0f} {r['replica_ms']:>10.3f} "
                  f"{r['p50_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['mean_batch']:>6.1f}")  # fmt: skip
    finally:
        serving.terminate()
        serving.wait()


if __name__ == "__main__":
    main()
