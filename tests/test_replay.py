"""The open-loop replayer against a real uvicorn server on loopback, and its command line."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from loadtests.openloop import run_open_loop, summarize
from loadtests.replay import main
from traces import Trace, poisson_schedule

SERVICE_S = 0.05


async def _predict(request: Request) -> Response:
    body = await request.json()
    await asyncio.sleep(SERVICE_S)
    if body.get("fail"):
        return JSONResponse({"error": "asked to fail"}, status_code=503)
    headers = {"x-compute-ms": "50", "x-batch-size": "1", "x-cold-start": "0"}
    return JSONResponse({"predictions": [0] * len(body["instances"])}, headers=headers)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A Starlette app that answers every predict after 50 ms, served by uvicorn in a thread."""
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
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


BODY = b'{"instances": [[1, 2, 3]]}'
FAIL = b'{"instances": [[1]], "fail": true}'


def test_sends_on_schedule_while_answers_are_slower_than_arrivals(server: str) -> None:
    schedule = poisson_schedule(Trace((200.0, 200.0)), seed=1)  # ~400 requests, 5 ms apart

    async def go() -> list[float]:
        tls = ssl.create_default_context()
        clients = [httpx.AsyncClient(trust_env=False, verify=tls) for _ in range(16)]
        try:
            records = await run_open_loop(
                clients, f"{server}/v1/models/m:predict", schedule, lambda i: BODY
            )
        finally:
            for c in clients:
                await c.aclose()
        assert [r.index for r in records] == list(range(len(schedule)))
        assert [r.scheduled_s for r in records] == schedule
        # the server's sleep and the client's timer are different clocks: allow them 1 ms
        bad = [(r.status, r.error, r.latency_s) for r in records
               if r.status != 200 or r.latency_s < SERVICE_S - 0.001]  # fmt: skip
        assert not bad, bad[:5]
        assert records[0].headers["x-batch-size"] == "1"
        # open loop: many requests leave before the first answer comes back
        first_answer = records[0].sent_s + records[0].latency_s
        assert sum(1 for r in records if r.sent_s < first_answer) >= 5
        return [r.lag_s for r in records]

    lags = asyncio.run(go())
    # A closed loop would fall behind by len(schedule) x 50 ms (~20 s) by the end; this one keeps
    # to the schedule. The bounds are loose on purpose: a busy 2-core CI machine can stall the
    # sender for a few hundred ms, which is noise, not a closed loop.
    assert max(lags) < 5.0, f"max send lag {max(lags) * 1e3:.1f} ms"
    assert np.median(lags) < 0.5, f"median send lag {np.median(lags) * 1e3:.1f} ms"


def test_errors_are_counted_by_status_and_every_request_recorded(server: str) -> None:
    schedule = [i * 0.01 for i in range(30)]

    async def go() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            records = await run_open_loop(
                client,
                f"{server}/v1/models/m:predict",
                schedule,
                lambda i: FAIL if i % 3 == 0 else BODY,
            )
            unreachable = await run_open_loop(
                client, "http://127.0.0.1:9/v1/models/m:predict", [0.0, 0.0], lambda i: BODY
            )
        summary = summarize(records, duration_s=0.3)
        assert summary.requests == 30 and summary.ok == 20
        assert summary.errors_by_status == {"503": 10}
        assert "asked to fail" in records[0].error
        gone = summarize(unreachable, duration_s=1.0)
        assert gone.requests == 2 and gone.ok == 0
        assert gone.errors_by_status == {"ConnectError": 2}

    asyncio.run(go())


