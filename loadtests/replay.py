"""``slackwise replay``: send a trace's requests open-loop to a function or app and record them.

The trace (a file, or the shared ``nasa`` / ``twitter`` count files) is cut to the window that
``--duration-s`` needs from ``--start-s``, optionally averaged over ``--downsample`` seconds per
step, scaled so its peak is ``--max-rps`` and each step held ``--step-s`` seconds, as MLProxy
replayed the AutoScale traces. Arrivals are Poisson within each step (``--seed``), or, for a
timestamp CSV with ``--exact``, the recorded times themselves. Requests leave on schedule whatever
the answers do; the summary says how late the generator itself was (send lag).

``add_arguments`` and ``run`` are what the ``slackwise`` CLI calls; ``main`` runs it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import ssl
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx

from loadtests.errors import LoadError
from loadtests.input_step import body_picker
from loadtests.openloop import LATE_S, Progress, Record, Summary, run_open_loop, summarize
from traces import (
    TraceError,
    downsample,
    exact_schedule,
    hold,
    load_arrivals,
    load_trace,
    poisson_schedule,
    resolve_trace,
    scale_to_peak,
)
from traces.formats import FORMATS, detect_format

logger = logging.getLogger(__name__)

#: distinct sample bodies drawn from a model (cycled over the requests)
SAMPLE_BODIES = 64


class UsageError(LoadError):
    """A flag's value cannot be used; the message names the flag and the value."""


def _number(kind: Callable[[str], float], low: float, inclusive: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            bound = f">= {low:g}" if inclusive else f"> {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text!r}")
        return value

    return parse


