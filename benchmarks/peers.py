"""slackwise against KServe and against the function alone: max rate under the SLO, side by side.

Run: ``make bench-peers`` (or ``.venv/bin/python benchmarks/peers.py --json runs/peers.json``).

For each model (digits, SLO 50 ms; embed, MiniLM, SLO 150 ms) and each system, one warm replica
on this machine:

- ``kserve``: KServe's ModelServer (installed into its own throwaway venv, ``.bench/kserve-venv``,
  never a dependency of this project) serving the very model class our functions serve
  (``benchmarks/kserve_server.py``), V1 protocol, no batching;
- ``function``: our function process alone (``python -m functions.serve --port``);
- ``slackwise``: ``slackwise serve -c experiments/peers/MODEL.yaml``: the adapter with its
  embedded local platform and one warm replica, exactly as users run it.

Load comes from ``benchmarks/loadgen.py`` in its own process: open-loop Poisson at a fixed rate,
``--warmup-s`` then ``--duration-s`` measured, latency from the scheduled send time. A rate
passes when P95 ≤ SLO and fewer than 0.1 % of requests fail. The sweep multiplies the rate by
``--step`` until a rate fails, then bisects ``--refine`` times between the last pass and the
first failure. CPU per request is the CPU seconds the system's processes (the server and its
children) used during the measured window, divided by the requests measured there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from functions.server_process import free_port

ROOT = Path(__file__).resolve().parent.parent
KSERVE_VERSION = "0.21.0"
MODELS = {"digits": 50.0, "embed": 150.0}
START_RPS = {"digits": 100.0, "embed": 10.0}
SYSTEMS = ("kserve", "function", "slackwise")


@dataclass
class Running:
    """A system under test: its predict URL and its root process."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def cpu_s(self) -> float:
        """CPU seconds of the root process and every child it has now."""
        try:
            root = psutil.Process(self.process.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        total = 0.0
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                t = proc.cpu_times()
                total += t.user + t.system
        return total


@dataclass
class Point:
    rate: float
    result: dict[str, Any]
    cpu_ms_per_request: float
    loadgen_cpu_ms_per_request: float
    passed: bool = field(default=False)


def _kserve_python(venv_dir: Path) -> Path:
    """The throwaway venv's Python, with KServe installed and our code importable from it."""
    python = venv_dir / "bin" / "python"
    stamp = venv_dir / f".kserve-{KSERVE_VERSION}"
    if not stamp.exists():
        print(f"installing kserve=={KSERVE_VERSION} into {venv_dir} ...", flush=True)
        venv.create(venv_dir, with_pip=True, clear=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"kserve=={KSERVE_VERSION}"], check=True
        )
        # our model classes and their packages (numpy, scikit-learn, torch...) come from this
        # project's venv, after KServe's own packages on the path
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        ours = [p for p in sys.path if p.endswith("site-packages")]
        Path(site, "zz_slackwise_project.pth").write_text(
            "\n".join([str(ROOT), *ours]) + "\n", encoding="utf-8"
        )
        stamp.touch()
    return python


def _wait_ready(running: Running, ready_url: str, timeout_s: float, warm: bool) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(trust_env=False) as client:
        while time.monotonic() < deadline:
            if running.process.poll() is not None:
                raise RuntimeError(
                    f"{running.name} exited with {running.process.returncode}; see {running.log}"
                )
            with contextlib.suppress(httpx.HTTPError):
                r = client.get(ready_url, timeout=2)
                if r.status_code == 200 and (not warm or r.json()["replicas"]["ready"] >= 1):
                    return
            time.sleep(0.2)
    raise RuntimeError(f"{running.name} not ready within {timeout_s:.0f} s; see {running.log}")


