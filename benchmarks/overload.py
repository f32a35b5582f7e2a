"""Overload: the default configuration driven open-loop from half to ten times its capacity.

Run: ``make bench-overload`` (``.venv/bin/python benchmarks/overload.py --repeat 3 --json
docs/results/overload.json --docs docs/reliability.md``; about 20 minutes with three repeats).

``slackwise serve -c experiments/overload/digits.yaml`` (digits, min-scale 1, max-scale 2, SLO
100 ms, containerConcurrency 1; every other value the default) on 127.0.0.1:8711. First its
capacity: closed loop, 32 clients, keep-alive (``benchmarks/loadgen.py --concurrency 32``). Then,
for each client kind (keep-alive connections; a new connection per request, thousands of
independent clients) and each multiple of that capacity (0.5, 1, 2, 3, 5, 10), an open-loop
Poisson load from ``benchmarks/loadgen.py`` in its own process, while this process polls the
status route (``GET /v1/models/digits``, every 50 ms) and samples the adapter's resident memory,
during the load and for 10 s after. One fresh adapter per client kind and repeat.

Reported per cell (medians over the repeats, with ranges): goodput (answers within the SLO per
second), what the client really put on the wire, refusals (429/503) and their P99 latency,
refusals without ``Retry-After``, client timeouts, the adapter's RSS (idle, peak during, 10 s
after) and the status route's P99. The targets the docs hold it to: goodput >= 90 % of
min(capacity, rate on the wire) at 3x and >= 80 % at 10x, no client timeouts, every refusal with
Retry-After, RSS within +50 MB of idle and back within 10 s, status route P99 <= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "experiments" / "overload" / "digits.yaml"
BASE = "http://127.0.0.1:8711"
PREDICT = f"{BASE}/v1/models/digits:predict"
STATUS = f"{BASE}/v1/models/digits"
#: the same status on the adapter's probe port (adapter.probe_port: a thread of its own)
PROBE_STATUS = "http://127.0.0.1:8712/v1/models/digits"
SLO_MS = 100.0
MULTIPLES = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
KINDS = ("keep-alive", "new connection")
PY = sys.executable
LOADGEN = str(ROOT / "benchmarks" / "loadgen.py")


def _start_adapter() -> subprocess.Popen[bytes]:
    slackwise = str(Path(PY).parent / "slackwise")
    proc = subprocess.Popen([slackwise, "serve", "-c", str(CONFIG)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{BASE}/healthz", timeout=1).status_code == 200:
                body = {"instances": [[0.0] * 64]}
                if httpx.post(PREDICT, json=body, timeout=10).status_code == 200:
                    return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("overload: the adapter did not come up on :8711")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def _loadgen(*flags: str) -> dict[str, Any]:
    out = subprocess.run([PY, LOADGEN, "--url", PREDICT, "--model", "digits", *flags],
                         capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


class _Watch(threading.Thread):
    """Polls the status route and samples the adapter's RSS until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.status_ms: list[float] = []
        self.probe_ms: list[float] = []
        self.rss: list[tuple[float, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=10, trust_env=False) as client:
            while not self.halt.is_set():
                for url, out in ((STATUS, self.status_ms), (PROBE_STATUS, self.probe_ms)):
                    sent = time.perf_counter()
                    try:
                        client.get(url)
                        out.append((time.perf_counter() - sent) * 1000.0)
                    except httpx.HTTPError:
                        out.append(10_000.0)
                self.rss.append((time.monotonic(), self.proc.memory_info().rss / 2**20))
                self.halt.wait(0.05)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100.0 * len(ordered)))]


def _cell(pid: int, rate: float, fresh: bool, duration_s: float) -> dict[str, Any]:
    idle = psutil.Process(pid).memory_info().rss / 2**20
    watch = _Watch(pid)
    watch.start()
    flags = ["--rate", f"{rate:.1f}", "--warmup-s", "2", "--duration-s", f"{duration_s:g}",
             "--timeout-s", "10", "--slo-ms", f"{SLO_MS:g}"]  # fmt: skip
    adapter = psutil.Process(pid)
    busy, began = adapter.cpu_times(), time.monotonic()
    result = _loadgen(*flags, *(["--fresh-connections"] if fresh else []))
    ended = time.monotonic()
    spent = adapter.cpu_times()
    cores = (spent.user + spent.system - busy.user - busy.system) / (ended - began)
    status_during, probe_during = list(watch.status_ms), list(watch.probe_ms)
    time.sleep(10.0)
    watch.halt.set()
    watch.join()
    during = [mb for t, mb in watch.rss if t <= ended]
    after = [mb for t, mb in watch.rss if t > ended]
    result.update(
        rss_idle_mb=round(idle, 1),
        rss_peak_mb=round(max(during, default=idle), 1),
        rss_after_10s_mb=round(after[-1] if after else idle, 1),
        status_p99_ms=round(_percentile(status_during, 99) or 0.0, 2),
        probe_status_p99_ms=round(_percentile(probe_during, 99) or 0.0, 2),
        adapter_cores=round(cores, 3),  # its CPU over the warm-up and the measured seconds
    )
    return result


