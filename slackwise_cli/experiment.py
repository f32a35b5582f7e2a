"""``slackwise experiment``: one trace replayed through each mode, on a fresh platform each time.

Modes: ``direct`` (straight to the function through the platform's activator: Knative alone),
``mlproxy`` (the adapter with MLProxy's published policy) and ``slackwise`` (the full adapter).
An app experiment (``experiment.app``) replays the app's pipeline inputs through
``/v1/apps/{app}:predict``; its modes are usually stage policies (``FIFO-NB``, ``ED-DYN``,
``EDF-DYN``, ``GS``...: the adapter in slackwise mode with that ``--stage-policy``), and its
summary adds each stage's mean queueing and compute time (GrandSLAM Fig. 11).
For each mode the local platform starts from scratch; the adapter (if any) starts in front of it
as its own process (``slackwise serve --platform-url``, as it would run in its own pod), and the
open-loop replayer runs in a third process and records every request. The result per mode:
requests, errors, SLO violation percentage, latency percentiles, replica-seconds, mean batch
size and cold starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import httpx

from knative.local.guard import ENV_VAR as TOKEN_ENV
from knative.local.platform import LocalPlatform
from slackwise_cli.disturbance import disturb, window_split
from slackwise_cli.results import (
    ExperimentResult,
    ModeRun,
    print_table,
    stage_times,
    summarize,
)
from slackwise_config import ADVISOR_MODE, Config, ExperimentConfig
from slackwise_config.model import headroom_of

logger = logging.getLogger(__name__)


class ExperimentFailed(RuntimeError):
    """A mode could not run to the end (a process exited, replicas never came): one line."""


def _replay_command(
    exp: ExperimentConfig, body: list[str], url: str, records: Path, *, direct: bool = False
) -> list[str]:
    target = ["--app", exp.app] if exp.app else ["--function", str(exp.function)]
    if direct:  # straight to the platform, which wants its token
        target += ["--bearer-env", TOKEN_ENV]
    return [
        sys.executable,
        "-m",
        "loadtests.replay",
        "--trace",
        exp.trace,
        "--start-s",
        f"{exp.start_s:g}",
        "--duration-s",
        f"{exp.duration_s:g}",
        "--max-rps",
        f"{exp.max_rps:g}",
        "--step-s",
        f"{exp.step_s:g}",
        "--seed",
        str(exp.seed),
        "--target",
        url,
        *target,
        *body,
        *_larger_inputs(exp),
        "--records",
        str(records),
        "--progress-s",
        "10",
    ]


def _larger_inputs(exp: ExperimentConfig) -> list[str]:
    """The replayer's flag for an ``input`` disturbance: the larger bodies are its to send."""
    d = exp.disturbance
    if d is None or d.kind != "input":
        return []
    return ["--larger-inputs", f"{d.start_s:g}:{d.duration_s:g}:{int(d.factor)}"]


def _count(platform: LocalPlatform, functions: list[str], start: float) -> dict[str, float]:
    """One timeline row: the replicas ready and asked for, summed over the functions."""
    counted = [platform.replicas(fn) for fn in functions]
    return {
        "t": round(time.monotonic() - start, 2),
        "ready": sum(c.ready for c in counted),
        "desired": sum(c.desired for c in counted),
    }


async def _sample(
    platform: LocalPlatform,
    functions: list[str],
    adapter_url: str | None,
    into: list[dict[str, float]],
    start: float,
) -> None:
    function = functions[0]
    async with httpx.AsyncClient(trust_env=False) as client:
        while True:
            row = _count(platform, functions, start)
            if adapter_url is not None and len(functions) == 1:
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                    status = (await client.get(f"{adapter_url}/v1/models/{function}")).json()
                    row["queue"] = status["queue"]
                    row["aimd_limit"] = status["aimd_limit"]
            into.append(row)
            await asyncio.sleep(1.0)


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def adapter_flags(mode: str) -> list[str]:
    """``slackwise serve`` flags for an experiment mode: a preset with who owns capacity, or a
    stage policy run by the slackwise preset (capacity left to the KPA, to compare batching)."""
    if mode == "mlproxy":
        return ["--mode", mode, "--capacity", "kpa"]
    if mode == "slackwise":
        return ["--mode", mode, "--capacity", "own"]
    if mode == "slackwise-kpa":
        return ["--mode", "slackwise", "--capacity", "kpa"]
    if mode == ADVISOR_MODE:
        return ["--mode", "slackwise", "--capacity", "floor"]
    headroom = headroom_of(mode)
    if headroom is not None:
        return ["--mode", "slackwise", "--capacity", "own", "--headroom", f"{headroom:g}"]
    return ["--mode", "slackwise", "--capacity", "kpa", "--stage-policy", mode]