_positive = _number(float, 0.0, inclusive=False)
_non_negative = _number(float, 0.0, inclusive=True)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The replay flags, on ``parser``: the trace, the target, the run."""
    _trace_arguments(parser.add_argument_group("trace"))
    _target_arguments(parser)
    _run_arguments(parser.add_argument_group("run"))


def _trace_arguments(trace: Any) -> None:
    trace.add_argument(
        "--trace",
        required=True,
        metavar="FILE|nasa|twitter",
        help="trace file (AutoScale, per-second counts, timestamp CSV; .gz ok) or a shared trace",
    )
    trace.add_argument("--trace-format", choices=FORMATS, help="override format detection")
    trace.add_argument(
        "--column",
        default="0",
        help="timestamp CSV column: header name or 0-based index (default 0)",
    )
    trace.add_argument(
        "--start-s",
        type=_non_negative,
        default=0.0,
        help="where the window starts in the trace, in its own seconds",
    )
    trace.add_argument(
        "--duration-s", type=_positive, required=True, help="seconds of load to send"
    )
    trace.add_argument(
        "--max-rps",
        type=_positive,
        help="scale the window so its peak is this rate (default: as recorded)",
    )
    trace.add_argument(
        "--step-s", type=_positive, help="seconds each trace step is held (default 1)"
    )
    trace.add_argument(
        "--downsample",
        type=_positive_int,
        default=1,
        metavar="K",
        help="average K trace seconds into one step first",
    )
    trace.add_argument(
        "--exact",
        action="store_true",
        help="timestamp CSV: send at the recorded times, not Poisson",
    )
    trace.add_argument("--seed", type=int, default=0, help="seed of the Poisson arrivals")


def _target_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_argument_group("target")
    target.add_argument(
        "--target",
        required=True,
        metavar="URL",
        help="base URL of the adapter or function (or the full predict URL)",
    )
    where = target.add_mutually_exclusive_group()
    where.add_argument("--function", metavar="NAME", help="POST /v1/models/NAME:predict")
    where.add_argument("--app", metavar="NAME", help="POST /v1/apps/NAME:predict")
    body = target.add_mutually_exclusive_group(required=True)
    body.add_argument(
        "--model", metavar="KIND", help="bodies {'instances': [x]} from the model's real samples"
    )
    body.add_argument("--body-file", type=Path, metavar="F", help="send this JSON body")
    body.add_argument(
        "--pipeline",
        metavar="NAME",
        help="bodies {'instances': [x]} from a pipeline's real app inputs (for --app)",
    )
    target.add_argument(
        "--larger-inputs",
        metavar="START_S:DURATION_S:FACTOR",
        help="with --model: requests sent in this window of the replay carry the model's larger "
        "inputs, about FACTOR times the usual size (a step change of input size)",
    )
    target.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra request header (repeatable), e.g. 'X-SLO-Ms: 200'",
    )
    parser.add_argument(
        "--bearer-env",
        metavar="VAR",
        help="send 'Authorization: Bearer $VAR' (a token kept off the command line), e.g. "
        "SLACKWISE_PLATFORM_TOKEN to replay straight against a local platform",
    )


def _run_arguments(run_group: Any) -> None:
    run_group.add_argument(
        "--timeout-s", type=_positive, default=30.0, help="per-request timeout (default 30)"
    )
    run_group.add_argument(
        "--records", type=Path, metavar="OUT.jsonl", help="write one JSON line per request here"
    )
    run_group.add_argument(
        "--progress-s",
        type=_positive,
        default=5.0,
        help="seconds between progress lines on stderr (default 5)",
    )
    run_group.add_argument(
        "--max-connections",
        type=_positive_int,
        default=4096,
        help="connection limit over all clients (default 4096)",
    )
    run_group.add_argument(
        "--clients",
        type=_positive_int,
        default=32,
        help="HTTP clients the requests are spread over, to keep each pool small (default 32)",
    )


def _url(args: argparse.Namespace) -> str:
    target: str = args.target
    if not target.startswith(("http://", "https://")):
        raise UsageError(f"--target {target!r}: not an http:// or https:// URL")
    base = target.rstrip("/")
    if args.function:
        return f"{base}/v1/models/{args.function}:predict"
    if args.app:
        return f"{base}/v1/apps/{args.app}:predict"
    return target


def _headers(args: argparse.Namespace) -> dict[str, str]:
    headers: dict[str, str] = {}
    if args.bearer_env:
        token = os.environ.get(args.bearer_env)
        if not token:
            raise UsageError(f"--bearer-env {args.bearer_env}: that variable is not set")
        headers["Authorization"] = f"Bearer {token}"
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header {item!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    return headers


def _schedule(args: argparse.Namespace) -> tuple[list[float], str]:
    """The arrival offsets and a description of where they came from."""
    try:
        path = resolve_trace(args.trace)
    except TraceError as exc:
        raise UsageError(f"--trace {args.trace!r}: {exc}") from None
    column: str | int = int(args.column) if args.column.isdigit() else args.column
    try:
        if args.exact:
            shaping = [f for f in ("max_rps", "step_s") if getattr(args, f) is not None]
            if args.downsample != 1:
                shaping.append("downsample")
            if shaping:
                flag = "--" + shaping[0].replace("_", "-")
                raise UsageError(f"{flag} {getattr(args, shaping[0])}: not with --exact")
            kind = args.trace_format or detect_format(path)
            if kind != "timestamps":
                raise UsageError(f"--exact: --trace {args.trace!r} is {kind}, not timestamps")
            times = load_arrivals(
                path, start_s=args.start_s, duration_s=args.duration_s, column=column
            )
            source = f"{path} (timestamps, exact, from {args.start_s:g} s)"
            return exact_schedule(times, until_s=args.duration_s), source
        step_s = 1.0 if args.step_s is None else args.step_s
        steps = math.ceil(args.duration_s / step_s - 1e-9)
        needed = steps * args.downsample
        trace = load_trace(
            path,
            format=args.trace_format,
            start_s=args.start_s,
            duration_s=needed,
            column=column,
        )
        if len(trace) < needed:
            raise UsageError(
                f"--duration-s {args.duration_s:g}: needs {needed} s of the trace from "
                f"--start-s {args.start_s:g}, but it has only {len(trace)}"
            )
        trace = downsample(trace, args.downsample)
        if args.max_rps is not None:
            trace = scale_to_peak(trace, args.max_rps)
        trace = hold(trace, step_s)
        schedule = poisson_schedule(trace, seed=args.seed, until_s=args.duration_s)
        source = f"{trace.source}; Poisson seed {args.seed}"
        return schedule, source
    except TraceError as exc:
        raise UsageError(f"--trace {args.trace!r}: {exc}") from None


def _bodies(args: argparse.Namespace, count: int) -> list[bytes]:
    if args.body_file is not None:
        try:
            raw: bytes = args.body_file.read_bytes()
            json.loads(raw)
        except OSError as exc:
            raise UsageError(f"--body-file {str(args.body_file)!r}: {exc.strerror}") from None
        except ValueError as exc:
            raise UsageError(f"--body-file {str(args.body_file)!r}: not JSON: {exc}") from None
        return [raw]
    if args.pipeline is not None:
        from functions.pipelines import PIPELINES

        pipeline = PIPELINES.get(args.pipeline)
        if pipeline is None:
            raise UsageError(
                f"--pipeline {args.pipeline!r}: unknown; known: {', '.join(sorted(PIPELINES))}"
            )
        try:
            inputs = pipeline.sample_inputs(max(1, min(SAMPLE_BODIES, count)))
        except ImportError as exc:
            raise UsageError(
                f"--pipeline {args.pipeline!r}: its packages are missing: {exc}"
            ) from None
        return [json.dumps({"instances": [x]}, separators=(",", ":")).encode() for x in inputs]
    from functions.registry import UnknownModel, create_model

    try:
        instances = create_model(args.model).sample_instances(max(1, min(SAMPLE_BODIES, count)))
    except UnknownModel as exc:
        raise UsageError(f"--model {args.model!r}: {exc}") from None
    except ImportError as exc:
        raise UsageError(f"--model {args.model!r}: its packages are missing: {exc}") from None
    return [json.dumps({"instances": [x]}, separators=(",", ":")).encode() for x in instances]


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1e3:.1f}"


def print_summary(summary: Summary, out: TextIO) -> None:
    """The end-of-run report."""
    s = summary
    errors = ", ".join(f"{k}: {v}" for k, v in s.errors_by_status.items()) or "none"
    print(
        f"requests {s.requests} in {s.duration_s:.1f} s: achieved {s.achieved_rps:.1f} req/s, "
        f"ok {s.ok} ({s.goodput_rps:.1f} req/s)",
        file=out,
    )
    print(f"errors: {errors}", file=out)
    print(
        f"latency ms: p50 {_ms(s.latency_p50_s)}  p95 {_ms(s.latency_p95_s)}  "
        f"p99 {_ms(s.latency_p99_s)}",
        file=out,
    )
    print(
        f"send lag ms: p50 {_ms(s.lag_p50_s)}  p99 {_ms(s.lag_p99_s)}  max {_ms(s.lag_max_s)}; "
        f"late > {LATE_S * 1e3:g} ms: {s.late}",
        file=out,
    )


def _print_progress(p: Progress) -> None:
    print(
        f"t={p.t_s:6.1f}s sent={p.sent} answered={p.answered} errors={p.errors} "
        f"in-flight={p.in_flight} lag-max={p.max_lag_s * 1e3:.1f}ms",
        file=sys.stderr,
        flush=True,
    )


def write_records(path: Path, records: Sequence[Record]) -> None:
    """One JSON object per line, in request order."""
    with path.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record.to_json(), separators=(",", ":")))
            f.write("\n")


async def _replay(
    args: argparse.Namespace, url: str, schedule: list[float], body: Callable[[int], bytes]
) -> tuple[list[Record], float]:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            logger.debug("cannot handle %s here; Ctrl-C will abort", sig.name)
    per_client = math.ceil(args.max_connections / args.clients)
    tls = ssl.create_default_context()  # one for all clients: each costs tens of ms to build
    limits = httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client)
    started = loop.time()
    try:
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    httpx.AsyncClient(limits=limits, trust_env=False, verify=tls)
                )
                for _ in range(args.clients)
            ]
            records = await run_open_loop(
                clients,
                url,
                schedule,
                body,
                timeout_s=args.timeout_s,
                headers=_headers(args),
                progress=_print_progress,
                progress_every_s=args.progress_s,
                stop=stop,
            )
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
    elapsed = min(loop.time() - started, args.duration_s) if stop.is_set() else args.duration_s
    return records, elapsed


def run(args: argparse.Namespace) -> int:
    """Replay as ``args`` say; 0 when done, 2 for unusable flags (message on stderr)."""
    try:
        url = _url(args)
        _headers(args)
        schedule, source = _schedule(args)
        try:
            body = body_picker(
                schedule,
                _bodies(args, len(schedule)),
                args.model,
                args.larger_inputs,
                SAMPLE_BODIES,
            )
        except ValueError as exc:
            raise UsageError(f"--larger-inputs {exc}") from None
        if args.records is not None and not args.records.parent.is_dir():
            raise UsageError(f"--records {str(args.records)!r}: no such directory")
    except UsageError as exc:
        print(f"slackwise replay: {exc}", file=sys.stderr)
        return 2
    mean = len(schedule) / args.duration_s
    print(f"trace: {source}", file=sys.stderr)
    print(
        f"sending {len(schedule)} requests over {args.duration_s:g} s (mean {mean:.1f} req/s) "
        f"to {url}",
        file=sys.stderr,
        flush=True,
    )
    records, elapsed = asyncio.run(_replay(args, url, schedule, body))
    if args.records is not None:
        write_records(args.records, records)
        print(f"records: {args.records}", file=sys.stderr)
    print_summary(summarize(records, elapsed), sys.stdout)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the replayer on its own (``python -m loadtests.replay``)."""
    parser = argparse.ArgumentParser(prog="slackwise replay", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
