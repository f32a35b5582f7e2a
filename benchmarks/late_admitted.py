"""Why admitted requests finished late, read from the adapter's request records.

Run: ``.venv/bin/python benchmarks/late_admitted.py RECORDS.jsonl [...] [--split-gap S]
[--json OUT]``; the records are what ``adapter.records`` writes (``benchmarks/overload_ab.py
--records DIR`` keeps one file a cell; ``benchmarks/overload.py --records DIR`` one an adapter,
its capacity probes and cells one after another: ``--split-gap 3`` reads each stretch of
arrivals between pauses of 3 s or more on its own, labelled by when it began and its admitted
rate).

The records name, for every answered request, when it arrived, when its batch left, when the
batch's answer came and its deadline; the members of one batch share the last two. So the
batches of each function are rebuilt from them, and each batch is placed against the function's
other batches: the share of its round trip during which another of its batches was on the wire
too (``beside``). The function's own evidence then says what a batch costs when nothing else of
it runs: a least-squares line of round trip against instances, fitted on the warm batches that
ran alone. Every late member (answered after its deadline) is put in one of three kinds:

* ``waited``: it left too late for its batch to make the deadline even at the alone line's
  pace; the queue (or the door's promise) is what failed, not the batch;
* ``slow beside``: it left in time for an alone batch, and its batch ran at least a quarter of
  its round trip beside another batch of the function and overran the line;
* ``slow alone``: the same with the batch (mostly) alone: the replica itself, or the host, was
  slow;
* ``cold``: its batch met a replica's cold start (no sample of the line either).

An admitted request that was not answered 200 (given up at its deadline in the queue, a 503; a
failed batch) is counted apart, by status, and by whether a batch beside another was in flight
while it waited: the records hold no refusal at the door, which never admitted it. Records
may be gzipped (``.gz``).

It also prints, for the batches themselves, the median ratio of round trip to the alone line
for batches beside another and alone: the slowdown one more batch in flight brings, measured,
which the controller's ``Parallelism`` estimates as ``beside_slowdown``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: a batch that shared at least this share of its round trip with another is "beside"
BESIDE_SHARE = 0.25
#: a batch that shared less than this is "alone" (between the two: neither, for the line)
ALONE_SHARE = 0.05


@dataclass
class Batch:
    """One batch, rebuilt from its members' records."""

    function: str
    sent: float
    done: float
    instances: int
    cold: bool
    members: list[dict[str, Any]] = field(default_factory=list)
    beside: float = 0.0  # share of the round trip with another batch of the function in flight

    @property
    def round_trip(self) -> float:
        return self.done - self.sent


def batches(records: Iterable[dict[str, Any]]) -> list[Batch]:
    """The answered requests grouped into their batches (same function, departure, answer)."""
    found: dict[tuple[str, float, float, int], Batch] = {}
    for r in records:
        if r.get("status") != 200 or r.get("dispatch") is None:
            continue
        key = (str(r["function"]), float(r["dispatch"]), float(r["done"]), int(r["batch_size"]))
        batch = found.get(key)
        if batch is None:
            batch = found[key] = Batch(key[0], key[1], key[2], key[3], bool(r.get("cold")))
        batch.members.append(r)
    out = sorted(found.values(), key=lambda b: (b.function, b.sent))
    _overlaps(out)
    return out


def _overlaps(ordered: list[Batch]) -> None:
    """Sets each batch's ``beside``: the share of its round trip that another batch of the same
    function was in flight too (the union of the others' intervals within its own)."""
    by_function: dict[str, list[Batch]] = defaultdict(list)
    for b in ordered:
        by_function[b.function].append(b)
    for group in by_function.values():
        for i, b in enumerate(group):
            spans: list[tuple[float, float]] = []
            for other in group[:i][::-1]:
                if other.done > b.sent:
                    spans.append((b.sent, min(other.done, b.done)))
                if b.sent - other.sent > 60.0:  # nothing takes a minute: stop looking back
                    break
            for other in group[i + 1 :]:
                if other.sent >= b.done:
                    break
                spans.append((other.sent, min(other.done, b.done)))
            b.beside = _covered(spans) / b.round_trip if b.round_trip > 0 else 0.0