def _with_token(token: str) -> dict[str, str]:
    """This process's environment with the platform's token (kept off command lines)."""
    return {**os.environ, TOKEN_ENV: token}


async def _start_adapter(
    config: Config, mode: str, platform_url: str, token: str
) -> tuple[asyncio.subprocess.Process, str]:
    """``slackwise serve`` in its own process, as it runs in a cluster: its own pod and core."""
    if not Path(config.source).is_file():
        raise ValueError(f"the experiment needs its config as a file, got {config.source!r}")
    host = config.platform.host
    port = _free_port(host)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "slackwise_cli.main",
        "serve",
        "-c",
        config.source,
        *adapter_flags(mode),
        "--host",
        host,
        "--port",
        str(port),
        "--platform-url",
        platform_url,
        stdout=asyncio.subprocess.DEVNULL,
        env=_with_token(token),
    )
    url = f"http://{host}:{port}"
    async with httpx.AsyncClient(trust_env=False) as client:
        for _ in range(600):
            if proc.returncode is not None:
                raise ExperimentFailed(f"{mode}: the adapter exited with code {proc.returncode}")
            with contextlib.suppress(httpx.TransportError):
                if (await client.get(f"{url}/healthz", timeout=1.0)).status_code == 200:
                    return proc, url
            await asyncio.sleep(0.05)
    proc.kill()
    raise ExperimentFailed(f"{mode}: the adapter did not come up at {url}")


async def _batch_stats(url: str, function: str) -> tuple[int, int]:
    """Batches and instances sent, from the adapter's Prometheus metrics."""
    async with httpx.AsyncClient(trust_env=False) as client:
        text = (await client.get(f"{url}/metrics", timeout=5.0)).text
    values: dict[str, float] = {}
    for line in text.splitlines():
        for name in ("slackwise_batch_size_count", "slackwise_batch_size_sum"):
            if line.startswith(f'{name}{{function="{function}"}}'):
                values[name] = float(line.rsplit(" ", 1)[1])
    return int(values.get("slackwise_batch_size_count", 0)), int(
        values.get("slackwise_batch_size_sum", 0)
    )


async def _initial_replicas_ready(
    config: Config, platform: LocalPlatform, functions: list[str], timeout_s: float = 180.0
) -> None:
    """Wait until every function has its initial replicas ready, as a deployment has before
    traffic is sent to it (an experiment that starts at zero, initial-scale 0, waits for
    nothing). Cold starts are then the ones the trace causes, not the platform's own start."""
    deadline = time.monotonic() + timeout_s
    for fn in functions:
        want = max(
            config.functions[fn].scaling.initial_scale, config.functions[fn].scaling.min_scale
        )
        while platform.replicas(fn).ready < want:
            if time.monotonic() > deadline:
                raise ExperimentFailed(
                    f"{fn}: {want} initial replicas not ready after {timeout_s:g} s"
                )
            await asyncio.sleep(0.1)


def _targets(config: Config, exp: ExperimentConfig) -> tuple[list[str], list[str]]:
    """The functions the experiment loads, and the replayer's body flags."""
    if exp.app is None:
        fn = str(exp.function)
        return [fn], ["--model", config.functions[fn].model]
    from functions.pipelines import PIPELINES

    stages = list(config.apps[exp.app].stages)
    kinds = tuple(config.functions[fn].model for fn in stages)
    for pipeline in PIPELINES.values():
        if tuple(pipeline.stages) == kinds:
            return stages, ["--pipeline", pipeline.name]
    known = ", ".join(f"{p.name} ({' -> '.join(p.stages)})" for p in PIPELINES.values())
    raise ValueError(
        f"app {exp.app!r} ({' -> '.join(kinds)}) matches no pipeline with sample inputs; "
        f"known: {known}"
    )


