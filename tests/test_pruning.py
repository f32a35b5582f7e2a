"""Request pruning (Swayam §3.3): answer at once a request that cannot meet its deadline."""

from __future__ import annotations

import pytest

from slackwise_policies.pruning import PruningConfig, expected_finish, judge

ON_LATE = PruningConfig(enabled=True)
ON_PREDICTED = PruningConfig(enabled=True, mode="predicted")


def test_off_by_default_never_prunes() -> None:
    decision = judge(100.0, 1.0, PruningConfig())
    assert not decision.prune and decision.reason == "disabled"


def test_late_mode_prunes_only_past_the_deadline() -> None:
    assert judge(10.001, 10.0, ON_LATE).prune
    assert judge(10.001, 10.0, ON_LATE).reason == "late"
    # even a request that will surely be late is kept until its deadline (Swayam's rule)
    on_time = judge(9.0, 10.0, ON_LATE, position=10_000, batch_ms=100.0)
    assert not on_time.prune and on_time.reason == "on-time"


def test_grace_allows_a_little_lateness() -> None:
    config = PruningConfig(enabled=True, grace_ms=50.0)
    assert not judge(10.04, 10.0, config).prune
    assert judge(10.06, 10.0, config).prune


def test_expected_finish_counts_rounds_of_batches() -> None:
    # 7 instances ahead, batches of 4, 1 slot: one batch ahead, own batch second
    assert expected_finish(0.0, position=7, batch_limit=4, slots=1, batch_ms=50.0) == 0.1
    # two slots serve that batch and ours side by side
    assert expected_finish(0.0, position=7, batch_limit=4, slots=2, batch_ms=50.0) == 0.05
    # a busy slot delays the first round
    assert expected_finish(
        0.0, position=0, batch_limit=4, slots=1, batch_ms=50.0, slot_free_in_ms=20.0
    ) == pytest.approx(0.07)


def test_predicted_mode_prunes_a_request_that_will_miss() -> None:
    args = {"batch_limit": 4, "slots": 1, "batch_ms": 50.0}
    keep = judge(0.0, 0.2, ON_PREDICTED, position=7, **args)  # type: ignore[arg-type]
    assert not keep.prune and keep.expected_finish == pytest.approx(0.1)
    drop = judge(0.0, 0.2, ON_PREDICTED, position=40, **args)  # type: ignore[arg-type]
    assert drop.prune and drop.reason == "predicted-late"
    assert drop.expected_finish == pytest.approx(0.55)


def test_bad_input_names_the_value() -> None:
    with pytest.raises(ValueError, match="mode"):
        PruningConfig(mode="eager")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grace_ms"):
        PruningConfig(grace_ms=-1.0)
    with pytest.raises(ValueError, match="position"):
        expected_finish(0.0, position=-1, batch_limit=1, slots=1, batch_ms=1.0)
    with pytest.raises(ValueError, match="slots"):
        expected_finish(0.0, position=0, batch_limit=1, slots=0, batch_ms=1.0)
