"""Swayam's analytical model (Eq. 1 / Theorem 2) against live RAND, as the paper's Fig. 5b does.

``n`` embed replicas run as real processes (``python -m functions.serve --max-in-flight 1``:
a busy one bounces a request with 429 at once, as Swayam's backends do) and the RAND frontend
(:class:`loadtests.rand_dispatch.RandDispatcher`) sends them open-loop Poisson load at a
utilisation ``ρ`` of their measured capacity: each request to a backend chosen at random,
another random one ``Δ`` after a bounce. The model (:mod:`slackwise_policies.swayam_model`, the
advisor's ``model: swayam``) is then given what that run measured, nothing else:

* ``d1 = d2`` = half the median bounce round trip (the frontend-to-backend trip and back);
* ``Δ`` = the mean gap between a bounce's answer and the next try, as slept;
* the execution time: the serving try's round trip less ``d1``, as a log-normal with its mean
  and P95/mean (the service model the advisor uses), and ``ρ = λ / (n·μ)`` from that mean and
  the measured arrival rate;

and predicts the response time's P50, P90, P95 and P99 (Theorem 2, Eq. 7) and the share of
requests served at the first try (Eq. 4: ``1 − ρ``), each set against the live value. Fleets
and loads run in rotated order each repeat; the table gives medians and ranges.

    .venv/bin/python benchmarks/swayam_model_live.py --repeat 3 \\
        --json docs/results/swayam_model_live.json --docs docs/advisor.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from functions.samples import sample_instances
from functions.server_process import ServerProcess
from loadtests.rand_dispatch import GaveUp, RandDispatcher, Served
from slackwise_cli.repeats import commit
from slackwise_cli.results import machine
from slackwise_policies.percentile import ServiceModel
from slackwise_policies.swayam_model import RandDispatch, rand_response_percentile_ms

ROOT = Path(__file__).resolve().parent.parent
MODEL = "embed"
REPLICAS = (1, 2)
LOADS = (0.2, 0.4, 0.6, 0.8)
PERCENTILES = (50, 90, 95, 99)
DELTA_S = 0.002
#: a request still bounced this long after its first try is given up (a client's timeout)
GIVE_UP_S = 10.0
BEGIN = "<!-- swayam live table: benchmarks/swayam_model_live.py -->"
END = "<!-- end swayam live table -->"


def _bodies(count: int) -> list[bytes]:
    return [json.dumps({"instances": [x]}).encode() for x in sample_instances(MODEL, count)]


async def _open_loop(
    rand: RandDispatcher, rate: float, warmup_s: float, duration_s: float, seed: int
) -> tuple[list[Served], int]:
    """Poisson arrivals at ``rate`` for ``warmup_s + duration_s``: those after the warm-up that
    were served, and how many of them were given up (bounced for ``GIVE_UP_S``)."""
    loop = asyncio.get_running_loop()
    rng = np.random.default_rng(seed)
    bodies = _bodies(32)
    total = warmup_s + duration_s
    times = np.cumsum(rng.exponential(1.0 / rate, size=int(rate * total * 1.3) + 16))
    start = loop.time()
    tasks: list[tuple[bool, asyncio.Task[Served]]] = []
    for i, at in enumerate(times[times < total]):
        delay = start + float(at) - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        task = loop.create_task(rand.send(bodies[i % len(bodies)]))
        tasks.append((float(at) >= warmup_s, task))
    await asyncio.gather(*(t for _, t in tasks), return_exceptions=True)
    counted = [t for c, t in tasks if c]
    for t in counted:
        error = t.exception()
        if error is not None and not isinstance(error, GaveUp):
            raise error
    return [t.result() for t in counted if t.exception() is None], sum(
        isinstance(t.exception(), GaveUp) for t in counted
    )


async def _calibrate(rand: RandDispatcher, count: int) -> float:
    """The mean serving round trip of requests sent one at a time (no bounce possible), s."""
    bodies = _bodies(count)
    served = [await rand.send(body) for body in bodies]
    return statistics.mean(s.serve_s for s in served[count // 5 :])


def _quantile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def predict(served: list[Served], rate: float, replicas: int) -> dict[str, Any]:
    """The model's inputs from the run, and its P50..P99 and first-try share."""
    bounce = [b for s in served for b in s.bounce_s]
    gaps = [g for s in served for g in s.gap_s]
    d_ms = 1000.0 * _quantile(bounce, 50) / 2.0 if len(bounce) >= 20 else 0.5
    delta_ms = 1000.0 * statistics.mean(gaps) if gaps else 1000.0 * DELTA_S
    execution = [1000.0 * s.serve_s - d_ms for s in served]
    mean = statistics.mean(execution)
    spread = max(1.0, _quantile(execution, 95) / mean)
    service = ServiceModel(a_ms=mean, spread=spread)
    rand = RandDispatch(d1_ms=d_ms, d2_ms=d_ms, delta_ms=delta_ms)
    rho = rate * mean / 1000.0 / replicas
    out: dict[str, Any] = {
        "d_ms": round(d_ms, 3),
        "delta_ms": round(delta_ms, 3),
        "exec_mean_ms": round(mean, 2),
        "exec_spread": round(spread, 3),
        "rho": round(rho, 3),
        "first_try_model": round(max(0.0, 1 - rho), 3),
    }
    for p in PERCENTILES:
        value = rand_response_percentile_ms(rate, replicas, service, float(p), rand)
        out[f"p{p}_model_ms"] = round(value, 2) if math.isfinite(value) else None
    return out