async def run_mode(config: Config, exp: ExperimentConfig, mode: str, workdir: Path) -> ModeRun:
    """One mode on a fresh platform; the adapter and the replayer run as their own processes."""
    functions, body = _targets(config, exp)
    records_path = workdir / f"{mode}.jsonl"
    timeline: list[dict[str, float]] = []
    started = time.monotonic()
    async with LocalPlatform(config) as platform:
        await _initial_replicas_ready(config, platform, functions)
        adapter: asyncio.subprocess.Process | None = None
        adapter_url: str | None = None
        if mode == "direct":
            target = platform.url(functions[0])
        else:
            adapter, adapter_url = await _start_adapter(
                config, mode, platform.url(functions[0]), platform.token
            )
            target = adapter_url
        sampled_from = time.monotonic()
        sampler = asyncio.create_task(
            _sample(platform, functions, adapter_url, timeline, sampled_from)
        )
        disturbing: asyncio.Task[None] | None = None
        batches = instances = 0
        per_stage: dict[str, tuple[int, int]] = {}
        try:
            if exp.disturbance is not None:  # the same window in every mode, from now
                fn = functions[0]
                pids = lambda: list(platform.replica_pids(fn, ready=True).values())  # noqa: E731
                disturbing = asyncio.create_task(disturb(exp.disturbance, pids))
            proc = await asyncio.create_subprocess_exec(
                *_replay_command(exp, body, target, records_path, direct=mode == "direct"),
                env=_with_token(platform.token),
            )
            code = await proc.wait()
            if code != 0:
                raise ExperimentFailed(
                    f"{mode}: the replayer exited with code {code} (its reason above)"
                )
            if adapter_url is not None:
                for fn in functions:
                    per_stage[fn] = await _batch_stats(adapter_url, fn)
                batches = sum(b for b, _ in per_stage.values())
                instances = sum(i for _, i in per_stage.values())
        finally:
            if disturbing is not None:
                disturbing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await disturbing
            sampler.cancel()
            # the count as the last answer left: a run shorter than a cold start (or a sampler
            # slowed by a busy adapter) would otherwise end its timeline before a replica was ready
            timeline.append(_count(platform, functions, sampled_from))
            usages = [platform.usage(fn) for fn in functions]
            usage = {key: sum(u[key] for u in usages) for key in ("replica_seconds", "cold_starts")}
            if adapter is not None:
                adapter.terminate()
                await adapter.wait()
    with records_path.open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    return ModeRun(
        mode=mode,
        records=records,
        usage=usage,
        timeline=timeline,
        batches=batches,
        instances_sent=instances,
        wall_s=time.monotonic() - started,
        per_stage=per_stage,
    )


async def run_experiment(
    config: Config,
    exp: ExperimentConfig,
    *,
    out: TextIO,
    plots_dir: Path | None = None,
) -> tuple[ExperimentResult, dict[str, ModeRun]]:
    """Every mode of ``exp`` in turn; prints the table.

    With ``plots_dir`` it also draws the plots there and keeps each mode's request records
    (``MODE.jsonl``, one JSON line per request, as the replayer wrote them).
    """
    if exp.app is not None:
        name = exp.app
        slo: float | None = config.apps[exp.app].slo_ms
        stages = list(config.apps[exp.app].stages)
    else:
        name = str(exp.function)
        slo = config.slo_ms(name)
        stages = []
    if slo is None:
        raise ValueError(f"function {name!r} has no SLO (functions.X.slo_ms or an app)")
    result = ExperimentResult(
        function=name,
        slo_ms=slo,
        trace=exp.trace,
        max_rps=exp.max_rps,
        step_s=exp.step_s,
        duration_s=exp.duration_s,
        start_s=exp.start_s,
        seed=exp.seed,
        stages=stages,
    )
    runs: dict[str, ModeRun] = {}
    with tempfile.TemporaryDirectory(prefix="slackwise-exp-") as tmp:
        workdir = Path(tmp) if plots_dir is None else plots_dir
        workdir.mkdir(parents=True, exist_ok=True)
        for mode in exp.modes:
            out.write(f"--- {mode}: replaying {exp.trace} against {name}\n")
            out.flush()
            run = await run_mode(config, exp, mode, workdir)
            runs[mode] = run
            summary = summarize(run, slo)
            if exp.disturbance is not None:
                split = window_split(run.records, run.timeline, exp.disturbance, slo)
                summary = dataclasses.replace(summary, window=split)
            if stages:
                summary = dataclasses.replace(
                    summary, stages=stage_times(run.records, stages, run.per_stage)
                )
            result.modes[mode] = summary
            s = result.modes[mode]
            out.write(
                f"    {s.requests} requests, {s.violation_pct:.2f}% over SLO, p99 "
                f"{s.p99_ms:.1f} ms, {s.replica_seconds:.1f} replica-s, {run.wall_s:.0f} s\n"
            )
            await asyncio.sleep(exp.settle_s)
    print_table(result, out)
    if plots_dir is not None:
        from slackwise_cli.plots import plot_experiment

        for path in plot_experiment(result, runs, plots_dir):
            out.write(f"plot: {path}\n")
    return result, runs
