"""A yielding start under a sustained flood: when the second replica is ready, and whether its
start timed out.

``slackwise serve -c experiments/overload/embed.yaml`` (min-scale 1, max-scale 2) pinned to CPU 0
with its replicas (the overload benchmark's server side), the open-loop generator on CPU 1 at
``--rate`` (10x embed's capacity by default) for ``--seconds``. With ``starting_nice: auto`` the
second replica the flood asks for yields (the serving one holds the only CPU); this prints, as
one JSON line, when it was ready (seconds into the flood), how many starts failed ("not ready
within" in the adapter's log: the platform killed a start at ``ready_timeout_s``), the goodput
and the share of answers within the SLO. ``--tree`` runs another checkout (a worktree of an
earlier commit) with this venv.

    .venv/bin/python benchmarks/yielding_start_flood.py --seconds 240
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from slackwise_cli.repeats import commit
from slackwise_cli.results import machine

ROOT = Path(__file__).resolve().parent.parent
STATUS = "http://127.0.0.1:8722/v1/models/embed"
PREDICT = "http://127.0.0.1:8721/v1/models/embed:predict"


def _ready(client: httpx.Client) -> int:
    try:
        return int(client.get(STATUS).json()["replicas"]["ready"])
    except (httpx.HTTPError, KeyError, ValueError):
        return 0


def flood(tree: Path, rate: float, seconds: float) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    config = str(tree / "experiments/overload/embed.yaml")
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log, httpx.Client(timeout=5) as client:
        serve = [sys.executable, "-m", "slackwise_cli.main", "serve", "-c", config]
        server = subprocess.Popen(
            ["taskset", "-c", "0", *serve], cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            deadline = time.monotonic() + 120.0
            while _ready(client) < 1 and time.monotonic() < deadline:
                time.sleep(0.5)
            began = time.monotonic()
            load = [sys.executable, str(ROOT / "benchmarks/loadgen.py"), "--url", PREDICT]
            load += ["--model", "embed", "--rate", f"{rate:g}", "--warmup-s", "2"]
            load += ["--duration-s", f"{seconds:g}", "--slo-ms", "300"]
            gen = subprocess.Popen(
                ["taskset", "-c", "1", *load],
                cwd=ROOT,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
                stdout=subprocess.PIPE,
                text=True,
            )
            second: float | None = None
            while gen.poll() is None:
                if second is None and _ready(client) >= 2:
                    second = round(time.monotonic() - began, 1)
                time.sleep(1.0)
            assert gen.stdout is not None
            out = json.loads(gen.stdout.read().strip().splitlines()[-1])
        finally:
            server.terminate()
            server.wait(30)
        log.seek(0)
        failures = re.findall(r"not ready within[^\n]*", log.read())
    answered = int(out["ok"]) + int(out["given_up"])
    return {
        "tree_commit": commit(tree),
        "command": " ".join(["benchmarks/yielding_start_flood.py", *sys.argv[1:]]),
        "machine": machine(),
        "rate": rate,
        "flood_s": seconds,
        "second_ready_at_s": second,
        "failed_starts": len(failures),
        "failures": failures[:5],
        "goodput_rps": out["goodput_rps"],
        "given_up": out["given_up"],
        "in_slo": round(int(out["ok_within_slo"]) / answered, 4) if answered else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1900.0, help="req/s (default 1900)")
    parser.add_argument("--seconds", type=float, default=240.0, help="the flood's measured s")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to serve from")
    args = parser.parse_args(argv)
    if not (args.rate > 0 and args.seconds > 0):
        parser.error(f"--rate and --seconds must be positive, got {args.rate} and {args.seconds}")
    print(json.dumps(flood(args.tree.resolve(), args.rate, args.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
