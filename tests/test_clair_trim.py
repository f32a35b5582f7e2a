"""The clairvoyant's trim (simulator.clair_trim): free decrements leave every decision as it was,
the others are tried in far-apart groups and put back where the late requests point."""

from __future__ import annotations

import random

import numpy as np

from simulator.clair_trim import Spans, changed_ticks, take_free, trim
from simulator.swayam_scalers import Clairvoyant


def _schedule(row: list[int], spans: Spans, *, ahead_s: float, collect_s: float) -> list[int]:
    """What the clairvoyant itself provisions at every tick the spans cover."""
    clair = Clairvoyant({"f": row}, tick_s=spans.tick_s, lookahead_s={"f": ahead_s},
                        collect_s=collect_s)  # fmt: skip
    return [clair.wanted(k * spans.tick_s, "f") for k in range(len(spans.lo))]


def test_spans_are_the_windows_the_clairvoyant_takes_its_maximum_over() -> None:
    rng = random.Random(3)
    row = [rng.randrange(0, 6) for _ in range(80)]
    spans = Spans.of(len(row), tick_s=1.0, ahead_s=2.5, collect_s=6.0)
    want = _schedule(row, spans, ahead_s=2.5, collect_s=6.0)
    got = [max(row[lo:hi], default=0) for lo, hi in zip(spans.lo, spans.hi, strict=True)]
    assert got == want
    assert want[-1] == 0  # the spans run past the last window


def test_a_window_changes_the_provisioning_only_where_it_alone_holds_the_maximum() -> None:
    spans = Spans.of(12, tick_s=1.0, ahead_s=0.0, collect_s=2.0)  # tick k sees windows k-2..k
    row = [0, 0, 4, 4, 4, 1, 1, 1, 3, 1, 1, 0]
    assert len(changed_ticks(row, 3, spans)) == 0  # window 2 or 4 holds 4 wherever 3 does
    assert list(changed_ticks(row, 2, spans)) == [2]  # tick 2 sees windows 0..2 only
    assert list(changed_ticks(row, 4, spans)) == [6]  # tick 6 sees windows 4..6 only
    assert list(changed_ticks(row, 8, spans)) == [8, 9, 10]
    assert len(changed_ticks(row, 0, spans)) == 0  # nothing to take


def test_free_decrements_leave_every_decision_as_it_was_and_only_those() -> None:
    rng = random.Random(7)
    for _ in range(20):
        row = [rng.randrange(0, 8) for _ in range(60)]
        spans = Spans.of(len(row), tick_s=1.0, ahead_s=3.4, collect_s=9.0)
        before = _schedule(row, spans, ahead_s=3.4, collect_s=9.0)
        taken = take_free(row, spans)
        assert taken > 0
        assert _schedule(row, spans, ahead_s=3.4, collect_s=9.0) == before
        for t, v in enumerate(row):  # what is left: one fewer anywhere changes a decision
            if v:
                fewer = list(row)
                fewer[t] -= 1
                assert _schedule(fewer, spans, ahead_s=3.4, collect_s=9.0) != before


def test_the_trim_finds_the_least_that_complies_in_groups_of_runs() -> None:
    """A pure stand-in for the run: a tick is late when fewer replicas are provisioned than it
    needs (known here, hidden from the trim). The trim must end at a row whose schedule covers
    every need, where one replica fewer in any window uncovers one, using fewer runs than it
    tried decrements (they go in groups)."""
    need = [0] * 200
    for start, level in ((20, 3), (90, 5), (150, 2)):
        for k in range(start, start + 10):
            need[k] = level
    ahead_s, collect_s = 2.0, 4.0
    spans = Spans.of(len(need), tick_s=1.0, ahead_s=ahead_s, collect_s=collect_s)
    row = [n + 2 if n else 0 for n in need]  # compliant, two replicas too many
    runs: list[list[int]] = []

    def run() -> tuple[int, set[int] | None]:
        schedule = _schedule(row, spans, ahead_s=ahead_s, collect_s=collect_s)
        runs.append(list(row))
        late = {k for k, n in enumerate(need) if schedule[k] < n}
        return sum(schedule), late

    start_cost = sum(_schedule(row, spans, ahead_s=ahead_s, collect_s=collect_s))
    out = trim(row, run, spans=spans, budget=100, best=start_cost, after_s=ahead_s + 1.0)
    assert out.finished and out.removed > 0
    final = _schedule(row, spans, ahead_s=ahead_s, collect_s=collect_s)
    assert all(final[k] >= n for k, n in enumerate(need))
    assert out.best == sum(final) < start_cost
    for t, v in enumerate(row):
        if v:
            fewer = list(row)
            fewer[t] -= 1
            s = _schedule(fewer, spans, ahead_s=ahead_s, collect_s=collect_s)
            assert s == final or any(s[k] < n for k, n in enumerate(need)), t
    assert out.runs == len(runs) < out.removed - out.free  # kept after runs, several a run


def test_a_trim_out_of_runs_puts_its_untested_group_back() -> None:
    spans = Spans.of(30, tick_s=1.0, ahead_s=0.0, collect_s=0.0)
    row = [2] * 30

    def run() -> tuple[str, set[int] | None]:
        return "failed", None  # nothing ever finishes: blame every decrement

    out = trim(row, run, spans=spans, budget=1, best="start", after_s=1.0)
    assert (out.runs, out.finished, out.best, out.removed) == (1, False, "start", 0)
    assert row == [2] * 30
    assert np.all(spans.hi - spans.lo <= 1)
