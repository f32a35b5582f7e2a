"""``slackwise report``: the docs' result tables, made from the JSON the experiments wrote.

A table in ``docs/*.md`` that comes from results is fenced by two comments (kinds: ``fig9`` and
``policies`` render JSON; ``include`` copies a text file a benchmark printed)::

    <!-- report: fig9 experiments/sim/results/autoscale-nasa.json ... -->
    | ... the table ... |
    <!-- /report -->

``slackwise report`` renders every fenced block again from the files it names (the kind says
how) and rewrites it; ``--check`` only says which blocks differ (the test suite runs it, so a
table cannot drift from its JSON); ``--run GROUP`` first re-runs that group's simulations
(writing their JSON and text summaries) so that one command refreshes numbers and tables.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slackwise_cli.report_groups import GROUPS

__all__ = ["GROUPS", "RENDERERS", "Block", "find_blocks", "render", "run_group", "update_docs"]

_OPEN = re.compile(r"^<!-- report: (?P<kind>[\w-]+)(?P<paths>(?: [^\s>]+)+) -->$")
_CLOSE = "<!-- /report -->"


def _int(value: float) -> str:
    """Thousands with a thin space, as the docs write them (``26 193``)."""
    return f"{round(value):,}".replace(",", " ")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _trace_label(doc: dict[str, Any]) -> str:
    trace = str(doc.get("trace") or "Poisson")
    known = {"nasa": "NASA", "twitter": "Twitter"}
    if trace in known:
        return known[trace]
    stem = Path(trace).name.split(".")[0].removeprefix("synthetic-autoscale-")
    return f"{stem.replace('-', ' ')} (synthetic)" if "synthetic" in trace else stem


def _fig9(docs: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| trace | scaler | replica-s | / ClairA1 | / ClairA2 | / minimal A2 | compliance % | "
        "viol % | cold hits | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for doc in docs:
        label = _trace_label(doc)
        for i, (name, row) in enumerate(doc["autoscalers"].items()):
            lines.append(
                f"| {label if i == 0 else ''} | {name} | {_int(row['replica_seconds'])} | "
                f"{_ratio(row.get('vs_clair_a1'))} | {_ratio(row.get('vs_clair_a2'))} | "
                f"{_ratio(row.get('vs_minimal_a2'))} | {row['compliance_pct']:.1f} | "
                f"{row['violation_pct']:.2f} | "
                f"{row['cold_start_hits']} | {row['p99_ms']:.0f} |"
            )
    from simulator.comparison import trim_note

    notes = [
        (_trace_label(doc), trim_note(doc["autoscalers"].get("minimal_a2", {}))) for doc in docs
    ]
    notes = [(label, note) for label, note in notes if note]
    if notes:
        lines += ["", *(f"- {label}: {note}." for label, note in notes)]
    return "\n".join(lines)


def _need(instances: int | None, *, searched: bool) -> str:
    """Fig. 14's count; none found (past 16 x the config's fleet) when searched."""
    if instances is None:
        return "> 16 x fleet" if searched else "-"
    return str(instances)


def _policies(docs: Sequence[dict[str, Any]]) -> str:
    (doc,) = docs
    # Fig. 14 per function type, when the run searched it (simulate --per-type)
    typed = any("instances_at_load_per_type" in row for row in doc["policies"].values())
    more = " per type | nodes per function |" if typed else ""
    lines = [
        "| policy | viol % | p50 ms | p99 ms | mean ms | mean batch | replica-s | "
        "max rps at SLA | vs GS | instances at load | vs GS |" + more,
        "|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if typed else ""),
    ]
    for name, row in doc["policies"].items():
        top = row.get("max_rps_at_sla")
        need = row.get("instances_at_load")
        line = (
            f"| {name} | {row['violation_pct']:.2f} | {row['p50_ms']:.0f} | "
            f"{row['p99_ms']:.0f} | {row['mean_ms']:.0f} | {row['mean_batch']:.2f} | "
            f"{row['replica_seconds']:.0f} | {'-' if top is None else f'{top:.0f}'} | "
            f"{_ratio(row.get('max_rps_vs_gs'))} | "
            f"{_need(need, searched=top is not None)} | "
            f"{_ratio(row.get('instances_vs_gs'))} |"
        )
        if typed:
            nodes = row.get("nodes_per_function_at_load") or {}
            line += (
                f" {_need(row.get('instances_at_load_per_type'), searched=top is not None)}"
                f" | {' '.join(f'{n} {c}' for n, c in nodes.items()) or '-'} |"
            )
        lines.append(line)
    both = "gs_over_best_paper" in doc  # both families ran: say which is which
    for suffix, family in (
        ("prior", "strengthened baseline" if both else "prior policy"),
        ("paper", "baseline as in the paper"),
    ):
        best = doc.get(f"gs_over_best_{suffix}")
        if best is not None:
            lines += ["", f"GS max rps at SLA / best {family}'s: **{best:.2f}**"]
        for key, how in (("instances", ""), ("per_type", ", per function type")):
            fewest = doc.get(f"best_{suffix}_{key}_over_gs")
            if fewest is not None:
                lines += [
                    f"Instances the best {family} needs at {doc['rate_rps']:g} rps / GS's "
                    f"(Fig. 14{how}): **{fewest:.2f}**"
                ]
    return "\n".join(lines)


def _ablation(docs: Sequence[dict[str, Any]]) -> str:
    """The policies table alone: an ablation's rows are parts of GS, not baselines to beat."""
    return _policies(docs).split("\n\n", 1)[0]


