"""What turning embed's rows into JSON-ready floats costs, per value in Python against numpy.

Run: ``.venv/bin/python benchmarks/row_encoding.py --json docs/results/row-encoding.json``
(seconds; it writes the table beside the JSON, ``row-encoding.md``, for docs/gpu.md). For batches
of 1, 32, 128 and 256 rows of 384 float32 values (unit vectors, as the encoder returns them), the
median of ``--repeat`` timings of each way of rounding to 6 decimals: ``round(float(v), 6)`` per
value (what ``functions/embed/model.py`` did) and ``np.round(rows.astype(np.float64), 6)
.tolist()`` (what it does); also how many values differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from functions.profile import machine
from slackwise_cli.repeats import commit

ROOT = Path(__file__).resolve().parent.parent


def _per_value(rows: np.ndarray) -> list[list[float]]:
    return [[round(float(v), 6) for v in row] for row in rows]


def _numpy(rows: np.ndarray) -> list[list[float]]:
    out: list[list[float]] = np.round(rows.astype(np.float64), 6).tolist()
    return out


def _median_ms(fn: Any, rows: np.ndarray, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(rows)
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    points = []
    for batch in (1, 32, 128, 256):
        rows = rng.standard_normal((batch, 384)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        differ = sum(
            a != b for x, y in zip(_per_value(rows), _numpy(rows), strict=True)
            for a, b in zip(x, y, strict=True)
        )  # fmt: skip
        point = {
            "batch": batch,
            "per_value_ms": round(_median_ms(_per_value, rows, args.repeat), 3),
            "numpy_ms": round(_median_ms(_numpy, rows, args.repeat), 3),
            "values_differing": differ,
        }
        points.append(point)
        print(f"  b={batch:<4} per value {point['per_value_ms']:8.3f} ms   numpy "
              f"{point['numpy_ms']:7.3f} ms   differing values {differ}")  # fmt: skip
    if args.json:
        doc = {"benchmark": "row_encoding", "commit": commit(ROOT), "repeat": args.repeat,
               "machine": vars(machine()), "points": points}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        args.json.with_suffix(".md").write_text(_table(doc) + "\n", encoding="utf-8")
    return 0


def _table(doc: dict[str, Any]) -> str:
    lines = [
        f"Median of {doc['repeat']} timings, {doc['machine']['cpu_model']}, commit {doc['commit']}",
        "",
        "| rows of 384 | per value in Python, ms | numpy, ms | values that differ |",
        "| --- | --- | --- | --- |",
    ]
    for p in doc["points"]:
        lines.append(
            f"| {p['batch']} | {p['per_value_ms']:.2f} | {p['numpy_ms']:.2f} "
            f"| {p['values_differing']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
