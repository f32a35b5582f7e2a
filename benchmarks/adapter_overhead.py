"""What the adapter costs, measured the way users run it: added latency, and CPU per role.

Run: ``make bench`` (``.venv/bin/python benchmarks/adapter_overhead.py --json
docs/results/adapter_overhead.json --docs docs/benchmarks.md``; about ten minutes). Every
measurement is repeated (``--repeat``, 3) and reported as the median and range; the JSON records
the commit, the machine and the command.

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
3. **Where the adapter's CPU goes** at ``--profile-rate`` (py-spy on the adapter process, when it
   is installed in the venv), grouped by the module of the leaf frame.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from functions.server_process import ServerProcess
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

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
        [
            sys.executable,
            str(ROOT / "benchmarks" / "loadgen.py"),
            "--url",
            f"{URL}:predict",
            "--model",
            "digits",
            "--rate",
            str(rate),
            "--warmup-s",
            "3",
            "--duration-s",
            str(seconds),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
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


def profile(serving: subprocess.Popen[bytes], rate: float, seconds: float = 10.0) -> dict[str, Any]:
    """Where the adapter process spends its CPU at ``rate``: py-spy samples (200 Hz, the GIL
    holder's stack, idle excluded) grouped by the leaf frame's module."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return {"skipped": "py-spy is not installed in this venv"}
    out = Path(tempfile.mkdtemp()) / "adapter.txt"
    gen = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "loadgen.py"),
            "--url",
            f"{URL}:predict",
            "--model",
            "digits",
            "--rate",
            str(rate),
            "--warmup-s",
            "2",
            "--duration-s",
            str(seconds + 2),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    time.sleep(3)
    rec = subprocess.run(
        [
            str(spy),
            "record",
            "--format",
            "raw",
            "-r",
            "200",
            "-d",
            str(int(seconds)),
            "--nonblocking",
            "-p",
            str(serving.pid),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    gen.wait()
    if rec.returncode != 0 or not out.exists():
        return {"skipped": f"py-spy failed: {rec.stderr.strip()[-300:]}"}
    by_module: dict[str, int] = {}
    total = 0
    for line in out.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        file = leaf[leaf.rfind("(") + 1 :].split(":")[0] if "(" in leaf else leaf
        module = _module_of(file)
        by_module[module] = by_module.get(module, 0) + int(count)
        total += int(count)
    shares = sorted(by_module.items(), key=lambda kv: -kv[1])
    return {
        "rate": rate,
        "seconds": seconds,
        "samples": total,
        "busy_share_of_a_core": round(total / (200.0 * seconds), 3),
        "by_module": [{"module": m, "share": round(n / total, 4)} for m, n in shares[:15]],
    }


def _module_of(file: str) -> str:
    """A file in a stack, as a module path of this project or a package name."""
    path = file.replace("\\", "/")
    if str(ROOT) in path:
        return path.split(str(ROOT) + "/", 1)[1]
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0]
    if "/lib/python" in path:
        return "stdlib: " + path.rsplit("/", 1)[-1]
    return path or "(native)"


def _stat(values: list[float]) -> dict[str, float]:
    xs = sorted(values)
    return {
        "median": round(statistics.median(xs), 3),
        "low": round(xs[0], 3),
        "high": round(xs[-1], 3),
    }


def measure(repeat: int, rates: list[float], profile_rate: float) -> dict[str, Any]:
    latency = [added_latency() for _ in range(repeat)]
    added = {
        key: _stat([run[key] for run in latency])
        for key in ("direct_p50_ms", "direct_p99_ms", "adapter_p50_ms", "adapter_p99_ms")
    }
    added["added_p50_ms"] = _stat([r["adapter_p50_ms"] - r["direct_p50_ms"] for r in latency])
    added["added_p99_ms"] = _stat([r["adapter_p99_ms"] - r["direct_p99_ms"] for r in latency])
    rows: dict[float, list[dict[str, float]]] = {rate: [] for rate in rates}
    prof: dict[str, Any] = {}
    serving = _start_slackwise()
    try:
        for _ in range(repeat):
            for rate in rates:
                rows[rate].append(cpu_per_role(serving, rate))
        if profile_rate > 0:
            prof = profile(serving, profile_rate)
    finally:
        serving.terminate()
        serving.wait()
    cpu = [
        {
            "offered_rps": rate,
            **{
                key: _stat([r[key] for r in runs])
                for key in ("adapter_ms", "replica_ms", "p50_ms", "p99_ms", "mean_batch")
            },
        }
        for rate, runs in rows.items()
    ]
    return {"added_latency": added, "cpu_per_role": cpu, "profile": prof, "runs": latency}


def _fmt(stat: dict[str, float], digits: int = 2) -> str:
    return f"{stat['median']:.{digits}f} ({stat['low']:.{digits}f}-{stat['high']:.{digits}f})"


def table(result: dict[str, Any]) -> str:
    """The docs block: added latency, CPU per role at each rate, and the profile."""
    meta, lat = result["meta"], result["added_latency"]
    lines = [
        f"Medians of {meta['repeat']} runs (range), commit {meta['commit']}, {meta['date']}, "
        f"{meta['machine']['cpus']} cores; `{meta['command']}`.",
        "",
        "| sequential requests, one at a time (digits) | P50 ms | P99 ms |",
        "| --- | --- | --- |",
        f"| the function alone | {_fmt(lat['direct_p50_ms'])} | {_fmt(lat['direct_p99_ms'])} |",
        f"| through slackwise serve | {_fmt(lat['adapter_p50_ms'])} | "
        f"{_fmt(lat['adapter_p99_ms'])} |",
        f"| added | {_fmt(lat['added_p50_ms'])} | {_fmt(lat['added_p99_ms'])} |",
        "",
        "| offered req/s | adapter CPU ms per request | replica CPU ms per request | P50 ms | "
        "P99 ms | mean batch |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["cpu_per_role"]:
        lines.append(
            f"| {row['offered_rps']:.0f} | {_fmt(row['adapter_ms'], 3)} | "
            f"{_fmt(row['replica_ms'], 3)} | {_fmt(row['p50_ms'], 1)} | "
            f"{_fmt(row['p99_ms'], 1)} | {_fmt(row['mean_batch'], 1)} |"
        )
    prof = result.get("profile") or {}
    if prof.get("by_module"):
        lines += [
            "",
            f"Where the adapter process's CPU went at {prof['rate']:.0f} req/s (py-spy, 200 Hz for "
            f"{prof['seconds']:.0f} s, `--nonblocking`, leaf frames by module; busy "
            f"{100 * prof['busy_share_of_a_core']:.0f} % of a core):",
            "",
            "| share | module (leaf frame) |",
            "| --- | --- |",
        ]
        lines += [
            f"| {100 * m['share']:.1f} % | `{m['module']}`{_note(m['module'])} |"
            for m in prof["by_module"]
        ]
    return "\n".join(lines)


#: what a leaf frame's module stands for, where its name does not say
_NOTES = {
    "asyncio/runners.py": " (the event loop's own work in uvloop's C code: socket reads and "
    "writes, callbacks, timers; the last Python frame while it runs)",
    "functions/runtime.py": " (`v1_instances`: the V1 body's parse and checks, shared with the "
    "function runtime)",
    "slackwise_core/http1.py": " (the lean HTTP/1.1 client to the replicas)",
    "knative/http1.py": " (the lean HTTP/1.1 client to the replicas; its home until it moved to "
    "slackwise_core/http1.py)",
}

#: where a module measured at an older commit lives now (a package that moved)
_MOVED = {"adapter/policies/": "slackwise_policies/"}


def _note(module: str) -> str:
    """What ``module`` stands for, and where it lives now if it moved since."""
    note = _NOTES.get(module, "")
    for old, new in _MOVED.items():
        if module.startswith(old):
            note += f" (now `{new}{module[len(old) :]}`)"
    return note


BEGIN = "<!-- adapter overhead: generated by benchmarks/adapter_overhead.py -->"
END = "<!-- end of adapter overhead -->"


def write_docs(doc: Path, result: dict[str, Any]) -> None:
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{doc} has no generated adapter overhead block (markers missing)")
    doc.write_text(f"{head}{BEGIN}\n{table(result)}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    parser.add_argument(
        "--rates", default="50,200,400,800,1000,1200", help="req/s, comma-separated"
    )
    parser.add_argument("--profile-rate", type=float, default=1000.0, help="0: no profile")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--docs", type=Path, help="rewrite the generated block in this file")
    parser.add_argument("--from-json", type=Path, help="measure nothing: render this JSON")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        result = json.loads(args.from_json.read_text(encoding="utf-8"))
    else:
        if args.repeat < 1:
            parser.error(f"--repeat must be at least 1, got {args.repeat}")
        try:
            rates = [float(r) for r in args.rates.split(",") if r]
        except ValueError:
            parser.error(f"--rates must be numbers, got {args.rates!r}")
        result = measure(args.repeat, rates, args.profile_rate)
        result["meta"] = {
            "command": " ".join(
                [
                    "python",
                    "benchmarks/adapter_overhead.py",
                    *(argv if argv is not None else sys.argv[1:]),
                ]
            ),
            "commit": commit(ROOT),
            "date": time.strftime("%Y-%m-%d"),
            "repeat": args.repeat,
            "config": str(CONFIG.relative_to(ROOT)),
            "machine": machine(),
        }
    print(table(result))
    if args.json is not None and args.from_json is None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.docs is not None:
        write_docs(args.docs, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
