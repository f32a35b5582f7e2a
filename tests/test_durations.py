"""Go-style durations."""

from __future__ import annotations

import pytest

from slackwise_core.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("60s", 60.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        (".5m", 30.0),
        ("2us", 2e-6),
        ("2µs", 2e-6),
        ("3ns", 3e-9),
        ("1h2m3s", 3723.0),
        (" 6s ", 6.0),
        ("-1s", -1.0),
        ("+2s", 2.0),
    ],
)
def test_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-", "60", "1x", "s", "1s ms", "1.2.3s", "s1", "1m30"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(6.0, "6s"), (1.5, "1.5s"), (0.0, "0s"), (90, "90s")]
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds
