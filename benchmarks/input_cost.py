"""What a larger input costs each function: the simulator's ``input_cost`` for GrandSLAM's sizes.

GrandSLAM (§3.2, Fig. 3c) measures a stage's execution time growing with its input's size
(images of 64, 128 and 256 pixels a side) and keeps a latency model per input size. This
measures the same for the functions here, in process on one thread: each function's sample
instances as they are ("small", the inputs its profile was measured with) and enlarged
("large": every image scaled to twice the side, four times the pixels, with its face box; every
text or question four times as long), decoded and predicted at batch sizes 1 and 8 (what a
replica spends on a batch), the median of ``--repeats`` runs each, and the ratio large / small,
which is what one large instance costs against one of the profile's.

    .venv/bin/python benchmarks/input_cost.py --repeats 15 --json experiments/sim/input-costs.json

``experiments/sim/wl1-cpu-inputs.yaml`` takes its ``input_cost`` values from that JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from functions import images
from functions.inputs import b64_encode, b64_field, image_bytes, rgb_image
from functions.registry import create_model
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("imagenet", "face_detect", "face_landmarks", "face_embed", "ner", "qa")
SIZES = (1, 8)


def _bigger_image(instance: Any) -> Any:
    pixels = images.scaled(rgb_image(b64_field(instance)), 2.0)
    out: dict[str, Any] = dict(b64_encode(image_bytes(pixels)))
    if isinstance(instance, dict) and "box" in instance:
        out["box"] = {k: v * 2 for k, v in instance["box"].items()}
    return out


def _longer_text(instance: Any) -> Any:
    if isinstance(instance, str):
        return " ".join([instance] * 4)
    return {**instance, "question": " ".join([instance["question"]] * 4)}


def enlarged(kind: str, instances: list[Any]) -> list[Any]:
    """The "large" class of ``kind``'s instances (see the module docstring)."""
    grow = _longer_text if kind in ("ner", "qa") else _bigger_image
    return [grow(x) for x in instances]


def _median_ms(model: Any, batch: list[Any], repeats: int) -> float:
    """Validating (decoding) and predicting ``batch``: what the replica spends on it."""
    model.predict([model.validate(x) for x in batch])  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.predict([model.validate(x) for x in batch])
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def measure(kind: str, repeats: int) -> dict[str, Any]:
    model = create_model(kind, threads=1)
    model.load()
    small = model.sample_instances(max(SIZES))
    classes = {"small": small, "large": enlarged(kind, small)}
    out: dict[str, Any] = {}
    for n in SIZES:
        ms = {c: _median_ms(model, xs[:n], repeats) for c, xs in classes.items()}
        out[f"b{n}"] = {"small_ms": round(ms["small"], 3), "large_ms": round(ms["large"], 3),
                        "ratio": round(ms["large"] / ms["small"], 3)}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    results = {}
    print("| function | b1 small / large ms | ratio | b8 small / large ms | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for kind in kinds:
        r = results[kind] = measure(kind, args.repeats)
        print(f"| {kind} | {r['b1']['small_ms']:.1f} / {r['b1']['large_ms']:.1f} | "
              f"{r['b1']['ratio']:.2f} | {r['b8']['small_ms']:.1f} / {r['b8']['large_ms']:.1f} | "
              f"{r['b8']['ratio']:.2f} |", flush=True)  # fmt: skip
    if args.json:
        doc = {"functions": results, "meta": {
            "command": " ".join(["python", "benchmarks/input_cost.py", *(argv or sys.argv[1:])]),
            "commit": commit(ROOT), "date": time.strftime("%Y-%m-%d"),
            "machine": machine(),
            "large": "images at twice the side (four times the pixels, boxes scaled), "
                     "texts (ner) and questions (qa) four times as long",
        }}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
