"""The overload benchmark's arithmetic and tables: the adapter's CPU fit, medians, the targets.

Pure functions of the cells ``benchmarks/overload_cells.py`` measured (no I/O), so the tables
can be re-rendered from the JSON. The targets each cell is held to:

- model-bound workloads (embed, the img-query chain): goodput >= 95 % of the capacity at 2x and
  3x, >= 90 % beyond (10x), and >= 99 % of the answered requests within the SLO at every level;
- the adapter-bound one (digits): goodput >= 0.8 of the bound ``C / (1 + (k-1)·r/a)`` from 2x
  (``a``, ``r``: the adapter's CPU µs per answer and per refusal, fitted over the same run's
  cells; at k times the capacity C the adapter pays ``a`` per answer and ``r`` per refusal of
  (k-1)·C, so if it is what limits C it answers at most that);
- model-bound workloads are also set against the bound of the core they share with the adapter
  (the layout puts the adapter and its replicas on one CPU): the same ``C / (1 + (k-1)·r/a)``
  with ``a`` the CPU µs per answer of the adapter and the replicas together and ``r`` the
  adapter's per refusal, both fitted over the run's cells. A refusal's CPU comes out of the
  model's core there, so above it no admission rule can serve more; reported beside the targets
  (goodput / bound), not a target of its own;
- everywhere: no client timeouts, every refusal with ``Retry-After``, refusal P99 <= 20 ms,
  status route P99 <= 50 ms (on the adapter's port and on its probe port), RSS back within
  10 MB of idle 10 s after.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

REFUSAL_P99_MS = 20.0
STATUS_P99_MS = 50.0
RSS_SLACK_MB = 10.0
IN_SLO_SHARE = 0.99
BOUND_SHARE = 0.8


@dataclass(frozen=True)
class Costs:
    """The adapter's CPU as ``base_cores·T + answer_us·answers + refusal_us·refusals`` (None:
    not identified by the cells, e.g. no cell had a refusal)."""

    base_cores: float | None
    answer_us: float | None
    refusal_us: float | None
    cells: int


def fit_costs(rows: Sequence[tuple[float, float, float, float]]) -> Costs:
    """Least squares over ``(seconds, answers, refusals, CPU seconds)``, one row per cell."""
    if not rows:
        return Costs(None, None, None, 0)
    x = np.array([row[:3] for row in rows], dtype=float)
    y = np.array([row[3] for row in rows], dtype=float)
    keep = [j for j in range(3) if np.any(x[:, j] != 0.0)]
    values: list[float | None] = [None, None, None]
    if keep and len(rows) >= len(keep):
        coef, _, rank, _ = np.linalg.lstsq(x[:, keep], y, rcond=None)
        if rank == len(keep):
            for j, c in zip(keep, coef, strict=True):
                values[j] = float(c)
    base, answer, refusal = values
    return Costs(
        base,
        None if answer is None else answer * 1e6,
        None if refusal is None else refusal * 1e6,
        len(rows),
    )


def bound_rps(capacity: float, multiple: float, costs: Costs) -> float | None:
    """What an adapter that spends ``r`` per refusal and ``a`` per answer can answer at
    ``multiple`` times its capacity: ``C / (1 + (k-1)·r/a)`` (C itself up to 1x)."""
    a, r = costs.answer_us, costs.refusal_us
    if a is None or r is None or a <= 0:
        return None
    return capacity / (1.0 + max(0.0, multiple - 1.0) * max(0.0, r) / a)


def derive(cell: dict[str, Any], costs: Costs) -> dict[str, Any]:
    """The cell's shares: goodput of the capacity, answered within the SLO, of the bound. The
    bound is taken at the load that reached the adapter (the rate on the wire over C), not at
    the multiple asked for: a generator that fell short of 10x would otherwise lower the bar."""
    capacity, goodput = float(cell["capacity_rps"]), float(cell["goodput_rps"] or 0.0)
    # answered: the 200s, and the admitted requests given up at their deadline (a 503 after
    # waiting is an admitted request's miss, not a refusal at the door)
    ok = int(cell["ok"]) + int(cell.get("given_up") or 0)
    wire = cell.get("on_wire_rps")
    k = float(wire) / capacity if wire and capacity else float(cell["multiple"])
    bound = bound_rps(capacity, k, costs)
    return {
        "goodput_share": round(goodput / capacity, 4) if capacity else None,
        "in_slo_share": round(int(cell["ok_within_slo"]) / ok, 4) if ok else None,
        "bound_rps": None if bound is None else round(bound, 1),
        "bound_share": round(goodput / bound, 4) if bound else None,
    }


def targets(bound: str, multiple: float, v: dict[str, Any]) -> dict[str, bool | None]:
    """Each target: met, missed, or None where it does not apply (or cannot be judged)."""

    def at_most(value: float | None, limit: float) -> bool:
        return value is None or value <= limit  # None: nothing of the kind was measured

    goodput: bool | None = None
    in_slo: bool | None = None
    if bound == "model":
        share = v.get("goodput_share")
        floor = 0.95 if 2.0 <= multiple <= 3.0 else 0.90 if multiple > 3.0 else None
        if floor is not None:
            goodput = share is not None and share >= floor
        in_slo = v.get("in_slo_share") is not None and v["in_slo_share"] >= IN_SLO_SHARE
    elif multiple >= 2.0:
        of_bound = v.get("bound_share")
        goodput = None if v.get("bound_rps") is None else (of_bound or 0.0) >= BOUND_SHARE
    return {
        "goodput": goodput,
        "in SLO": in_slo,
        "timeouts": (v.get("timeouts") or 0) == 0,
        "Retry-After": (v.get("refused_without_retry_after") or 0) == 0,
        "refusal P99": at_most(v.get("refusal_p99_ms"), REFUSAL_P99_MS),
        "status P99": at_most(v.get("status_p99_ms"), STATUS_P99_MS),
        "probe P99": at_most(v.get("probe_status_p99_ms"), STATUS_P99_MS),
        "RSS": at_most(v.get("rss_after_mb"), float(v.get("rss_idle_mb") or 0.0) + RSS_SLACK_MB),
    }


def verdict(checks: dict[str, bool | None]) -> str:
    missed = [name for name, ok in checks.items() if ok is False]
    return "all met" if not missed else "missed: " + ", ".join(missed)


#: what the summary gives as a median with its range, per workload, client kind and multiple
KEYS = (
    "capacity_rps",
    "rate",
    "on_wire_rps",
    "goodput_rps",
    "goodput_share",
    "in_slo_share",
    "bound_rps",
    "bound_share",
    "ok",
    "refused",
    "given_up",
    "refusal_p99_ms",
    "refused_without_retry_after",
    "timeouts",
    "client_dropped",
    "lag_p99_ms",
    "rss_idle_mb",
    "rss_peak_mb",
    "rss_after_mb",
    "status_p99_ms",
    "probe_status_p99_ms",
    "adapter_cores",
    "replica_cores",
)


def stat(values: list[Any]) -> dict[str, float | None]:
    numbers = [float(v) for v in values if v is not None]
    if not numbers:
        return {"median": None, "low": None, "high": None}
    return {"median": statistics.median(numbers), "low": min(numbers), "high": max(numbers)}


def summarize(workload: dict[str, Any]) -> None:
    """Fills ``costs`` (per client kind), each run's derived shares and target checks, and
    ``summary`` (medians per kind and multiple, their targets) into a workload's results."""
    runs: list[dict[str, Any]] = workload["runs"]
    kinds = list(dict.fromkeys(c["kind"] for c in runs))
    multiples = sorted({float(c["multiple"]) for c in runs})
    workload["costs"] = {}
    workload["summary"] = []
    for kind in kinds:
        cells = [c for c in runs if c["kind"] == kind]
        rows = [(c["window_s"], c["ok"], c["refused"], c["adapter_cpu_s"]) for c in cells]
        costs = fit_costs(rows)
        workload["costs"][kind] = asdict(costs)
        if workload["bound"] == "model":
            # the server's core: the adapter and its replicas share it (the layout); runs
            # from before the replicas' CPU was recorded have no bound
            core = [
                (c["window_s"], c["ok"], c["refused"], c["adapter_cpu_s"] + c["replicas_cpu_s"])
                for c in cells
                if c.get("replicas_cpu_s") is not None
            ]
            costs = fit_costs(core) if len(core) == len(cells) else Costs(None, None, None, 0)
            if costs.cells:
                workload.setdefault("core_costs", {})[kind] = asdict(costs)
        for c in cells:
            c.update(derive(c, costs))
            c["targets"] = targets(workload["bound"], float(c["multiple"]), c)
        for multiple in multiples:
            group = [c for c in cells if float(c["multiple"]) == multiple]
            row: dict[str, Any] = {"kind": kind, "multiple": multiple}
            row.update({key: stat([c.get(key) for c in group]) for key in KEYS})
            medians = {key: row[key]["median"] for key in KEYS}
            row["targets"] = targets(workload["bound"], multiple, medians)
            workload["summary"].append(row)


