"""The overload benchmark's capacity search (benchmarks/capacity_search.py), pure: a failure is
run again before it counts, a pass is not, and the bracket closes on the capacity."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def search_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("capacity_search")


def _run(module: ModuleType, start: float, probe: Callable[[float, int], bool]) -> object:
    """Drive a search from ``start``; ``probe(rate, index)`` says whether the probe passed."""
    search = module.CapacitySearch(start)
    index = 0
    while search.more():
        search.record(probe(search.rate, index))
        index += 1
        assert index < 100
    return search


def test_a_steady_service_brackets_its_capacity(search_module: ModuleType) -> None:
    search = _run(search_module, 50.0, lambda rate, _: rate <= 100.0)
    assert search.passed is not None and search.failed is not None
    assert search.passed <= 100.0 < search.failed
    assert search.failed / search.passed < 1.25  # bisected at least twice
    # every failure was run once more at its rate, and a steady service failed it again
    outcomes = search.outcomes
    retried = [i for i, (_, _, counted) in enumerate(outcomes) if not counted]
    assert retried and all(not outcomes[i][1] for i in retried)
    assert all(outcomes[i + 1][:2] == (outcomes[i][0], False) for i in retried)
    assert all(not ok for _, ok, counted in outcomes if not counted)


def test_one_stalled_probe_does_not_pin_the_capacity(search_module: ModuleType) -> None:
    """The chain's search at c45fbbf: 1+, 2+, then one stall failed 2.25, and the bisection closed
    on 2 req/s. Run again, the stalled rate passes and the search goes on up."""
    stalled = {2}  # the third probe stalls

    def probe(rate: float, index: int) -> bool:
        return index not in stalled and rate <= 8.0

    search = _run(search_module, 1.0, probe)
    assert search.passed is not None and search.passed > 5.0
    first_failure = search.outcomes[2]
    assert first_failure[1] is False and first_failure[2] is False  # not counted
    assert search.outcomes[3][0] == first_failure[0] and search.outcomes[3][1] is True


def test_a_failure_that_repeats_counts(search_module: ModuleType) -> None:
    """A service that really degrades (every probe from the fourth fails) is not retried for
    ever: each failure is run once more, then it counts, and the search ends."""
    search = _run(search_module, 10.0, lambda rate, index: index < 3 and rate <= 100.0)
    assert search.failed is not None
    counted = [o for o in search.outcomes if o[2]]
    assert len(counted) <= search_module.MAX_PROBES
    assert len(search.outcomes) <= 2 * search_module.MAX_PROBES + 1
    assert search.outcomes[-1][0] == search.failed  # probed once more at the end: failed again


def test_a_first_rate_must_be_positive(search_module: ModuleType) -> None:
    with pytest.raises(ValueError, match="first rate"):
        search_module.CapacitySearch(0.0)


def test_a_failure_the_start_left_is_probed_again_after_the_passes_below_it(
    search_module: ModuleType,
) -> None:
    """embed at 09c5476: its first rate, 16 req/s, failed twice back to back (what the closed
    loop's flood left), then 11-16 passed and the search stopped at 16, while its 10x cell then
    served 124 req/s in the SLO. Probed once more at the end, 16 passes and the search goes on
    up."""
    search = _run(search_module, 16.0, lambda rate, index: index >= 2 and rate <= 120.0)
    assert search.passed is not None and search.passed > 60.0
    assert 16.0 in search.rechecked
