"""Markdown tables of measured profiles: ``python -m functions.profile_report
functions/profiles/cpu/``.

Prints a summary row per profile, then, for every ``*.json`` profile in the directory, one table
of batch latency (median and P95, in process and over HTTP) and the cold start;
``docs/profiles.md`` embeds the output.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from functions.profile_format import LatencyStat, Profile, load_profile


def _cell(stats: LatencyStat | None) -> str:
    if stats is None:
        return "–"
    return f"{stats.median:.1f} / {stats.p95:.1f}"


def profile_table(result: Profile) -> str:
    """One profile as a Markdown section."""
    cold = result.cold_start_s
    ready = "–" if cold.ready_s is None else f"{cold.ready_s:.2f} s"
    first = "–" if cold.first_request_ms is None else f"{cold.first_request_ms:.1f} ms"
    fit = result.linear_fit
    lines = [
        f"### {result.kind}, {result.threads} thread{'s' if result.threads > 1 else ''}",
        "",
        f"Cold start: ready {ready} after spawn (model load {cold.load_ms:.0f} ms), first "
        f"request {first}. Fit: {fit.a_ms:.1f} ms + {fit.b_ms_per_item:.2f} ms × batch. "
        f"Measured {result.measured_at} on {result.machine.cpu_model} "
        f"({result.machine.cores} cores), up to {result.repeats} calls per size.",
        "",
        "| batch | in process median / P95 ms | HTTP median / P95 ms | x-compute-ms median / P95 |"
        " per item (in process) ms |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size in result.batch_sizes:
        local = result.inprocess[size]
        lines.append(
            f"| {size} | {_cell(local)} | {_cell(result.http.get(size))} | "
            f"{_cell(result.server_compute.get(size))} | {local.median / size:.2f} |"
        )
    return "\n".join(lines)


def summary_table(results: list[Profile]) -> str:
    """One row per profile: medians at batch 1, 8 and 64 and the cold start."""
    lines = [
        "| function | threads | b1 in proc / HTTP ms | b8 in proc / HTTP ms |"
        " b64 in proc / HTTP ms | per item b64 / b1 | ready after spawn s | model load ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        cells = []
        for size in (1, 8, 64):
            local = result.inprocess.get(size)
            remote = result.http.get(size)
            local_ms = "–" if local is None else f"{local.median:.1f}"
            remote_ms = "–" if remote is None else f"{remote.median:.1f}"
            cells.append(f"{local_ms} / {remote_ms}")
        one, many = result.inprocess.get(1), result.inprocess.get(64)
        ratio = "–" if one is None or many is None else f"{many.median / 64 / one.median:.2f}"
        cold = result.cold_start_s
        ready = "–" if cold.ready_s is None else f"{cold.ready_s:.2f}"
        lines.append(
            f"| {result.kind} | {result.threads} | {' | '.join(cells)} | {ratio} | {ready} | "
            f"{cold.load_ms:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m functions.profile_report", description=__doc__)
    parser.add_argument("directory", type=Path, nargs="?", default=Path("functions/profiles/cpu"))
    args = parser.parse_args(argv)
    paths = sorted(args.directory.glob("*.json"))
    if not paths:
        print(f"no profiles in {args.directory}", file=sys.stderr)
        return 2
    results = sorted((load_profile(path) for path in paths), key=lambda r: (r.kind, r.threads))
    print(summary_table(results))
    print()
    print("\n\n".join(profile_table(result) for result in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
