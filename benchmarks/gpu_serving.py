"""A model on one GPU through the adapter, against the same model batched in one process.

Run (on a machine with an NVIDIA GPU): ``.venv/bin/python benchmarks/gpu_serving.py --model embed
--slo-ms 100 --repeat 3 --json docs/results/gpu-serving-embed.json``; about 3 minutes a repeat.

1. **In process** (the bound): ``model.predict`` on the GPU at each batch size up to the model's
   limit, median and P95 of ``--calls`` timed calls after a warm-up; the model's best batched
   throughput is the most items a second over the batch sizes whose P95 fits in the SLO.
2. **Through the adapter**: ``slackwise serve`` with one replica of the model's ``variant: gpu``
   (started by the embedded local platform with ``--device``), its batch cap the model's limit,
   everything else the default; its largest rate under the SLO is found as ``make bench-peers``
   finds it (``benchmarks/peer_sweep.py``: open-loop Poisson from ``benchmarks/loadgen.py``, P95 <=
   SLO, P99 <= 2x SLO, < 0.1 % errors), each point ``--duration-s`` after ``--warmup-s``.
   ``--container-concurrency 1,2`` measures it with one batch at a time on the replica and with
   two (the second's parsing and the first's answer overlap the other's compute), each repeat.
3. **The function alone** (first repeat only), one request per call straight to a
   ``functions.serve`` process on the GPU (no batching): what the adapter's batching adds.

``--device cpu`` runs the same steps on the CPU (a check of the script, not a GPU number).

The JSON records the GPU, the versions, the commit and every point; ``fraction`` is the adapter's
largest rate over the in-process bound (median over repeats, with its range).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
from peer_sweep import Probe, median_and_range, sweep
from peer_systems import ROOT, Running, serve_command

from functions.profile import gpu_name, machine
from functions.registry import create_model
from slackwise_cli.repeats import commit

PORT = 8700
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def inprocess(model_kind: str, device: str, slo_ms: float, calls: int) -> dict[str, Any]:
    """Median and P95 per batch size of ``predict`` on ``device``, and the best rate within SLO."""
    import torch

    model = create_model(model_kind, device=device)
    model.check_device()
    model.load()
    sizes = [n for n in BATCH_SIZES if n <= model.max_instances]
    pool = [model.validate(x) for x in model.sample_instances(max(sizes))]
    rows: dict[str, dict[str, float]] = {}
    for size in sizes:
        batch = pool[:size]
        for _ in range(3):
            model.predict(batch)
        times = []
        for _ in range(calls):
            if device != "cpu":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model.predict(batch)
            times.append((time.perf_counter() - t0) * 1000.0)
        median, p95 = float(np.median(times)), float(np.percentile(times, 95))
        rows[str(size)] = {
            "median_ms": round(median, 3),
            "p95_ms": round(p95, 3),
            "items_per_s": round(1000.0 * size / median, 1),
        }
        print(f"  in process b={size:<4} median {median:7.2f} ms  p95 {p95:7.2f} ms", flush=True)
    fitting = {n: r for n, r in rows.items() if r["p95_ms"] <= slo_ms}
    best = max(fitting, key=lambda n: fitting[n]["items_per_s"]) if fitting else None
    encoder = getattr(model, "_encoder", None)
    dtype = None if encoder is None else str(next(encoder._model.parameters()).dtype)
    del model
    if device != "cpu":
        torch.cuda.empty_cache()
    return {
        "batches": rows,
        "best_batch": None if best is None else int(best),
        "best_items_per_s": None if best is None else fitting[best]["items_per_s"],
        "dtype": dtype,
    }


def _config(
    model_kind: str, slo_ms: float, device: str, max_batch: int, concurrency: int, out_dir: Path
) -> Path:
    path = out_dir / f"{model_kind}-gpu-cc{concurrency}.yaml"
    path.write_text(
        "\n".join([
            "platform:",
            "  autoscaler:",
            '    initial-scale: "1"',
            "functions:",
            f"  {model_kind}:",
            f"    model: {model_kind}",
            *([] if device == "cpu" else ["    variant: gpu", f"    device: {device}"]),
            f"    slo_ms: {slo_ms:g}",
            f"    container_concurrency: {concurrency}",
            f"    max_batch: {max_batch}",
            "    annotations:",
            '      autoscaling.knative.dev/min-scale: "1"',
            '      autoscaling.knative.dev/max-scale: "1"',
            "adapter:",
            "  host: 127.0.0.1",
            f"  port: {PORT}",
            "",
        ]),
        encoding="utf-8",
    )  # fmt: skip
    return path


@contextlib.contextmanager
def running(
    system: str, model_kind: str, config: Path, device: str, log: Path
) -> Iterator[Running]:
    """``slackwise serve -c config``, or the function alone on ``device``, until the block ends."""
    if system == "slackwise":
        cmd = [sys.executable, "-m", "slackwise_cli.main", "serve", "-c", str(config)]
        port = PORT
    else:
        port = PORT + 1
        cmd = [sys.executable, "-m", "functions.serve", "--model", model_kind, "--device", device,
               "--port", str(port)]  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1/models/{model_kind}:predict"
    with serve_command(cmd, url, system, log, model_kind) as run:
        yield run


def _versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "transformers", "sentence-transformers", "onnxruntime", "starlette"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embed", help="a model kind with a GPU variant")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--slo-ms", type=float, default=100.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=30, help="timed calls per batch size")
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--duration-s", type=float, default=6.0)
    parser.add_argument("--refine", type=int, default=3)
    parser.add_argument("--systems", default="slackwise,function")
    parser.add_argument(
        "--container-concurrency",
        default="1",
        help="comma-separated batches the adapter may hold at once on the one replica; each is "
        "measured in every repeat (slackwise at 1, slackwise-ccN at N)",
    )
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument(
        "--commit", default=None, help="the revision measured (default: this checkout's HEAD)"
    )
    args = parser.parse_args(argv)
    if args.device != "cpu" and gpu_name_or_none(args.device) is None:
        print(f"gpu_serving: no GPU behind {args.device!r} (torch sees none)", file=sys.stderr)
        return 2
    systems = [s for s in args.systems.split(",") if s]
    try:
        levels = [int(n) for n in args.container_concurrency.split(",") if n]
    except ValueError:
        parser.error(f"--container-concurrency takes integers, got {args.container_concurrency!r}")
    if not levels or min(levels) < 1:
        parser.error(f"--container-concurrency must be >= 1, got {args.container_concurrency!r}")
    systems = [
        *(_adapter_key(n) for n in levels if "slackwise" in systems),
        *(s for s in systems if s != "slackwise"),
    ]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp)
        for index in range(args.repeat):
            print(f"repeat {index + 1}/{args.repeat}", flush=True)
            bound = inprocess(args.model, args.device, args.slo_ms, args.calls)
            cap = max(int(n) for n in bound["batches"])
            entry: dict[str, Any] = {"inprocess": bound}
            adapters = [s for s in systems if s.startswith("slackwise")]
            for system in systems if index == 0 else adapters:
                level = int(system.removeprefix("slackwise-cc")) if "-cc" in system else 1
                config = _config(args.model, args.slo_ms, args.device, cap, level, out_dir)
                log = out_dir / f"{system}-{index}.log"
                kind = "slackwise" if system in adapters else system
                with running(kind, args.model, config, args.device, log) as run:
                    probe = Probe(args.warmup_s, args.duration_s, seed=index)
                    entry[system] = sweep(run, args.model, args.slo_ms, probe, args.refine)
            best = bound["best_items_per_s"]
            for system in adapters:
                rate = entry[system].get("max_rate")
                fraction = round(rate / best, 3) if rate and best else None
                entry[_fraction_key(system)] = fraction
                print(f"  {system} {rate} req/s against {best} in process: {fraction}")
            runs.append(entry)
            _write(args, systems, runs)  # after every repeat: a run cut short keeps what it has
    return 0


def _write(args: argparse.Namespace, systems: list[str], runs: list[dict[str, Any]]) -> None:
    adapters = [s for s in systems if s.startswith("slackwise")]
    summary = {
        **{
            _fraction_key(s): median_and_range([r[_fraction_key(s)] for r in runs], digits=3)
            for s in adapters
        },
        "inprocess_best_items_per_s": median_and_range(
            [r["inprocess"]["best_items_per_s"] for r in runs]
        ),
        **{
            f"{s}_max_rate": median_and_range([r[s]["max_rate"] for r in runs if s in r])
            for s in systems
        },
    }
    doc = {
        "benchmark": "gpu_serving",
        "command": "python benchmarks/gpu_serving.py " + " ".join(sys.argv[1:]),
        "commit": args.commit or commit(ROOT),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": args.device,
        "machine": vars(machine(args.device)),
        "versions": _versions(),
        "settings": {
            "model": args.model, "slo_ms": args.slo_ms, "repeat": args.repeat,
            "repeats_done": len(runs),
            "calls": args.calls, "warmup_s": args.warmup_s, "duration_s": args.duration_s,
            "refine": args.refine, "systems": systems,
            "container_concurrency": args.container_concurrency,
            "pass_rule": "P95 <= SLO, P99 <= 2x SLO, errors < 0.1 %, none dropped",
        },
        "summary": summary,
        "runs": runs,
    }  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary), flush=True)


def _adapter_key(concurrency: int) -> str:
    """The adapter's system name in the JSON at ``container_concurrency`` (``slackwise`` at 1)."""
    return "slackwise" if concurrency == 1 else f"slackwise-cc{concurrency}"


def _fraction_key(system: str) -> str:
    return "fraction" + system.removeprefix("slackwise")


def gpu_name_or_none(device: str) -> str | None:
    """The GPU's name, or None where torch sees none."""
    try:
        import torch
    except ImportError:
        return None
    return gpu_name(device) if torch.cuda.is_available() else None


if __name__ == "__main__":
    sys.exit(main())