def _median(cells: list[dict[str, Any]], key: str) -> dict[str, float | None]:
    values = [float(c[key]) for c in cells if c.get(key) is not None]
    if not values:
        return {"median": None, "low": None, "high": None}
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


KEYS = ("goodput_rps", "on_wire_rps", "refused", "refusal_p99_ms", "refused_without_retry_after",
        "timeouts", "rss_idle_mb", "rss_peak_mb", "rss_after_10s_mb", "status_p99_ms",
        "probe_status_p99_ms", "adapter_cores")  # fmt: skip


def measure(
    repeat: int,
    duration_s: float,
    multiples: tuple[float, ...] = MULTIPLES,
    kinds: tuple[str, ...] = KINDS,
) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for r in range(repeat):
        for kind in kinds:
            proc = _start_adapter()
            try:
                capacity = _loadgen("--concurrency", "32", "--warmup-s", "3", "--duration-s", "10")
                print(f"repeat {r + 1} {kind}: capacity {capacity['ok_rps']} req/s", flush=True)
                for multiple in multiples:
                    rate = multiple * float(capacity["ok_rps"])
                    cell = _cell(proc.pid, rate, kind != "keep-alive", duration_s)
                    cell.update(repeat=r + 1, kind=kind, multiple=multiple,
                                capacity_rps=capacity["ok_rps"])  # fmt: skip
                    print(json.dumps(cell), flush=True)
                    runs.append(cell)
            finally:
                _stop(proc)
    summary = []
    for kind in kinds:
        for multiple in multiples:
            cells = [c for c in runs if c["kind"] == kind and c["multiple"] == multiple]
            row: dict[str, Any] = {"kind": kind, "multiple": multiple}
            row["capacity_rps"] = _median(cells, "capacity_rps")
            for key in KEYS:
                row[key] = _median(cells, key)
            goodput = row["goodput_rps"]["median"] or 0.0
            bound = min(row["capacity_rps"]["median"] or 0.0, row["on_wire_rps"]["median"] or 0.0)
            row["goodput_share"] = round(goodput / bound, 3) if bound else None
            summary.append(row)
    return {"runs": runs, "summary": summary}


def _fmt(stat: dict[str, float | None], digits: int = 0) -> str:
    m, lo, hi = stat["median"], stat["low"], stat["high"]
    if m is None:
        return "-"
    if lo == hi:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def table(result: dict[str, Any]) -> str:
    lines = [
        "| clients | x capacity | on the wire req/s | goodput req/s (share) | refused | refusal "
        "P99 ms | no Retry-After | timeouts | RSS idle / peak / +10 s MB | status P99 ms | "
        "adapter cores |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["summary"]:
        share = row["goodput_share"]
        lines.append(
            f"| {row['kind']} | {row['multiple']:g} | {_fmt(row['on_wire_rps'])} | "
            f"{_fmt(row['goodput_rps'])} ({'-' if share is None else f'{100 * share:.0f} %'}) | "
            f"{_fmt(row['refused'])} | {_fmt(row['refusal_p99_ms'], 1)} | "
            f"{_fmt(row['refused_without_retry_after'])} | {_fmt(row['timeouts'])} | "
            f"{_fmt(row['rss_idle_mb'])} / {_fmt(row['rss_peak_mb'])} / "
            f"{_fmt(row['rss_after_10s_mb'])} | {_fmt(row['status_p99_ms'], 1)} | "
            f"{_fmt(row['adapter_cores'], 2)} |"
        )
    return "\n".join(lines)


BEGIN = "<!-- overload table: benchmarks/overload.py -->"
END = "<!-- end overload table -->"


def write_docs(path: Path, result: dict[str, Any]) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    path.write_text(text[:start] + "\n" + table(result) + "\n" + text[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per cell (medians)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="measured seconds a cell")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--docs", type=Path, help="rewrite the overload table in this file")
    parser.add_argument(
        "--multiples",
        default=",".join(f"{m:g}" for m in MULTIPLES),
        help="x capacity, comma-separated",
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"of: {', '.join(KINDS)}")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    try:
        multiples = tuple(float(m) for m in args.multiples.split(",") if m)
    except ValueError:
        parser.error(f"--multiples must be numbers, got {args.multiples!r}")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    for kind in kinds:
        if kind not in KINDS:
            parser.error(f"--kinds: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    result = measure(args.repeat, args.duration_s, multiples, kinds)
    result["meta"] = {
        "command": " ".join([Path(PY).name, "benchmarks/overload.py", *(argv or sys.argv[1:])]),
        "commit": commit(ROOT),
        "machine": machine(),
        "config": str(CONFIG.relative_to(ROOT)),
        "slo_ms": SLO_MS,
        "date": time.strftime("%Y-%m-%d"),
    }
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.docs:
        write_docs(args.docs, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
