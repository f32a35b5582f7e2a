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
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

from adapter.policies.latency import LatencyModel
from simulator.profiles import resolve_curves
from simulator.service import ServiceCurve

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
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
