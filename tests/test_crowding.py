"""A chain's door judged by what crowds of its own requests were measured to take (pure)."""

from __future__ import annotations

import heapq
import random

import pytest

from slackwise_policies.crowding import Crowding


def seen(crowding: Crowding, now: float, ahead: int, latency_s: float, count: int = 8) -> None:
    for _ in range(count):
        crowding.observe(now, ahead, latency_s)


def test_nothing_ahead_is_always_admitted_whatever_the_evidence() -> None:
    c = Crowding()
    seen(c, 0.0, 0, 5.0)
    assert c.judge(0.0, 0, 0.4) is None
    assert c.judge(0.0, 1, 0.4) is not None


def test_a_crowd_measured_too_slow_refuses_it_and_every_larger_one() -> None:
    c = Crowding(aim=0.9)
    seen(c, 0.0, 0, 0.07)
    seen(c, 0.0, 1, 0.14)
    seen(c, 0.0, 2, 0.45)  # behind two: past 0.9 x 400 ms
    seen(c, 0.0, 5, 0.10)  # a lucky few behind five do not open the door wider than two
    assert c.judge(0.0, 1, 0.4) is None
    refused = c.judge(0.0, 2, 0.4)
    assert refused is not None and refused.ahead == 2
    assert refused.expected_s == pytest.approx(0.45)
    assert refused.late_s == pytest.approx(0.45 - 0.36)
    assert c.judge(0.0, 5, 0.4) is not None
    assert c.deepest(0.0, 0.4) == 1


def test_deeper_than_anything_seen_is_priced_by_the_measured_slope() -> None:
    c = Crowding(aim=1.0)
    seen(c, 0.0, 0, 0.10)
    seen(c, 0.0, 2, 0.30)  # 100 ms per request ahead
    assert c.expected_s(0.0, 3) == pytest.approx(0.40)
    assert c.judge(0.0, 3, 0.41) is None
    assert c.judge(0.0, 4, 0.41) is not None  # 500 ms expected
    # between two counts seen: at least what the fewer took
    assert c.expected_s(0.0, 1) == pytest.approx(0.10)


def test_evidence_ages_out_and_the_door_tries_one_deeper_again() -> None:
    c = Crowding(aim=1.0, window_s=30.0)
    seen(c, 0.0, 0, 0.10)
    seen(c, 0.0, 1, 0.20)
    seen(c, 0.0, 2, 0.90)  # once, behind two was far too slow
    assert c.judge(10.0, 2, 0.4) is not None
    seen(c, 25.0, 0, 0.10)
    seen(c, 25.0, 1, 0.20)
    # 31 s on: the slow crowd is forgotten, and behind two is priced from 0 and 1 (0.30 s)
    assert c.expected_s(31.0, 2) == pytest.approx(0.30)
    assert c.judge(31.0, 2, 0.4) is None
    assert c.judge(31.0, 4, 0.4) is not None  # but not four (0.50 s by the slope)


def test_too_few_samples_are_not_evidence() -> None:
    c = Crowding(min_samples=4)
    seen(c, 0.0, 1, 9.0, count=3)
    assert c.expected_s(0.0, 1) is None and c.judge(0.0, 1, 0.4) is None


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="quantile"):
        Crowding(quantile=0.0)
    with pytest.raises(ValueError, match="aim"):
        Crowding(aim=1.5)


def flood(crowding: Crowding | None, seed: int = 1) -> tuple[int, int]:
    """A chain on one core, on a virtual clock: every request in flight shares the core, so
    each takes 70 ms of work and finishes after everything ahead of it (the pace measured
    live: about 65 ms more per request ahead). 20 s at half what the core carries, then 120 s
    at ten times it. A door that judges only the queue at the first stage (nothing is ever
    queued there: the stage has two slots) admits what comes; one with ``crowding`` asks the
    evidence first. Returns (admitted, late) over the whole run."""
    rng = random.Random(seed)
    slo, work = 0.4, 0.07
    t, busy_until = 0.0, 0.0
    finishing: list[tuple[float, int, float, int]] = []  # (done, id, arrival, ahead)
    admitted = late = 0
    while t < 140.0:
        t += rng.expovariate((0.5 if t < 20.0 else 10.0) / work)
        while finishing and finishing[0][0] <= t:
            done, _, arrival, ahead = heapq.heappop(finishing)
            if crowding is not None:
                crowding.observe(done, ahead, done - arrival)
        ahead = len(finishing)
        if crowding is not None and crowding.judge(t, ahead, slo) is not None:
            continue
        busy_until = max(busy_until, t) + work * rng.uniform(0.8, 1.2)
        heapq.heappush(finishing, (busy_until, admitted, t, ahead))
        admitted += 1
        late += busy_until - t > slo
    return admitted, late


def test_under_a_flood_what_the_crowd_rule_admits_finishes_in_time() -> None:
    admitted, late = flood(Crowding())
    blind_admitted, blind_late = flood(None)
    assert blind_late / blind_admitted > 0.5  # the door that cannot see the crowd
    assert late / admitted <= 0.01
    # and it still serves close to what the core carries (1 / 70 ms over the 120 s flood)
    assert admitted >= 0.85 * 120.0 / 0.07
