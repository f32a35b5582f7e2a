"""What a refused batch means for its members, and when a failed send is retried."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.serving.rejections import halves, read_rejection, retry_delay


def test_a_named_instance_is_read_from_the_error() -> None:
    named = read_rejection(400, b'{"error": "instances[3]: not an image"}')
    assert (named.index, named.detail) == (3, "not an image")
    assert named.reason == "instances[3]: not an image"
    unnamed = read_rejection(400, b'{"error": "Failed to decode"}')
    assert unnamed.index is None and unnamed.reason == "Failed to decode"
    text = read_rejection(503, b"no healthy upstream")
    assert text.reason == "no healthy upstream" and text.index is None
    # only a 400 names an instance: a 500 that mentions one is still the function's failure
    assert read_rejection(500, b'{"error": "instances[0]: boom"}').index is None


@given(st.lists(st.integers(1, 20), min_size=2, max_size=30))
def test_halves_are_both_non_empty_and_balanced(sizes: list[int]) -> None:
    first, second = halves(sizes)
    assert first >= 1 and second >= 1 and first + second == len(sizes)
    left, right = sum(sizes[:first]), sum(sizes[first:])
    # no other cut is more even
    best = min(abs(sum(sizes[:i]) - sum(sizes[i:])) for i in range(1, len(sizes)))
    assert abs(left - right) == best


def test_one_member_cannot_be_split() -> None:
    with pytest.raises(ValueError, match="cannot be split"):
        halves([4])


def test_retries_back_off_and_stop_at_the_deadline() -> None:
    kw = {"now": 0.0, "earliest_deadline": 1.0, "expected_s": 0.1}
    assert retry_delay(1, **kw) == 0.05
    assert retry_delay(2, **kw) == 0.1
    assert retry_delay(3, **kw) is None  # two retries at most
    # a retry that could not finish before the earliest deadline is not made
    assert retry_delay(1, now=0.9, earliest_deadline=1.0, expected_s=0.1) is None