def fmt_stat(s: dict[str, float | None], digits: int = 0, scale: float = 1.0) -> str:
    """A statistic as "median (low-high)", the range left out where it rounds to one value."""
    m, lo, hi = s["median"], s["low"], s["high"]
    if m is None or lo is None or hi is None:
        return "-"
    if f"{lo * scale:.{digits}f}" == f"{hi * scale:.{digits}f}":
        return f"{m * scale:,.{digits}f}"
    return f"{m * scale:,.{digits}f} ({lo * scale:,.{digits}f}-{hi * scale:,.{digits}f})"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} µs"


def table(workload: dict[str, Any]) -> str:
    """One workload's table (medians, ranges in brackets) and the lines under it."""
    digits = workload["bound"] == "adapter"
    head = ["clients", "x C", "offered / on the wire req/s", "goodput req/s", "of C"]
    head += ["bound req/s", "goodput / bound"]
    head += ["answered in SLO", "refused", "given up", "refusal P99 ms", "no Retry-After"]
    head += ["timeouts"]
    head += ["RSS idle / peak / +10 s MB", "status P99 ms (port / probe port)"]
    head += ["cores: adapter / replicas", "targets"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in workload["summary"]:
        cells = [
            row["kind"],
            f"{row['multiple']:g}",
            f"{fmt_stat(row['rate'])} / {fmt_stat(row['on_wire_rps'])}",
            fmt_stat(row["goodput_rps"]),
            fmt_stat(row["goodput_share"], 0, 100.0) + " %",
        ]
        cells += [fmt_stat(row["bound_rps"]), fmt_stat(row["bound_share"], 2)]
        cells += [
            fmt_stat(row["in_slo_share"], 1, 100.0) + " %",
            fmt_stat(row["refused"]),
            fmt_stat(row["given_up"]),
            fmt_stat(row["refusal_p99_ms"], 1),
            fmt_stat(row["refused_without_retry_after"]),
            fmt_stat(row["timeouts"]),
            " / ".join(fmt_stat(row[k]) for k in ("rss_idle_mb", "rss_peak_mb", "rss_after_mb")),
            f"{fmt_stat(row['status_p99_ms'], 1)} / {fmt_stat(row['probe_status_p99_ms'], 1)}",
            f"{fmt_stat(row['adapter_cores'], 2)} / {fmt_stat(row['replica_cores'], 2)}",
            verdict(row["targets"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    slo = f"{workload['slo_ms']:g} ms"
    for kind, costs in workload["costs"].items():
        found = [c for c in workload["capacity"] if c["kind"] == kind]
        cap = stat([c["capacity_rps"] for c in found])
        unfound = sum(not c["found"] for c in found)
        open_ended = sum(not c.get("bracketed", True) for c in found)
        note = f"; no probe passed in {unfound} of {len(found)}" if unfound else ""
        if open_ended:
            note += f"; a lower bound in {open_ended} of {len(found)} (no probe failed)"
        base = costs["base_cores"]
        line = (
            f"- {kind}: capacity {fmt_stat(cap)} req/s (open loop: the most with >= 99 % of the "
            f"requests sent answered within {slo}{note}); the adapter's CPU fits "
            f"a = {_us(costs['answer_us'])} per answer, r = {_us(costs['refusal_us'])} per "
            f"refusal, {'-' if base is None else f'{base:.2f}'} cores besides (least squares "
            f"over its {costs['cells']} cells)"
        )
        core = workload.get("core_costs", {}).get(kind) if not digits else None
        if core is not None:
            line += (
                f"; the core it shares with the replicas fits a = {_us(core['answer_us'])} per "
                f"answer (adapter and replicas), r = {_us(core['refusal_us'])} per refusal"
            )
        rows = [r for r in workload["summary"] if r["kind"] == kind and r["multiple"] >= 2]
        fractions = [
            f"{r['multiple']:g}x {r['bound_rps']['median'] / r['capacity_rps']['median']:.2f}"
            for r in rows
            if r["bound_rps"]["median"] is not None and r["capacity_rps"]["median"]
        ]
        if fractions:
            line += "; the bound C / (1 + (k-1)·r/a) is " + ", ".join(fractions) + " of C"
        lines.append(line + ".")
    return "\n".join(lines)
