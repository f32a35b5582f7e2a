"""Trimming a clairvoyant's window counts to minimal ones (``autoscaling.clair_trim``).

ClairA2 (Swayam §5) provisions, at each scaler tick, the most any window needs from
``collect_s`` ago to a setup time ahead (:meth:`simulator.swayam_scalers.Clairvoyant.wanted`).
The counts the repair rounds leave comply, but a 5 % rate grid and the replicas a repair round
added are never taken back. The trim takes them back, over the same seeded run:

* **Decrements that change nothing are taken without a run.** One replica fewer in window ``t``
  changes what the clairvoyant provisions only when ``t`` is the one window at its count in some
  tick's span (:func:`changed_ticks`); otherwise every decision, and so the whole run, is the
  same. Those are taken first, window by window, as far as they go (:func:`take_free`).
* **The others are tried in groups, fullest first.** A group holds decrements whose affected
  stretches (from the first tick whose provisioning drops to ``after_s`` past the last) do not
  overlap; one run tests them together. When windows fail, each late request's tick names the
  decrement whose stretch holds it (else the nearest one before it; else all of them). Those are
  put back and the rest run again, until the run complies. A decrement put back is not tried
  again at that count.
* **Passes repeat** until no untried decrement is left or ``budget`` runs were made.

When the trim finishes with nothing left to try, one replica fewer in any window either changes
the provisioning and broke the SLA in its own stretch (tested with far-apart others), or leaves
the run as it was; every replica-second the schedule holds was needed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from simulator.swayam_scalers import clair_span

__all__ = ["Spans", "TrimOutcome", "changed_ticks", "take_free", "trim"]

R = TypeVar("R")


@dataclass(frozen=True)
class Spans:
    """The windows each scaler tick ``k`` (at ``k·tick_s``) takes its maximum over:
    ``row[lo[k]:hi[k]]``, as :meth:`Clairvoyant.wanted` computes them."""

    lo: np.ndarray
    hi: np.ndarray
    tick_s: float

    @classmethod
    def of(cls, windows: int, *, tick_s: float, ahead_s: float, collect_s: float) -> Spans:
        """Every tick's span, until the spans have passed the last window."""
        ticks = windows + math.ceil((collect_s + ahead_s) / tick_s) + 2
        bounds = [
            clair_span(k * tick_s, windows, tick_s=tick_s, ahead_s=ahead_s, collect_s=collect_s)
            for k in range(ticks)
        ]
        lo, hi = np.array(bounds, dtype=np.int64).reshape(-1, 2).T
        return cls(lo=lo, hi=hi, tick_s=tick_s)


def changed_ticks(row: list[int], t: int, spans: Spans) -> np.ndarray:
    """The scaler ticks whose provisioning drops when window ``t`` holds one replica fewer: those
    whose span holds ``t`` and no other window with as many."""
    v = row[t]
    if v <= 0:
        return np.empty(0, dtype=np.int64)
    a = t - 1
    while a >= 0 and row[a] < v:
        a -= 1
    b = t + 1
    while b < len(row) and row[b] < v:
        b += 1
    lo, hi = spans.lo, spans.hi
    return np.nonzero((lo > a) & (lo <= t) & (hi > t) & (hi <= b))[0]


def take_free(row: list[int], spans: Spans) -> int:
    """Lower every window as far as the provisioning stays the same (the run is then unchanged);
    returns how many replicas went."""
    taken = 0
    changed = True
    while changed:
        changed = False
        for t in range(len(row)):
            while row[t] > 0 and len(changed_ticks(row, t, spans)) == 0:
                row[t] -= 1
                taken += 1
                changed = True
    return taken


@dataclass
class TrimOutcome(Generic[R]):
    """What the trim did: replicas taken (with and without a run), runs made, whether it
    stopped with nothing left to try, and the last compliant run's outcome."""

    removed: int
    free: int
    runs: int
    finished: bool
    best: R


def trim(
    row: list[int],
    run: Callable[[], tuple[R, set[int] | None]],
    *,
    spans: Spans,
    budget: int,
    best: R,
    after_s: float,
) -> TrimOutcome[R]:
    """Trim a compliant ``row`` in place (see the module docstring). ``run()`` runs the current
    row and returns its outcome and the ticks of late requests in failing windows (empty: it
    complies; None: some never finished); ``after_s`` is how long after its last changed tick a
    decrement is held responsible for what is late."""
    free = take_free(row, spans)
    removed = runs = 0
    tried: set[tuple[int, int]] = set()
    while runs < budget:
        group = _group(row, spans, tried, after_s)
        if not group:
            return TrimOutcome(removed + free, free, runs, True, best)
        for t, _ in group:
            row[t] -= 1
        while group and runs < budget:
            runs += 1
            outcome, late = run()
            if late == set():
                removed, best = removed + len(group), outcome
                break
            blamed = _blamed(group, late, spans.tick_s)
            for t, _ in blamed:
                row[t] += 1
                tried.add((t, row[t]))
            group = [g for g in group if g not in blamed]
        else:
            for t, _ in group:  # the budget ran out before this group was shown to comply
                row[t] += 1
        free += take_free(row, spans)
    return TrimOutcome(removed + free, free, runs, False, best)


def _group(
    row: list[int], spans: Spans, tried: set[tuple[int, int]], after_s: float
) -> list[tuple[int, tuple[float, float]]]:
    """Untried decrements, fullest first, whose stretches (seconds) do not overlap."""
    order = sorted(
        (t for t, v in enumerate(row) if v > 0 and (t, v) not in tried), key=lambda t: (-row[t], t)
    )
    taken: list[tuple[int, tuple[float, float]]] = []
    for t in order:
        ks = changed_ticks(row, t, spans)
        if len(ks) == 0:
            continue
        start = float(ks[0]) * spans.tick_s
        stretch = (start, float(ks[-1]) * spans.tick_s + after_s)
        if all(stretch[1] < s or stretch[0] > e for _, (s, e) in taken):
            taken.append((t, stretch))
    return taken


def _blamed(
    group: list[tuple[int, tuple[float, float]]], late: set[int] | None, tick_s: float
) -> list[tuple[int, tuple[float, float]]]:
    """The decrements a failed run's late ticks point at (all of them when it cannot tell)."""
    if not late:
        return list(group)
    out: dict[int, tuple[int, tuple[float, float]]] = {}
    by_start = sorted(group, key=lambda g: g[1][0])
    for tick in late:
        u = tick * tick_s
        inside = [g for g in group if g[1][0] <= u <= g[1][1]]
        before = [g for g in by_start if g[1][0] <= u][-1:]
        for g in inside or before or group:
            out[g[0]] = g
    return list(out.values())
