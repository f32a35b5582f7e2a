"""Learning what an input's size costs a function from its mixed batches (input_cost)."""

from __future__ import annotations

import random

import pytest

from slackwise_policies.input_cost import InputCost, batch_input_bytes

SMALL, LARGE = 1000.0, 4000.0
#: face_detect measured 3.81x for a photo at twice the side (experiments/sim/input-costs.json)
LARGE_COST = 3.81


def feed(cost: InputCost, batches: int, *, share_large: float = 0.5, seed: int = 1) -> None:
    """Batches of 1-8 members drawn from the mix; each takes the model's estimate (learnt on
    the mix) × its members' mean cost over the mix's, with ±10 % noise."""
    rng = random.Random(seed)
    mix = (1 - share_large) + share_large * LARGE_COST
    for _ in range(batches):
        members = [LARGE if rng.random() < share_large else SMALL for _ in range(rng.randint(1, 8))]
        mean_cost = sum(LARGE_COST if m == LARGE else 1.0 for m in members) / len(members)
        excess = mean_cost / mix * rng.uniform(0.9, 1.1)
        cost.observe(batch_input_bytes((m, 1) for m in members), excess)


def test_it_learns_what_a_larger_input_costs_from_mixed_batches() -> None:
    cost = InputCost()
    feed(cost, 3000)
    assert cost.cost(LARGE) / cost.cost(SMALL) == pytest.approx(LARGE_COST, rel=0.1)
    assert cost.cost(cost.mean_bytes) == pytest.approx(1.0)
    mix = 0.5 + 0.5 * LARGE_COST
    assert cost.cost(SMALL) == pytest.approx(1.0 / mix, rel=0.1)


def test_every_request_costs_one_until_there_is_something_to_learn() -> None:
    cost = InputCost(min_batches=30)
    feed(cost, 20)
    assert cost.cost(LARGE) == 1.0  # too few batches
    one_size = InputCost()
    for _ in range(200):
        one_size.observe(SMALL, 1.0)
    assert one_size.line() is None and one_size.cost(LARGE) == 1.0  # no spread of sizes
    flat = InputCost()
    rng = random.Random(2)
    for _ in range(500):  # sizes vary, time does not: nothing to price
        flat.observe(rng.choice([SMALL, LARGE]), rng.uniform(0.95, 1.05))
    assert flat.cost(LARGE) == pytest.approx(1.0, abs=0.06)
    assert cost.cost(0.0) == 1.0  # a request of unknown size is priced as the mix


def test_nonsense_is_ignored_and_costs_are_clipped() -> None:
    cost = InputCost(bounds=(0.5, 2.0))
    feed(cost, 3000)
    before = (cost.batches, cost.mean_bytes)
    for bad in ((0.0, 1.0), (SMALL, 0.0), (float("nan"), 1.0), (SMALL, float("inf"))):
        cost.observe(*bad)
    assert (cost.batches, cost.mean_bytes) == before
    assert cost.cost(100 * LARGE) == 2.0 and cost.cost(1.0) == 0.5
    with pytest.raises(ValueError, match="alpha"):
        InputCost(alpha=0.0)
    with pytest.raises(ValueError, match="bounds"):
        InputCost(bounds=(1.5, 2.0))


def test_a_batch_size_is_its_known_members_mean() -> None:
    assert batch_input_bytes([(1000.0, 1), (4000.0, 3)]) == 3250.0
    assert batch_input_bytes([(0.0, 2), (2000.0, 1)]) == 2000.0  # unknown sizes left out
    assert batch_input_bytes([]) == 0.0