async def _cell(rand: RandDispatcher, replicas: int, rho: float, mu: float, seed: int,
                probe: tuple[float, float]) -> dict[str, Any]:  # fmt: skip
    warmup_s, duration_s = probe
    rate = rho * replicas * mu
    served, gave_up = await _open_loop(rand, rate, warmup_s, duration_s, seed)
    measured_rate = (len(served) + gave_up) / duration_s
    cell: dict[str, Any] = {
        "replicas": replicas,
        "load": rho,
        "offered_rps": round(rate, 2),
        "measured_rps": round(measured_rate, 2),
        "requests": len(served) + gave_up,
        "gave_up": gave_up,
        "first_try_live": round(sum(s.bounces == 0 for s in served) / len(served), 3),
        "mean_bounces": round(statistics.mean(s.bounces for s in served), 3),
    }
    cell.update(predict(served, measured_rate, replicas))
    # a request given up is later than every answer: it sits at the top of the ranks
    response = sorted(1000.0 * s.response_s for s in served) + [math.inf] * gave_up
    for p in PERCENTILES:
        live = response[max(0, math.ceil(p / 100.0 * len(response)) - 1)]
        model = cell[f"p{p}_model_ms"]
        cell[f"p{p}_live_ms"] = round(live, 2) if math.isfinite(live) else None
        both = model is not None and math.isfinite(live)
        cell[f"p{p}_err_pct"] = round(100.0 * (model - live) / live, 1) if both else None
    return cell


@contextlib.contextmanager
def _fleet(replicas: int) -> Iterator[list[str]]:
    servers = [ServerProcess(MODEL, max_in_flight=1) for _ in range(replicas)]
    try:
        for server in servers:
            server.start()
        with httpx.Client(trust_env=False, timeout=5) as client:
            for server in servers:
                server.wait_ready(client, timeout_s=180)
        yield [s.predict_url for s in servers]
    finally:
        for server in servers:
            server.stop()


async def _fleet_cells(
    urls: list[str], repeat: int, probe: tuple[float, float]
) -> list[dict[str, Any]]:
    """One fleet's loads, in the order of ``repeat`` (0-based), through one RAND frontend."""
    replicas = len(urls)
    seed = 1000 * (repeat + 1) + replicas
    rand = RandDispatcher(urls, delta_s=DELTA_S, seed=seed, give_up_s=GIVE_UP_S)
    cells: list[dict[str, Any]] = []
    try:
        mu = 1.0 / await _calibrate(rand, 60)
        k = repeat % len(LOADS)
        for rho in LOADS[k:] + LOADS[:k]:
            cell = {"repeat": repeat + 1, "mu_rps": round(mu, 2),
                    **await _cell(rand, replicas, rho, mu, repeat + 1, probe)}  # fmt: skip
            print(json.dumps(cell), flush=True)
            cells.append(cell)
    finally:
        rand.close()
    return cells