def _covered(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        start = max(start, end)
        if stop > start:
            total, end = total + stop - start, stop
    return total


def alone_line(group: Sequence[Batch]) -> tuple[float, float] | None:
    """(intercept s, slope s an instance) of round trip against instances over the warm batches
    that ran alone: a least-squares line through each size's median (weighted by how many
    batches had that size), so a few slow batches do not move it; None with fewer than three."""
    by_size: dict[int, list[float]] = defaultdict(list)
    for b in group:
        if not b.cold and b.beside < ALONE_SHARE:
            by_size[b.instances].append(b.round_trip)
    if sum(len(v) for v in by_size.values()) < 3:
        return None
    points = [(x, statistics.median(ys), len(ys)) for x, ys in by_size.items()]
    weight = sum(w for _, _, w in points)
    mx = sum(x * w for x, _, w in points) / weight
    my = sum(y * w for _, y, w in points) / weight
    sxx = sum(w * (x - mx) ** 2 for x, _, w in points)
    if sxx == 0:
        return my, 0.0
    slope = max(0.0, sum(w * (x - mx) * (y - my) for x, y, w in points) / sxx)
    return my - slope * mx, slope


def explain(group: Sequence[Batch], failed: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """One function's answered requests, its late ones by kind, its batches' slowdowns, and
    its admitted requests that ``failed`` (records not answered 200), by status."""
    line = alone_line(group)
    answered = sum(len(b.members) for b in group)
    kinds = {"waited": 0, "slow beside": 0, "slow alone": 0, "cold": 0}
    overrun_ms: list[float] = []
    ratios: dict[str, list[float]] = {"beside": [], "alone": []}
    for b in group:
        expected = None if line is None else line[0] + line[1] * b.instances
        if expected and expected > 0 and not b.cold:
            if b.beside >= BESIDE_SHARE:
                ratios["beside"].append(b.round_trip / expected)
            elif b.beside < ALONE_SHARE:
                ratios["alone"].append(b.round_trip / expected)
        for m in b.members:
            if m["done"] <= m["deadline"]:
                continue
            overrun_ms.append(1000.0 * (m["done"] - m["deadline"]))
            if b.cold:
                kinds["cold"] += 1
            elif expected is None or b.sent + expected > m["deadline"]:
                kinds["waited"] += 1
            elif b.beside >= BESIDE_SHARE:
                kinds["slow beside"] += 1
            else:
                kinds["slow alone"] += 1
    late = sum(kinds.values())
    by_status: dict[str, int] = defaultdict(int)
    for r in failed:
        by_status[str(r.get("status"))] += 1
    beside = [b for b in group if b.beside >= BESIDE_SHARE]
    failed_beside = sum(
        any(b.sent < float(r["done"]) and b.done > float(r["arrival"]) for b in beside)
        for r in failed
    )
    return {
        "answered": answered,
        "failed": len(failed),
        "failed_by_status": dict(sorted(by_status.items())),
        "failed_while_beside": failed_beside,
        "late": late,
        "late_share": late / answered if answered else None,
        "late_by_kind": kinds,
        "late_overrun_ms_median": statistics.median(overrun_ms) if overrun_ms else None,
        "batches": len(group),
        "batches_beside": len(ratios["beside"]),
        "batches_alone": len(ratios["alone"]),
        "alone_line_ms": None if line is None else [1000.0 * line[0], 1000.0 * line[1]],
        "beside_ratio_median": _median(ratios["beside"]),
        "alone_ratio_median": _median(ratios["alone"]),
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def read(path: Path) -> list[dict[str, Any]]:
    """The JSON-lines records of ``path``; a line that is not a JSON object is a clear error."""
    out = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, text in enumerate(lines, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"late_admitted: {path}:{number}: not JSON: {exc.msg}") from None
            if not isinstance(record, dict):
                raise SystemExit(f"late_admitted: {path}:{number}: not a record (a JSON object)")
            out.append(record)
    return out


def report_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per function of ``records``."""
    records = list(records)
    groups: dict[str, list[Batch]] = defaultdict(list)
    for b in batches(records):
        groups[b.function].append(b)
    failed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("status") != 200:
            failed[str(r["function"])].append(r)
            groups.setdefault(str(r["function"]), [])
    return [{"function": fn, **explain(group, failed[fn])} for fn, group in sorted(groups.items())]


def stretches(records: list[dict[str, Any]], gap_s: float) -> list[list[dict[str, Any]]]:
    """``records`` cut where no request arrived for ``gap_s`` or more, in arrival order."""
    ordered = sorted(records, key=lambda r: float(r["arrival"]))
    out: list[list[dict[str, Any]]] = []
    last = -math.inf
    for r in ordered:
        if float(r["arrival"]) - last >= gap_s or not out:
            out.append([])
        out[-1].append(r)
        last = float(r["arrival"])
    return out


def report(
    paths: Sequence[Path], gap_s: float | None = None, last: int | None = None
) -> list[dict[str, Any]]:
    """One row per (file, function), or with ``gap_s`` per (stretch of a file, function), of
    the ``last`` stretches of each file only when given (an overload run's cells)."""
    rows = []
    for path in paths:
        records = read(path)
        if gap_s is None:
            rows += [{"file": path.name, **row} for row in report_records(records)]
            continue
        for part in stretches(records, gap_s)[-(last or 0) :]:
            start, end = float(part[0]["arrival"]), float(part[-1]["arrival"])
            rate = len(part) / (end - start) if end > start else 0.0
            label = f"{path.name} @{start:.0f} s, {rate:.0f} req/s admitted"
            rows += [{"file": label, **row} for row in report_records(part)]
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = ("| records | function | answered | late | waited | slow beside | slow alone | cold "
            "| not answered 200 | batches beside / alone | round trip / alone line, beside "
            "| alone |")  # fmt: skip
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        k = r["late_by_kind"]
        lines.append(
            f"| {r['file']} | {r['function']} | {r['answered']} | {r['late']} | {k['waited']} "
            f"| {k['slow beside']} | {k['slow alone']} | {k['cold']} | {_failed(r)} "
            f"| {r['batches_beside']} / "
            f"{r['batches_alone']} | {r['beside_ratio_median']} | {r['alone_ratio_median']} |"
        )
    return "\n".join(lines)


def totals(rows: Sequence[dict[str, Any]]) -> str:
    """The rows summed: answered, late by kind, given up and those while a pair ran."""
    late: dict[str, int] = defaultdict(int)
    for r in rows:
        for kind, n in r["late_by_kind"].items():
            late[kind] += n
    kinds = ", ".join(f"{n} {kind}" for kind, n in late.items())
    answered, failed = sum(r["answered"] for r in rows), sum(r["failed"] for r in rows)
    beside = sum(r["failed_while_beside"] for r in rows)
    return (f"total: {answered} answered, {sum(late.values())} late ({kinds}); {failed} not "
            f"answered 200, {beside} of them while a batch ran beside another")  # fmt: skip


def _failed(row: dict[str, Any]) -> str:
    statuses = ", ".join(f"{n} × {s}" for s, n in row["failed_by_status"].items())
    beside = row["failed_while_beside"]
    return f"{row['failed']} ({statuses}; {beside} beside)" if row["failed"] else "0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path, help="adapter.records JSON-lines files")
    parser.add_argument(
        "--split-gap",
        type=float,
        metavar="S",
        help="read each stretch of arrivals between pauses of S seconds or more on its own",
    )
    parser.add_argument("--last", type=int, metavar="N",
                        help="with --split-gap, only each file's last N stretches (an overload "
                             "run's last N cells), and their totals")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.last is not None and (args.last < 1 or args.split_gap is None):
        parser.error(f"--last needs --split-gap and N >= 1, got {args.last}")
    if args.split_gap is not None and args.split_gap <= 0:
        parser.error(f"--split-gap must be positive, got {args.split_gap}")
    for path in args.records:
        if not path.is_file():
            parser.error(f"no such records file: {path}")
    rows = report(args.records, args.split_gap, args.last)
    print(table(rows))
    print(totals(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