@contextlib.contextmanager
def start(system: str, model: str, out_dir: Path, kserve_venv: Path) -> Iterator[Running]:
    log = out_dir / f"{system}-{model}.log"
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    if system == "slackwise":
        port = 8700
        cmd = [str(Path(sys.executable).parent / "slackwise"), "serve", "-c",
               str(ROOT / "experiments" / "peers" / f"{model}.yaml")]  # fmt: skip
    elif system == "function":
        port = free_port()
        cmd = [sys.executable, "-m", "functions.serve", "--model", model, "--port", str(port)]
    elif system == "kserve":
        port = free_port()
        python = _kserve_python(kserve_venv)
        cmd = [str(python), str(ROOT / "benchmarks" / "kserve_server.py"), "--model", model,
               "--port", str(port)]  # fmt: skip
    else:
        raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")
    base = f"http://127.0.0.1:{port}/v1/models/{model}"
    with open(log, "wb") as sink:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    running = Running(system, f"{base}:predict", process, log)
    try:
        _wait_ready(running, base, timeout_s=300, warm=system == "slackwise")
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(running: Running, model: str, rate: float, args: argparse.Namespace) -> Point:
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "loadgen.py"), "--url", running.url,
        "--model", model, "--rate", f"{rate:g}", "--warmup-s", str(args.warmup_s),
        "--duration-s", str(args.duration_s), "--seed", str(args.seed),
    ]  # fmt: skip
    gen = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert gen.stdout is not None
    gen_proc = psutil.Process(gen.pid)
    cpu0 = cpu1 = gen0 = 0.0
    result: dict[str, Any] = {}
    for line in gen.stdout:
        if line.strip() == "measuring":
            cpu0 = running.cpu_s()
            t = gen_proc.cpu_times()
            gen0 = t.user + t.system
        elif line.startswith("{"):
            cpu1 = running.cpu_s()
            result = json.loads(line)
            with contextlib.suppress(psutil.NoSuchProcess):
                t = gen_proc.cpu_times()
                gen0 = t.user + t.system - gen0
    gen.wait()
    if not result:
        raise RuntimeError(f"the load generator printed no result (exit {gen.returncode})")
    n = max(1, int(result["requests"]))
    return Point(rate, result, 1000.0 * (cpu1 - cpu0) / n, 1000.0 * gen0 / n)


def sweep(running: Running, model: str, slo_ms: float, args: argparse.Namespace) -> dict[str, Any]:
    points: list[Point] = []

    def run(rate: float) -> Point:
        point = measure(running, model, rate, args)
        r = point.result
        point.passed = r["error_ratio"] < 0.001 and r["p95_ms"] <= slo_ms
        points.append(point)
        print(
            f"  {running.name:9s} {model:6s} {rate:7.0f} req/s  p50 {r['p50_ms']:7.2f}  "
            f"p95 {r['p95_ms']:8.2f}  p99 {r['p99_ms']:8.2f} ms  err {r['error_ratio']:.4f}  "
            f"batch {r['mean_batch'] or 1:5.2f}  cpu {point.cpu_ms_per_request:5.2f} ms/req  "
            f"{'pass' if point.passed else 'FAIL'}",
            flush=True,
        )
        return point

    at_50 = run(50.0)
    good: Point | None = at_50 if at_50.passed else None
    bad: Point | None = None if at_50.passed else at_50
    if good is None:
        # the system cannot take 50 req/s: step down until it passes
        rate = 50.0 / args.step
        while rate >= args.min_rps:
            point = run(round(rate, 1))
            if point.passed:
                good = point
                break
            bad = point
            rate /= args.step
    else:
        rate = START_RPS[model] if START_RPS[model] > 50 else 50.0 * args.step
        while rate <= args.max_rps:
            point = run(rate)
            if not point.passed:
                bad = point
                break
            good = point
            rate *= args.step
    for _ in range(args.refine if good is not None and bad is not None else 0):
        assert good is not None and bad is not None
        point = run(round((good.rate + bad.rate) / 2.0, 1))
        if point.passed:
            good = point
        else:
            bad = point
    return {
        "slo_ms": slo_ms,
        "max_rate_under_slo": good.rate if good is not None else None,
        "p50_ms_at_50": at_50.result["p50_ms"],
        "at_max": None if good is None else _row(good),
        "points": [_row(p) for p in sorted(points, key=lambda p: p.rate)],
    }