def measure(repeat: int, probe: tuple[float, float]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for r in range(repeat):
        for replicas in REPLICAS if r % 2 == 0 else REPLICAS[::-1]:
            with _fleet(replicas) as urls:
                runs += asyncio.run(_fleet_cells(urls, r, probe))
    return runs


PERCENTILE_KEYS = tuple(
    f"p{p}_{k}" for p in PERCENTILES for k in ("live_ms", "model_ms", "err_pct")
)
SUMMARY_KEYS = ("rho", "measured_rps", "gave_up", "first_try_live", "first_try_model", "d_ms",
                "delta_ms", "exec_mean_ms", *PERCENTILE_KEYS)  # fmt: skip


def _stat(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "low": min(values), "high": max(values),
            "runs": len(values)}  # fmt: skip


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fleet and load, each key's median and range over the repeats. A percentile that was
    given up (live) or saturated (model) ranks above every number (inf); an error that could
    not be computed is left out (``runs`` says how many it is over)."""
    rows = []
    for replicas in REPLICAS:
        for load in LOADS:
            cells = [c for c in runs if c["replicas"] == replicas and c["load"] == load]
            if not cells:
                continue
            row: dict[str, Any] = {"replicas": replicas, "load": load}
            for key in SUMMARY_KEYS:
                ranked = key.endswith(("_live_ms", "_model_ms"))
                row[key] = _stat([math.inf if c[key] is None else float(c[key])
                                  for c in cells if ranked or c[key] is not None])  # fmt: skip
            rows.append(row)
    return rows


def _ms(stat: dict[str, Any] | None, saturated: str) -> str:
    if stat is None or stat["median"] is None or math.isinf(stat["median"]):
        return saturated  # (a saved summary holds None where the run had inf)
    return f"{stat['median']:.1f}"


def _err(stat: dict[str, Any] | None, runs: int) -> str:
    if stat is None:
        return "—"
    if stat["runs"] < runs:  # the others had no number on one side
        return f"{stat['median']:+.0f} in {stat['runs']} of {runs} runs"
    return f"{stat['median']:+.0f} ({stat['low']:+.0f}..{stat['high']:+.0f})"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["replicas", "load ρ (set / measured)", "req/s", "given up", "first try: live / Eq. 4"]
    head += [f"P{p} live / model ms (err %)" for p in PERCENTILES]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        first = f"{r['first_try_live']['median']:.2f} / {r['first_try_model']['median']:.2f}"
        cells = [str(r["replicas"]), f"{r['load']:.1f} / {r['rho']['median']:.2f}",
                 f"{r['measured_rps']['median']:.0f}", f"{r['gave_up']['median']:.0f}",
                 first]  # fmt: skip
        for p in PERCENTILES:
            live = _ms(r[f"p{p}_live_ms"], f"> {GIVE_UP_S:g} s")
            model = _ms(r[f"p{p}_model_ms"], "saturated")
            cells.append(f"{live} / {model} ({_err(r[f'p{p}_err_pct'], r['rho']['runs'])})")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _json_safe(value: Any) -> Any:
    """``value`` with every inf as None (JSON has no infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def write_docs(path: Path, rows: list[dict[str, Any]]) -> None:
    text = path.read_text(encoding="utf-8")
    parts = []
    for p in PERCENTILES:
        key = f"p{p}_err_pct"
        errors = [abs(r[key]["median"]) for r in rows
                  if r[key] and r[key]["runs"] == r["rho"]["runs"]]  # fmt: skip
        if errors:
            parts.append(f"P{p} {statistics.mean(errors):.0f} % over {len(errors)} rows")
    body = f"{table(rows)}\n\nMean |error| of the medians: {', '.join(parts)}."
    head, rest = text.split(BEGIN, 1)
    path.write_text(f"{head}{BEGIN}\n{body}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=3.0)
    parser.add_argument("--duration-s", type=float, default=30.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--docs", type=Path, help="a markdown file with the table's markers")
    parser.add_argument(
        "--render", type=Path, help="write the table from this saved JSON instead of measuring"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    if args.duration_s <= 0 or args.warmup_s < 0:
        parser.error("--duration-s must be > 0 and --warmup-s >= 0")
    if args.docs is not None and BEGIN not in (
        args.docs.read_text(encoding="utf-8") if args.docs.is_file() else ""
    ):
        parser.error(f"--docs {args.docs}: no {BEGIN!r} block in it to fill")
    if args.render is not None:
        rows = json.loads(args.render.read_text(encoding="utf-8"))["summary"]
        print(table(rows))
        if args.docs:
            write_docs(args.docs, rows)
        return 0
    runs = measure(args.repeat, (args.warmup_s, args.duration_s))
    rows = summarize(runs)
    print(table(rows))
    result = {"runs": runs, "summary": rows, "meta": {
        "command": " ".join(["python", "benchmarks/swayam_model_live.py", *(argv or sys.argv[1:])]),
        "commit": commit(ROOT), "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "setup": f"{MODEL} replicas with --max-in-flight 1 behind loadtests/rand_dispatch.py",
        "delta_s": DELTA_S, "give_up_s": GIVE_UP_S,
        "probe": {"warmup_s": args.warmup_s, "duration_s": args.duration_s},
    }}  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(_json_safe(result), indent=2, allow_nan=False)
        args.json.write_text(text + "\n", encoding="utf-8")
    if args.docs:
        write_docs(args.docs, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
