"""``slackwise plot``: the figures of replay records and Locust CSV histories, and a one-line
error for anything else."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from loadtests.locust_options import Recorder
from slackwise_cli.plot_command import draw, from_locust, from_records, latency_scale

LOCUST_HEADER = (
    "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,"
    "99.9%,99.99%,100%,Total Request Count,Total Failure Count,Total Median Response Time,"
    "Total Average Response Time,Total Min Response Time,Total Max Response Time,"
    "Total Average Content Size"
)


def records(path: Path) -> Path:
    rows = []
    for i in range(100):  # 10 s at 10 req/s; the second half slow, one in ten failed
        sent = i / 10.0
        latency = 0.02 if sent < 5.0 else 0.4
        status = 503 if i % 10 == 9 else 200
        rows.append({"index": i, "scheduled": sent, "sent": sent, "latency": latency,
                     "status": status, "headers": {}})  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_records_become_windows_of_p95_misses_and_rate(tmp_path: Path) -> None:
    s = from_records(records(tmp_path / "run.jsonl"), slo_ms=100.0, window_s=5.0)
    assert s.t == [0.0, 5.0] and s.rate == [10.0, 10.0]
    assert s.p95 == pytest.approx([20.0, 400.0])
    assert s.miss == pytest.approx([10.0, 100.0])  # failures, then every request too slow
    assert len(s.latencies) == 90 and s.latencies == sorted(s.latencies)


def test_locust_history_takes_the_aggregated_rows(tmp_path: Path) -> None:
    path = tmp_path / "lc_stats_history.csv"
    path.write_text(
        LOCUST_HEADER + "\n"
        "100,4,,Aggregated,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,0,0,0,0,0,0,0\n"
        "101,4,POST,/v1/models/m:predict,4,1,9,9,9,9,9,9,9,9,9,9,9,4,1,9,9,9,9,9\n"
        "101,4,,Aggregated,4,1,9,9,9,9,30,40,50,60,70,80,90,4,1,9,9,9,9,9\n",
        encoding="utf-8",
    )
    s = from_locust(path)
    assert s.label == "lc" and s.t == [0.0, 1.0] and s.rate == [0.0, 4.0]
    assert math.isnan(s.p95[0]) and s.p95[1] == 40.0 and s.miss[1] == 25.0
    assert s.latencies == []


def test_locusts_records_give_a_p95_that_agrees_with_the_miss_panel(tmp_path: Path) -> None:
    """A minute of a Locust run, recorded by the locustfile: answers over the SLO for the first
    18 s, then fast. Locust's cumulative P95 stays over the SLO for the whole minute; the
    windowed P95 from the records is over it exactly where the miss panel shows misses."""
    path = tmp_path / "locust.jsonl"
    recorder = Recorder(path, start=1000.0)
    for i in range(600):  # 10 a second for 60 s
        t = i / 10
        recorder.record(1000.0 + t, 0.450 if t < 18 else 0.120, 200)
    recorder.close()
    s = from_records(path, slo_ms=300.0, window_s=5.0)
    assert len(s.t) == 12 and s.p95_over == "5 s windows" and not s.cumulative
    for p95, miss in zip(s.p95, s.miss, strict=True):
        assert (p95 > 300.0) == (miss > 5.0)
    assert [t for t, p95 in zip(s.t, s.p95, strict=True) if p95 > 300.0] == [0, 5, 10, 15]
    # Locust's own history without --csv-full-history: cumulative, and drawn as such
    history = tmp_path / "lc_stats_history.csv"
    lines = [LOCUST_HEADER]
    for second in range(60):
        p95 = 450 if second < 40 else 440  # what a cumulative P95 does after 18 s of 450 ms
        lines.append(f"{100 + second},10,,Aggregated,10,0,{','.join([str(p95)] * 11)},"
                     "10,0,120,120,120,120,120")  # fmt: skip
    history.write_text("\n".join(lines) + "\n", encoding="utf-8")
    locust = from_locust(history)
    assert locust.cumulative and "cumulative" in locust.p95_over
    paths = draw([s, locust], 300.0, tmp_path / "fig")
    assert paths[0].stat().st_size > 10_000


def test_the_latency_axis_is_linear_where_the_range_is_small() -> None:
    assert latency_scale([300.0, 310.0, float("nan")]) == "linear"
    assert latency_scale([5.0, 900.0]) == "log"
    assert latency_scale([]) == "linear"


def test_the_command_draws_and_refuses_bad_inputs_in_one_line(tmp_path: Path) -> None:
    def plot(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "slackwise_cli.main", "plot", *args],
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    done = plot(str(records(tmp_path / "a.jsonl")), "--slo-ms", "100", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "latency.png").stat().st_size > 1000
    assert (tmp_path / "ccdf.png").stat().st_size > 1000
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    for args, says in (([str(bad)], "not a Locust stats history"),
                       ([str(tmp_path / "none.jsonl")], "No such file"),
                       ([str(bad), "--slo-ms", "0"], "must be positive")):  # fmt: skip
        full = [*args, "--out", str(tmp_path)]
        if "--slo-ms" not in full:
            full += ["--slo-ms", "100"]
        done = plot(*full)
        assert done.returncode != 0 and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