def _cell(doc: dict[str, Any], mode: str, key: str, fmt: str) -> str:
    """A mode's value (a repeated run's median) and, when repeats differ, their range."""
    value = doc["modes"][mode].get(key, float("nan"))
    low_high = doc.get("ranges", {}).get(mode, {}).get(key)
    if not low_high or low_high[0] == low_high[1]:
        return format(value, fmt)
    return f"{format(value, fmt)} ({format(low_high[0], fmt)}-{format(low_high[1], fmt)})"


def _ran(doc: dict[str, Any]) -> str:
    """Where and when the numbers came from: one run's seed, or the repeats' seeds and commit."""
    ran = doc.get("ran_on") or {}
    d = (doc.get("runs") or [doc])[0]
    where = (
        f"on {ran.get('cpu', '?')} ({ran.get('cores', '?')} cores), {d['duration_s']:g} s of "
        f"{d['trace']} from second {d['start_s']:g}, peak {d['max_rps']:g} req/s"
    )
    if "repeats" not in doc:
        return f"Ran {ran.get('at', '?')} {where}, seed {doc['seed']}."
    seeds = ", ".join(map(str, doc.get("seeds", [doc["seed"]])))
    return (
        f"Medians of {doc['repeats']} runs (range), seeds {seeds}, modes in rotated order, "
        f"ran {ran.get('at', '?')} {where}, commit {doc.get('commit', '?')}."
    )


def _live(docs: Sequence[dict[str, Any]]) -> str:
    (doc,) = docs
    lines = [
        "| mode | requests | errors | SLO viol. % | viol. % after first ready | p50 ms | p95 ms | "
        "p99 ms | replica-s | vs direct | mean batch | cold starts | cold hits |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    direct = doc["modes"].get("direct", {}).get("replica_seconds")
    for mode, row in doc["modes"].items():
        share = row["replica_seconds"] / direct - 1.0 if direct else None
        cells = [
            _cell(doc, mode, key, fmt)
            for key, fmt in (
                ("requests", ".0f"),
                ("errors", ".0f"),
                ("violation_pct", ".2f"),
                ("warm_violation_pct", ".2f"),
                ("p50_ms", ".1f"),
                ("p95_ms", ".1f"),
                ("p99_ms", ".1f"),
                ("replica_seconds", ".1f"),
            )
        ]
        cells.append("-" if share is None else f"{100 * share:+.0f} %")
        tail = (("mean_batch", ".2f"), ("cold_starts", ".0f"), ("cold_hits", ".0f"))
        cells += [_cell(doc, mode, key, fmt) for key, fmt in tail]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    if doc.get("ran_on"):
        lines += ["", _ran(doc)]
    return "\n".join(lines)


def _interference(docs: Sequence[dict[str, Any]]) -> str:
    """A repeated experiment with a disturbance: medians (ranges) in and out of its window."""
    (doc,) = docs
    lines = [
        "| mode | SLO misses % | after first ready % | misses in the window % | misses outside % "
        "| replica-s | replica-s in the window |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode, row in doc["modes"].items():
        window = row.get("window") or {}
        lines.append(
            f"| {mode} | {_cell(doc, mode, 'violation_pct', '.1f')} | "
            f"{_cell(doc, mode, 'warm_violation_pct', '.1f')} | "
            f"{window.get('inside_violation_pct', float('nan')):.1f} | "
            f"{window.get('outside_violation_pct', float('nan')):.1f} | "
            f"{_cell(doc, mode, 'replica_seconds', '.1f')} | "
            f"{window.get('inside_replica_s', float('nan')):.0f} |"
        )
    d = doc.get("disturbance")
    what = ""
    if d:
        what = _disturbance_text(d)
    lines += ["", _ran(doc) + what + " The window's columns are medians of each run's split."]
    return "\n".join(lines)


def _disturbance_text(d: dict[str, Any]) -> str:
    kind = {
        "cpu": f"{d['cores']} busy process(es) beside everything",
        "pause": "the function's ready replicas stopped (SIGSTOP)",
        "slow": f"every ready replica of the function throttled to 1/{d.get('factor', 1):g} of "
        "its CPU time (stopped for the rest of each 100 ms)",
        "input": f"requests sent with inputs {d.get('factor', 1):g} times the usual size "
        "(the model's own larger instances)",
    }[d["kind"]]
    when = f"from second {d['start_s']:g} for {d['duration_s']:g} s of the replay"
    if d.get("repeat", 1) > 1:
        when += f", {d['repeat']} times, every {d['every_s']:g} s"
    return f" The disturbance: {kind} {when}."


def _queue_ms(row: dict[str, Any], *, stage: str) -> float:
    return float(row["stages"][stage]["queue_ms"])


def _chain(docs: Sequence[dict[str, Any]]) -> str:
    """Stage policies on one app over several runs (seeds): violations, P99 and each stage's
    mean queue, run by run."""
    runs = " / ".join(f"seed {d['seed']}" for d in docs)
    stages = list(docs[0].get("stages", []))
    lines = [
        f"| policy | SLO viol. % ({runs}) | p50 ms | p99 ms | mean batch | "
        + " | ".join(f"{s} queue ms" for s in stages)
        + f" | {stages[0]} compute ms |",
        "|---|---|---|---|---|" + "---|" * (len(stages) + 1),
    ]

    def each(mode: str, pick: Callable[[dict[str, Any]], float], fmt: str) -> str:
        return " / ".join(format(pick(d["modes"][mode]), fmt) for d in docs)

    for mode in docs[0]["modes"]:
        queues = [each(mode, functools.partial(_queue_ms, stage=s), ".0f") for s in stages]
        lines.append(
            f"| {mode} | {each(mode, lambda r: r['violation_pct'], '.2f')} | "
            f"{each(mode, lambda r: r['p50_ms'], '.0f')} | "
            f"{each(mode, lambda r: r['p99_ms'], '.0f')} | "
            f"{each(mode, lambda r: r['mean_batch'], '.2f')} | "
            + " | ".join(queues)
            + f" | {each(mode, lambda r: r['stages'][stages[0]]['compute_ms'], '.0f')} |"
        )
    first, ran = docs[0], [d["ran_on"]["at"][:16] for d in docs if d.get("ran_on")]
    lines += [
        "",
        f"{len(docs)} runs, {', '.join(ran)} (UTC) on {docs[0]['ran_on']['cpu']}: "
        f"{first['duration_s']:g} s of {first['trace']} from second {first['start_s']:g}, "
        f"peak {first['max_rps']:g} req/s, SLO {first['slo_ms']:g} ms.",
    ]
    return "\n".join(lines)


def _roma(docs: Sequence[dict[str, Any]]) -> str:
    (doc,) = docs
    lines = [
        "| system | violations (app-seconds) | viol % | core-s | / RR+max | mean ms | p50 ms | "
        "p99 ms | max ms | served on GPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    # every core, fixed: RR+max, or the adapter with every core where the run went through it
    fixed = doc["systems"].get("rr_max") or doc["systems"].get("adapter_max") or {}
    full = fixed.get("core_seconds")
    for name, r in doc["systems"].items():
        share = f"{r['core_seconds'] / full:.2f}" if full else "-"
        lines.append(
            f"| {name} | {r['violations']} | {r['violation_pct']:.2f} | {r['core_seconds']:.0f} | "
            f"{share} | {r['mean_ms']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['max_ms']:.1f} | {100 * r['gpu_share']:.0f} % |"
        )
    return "\n".join(lines)


#: how each kind of block is rendered from the JSON documents it names
RENDERERS: dict[str, Callable[[Sequence[dict[str, Any]]], str]] = {
    "fig9": _fig9,
    "interference": _interference,
    "policies": _policies,
    "ablation": _ablation,
    "live": _live,
    "chain": _chain,
    "roma": _roma,
}


@dataclass(frozen=True)
class Block:
    """One fenced table: where it is, what it is made from, and what it says now."""

    doc: Path
    kind: str
    sources: tuple[str, ...]
    start: int  # index of the opening comment's line
    end: int  # index of the closing comment's line
    text: str


def find_blocks(doc: Path) -> list[Block]:
    """The fenced blocks of one markdown file; a ValueError names an unclosed or unknown one."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = _OPEN.match(lines[i].strip())
        if match is None:
            i += 1
            continue
        kind = match["kind"]
        if kind not in RENDERERS and kind not in ("include", "modules"):
            raise ValueError(
                f"{doc}:{i + 1}: unknown report kind {kind!r} "
                f"(one of {', '.join(sorted(RENDERERS))})"
            )
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == _CLOSE), None)
        if end is None:
            raise ValueError(f"{doc}:{i + 1}: {kind} block has no closing {_CLOSE}")
        text = "\n".join(lines[i + 1 : end]).strip("\n")
        blocks.append(Block(doc, kind, tuple(match["paths"].split()), i, end, text))
        i = end + 1
    return blocks


def render(block: Block, root: Path) -> str:
    """The table ``block`` should hold, from its sources under ``root`` (JSON documents; the
    ``include`` kind takes a text file a benchmark printed, as it is)."""
    if block.kind == "modules":  # package directories, read as they are now
        from slackwise_cli.module_map import module_map

        return module_map(root, block.sources)
    texts = []
    for source in block.sources:
        path = root / source
        if not path.is_file():
            raise ValueError(f"{block.doc}:{block.start + 1}: no results file {source}")
        texts.append(path.read_text(encoding="utf-8"))
    if block.kind == "include":
        return "\n".join(text.strip("\n") for text in texts)
    return RENDERERS[block.kind]([json.loads(text) for text in texts])


def update_docs(root: Path, *, check: bool = False) -> list[Block]:
    """Re-render every fenced block under ``root/docs``; the blocks whose text differed (with
    ``check`` nothing is written)."""
    stale = []
    for doc in sorted((root / "docs").glob("*.md")):
        blocks = find_blocks(doc)
        if not blocks:
            continue
        lines = doc.read_text(encoding="utf-8").splitlines()
        changed = False
        for block in reversed(blocks):  # from the end, so earlier indices stay valid
            fresh = render(block, root)
            if fresh != block.text:
                stale.append(block)
                changed = True
                lines[block.start + 1 : block.end] = fresh.splitlines()
        if changed and not check:
            doc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return stale


def run_group(group: str, root: Path, *, jobs: int = 2) -> int:
    """Re-run one group's simulations from ``root`` (each writes its JSON, and its printed table
    to the ``.txt`` beside it), or the live experiments; the first non-zero exit status, or 0."""
    import argparse

    from slackwise_cli import simulate

    if group == "live":
        return _run_live(root)
    for config, out, extra in GROUPS[group]:
        # run from the root with relative paths: the JSON records the config as the docs cite it
        argv = ["-c", config, "--json", out, "--jobs", str(jobs), *extra]
        parser = argparse.ArgumentParser(prog="slackwise simulate")
        simulate.add_arguments(parser)
        args = parser.parse_args(argv)
        print("slackwise simulate " + " ".join(argv), flush=True)
        text = io.StringIO()
        with contextlib.chdir(root):
            status = simulate.run(args, out=text)
        if status:
            return status
        summary = text.getvalue().replace(str(root) + "/", "")
        (root / out).with_suffix(".txt").write_text(summary, encoding="utf-8")
        print(summary, flush=True)
    return 0


def _run_live(root: Path) -> int:
    """Each live experiment in turn, as its own ``slackwise experiment`` process."""
    import subprocess
    import sys

    for config, out, extra in GROUPS["live"]:  # LIVE, then the disturbed runs
        (root / out).parent.mkdir(parents=True, exist_ok=True)
        argv = ["experiment", "-c", config, "--json", out, *extra]
        print("slackwise " + " ".join(argv), flush=True)
        code = "import sys; from slackwise_cli.main import main; sys.exit(main(sys.argv[1:]))"
        status = subprocess.run([sys.executable, "-c", code, *argv], cwd=root, check=False)
        if status.returncode:
            return status.returncode
    return 0
