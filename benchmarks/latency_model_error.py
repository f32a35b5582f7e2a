"""Each function's latency model against its measured profile: the line (GrandSLAM Eq. 2) and
the curve (``LatencyModel(curve=True)``), fed the same samples.

For every function with a CPU profile (``functions/profiles/cpu``, the HTTP round trip, as the
adapter sees it), batches of the sizes a dynamic batcher sends (1 to 32, smaller ones more
often) are drawn from the profile's log-normal service curve
(:class:`simulator.service.ServiceCurve`, median and P95 as measured) and fed to a fresh model
of each kind, seeded with the profile's linear fit as the adapter seeds it. The table gives,
per function, each model's estimate error against the measured median at each size (mean and
worst |error| over the sizes), and the P95 error of ``p95_ms`` against the measured P95.

    .venv/bin/python benchmarks/latency_model_error.py [--samples N] [--seed S]

Output: a markdown table (docs/simulator.md includes it through ``slackwise report``).

Against live samples: ``--live RECORDS... --stages stage=kind,...`` reads the replayer's records
of a live chain run (``slackwise experiment --plots DIR`` keeps them as ``DIR/MODE.jsonl``; each
answer's ``Server-Timing`` and ``X-Batch-Size`` give every stage's batch round trip and size, as
in ``benchmarks/calibrate_from_live.py``). Per stage, the first half of the batches (in the
order they were answered) is fed to each model, seeded from the quiet profile as the adapter
seeds it; the second half is held out: at every batch size seen at least ``--min-samples`` times
there, each model's estimate is compared with the held-out median and its ``p95_ms`` with the
held-out P95. "profile" is the seed alone (what the quiet profile predicts, no live sample).

    .venv/bin/python benchmarks/latency_model_error.py --live runs/img-query/GS.jsonl \
        --stages classify=imagenet,nlu=ner,answer=qa
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from pathlib import Path

from simulator.profiles import resolve_curves
from simulator.service import ServiceCurve
from slackwise_cli.results import stage_samples
from slackwise_policies.latency import LatencyModel

SIZES = (1, 2, 4, 8, 16, 32)
FUNCTIONS = ("digits", "embed", "qa", "ner", "imagenet", "face_detect", "face_embed",
             "face_landmarks")  # fmt: skip


def errors(curve: ServiceCurve, samples: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """Per model kind: (mean |error| of the median, worst |error|, mean |error| of the P95), %."""
    rng = random.Random(seed)
    sigma = {n: curve.p95_ms(n) / curve.median_ms(n) for n in SIZES}
    models = {
        "line": LatencyModel.from_prior(max(curve.prior_a_ms, 0.1), max(curve.prior_b_ms, 0.0)),
        "curve": LatencyModel.from_prior(
            max(curve.prior_a_ms, 0.1), max(curve.prior_b_ms, 0.0), curve=True
        ),
    }
    weights = [1.0 / n for n in SIZES]  # small batches are the common ones
    for i in range(samples):
        n = rng.choices(SIZES, weights)[0]
        spread = math.log(sigma[n]) / 1.6448536269514722
        y = curve.median_ms(n) * math.exp(spread * rng.gauss(0.0, 1.0))
        for model in models.values():
            model.observe(i * 0.001, n, y, y, cold=False)
    now = samples * 0.001
    out = {}
    for kind, model in models.items():
        med = [abs(model.estimate_ms(n) / curve.median_ms(n) - 1) * 100 for n in SIZES]
        p95 = [abs(model.p95_ms(n, now) / curve.p95_ms(n) - 1) * 100 for n in SIZES]
        out[kind] = (sum(med) / len(med), max(med), sum(p95) / len(p95))
    return out


def live_errors(curve: ServiceCurve, samples: list[tuple[int, float]], min_samples: int
                ) -> tuple[dict[str, tuple[float, float, float]], list[int]]:  # fmt: skip
    """Per model (profile, line, curve): mean |error| of the median, worst, mean |error| of the
    P95 against the held-out half, %; and the batch sizes judged."""
    half = len(samples) // 2
    a, b = max(curve.prior_a_ms, 0.1), max(curve.prior_b_ms, 0.0)
    models = {"profile": LatencyModel.from_prior(a, b),
              "line": LatencyModel.from_prior(a, b),
              "curve": LatencyModel.from_prior(a, b, curve=True)}  # fmt: skip
    for i, (n, ms) in enumerate(samples[:half]):
        for kind in ("line", "curve"):
            models[kind].observe(i * 0.001, n, ms, ms, cold=False)
    now = half * 0.001
    held: dict[int, list[float]] = {}
    for n, ms in samples[half:]:
        held.setdefault(n, []).append(ms)
    sizes = sorted(n for n, v in held.items() if len(v) >= min_samples)
    out = {}
    for kind, model in models.items():
        med = [abs(model.estimate_ms(n) / statistics.median(held[n]) - 1) * 100 for n in sizes]
        p95 = [abs(model.p95_ms(n, now) / _p95(held[n]) - 1) * 100 for n in sizes]
        out[kind] = (statistics.fmean(med), max(med), statistics.fmean(p95)) if sizes else (
            math.nan, math.nan, math.nan)  # fmt: skip
    return out, sizes


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main_live(args: argparse.Namespace) -> None:
    pairs = [item.split("=", 1) for item in args.stages.split(",")]
    stages = [(p[0], p[1]) for p in pairs if len(p) == 2]
    if len(stages) != len(pairs):
        raise SystemExit(f"--stages: expected stage=kind,..., got {args.stages!r}")
    curves = resolve_curves("cpu", {k: k for _, k in stages}, Path.cwd())
    samples = stage_samples(args.live, [s for s, _ in stages])
    print(f"live records: {', '.join(map(str, args.live))}; first half fed, second half held "
          f"out; |error| in % against the held-out medians and P95s\n")  # fmt: skip
    print("| stage (function) | samples (one per request) | sizes judged | profile: median mean | "
          "line: median mean | line: median worst | line: P95 mean | curve: median mean | "
          "curve: median worst | curve: P95 mean |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for stage, kind in stages:
        e, sizes = live_errors(curves[kind], samples[stage], args.min_samples)
        p, line, curve = e["profile"], e["line"], e["curve"]
        print(f"| {stage} ({kind}) | {len(samples[stage])} | {', '.join(map(str, sizes))} | "
              f"{p[0]:.1f} | {line[0]:.1f} | {line[1]:.1f} | {line[2]:.1f} | "
              f"{curve[0]:.1f} | {curve[1]:.1f} | {curve[2]:.1f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--live", type=Path, nargs="+", help="replayer records (JSON lines)")
    parser.add_argument("--stages", help="with --live: stage=kind,... in chain order")
    parser.add_argument("--min-samples", type=int, default=20)
    args = parser.parse_args()
    if args.live:
        if not args.stages:
            parser.error("--live needs --stages stage=kind,...")
        main_live(args)
        return
    curves = resolve_curves("cpu", {f: f for f in FUNCTIONS}, Path.cwd())
    print(f"sizes {', '.join(map(str, SIZES))}; {args.samples} batches, seed {args.seed}; "
          "|error| in % against the profile's HTTP round trip\n")  # fmt: skip
    print("| function | line: median mean | line: median worst | line: P95 mean | "
          "curve: median mean | curve: median worst | curve: P95 mean |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name in FUNCTIONS:
        e = errors(curves[name], args.samples, args.seed)
        line, curve = e["line"], e["curve"]
        print(f"| {name} | {line[0]:.1f} | {line[1]:.1f} | {line[2]:.1f} | "
              f"{curve[0]:.1f} | {curve[1]:.1f} | {curve[2]:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
