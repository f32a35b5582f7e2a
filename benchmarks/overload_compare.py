"""Two revisions' overload runs side by side: medians (ranges) per workload, clients and multiple.

    .venv/bin/python benchmarks/overload_compare.py --before A1.json A2.json \\
        --after B1.json B2.json --json docs/results/overload-NAME.json \\
        --docs docs/reliability.md --name NAME

Each input is a ``benchmarks/overload.py --json`` result (any workloads, client kinds and
repeats), run from a worktree of the revision it measures, the two sides interleaved in the same
hour. Each file's cells are derived as the overload report derives them (their shares of the
capacity their own run measured), then the cells of a side are pooled: for every workload, client
kind and multiple, the medians with their ranges of the goodput's share of the capacity, the
answered requests within the SLO, the admitted requests given up, the refusal P99, the mean
batch and the batch limit the status reported during the cell (from runs that record it).
``--docs`` rewrites the block ``<!-- overload compare NAME ... -->`` of that file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from overload_report import fmt_stat, stat, summarize

#: (column, key in a cell, scale, digits)
COLUMNS = (
    ("goodput / C %", "goodput_share", 100.0, 0),
    ("answered in SLO %", "in_slo_share", 100.0, 1),
    ("given up", "given_up", 1.0, 0),
    ("refusal P99 ms", "refusal_p99_ms", 1.0, 0),
    ("mean batch", "mean_batch", 1.0, 1),
)


def cells(paths: list[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every cell of these results, derived and tagged with its workload; and their metas."""
    out: list[dict[str, Any]] = []
    metas: list[dict[str, Any]] = []
    for path in paths:
        result = json.loads(path.read_text(encoding="utf-8"))
        metas.append({"file": str(path), **result.get("meta", {})})
        for name, workload in result["workloads"].items():
            summarize(workload)
            out.extend({"workload": name, **cell} for cell in workload["runs"])
    return out, metas


def _limit(group: list[dict[str, Any]]) -> str:
    spans = [c["batch_limit"] for c in group if c.get("batch_limit")]
    if not spans:
        return "-"
    return f"{min(s[0] for s in spans):g}-{max(s[1] for s in spans):g}"


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per workload, client kind and multiple found on both sides."""

    def key(c: dict[str, Any]) -> tuple[str, str, float]:
        return c["workload"], c["kind"], float(c["multiple"])

    rows = []
    for k in sorted({key(c) for c in before} & {key(c) for c in after}):
        sides = [[c for c in side if key(c) == k] for side in (before, after)]
        row: dict[str, Any] = {"workload": k[0], "kind": k[1], "multiple": k[2]}
        for _, field, _, _ in COLUMNS:
            row[field] = [stat([c.get(field) for c in side]) for side in sides]
        row["batch_limit"] = [_limit(side) for side in sides]
        row["runs"] = [len(side) for side in sides]
        row["text"] = [
            [
                fmt_stat(stat([c.get(f) for c in side]), digits, scale)
                for _, f, scale, digits in COLUMNS
            ]
            for side in sides
        ]
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]], names: tuple[str, str]) -> str:
    a, b = names
    head = ["workload", "clients", "x C", "runs"]
    head += [f"{title} {a} / {b}" for title, _, _, _ in COLUMNS] + [f"batch limit {a} / {b}"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cols = [r["workload"], r["kind"], f"{r['multiple']:g}", f"{r['runs'][0]} / {r['runs'][1]}"]
        cols += [f"{x} / {y}" for x, y in zip(r["text"][0], r["text"][1], strict=True)]
        cols.append(f"{r['batch_limit'][0]} / {r['batch_limit'][1]}")
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines) + "\n"


def write_docs(path: Path, name: str, text: str) -> None:
    """Replace the block named ``name`` in ``path`` (it must be there: nothing is appended)."""
    start = f"<!-- overload compare {name}: benchmarks/overload_compare.py -->"
    end = f"<!-- end overload compare {name} -->"
    doc = path.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"overload_compare: no block {start!r} ... {end!r} in {path}")
    path.write_text(pattern.sub(lambda _: f"{start}\n{text}{end}", doc), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, nargs="+", required=True)
    parser.add_argument("--after", type=Path, nargs="+", required=True)
    parser.add_argument("--json", type=Path, help="write the comparison here")
    parser.add_argument("--docs", type=Path, help="rewrite the comparison's block in this file")
    parser.add_argument("--name", default="before-after", help="the docs block's name")
    args = parser.parse_args(argv)
    for path in [*args.before, *args.after]:
        if not path.is_file():
            parser.error(f"no such result: {path}")
    before, before_meta = cells(args.before)
    after, after_meta = cells(args.after)
    names = tuple(str(m[0].get("commit", "?")) for m in (before_meta, after_meta))
    rows = compare(before, after)
    if not rows:
        parser.error("the two sides share no workload, client kind and multiple")
    text = table(rows, (names[0], names[1]))
    sys.stdout.write(text)
    if args.json:
        command = " ".join(["benchmarks/overload_compare.py", *(argv or sys.argv[1:])])
        doc = {"meta": {"command": command, "before": before_meta, "after": after_meta},
               "rows": [{k: v for k, v in r.items() if k != "text"} for r in rows]}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if args.docs:
        write_docs(args.docs, args.name, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