def _row(p: Point) -> dict[str, Any]:
    r = p.result
    return {
        "rate": p.rate,
        "passed": p.passed,
        "p50_ms": r["p50_ms"],
        "p95_ms": r["p95_ms"],
        "p99_ms": r["p99_ms"],
        "error_ratio": r["error_ratio"],
        "mean_batch": r["mean_batch"],
        "cpu_ms_per_request": round(p.cpu_ms_per_request, 3),
        "loadgen_cpu_ms_per_request": round(p.loadgen_cpu_ms_per_request, 3),
        "requests": r["requests"],
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        "| model (SLO) | system | max rate under the SLO | P50 / P95 / P99 at that rate | "
        "CPU per request there | mean batch | P50 at 50 req/s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for model, systems in results["models"].items():
        for system, s in systems.items():
            top = s["at_max"]
            rate = "none" if top is None else f"{top['rate']:.0f} req/s"
            lat = "–" if top is None else (
                f"{top['p50_ms']:.1f} / {top['p95_ms']:.1f} / {top['p99_ms']:.1f} ms"
            )  # fmt: skip
            cpu = "–" if top is None else f"{top['cpu_ms_per_request']:.2f} ms"
            batch = "–" if top is None or top["mean_batch"] is None else f"{top['mean_batch']:.1f}"
            lines.append(
                f"| {model} ({s['slo_ms']:.0f} ms) | {system} | {rate} | {lat} | {cpu} | "
                f"{batch} | {s['p50_ms_at_50']:.1f} ms |"
            )
    return "\n".join(lines)


BEGIN = "<!-- peers table: generated by benchmarks/peers.py from docs/results/peers.json -->"
END = "<!-- end of peers table -->"


def render_into(doc: Path, results: dict[str, Any]) -> None:
    """Replace the generated table in ``doc`` (between :data:`BEGIN` and :data:`END`)."""
    text = doc.read_text(encoding="utf-8")
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{doc} has no generated peers table (markers missing)")
    body = f"{BEGIN}\n{header(results)}\n\n{table(results)}\n{END}"
    doc.write_text(head + body + tail, encoding="utf-8")


def header(results: dict[str, Any]) -> str:
    return (
        f"Measured {results['when']} on {results['machine']}; each rate "
        f"{results['warmup_s']:g} s warm-up + {results['duration_s']:g} s measured."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--step", type=float, default=1.5, help="rate multiplier per step")
    parser.add_argument("--refine", type=int, default=2, help="bisection steps")
    parser.add_argument("--max-rps", type=float, default=5000.0)
    parser.add_argument("--min-rps", type=float, default=2.0, help="lowest rate tried")
    parser.add_argument(
        "--merge", type=Path, help="start from these results and replace what this run measures"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kserve-venv", type=Path, default=ROOT / ".bench" / "kserve-venv")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "runs" / "peers")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--docs", type=Path, help="rewrite the generated table in this Markdown file"
    )
    parser.add_argument(
        "--from-json", type=Path, help="measure nothing: render the table from this JSON"
    )
    args = parser.parse_args(argv)
    if args.from_json is not None:
        results = json.loads(args.from_json.read_text(encoding="utf-8"))
        print(table(results))
        if args.docs is not None:
            render_into(args.docs, results)
        return 0
    models = [m for m in args.models.split(",") if m]
    systems = [s for s in args.systems.split(",") if s]
    for m in models:
        if m not in MODELS:
            parser.error(f"--models: unknown model {m!r}; known: {', '.join(MODELS)}")
    for s in systems:
        if s not in SYSTEMS:
            parser.error(f"--systems: unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    if args.step <= 1:
        parser.error(f"--step must be above 1, got {args.step}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    previous: dict[str, Any] = {}
    if args.merge is not None:
        previous = json.loads(args.merge.read_text(encoding="utf-8"))
    results: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "warmup_s": args.warmup_s,
        "duration_s": args.duration_s,
        "models": previous.get("models", {}),
    }
    if previous:
        results["when"] = f"{previous['when']}; {results['when']}"
    for model in models:
        results["models"].setdefault(model, {})
        for system in systems:
            with start(system, model, args.out_dir, args.kserve_venv) as running:
                results["models"][model][system] = sweep(running, model, MODELS[model], args)
    print()
    print(table(results))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if args.docs is not None:
        render_into(args.docs, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
