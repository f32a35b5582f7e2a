"""Several adapters owning one function's count: shares with leases, the largest live one runs."""

from __future__ import annotations

from knative.cluster.shares import MAX_SCALE, MIN_SCALE, SCALE_SHARE, scale_annotations, share_of
from knative.local.fleet import FunctionRuntime
from slackwise_config import parse_config

DEFAULTS = {MIN_SCALE: "0", MAX_SCALE: "8"}


def test_the_largest_live_share_runs_and_lapsed_shares_are_dropped() -> None:
    current = {
        SCALE_SHARE + "a": "3@1000",
        SCALE_SHARE + "b": "5@900",  # its lease ended at 900: that adapter died
        "autoscaling.knative.dev/target": "1",
    }
    patch = scale_annotations(current, DEFAULTS, owner="c", replicas=2, lease_s=30, now=950)
    assert patch[SCALE_SHARE + "c"] == "2@980"
    assert patch[SCALE_SHARE + "b"] is None  # removed
    assert (patch[MIN_SCALE], patch[MAX_SCALE]) == ("3", "3")  # a's share is the largest live
    assert "autoscaling.knative.dev/target" not in patch


def test_withdrawing_the_last_share_gives_the_template_back() -> None:
    current = {SCALE_SHARE + "a": "4@2000"}
    patch = scale_annotations(current, DEFAULTS, owner="a", replicas=None, lease_s=None, now=10)
    assert patch == {SCALE_SHARE + "a": None, MIN_SCALE: "0", MAX_SCALE: "8"}
    zero = scale_annotations({}, DEFAULTS, owner="a", replicas=0, lease_s=30, now=10)
    assert (zero[MIN_SCALE], zero[MAX_SCALE]) == ("0", "1")  # a request can still wake one
    assert share_of("junk", 0) is None and share_of("2@5", 6) is None and share_of("2@5", 4) == 2


def test_the_local_platform_runs_the_largest_share_until_its_lease_lapses() -> None:
    config = parse_config({"functions": {"f": {"model": "digits", "slo_ms": 100}}})
    fn = FunctionRuntime(config.functions["f"], queue_depth=10, now=0.0)
    assert fn.owned(0.0) is None  # nobody owns it: the KPA decides
    fn.owners["a"] = (4, 30.0)
    fn.owners["b"] = (2, 60.0)
    assert fn.owned(10.0) == 4
    assert fn.owned(31.0) == 2  # a stopped renewing (killed): only b's share counts
    assert "a" not in fn.owners
    del fn.owners["b"]  # b withdrew on stop
    assert fn.owned(32.0) is None
