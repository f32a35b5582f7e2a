"""What each function kind's process holds in memory: its resident set once the model is loaded
and after it has served a batch of its real samples, measured here and written as
``functions/profiles/memory.json``, which ``slackwise manifests`` reads for each function's
memory request (the measured peak plus a quarter) and limit (twice the request).

Run: ``.venv/bin/python benchmarks/function_memory.py`` (about a minute; one kind at a time).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import httpx
import psutil

from functions.registry import KINDS
from functions.samples import sample_request
from functions.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "functions" / "profiles" / "memory.json"
#: the batch each kind serves before its resident set is read (its largest profiled batch)
BATCH = 16


def measure(kind: str) -> dict[str, float]:
    """RSS (MiB) of one ``python -m functions.serve --model KIND`` process, ready and after a
    batch of ``BATCH`` real samples."""
    with ServerProcess(kind) as server, httpx.Client(trust_env=False) as client:
        server.wait_ready(client, timeout_s=180)
        pid = server.pid
        ready = psutil.Process(pid).memory_info().rss / 2**20
        r = client.post(server.predict_url, json=sample_request(kind, BATCH), timeout=120)
        r.raise_for_status()
        served = psutil.Process(pid).memory_info().rss / 2**20
    return {"ready_mib": round(ready, 1), "after_batch_mib": round(served, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default=",".join(sorted(KINDS)), help="comma-separated")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    kinds = {}
    for kind in [k for k in args.kinds.split(",") if k]:
        kinds[kind] = measure(kind)
        print(f"{kind:<15} ready {kinds[kind]['ready_mib']:7.1f} MiB   after a batch of "
              f"{BATCH}: {kinds[kind]['after_batch_mib']:7.1f} MiB", flush=True)  # fmt: skip
    doc = {
        "measured_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "batch": BATCH,
        "command": "benchmarks/function_memory.py",
        "kinds": kinds,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
