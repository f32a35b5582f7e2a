"""The door under a flood on virtual time: how many of the requests it admits finish late.

``.venv/bin/python benchmarks/door_flood.py --seeds 5 --json docs/results/door_flood.json``
drives the adapter's own :class:`slackwise_policies.controller.Controller` (the slackwise preset,
``late: predict``, the door, the batcher and AIMD as they run live) with open-loop Poisson
arrivals at 0.5x-10x a function's capacity, on a virtual clock. The function is modelled on
what ``make bench-overload`` measured for **embed** (docs/reliability.md): two replicas with
containerConcurrency 1 on one shared core, so the batches in flight share it (processor
sharing: two running batches each run at half speed), a batch of ``n`` costing
``a + b·n`` ms of the core alone (15 + 5·n by default), times a log-normal noise (sigma 0.15);
SLO 300 ms. The latency model starts at the true alone costs and learns from what it sees,
contention included, as it does live. ``--stalls-per-s R --stall-ms M`` adds the host's steal
as a two-core VM shows it: at Poisson times, R a second, the core stops for M ms and no batch
in flight progresses (from a random generator of their own, so a seed's arrivals and noise
are the same with and without them). ``--prelude X:S,...`` runs phases before the rate
under test, each at X times the capacity for S seconds, uncounted: a flood, then a calm, then
the rate shows what the controller carries from one flood to the next (live, the overload
benchmark's cells follow its capacity probes and each other the same way).

Why on a virtual clock: live, one 10x cell of embed went from 87 % to 98.6 % of its answers in
the SLO between runs on the same tree, so a change to the door cannot be judged by a few
live runs; here a run takes about a second and is the same every time for a seed. What it
leaves out, the live benchmark keeps: the adapter's own CPU, the kernel's queues, the client.

Per rate it prints the medians over the seeds (with ranges) of the share of admitted requests
that finished late (given up at their deadline counts as late), the goodput (admitted and in
time, per second), its fraction of the capacity (the most the core serves at the largest batch
whose two-way shared run still fits the SLO), and the share refused.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from slackwise_cli.repeats import commit  # noqa: E402
from slackwise_cli.results import machine  # noqa: E402
from slackwise_policies.admission import Lateness  # noqa: E402
from slackwise_policies.controller import Controller  # noqa: E402
from slackwise_policies.latency import LatencyModel  # noqa: E402
from slackwise_policies.modes import preset  # noqa: E402
from slackwise_policies.parallelism import Parallelism  # noqa: E402
from slackwise_policies.queue import QueuedRequest  # noqa: E402

MULTIPLES = (0.5, 1.0, 2.0, 3.0, 10.0)


@dataclass(frozen=True)
class Function:
    """The flooded function: ``replicas`` sharing one core, a batch of n costing a + b·n ms."""

    a_ms: float = 15.0
    b_ms: float = 5.0
    sigma: float = 0.15
    replicas: int = 2
    slo_s: float = 0.3
    max_batch: int = 64
    #: the host's steal: stalls of ``stall_ms`` at Poisson times, ``stalls_per_s`` a second,
    #: in which no batch in flight progresses (0: a quiet host)
    stalls_per_s: float = 0.0
    stall_ms: float = 0.0

    def capacity_rps(self) -> float:
        """The core's rate at the largest batch that still fits the SLO when every replica runs
        one at once (each then takes ``replicas`` times as long)."""
        fits = [
            n for n in range(1, self.max_batch + 1)
            if self.replicas * (self.a_ms + self.b_ms * n) <= 1000.0 * self.slo_s
        ]  # fmt: skip
        n = max(fits, default=1)
        return 1000.0 * n / (self.a_ms + self.b_ms * n)


def flood(
    fn: Function,
    rate: float,
    *,
    seed: int,
    seconds: float = 40.0,
    warmup_s: float = 10.0,
    margin: bool = True,
    tail_quantile: float = 0.99,
    prelude: tuple[tuple[float, float], ...] = (),
    priced: bool = True,
) -> dict[str, float]:
    """One run: arrivals at ``rate`` for ``seconds`` after the uncounted ``prelude`` ((rate,
    seconds) phases); counted after ``warmup_s``. Without ``margin`` the door judges by its own
    arithmetic alone (the margin learnt from late finishes held at 0); without ``priced``,
    it prices the slots as independent (:meth:`Parallelism.price` at 1)."""
    rng = random.Random(seed)
    rate_at, start = _phases(rate, prelude)
    warmup_s, seconds = start + warmup_s, start + seconds
    c = _controller(fn, margin, tail_quantile, priced)
    now, seq = 0.0, 0
    admitted = in_time = refused = 0
    batches: list[int] = []  # sizes of the batches sent after the warm-up
    arrival = rng.expovariate(rate_at(0.0))
    running: list[tuple[list[float], float, list[QueuedRequest]]] = []  # ([work ms], sent, batch)
    stalls = random.Random(seed + 1_000_003)  # a seed's arrivals and noise stay as they were
    next_stall = stalls.expovariate(fn.stalls_per_s) if fn.stalls_per_s > 0.0 else math.inf
    stall_end = -math.inf
    # arrivals stop at ``seconds``, then what was admitted drains: a request still queued or in
    # flight when the clock stopped is neither late nor in time (counted late, as it was before
    # 2026-11-29, it added about 0.6 points at every rate: a second of admissions at capacity)
    while now < seconds or running or c.queue:
        if arrival >= seconds:
            arrival = math.inf
        shared = len(running)
        stalled = now < stall_end
        first = min(range(shared), key=lambda i: running[i][0][0]) if shared else -1
        resumes = stall_end if stalled else now
        ends = resumes + running[first][0][0] * shared / 1000.0 if shared else math.inf
        turn = stall_end if stalled else next_stall  # the next stall's start, or its end
        then = min(arrival, ends, turn)
        if math.isinf(min(arrival, ends)):  # nothing in flight or to come: the queue waits
            then = min(then, now + 0.001)
        if not stalled:
            for work, _, _ in running:  # every batch in flight gets its share of the core
                work[0] -= (then - now) * 1000.0 / shared
        now = then
        if then == turn and turn < min(arrival, ends):
            if not stalled:  # a stall begins
                stall_end = now + fn.stall_ms / 1000.0
                next_stall = stall_end + stalls.expovariate(fn.stalls_per_s)
        elif shared and ends <= arrival:
            _, sent, batch = running.pop(first)
            took = (now - sent) * 1000.0
            c.completed(batch, now=now, instances=len(batch), round_trip_ms=took, compute_ms=took,
                        cold=False, timeout_dispatch=False)  # fmt: skip
            c.released()
            in_time += sum(now <= r.deadline for r in batch if r.arrival >= warmup_s)
        elif not math.isinf(arrival):
            seq += 1
            request = QueuedRequest(deadline=now + fn.slo_s, arrival=now, seq=seq)
            refusal = c.admit(request, now, ready=fn.replicas, lag_s=0.0)
            if now >= warmup_s:
                admitted += refusal is None
                refused += refusal is not None
            arrival = now + rng.expovariate(rate_at(now))
        while (step := c.step(now, ready=fn.replicas)).batch:
            work = (fn.a_ms + fn.b_ms * len(step.batch)) * math.exp(rng.gauss(0.0, fn.sigma))
            running.append(([work], now, list(step.batch)))
            if now >= warmup_s:
                batches.append(len(step.batch))
    span = seconds - warmup_s
    return {
        "late_share": 1.0 - in_time / max(1, admitted),
        "goodput_rps": in_time / span,
        "refused_share": refused / max(1, admitted + refused),
        "mean_batch": statistics.fmean(batches) if batches else 0.0,
    }


class _Unpriced(Parallelism):
    """The slots that pay, with the door pricing every slot as independent (before 564b42b)."""

    def price(self, slots: int, now: float, window_s: float = 30.0) -> float:
        return 1.0


def _controller(
    fn: Function, margin: bool, tail_quantile: float, priced: bool = True
) -> Controller[QueuedRequest]:
    """The adapter's controller for ``fn`` behind its door, its latency model at the true
    alone costs (without ``margin``, the margin learnt from late finishes held at 0; without
    ``priced``, the door prices the slots as independent)."""
    model = LatencyModel(a_ms=fn.a_ms, b_ms_per_item=fn.b_ms)
    model.tail_quantile = tail_quantile
    c: Controller[QueuedRequest] = Controller(
        name="f", preset=preset("slackwise"), model=model, max_batch=fn.max_batch,
        container_concurrency=1, now=0.0, late="predict",
    )  # fmt: skip
    if not margin:
        c.lateness = Lateness(cap=0.0)
    if not priced:
        c.parallel = _Unpriced()
    return c


def _phases(
    rate: float, prelude: tuple[tuple[float, float], ...]
) -> tuple[Callable[[float], float], float]:
    """The arrival rate at each virtual time, and when ``rate`` (after the prelude) begins."""
    ends, start = [], 0.0
    for phase_rate, phase_s in prelude:
        start += phase_s
        ends.append((start, phase_rate))
    return (lambda t: next((r for end, r in ends if t < end), rate)), start


def _stat(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="runs per rate (medians)")
    parser.add_argument("--seconds", type=float, default=40.0, help="virtual seconds a run")
    parser.add_argument("--warmup-s", type=float, default=10.0, help="virtual seconds not counted")
    parser.add_argument(
        "--no-margin", action="store_true", help="the door's arithmetic alone (margin held at 0)"
    )
    parser.add_argument("--stalls-per-s", type=float, default=0.0,
                        help="the host's stalls a second (Poisson), none by default")  # fmt: skip
    parser.add_argument("--stall-ms", type=float, default=0.0,
                        help="how long each stall holds every batch in flight")  # fmt: skip
    parser.add_argument("--tail-quantile", type=float, default=0.99,
                        help="the quantile the door prices a batch at and the batcher judges "
                             "its head by (the adapter's: 0.99)")  # fmt: skip
    parser.add_argument(
        "--prelude",
        default="",
        metavar="X:S,...",
        help="phases before each rate, uncounted: X times the capacity for S virtual seconds "
        "each (e.g. 3:15,0.5:30: a flood, then a calm)",
    )
    parser.add_argument("--unpriced-slots", action="store_true",
                        help="the door prices the slots as independent, as before 564b42b "
                             "(an ablation of Parallelism.price)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    prelude = _prelude(parser, args.prelude)
    if not 0.5 <= args.tail_quantile < 1.0:
        parser.error(f"--tail-quantile must be within [0.5, 1), got {args.tail_quantile}")
    if args.stalls_per_s < 0.0 or args.stall_ms < 0.0:
        parser.error(
            f"--stalls-per-s and --stall-ms must be >= 0, got {args.stalls_per_s} and "
            f"{args.stall_ms}"
        )
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if not 0.0 <= args.warmup_s < args.seconds:
        parser.error(f"--warmup-s must be within [0, --seconds), got {args.warmup_s}")
    fn = Function(stalls_per_s=args.stalls_per_s, stall_ms=args.stall_ms)
    capacity = fn.capacity_rps()
    phases = tuple((x * capacity, s) for x, s in prelude)
    started = time.time()
    rows: list[dict[str, Any]] = []
    print(f"capacity {capacity:.0f} req/s; medians of {args.seeds} seeds (ranges)")
    print("x C | offered req/s | admitted late | goodput req/s | of C | refused | mean batch")
    for k in MULTIPLES:
        runs = [
            flood(fn, k * capacity, seed=s, seconds=args.seconds, warmup_s=args.warmup_s,
                  margin=not args.no_margin, tail_quantile=args.tail_quantile,
                  prelude=phases, priced=not args.unpriced_slots)
            for s in range(args.seeds)
        ]  # fmt: skip
        row = {key: _stat([r[key] for r in runs]) for key in runs[0]}
        rows.append({"multiple": k, "offered_rps": k * capacity, **row})
        late, good, ref = row["late_share"], row["goodput_rps"], row["refused_share"]
        batch = row["mean_batch"]
        print(f"{k:g} | {k * capacity:.0f} | {100 * late['median']:.2f} % "
              f"({100 * late['low']:.2f}-{100 * late['high']:.2f}) | {good['median']:.1f} "
              f"({good['low']:.1f}-{good['high']:.1f}) | {good['median'] / capacity:.2f} | "
              f"{100 * ref['median']:.1f} % | {batch['median']:.1f}")  # fmt: skip
    if args.json:
        meta = {
            "command": " ".join(["benchmarks/door_flood.py", *(argv or sys.argv[1:])]),
            "commit": commit(ROOT), "machine": machine(), "started": started,
            "function": fn.__dict__, "capacity_rps": capacity, "seconds": args.seconds,
            "warmup_s": args.warmup_s, "margin": not args.no_margin,
            "tail_quantile": args.tail_quantile, "prelude": [list(p) for p in prelude],
            "priced_slots": not args.unpriced_slots,
            "accounting": "drained: arrivals stop at the run's end and what was admitted "
                          "finishes before the counts (the runs before 2026-11-29 counted the "
                          "requests still queued or in flight at the end as late)",
        }  # fmt: skip
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    return 0


def _prelude(parser: argparse.ArgumentParser, text: str) -> tuple[tuple[float, float], ...]:
    """``--prelude``'s phases as (multiple of C, seconds); exits naming a bad one."""
    phases = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            x, s = (float(v) for v in part.split(":"))
        except ValueError:
            parser.error(f"--prelude: {part!r} is not X:S (a multiple of C and seconds)")
        if x < 0.0 or s <= 0.0:
            parser.error(f"--prelude: {part!r} needs X >= 0 and S > 0")
        phases.append((x, s))
    return tuple(phases)


if __name__ == "__main__":
    raise SystemExit(main())
