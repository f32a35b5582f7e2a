"""A step change of input size (loadtests.input_step, ``--larger-inputs``, the experiment's
``input`` disturbance): the requests sent inside the window carry the model's own larger inputs,
through the real replayer to a real server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from functions.embed.model import MAX_CHARS, SentenceEmbedder, sample_sentences
from functions.registry import create_model
from loadtests.input_step import (
    InputStep,
    body_picker,
    larger_bodies,
    parse_input_step,
    pick_bodies,
)
from loadtests.replay import main
from slackwise_cli.disturbance import disturb
from slackwise_cli.experiment import _replay_command
from slackwise_cli.experiment_command import parse_disturbance
from slackwise_config.model import Disturbance, ExperimentConfig


def test_embeds_larger_inputs_are_its_own_sentences_joined_and_valid() -> None:
    model = SentenceEmbedder()
    usual = model.sample_instances(8)
    larger = model.larger_instances(8, 4)
    assert larger is not None and len(larger) == 8
    sentences = set(sample_sentences())
    for text in larger:
        parts = text.split(" ")
        assert model.validate(text) == text and len(text) <= MAX_CHARS
        # four whole sample sentences, nothing invented
        assert sum(1 for s in sentences if s in text) >= 1 and len(parts) > len(usual[0].split())

    def mean(texts: list[str]) -> float:
        return sum(map(len, texts)) / len(texts)

    assert 3.0 <= mean(larger) / mean(usual) <= 5.0
    huge = model.larger_instances(2, 500)
    assert huge is not None and all(len(t) == MAX_CHARS for t in huge)


def test_a_model_without_larger_inputs_says_so() -> None:
    assert create_model("digits").larger_instances(4, 2) is None
    with pytest.raises(ValueError, match="'digits' has no larger inputs"):
        larger_bodies("digits", 4, 2)


def test_only_requests_sent_inside_the_window_carry_larger_bodies() -> None:
    schedule = [0.5 * i for i in range(20)]  # 0 .. 9.5 s
    step = InputStep(start_s=3.0, duration_s=2.0, factor=4)
    pick = pick_bodies(schedule, [b"a", b"b"], [b"LARGE"], step)
    chosen = [pick(i) for i in range(len(schedule))]
    assert [t for t, b in zip(schedule, chosen, strict=True) if b == b"LARGE"] == [
        3.0,
        3.5,
        4.0,
        4.5,
    ]
    assert chosen[:2] == [b"a", b"b"]
    plain = pick_bodies(schedule, [b"a"])
    assert {plain(i) for i in range(20)} == {b"a"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("20:20", "START_S:DURATION_S:FACTOR"),
        ("a:20:4", "numbers"),
        ("20:0:4", "DURATION_S > 0"),
        ("20:5:1", "whole number >= 2"),
        ("20:5:2.5", "whole number >= 2"),
    ],
)
def test_the_step_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_input_step(text)


def test_the_step_needs_a_model_to_draw_larger_inputs_from() -> None:
    with pytest.raises(ValueError, match="needs --model"):
        body_picker([0.0], [b"x"], None, "0:1:2", 4)
    assert parse_input_step("20:10:8") == InputStep(start_s=20.0, duration_s=10.0, factor=8)


def test_the_experiment_flag_and_its_replay_command() -> None:
    d = parse_disturbance("input:20:10:8", 60.0)
    assert d == Disturbance(kind="input", start_s=20.0, duration_s=10.0, factor=8.0)
    assert parse_disturbance("input:20:10", 60.0).factor == 2.0
    for bad in ("input:20:10:1", "input:20:10:2.5"):
        with pytest.raises(SystemExit, match="whole number >= 2"):
            parse_disturbance(bad, 60.0)
    exp = ExperimentConfig(function="embed", trace="twitter", max_rps=60.0, disturbance=d)
    command = _replay_command(exp, ["--model", "embed"], "http://x", Path("r.jsonl"))
    at = command.index("--larger-inputs")
    assert command[at + 1] == "20:10:8"
    quiet = ExperimentConfig(function="embed", trace="twitter", max_rps=60.0)
    assert "--larger-inputs" not in _replay_command(quiet, [], "http://x", Path("r.jsonl"))


def test_the_platform_is_left_alone_the_replayer_sends_the_step() -> None:
    touched: list[int] = []

    def pids() -> list[int]:
        touched.append(1)
        return []

    d = Disturbance(kind="input", start_s=0.0, duration_s=5.0, factor=4.0)
    started = time.monotonic()
    asyncio.run(disturb(d, pids))
    assert touched == [] and time.monotonic() - started < 1.0


SEEN: list[tuple[float, int]] = []


async def _predict(request: Request) -> Response:
    body = await request.json()
    SEEN.append((time.monotonic(), len(body["instances"][0])))
    return JSONResponse({"predictions": [0]})


@pytest.fixture()
def server() -> Iterator[str]:
    app = Starlette(routes=[Route("/v1/models/{name}:predict", _predict, methods=["POST"])])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    config.ws = "none"
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    srv.should_exit = True
    thread.join(timeout=10)


def test_the_replayer_sends_larger_inputs_in_the_window_only(server: str, tmp_path: Path) -> None:
    trace = tmp_path / "flat.txt"
    trace.write_text("1\n1\n1\n")
    records = tmp_path / "out.jsonl"
    SEEN.clear()
    argv = [
        "--trace", str(trace), "--max-rps", "40", "--duration-s", "3", "--target", server,
        "--function", "m", "--model", "embed", "--larger-inputs", "1:1:4", "--seed", "2",
        "--records", str(records), "--progress-s", "5",
    ]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(rows) == len(SEEN) > 60 and all(r["status"] == 200 for r in rows)
    longest_usual = max(len(s) for s in sample_sentences())
    # judged by when each was scheduled, not by when the server saw it (a busy machine delays
    # that hop by more than any margin): as many larger bodies arrived as were scheduled in the
    # window, give or take those scheduled within 0.1 s of its edges (the first request stands
    # for the replay's start, a few ms after it)
    larger = sum(1 for _, n in SEEN if n > longest_usual)
    s0 = min(r["scheduled"] for r in rows)
    starts = [r["scheduled"] - s0 for r in rows]
    inside = sum(1 for t in starts if 1.0 <= t < 2.0)
    edges = sum(1 for t in starts if min(abs(t - 1.0), abs(t - 2.0)) < 0.1)
    assert inside > 10 and larger > 10 and len(SEEN) - larger > 10
    assert abs(larger - inside) <= edges


def test_an_experiment_whose_model_has_no_larger_inputs_is_refused_before_it_starts() -> None:
    import dataclasses

    from slackwise_cli.experiment_command import _check_inputs
    from slackwise_cli.running import load

    step = Disturbance(kind="input", start_s=20.0, duration_s=10.0, factor=4.0)
    for name, refused in (("digits-twitter", True), ("embed-twitter", False)):
        config = load(str(Path(__file__).parents[1] / "experiments" / f"{name}.yaml"))
        assert config.experiment is not None
        exp = dataclasses.replace(config.experiment, disturbance=step)
        if refused:
            with pytest.raises(SystemExit, match="'digits' of function 'digits' has no larger"):
                _check_inputs(config, exp)
        else:
            _check_inputs(config, exp)