def test_earlier_replay_interface_still_answers_outcomes(server: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            outcomes = await run_open_loop(
                client, f"{server}/v1/models/m:predict", [0.0, 0.0, 0.02], lambda i: BODY
            )
        assert [o.index for o in outcomes] == [0, 1, 2]
        assert all(o.status == 200 and o.header_ms("x-compute-ms") == 50.0 for o in outcomes)
        assert not any(o.cold for o in outcomes)

    asyncio.run(go())


def test_cli_replays_a_trace_file_and_writes_records(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "trace_t4.txt"
    trace.write_text("1\n4\n2\n")
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    records = tmp_path / "out.jsonl"
    argv = [
        "--trace", str(trace), "--max-rps", "40", "--step-s", "0.5", "--duration-s", "1.5",
        "--target", server, "--function", "m", "--body-file", str(body), "--seed", "3",
        "--records", str(records), "--progress-s", "0.5",
    ]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["index"] for r in lines] == list(range(len(lines)))
    assert len(lines) > 10 and all(r["status"] == 200 for r in lines)
    assert {"scheduled", "sent", "lag", "latency", "error", "headers"} <= set(lines[0])
    assert f"requests {len(lines)} in 1.5 s" in out
    assert "send lag ms" in out and "errors: none" in out
    assert "scaled to peak 40" in err and "sent=" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-rps", "-5"], "--max-rps: must be > 0, got '-5'"),
        (["--step-s", "soon"], "--step-s: not a number: 'soon'"),
        (["--trace", "/no/such/trace.txt"], "--trace '/no/such/trace.txt'"),
        (["--target", "ftp://x"], "--target 'ftp://x'"),
        (["--header", "nocolon"], "--header 'nocolon'"),
        (["--duration-s", "50"], "--duration-s 50: needs 50 s"),
        (["--exact"], "--exact: --trace"),
        (["--larger-inputs", "1:1:4"], "--larger-inputs '1:1:4': needs --model"),
    ],
)
def test_cli_bad_flags_exit_2_naming_flag_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    trace = tmp_path / "trace_t4.txt"
    trace.write_text("1\n4\n2\n")
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    base = {"--trace": str(trace), "--duration-s": "2", "--target": "http://127.0.0.1:9"}
    for flag, value in zip(flags[::2], flags[1::2], strict=False):
        base[flag] = value
    argv = [x for kv in base.items() for x in kv] + ["--function", "m", "--body-file", str(body)]
    argv += [f for f in flags if f == "--exact"]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def _exit_code(argv: list[str]) -> int:
    """``main``'s return code, or the code argparse exits with."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(str(exc.code))


@pytest.mark.slow
def test_locust_headless_follows_the_trace_and_counts_slo_misses_as_failures(
    tmp_path: Path,
) -> None:
    """Locust itself, headless, against a real HTTP server: the options go through Locust's
    parser, the SLO comes from the server's status route, slow answers and errors are failures,
    and the run ends when the trace does."""
    import http.server
    import threading

    seen: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def _send(self, status: int, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # the adapter's status route
            self._send(200, b'{"name": "m", "slo_ms": 100}')

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            seen.append(1)
            n = len(seen)
            if n % 4 == 1:
                time.sleep(0.25)  # over the 100 ms SLO
            if n % 4 == 2:
                self._send(503, b'{"error": "busy"}')
                return
            self._send(200, b'{"predictions": [1]}')

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    trace = tmp_path / "trace_wc.txt"
    trace.write_text("4\n4\n4\n4\n")
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    root = Path(__file__).parent.parent
    locust = Path(sys.executable).with_name("locust")
    try:
        done = subprocess.run(
            [str(locust), "-f", str(root / "loadtests" / "locustfile.py"), "--headless",
             "--host", f"http://127.0.0.1:{server.server_address[1]}", "--run-time", "60s",
             "--slackwise-trace", str(trace), "--slackwise-function", "m",
             "--slackwise-body-file", str(body), "--csv", str(tmp_path / "out"), "--only-summary",
             "--slackwise-records", str(tmp_path / "answers.jsonl")],
            capture_output=True, text=True, timeout=120, cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: Locust saw failures
    failures = (tmp_path / "out_failures.csv").read_text()
    assert "over the SLO (100 ms)" in failures and "HTTP 503" in failures, failures
    stats = (tmp_path / "out_stats.csv").read_text().splitlines()
    row = dict(zip(stats[0].split(","), stats[-1].split(","), strict=True))  # the aggregate
    sent, failed = int(row["Request Count"]), int(row["Failure Count"])
    # 4 users, one a second, for the 4 s trace; those in flight when it ended are not counted
    assert sent <= len(seen) <= sent + 4 and 8 <= sent <= 20
    assert failed >= sent // 2 - 1  # every 4th slow and every 4th refused
    # each answer recorded as the replayer records them, for slackwise plot's windows
    rows = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert sent <= len(rows) <= len(seen)
    assert {r["status"] for r in rows} == {200, 503}
    assert all(0 <= r["sent"] < 10 for r in rows)
    assert sum(r["latency"] > 0.2 for r in rows) >= len(rows) // 4 - 1  # the slow ones


def test_locust_options_are_refused_with_their_name() -> None:
    import argparse

    from loadtests.locust_options import settings_from, verdict

    ns = argparse.Namespace(
        slackwise_trace="nasa", slackwise_start_s="0", slackwise_duration_s="10",
        slackwise_max_rps="fast", slackwise_step_s="1", slackwise_function="m",
        slackwise_app="", slackwise_model="", slackwise_body_file="", slackwise_slo_ms="",
    )  # fmt: skip
    with pytest.raises(SystemExit, match="--slackwise-max-rps='fast': not a number"):
        settings_from(ns, None)
    ns.slackwise_max_rps, ns.slackwise_app = "10", "chain"
    with pytest.raises(SystemExit, match="not both"):
        settings_from(ns, None)
    assert verdict(200, 99.0, 100.0) is None
    assert verdict(200, 101.0, 100.0) == "over the SLO (100 ms)"
    assert verdict(200, 5000.0, None) is None
    assert verdict(429, 1.0, 100.0) == "HTTP 429"
