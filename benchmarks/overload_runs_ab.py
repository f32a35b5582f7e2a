"""Two trees' ``benchmarks/overload.py`` runs side by side: medians over the runs of each cell.

``benchmarks/overload_ab.py`` drives both revisions at the same offered rates; this one reads
runs of the whole benchmark made one after the other (each with its own capacity search, so
its multiples are of its own capacity), e.g. a worktree of the earlier commit and the tree
after it, interleaved::

    python benchmarks/overload.py --repeat 1 --workloads embed --kinds keep-alive \\
        --multiples 1,2,3,10 --json before-1.json      # from a worktree of BEFORE
    python benchmarks/overload.py ... --json after-1.json   # from the tree after
    ...
    python benchmarks/overload_runs_ab.py --before before-1.json,before-2.json,... \\
        --after after-1.json,... --workload embed --json docs/results/X.json \\
        --docs docs/reliability.md --name NAME

It writes the cells of both sides (and each run's meta) to ``--json`` and the table between
``<!-- overload runs before/after NAME -->`` and its end marker in ``--docs``; ``--render``
redraws the table from such a JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

COLUMNS = ("in SLO %", "goodput / C", "goodput req/s", "given up", "door: late / finished")


def cells(paths: list[Path], workload: str) -> dict[str, Any]:
    """The runs of one side: each file's cells of ``workload`` and its meta."""
    runs, metas = [], []
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        metas.append(data["meta"])
        for cell in data["workloads"][workload]["runs"]:
            answered = int(cell["ok"]) + int(cell.get("given_up") or 0)
            runs.append({
                "file": path.name, "kind": cell["kind"], "multiple": cell["multiple"],
                "capacity_rps": cell["capacity_rps"], "goodput_rps": cell["goodput_rps"],
                "in_slo_pct": 100.0 * int(cell["ok_within_slo"]) / answered if answered else None,
                "goodput_share": cell["goodput_rps"] / cell["capacity_rps"],
                "given_up": cell.get("given_up"), "door_late": cell.get("door_late"),
                "door_finished": cell.get("door_finished"),
            })  # fmt: skip
    return {"runs": runs, "metas": metas}


def _med(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})"


def _side(side: str, metas: list[dict[str, Any]]) -> str:
    commits = ", ".join(sorted({str(m["commit"]) for m in metas}))
    dirty = " with uncommitted changes" if any(m.get("uncommitted_changes") for m in metas) else ""
    return f"{side}: {len(metas)} runs at {commits}{dirty}"


def table(data: dict[str, Any]) -> str:
    """Medians (ranges) per cell, before / after."""
    head = "| clients | x C | " + " | ".join(f"{c} before / after" for c in COLUMNS) + " |"
    lines = [head, "|" + " --- |" * (2 + len(COLUMNS))]
    keys = sorted({(r["kind"], r["multiple"]) for r in data["before"]["runs"]})
    for kind, multiple in keys:
        row = [kind, f"{multiple:g}"]
        for field in ("in_slo_pct", "goodput_share", "goodput_rps", "given_up", "door"):
            pair = []
            for side in ("before", "after"):
                runs = [
                    r for r in data[side]["runs"] if (r["kind"], r["multiple"]) == (kind, multiple)
                ]
                if field == "door":
                    pair.append(", ".join(f"{r['door_late']}/{r['door_finished']}" for r in runs))
                else:
                    pair.append(_med([float(r[field]) for r in runs if r[field] is not None]))
            row.append(" / ".join(pair))
        lines.append("| " + " | ".join(row) + " |")
    sides = ", ".join(_side(side, data[side]["metas"]) for side in ("before", "after"))
    note = data.get("note", "")
    return "\n".join(lines) + f"\n\nMedians (ranges) over the runs; {sides}. {note}".rstrip()


def splice(doc: Path, name: str, block: str) -> None:
    begin, end = f"<!-- overload runs before/after {name} -->", "<!-- end overload runs -->"
    text = doc.read_text(encoding="utf-8")
    if begin not in text:
        raise SystemExit(f"{doc}: no {begin!r} marker")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{block}\n{end}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="comma-separated overload.py JSONs")
    parser.add_argument("--after", help="comma-separated overload.py JSONs")
    parser.add_argument("--workload", default="embed")
    parser.add_argument("--note", default="", help="a sentence under the table")
    parser.add_argument("--json", type=Path, help="write both sides' cells here")
    parser.add_argument("--render", type=Path, help="only redraw the table from this JSON")
    parser.add_argument("--docs", type=Path, help="splice the table into this file")
    parser.add_argument("--name", default="", help="the docs block's name")
    args = parser.parse_args(argv)
    if args.render:
        data = json.loads(args.render.read_text(encoding="utf-8"))
    else:
        if not (args.before and args.after):
            parser.error("--before and --after (or --render) are required")
        data = {
            "workload": args.workload, "note": args.note,
            "before": cells([Path(p) for p in args.before.split(",")], args.workload),
            "after": cells([Path(p) for p in args.after.split(",")], args.workload),
        }  # fmt: skip
        if args.json:
            args.json.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    block = table(data)
    print(block)
    if args.docs:
        splice(args.docs, args.name, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
