"""One of our model classes served by Ray Serve with ``@serve.batch`` (its dynamic batching).

Run by ``benchmarks/peers.py`` with the throwaway venv's Python, where ``ray[serve]`` is installed
(it is not a dependency of this project): ``python benchmarks/ray_server.py --model digits --port
8000 --replicas 1 --max-batch 32 --wait-ms 5``. Configured as Ray Serve's docs recommend for
throughput with batching: an async batched method (``max_batch_size``, ``batch_wait_timeout_s``),
``max_ongoing_requests`` raised so a replica can hold a whole batch and the next one (the default,
5, would cap every batch at 5), the dashboard off, one model thread per replica, Ray Serve's
throughput mode on (``RAY_SERVE_THROUGHPUT_OPTIMIZED=1``; ``--plain`` for its defaults) and access
logs off. The model is the very class our functions serve (``functions.registry``): each instance is
validated apart (a bad one is a 400 for its own request) and the batch is one ``predict`` call. The
answer carries ``x-batch-size`` as our runtime's does. Serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--max-batch", type=int, default=32)
    parser.add_argument("--wait-ms", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--plain", action="store_true", help="Ray Serve's defaults, not its throughput mode"
    )
    return parser.parse_args(argv)


def _deployment(args: argparse.Namespace) -> Any:
    """The Ray Serve deployment of ``args.model`` with ``@serve.batch``, bound."""
    from ray import serve  # only in the benchmark's own venv
    from starlette.requests import Request
    from starlette.responses import Response

    model_kind, threads = args.model, args.threads

    @serve.deployment(
        num_replicas=args.replicas,
        max_ongoing_requests=max(100, 4 * args.max_batch),
        ray_actor_options={"num_cpus": 0},
        logging_config={"enable_access_log": False, "log_level": "WARNING"},
    )
    class Served:
        def __init__(self) -> None:
            from functions.registry import create_model

            self.inner = create_model(model_kind, threads=threads)
            self.inner.load()

        @serve.batch(max_batch_size=args.max_batch, batch_wait_timeout_s=args.wait_ms / 1000.0)
        async def run(self, groups: list[list[Any]]) -> list[tuple[list[Any], int]]:
            flat = [x for group in groups for x in group]
            out = self.inner.predict(flat)
            answers, start = [], 0
            for group in groups:
                answers.append((out[start : start + len(group)], len(flat)))
                start += len(group)
            return answers

        async def __call__(self, request: Request) -> Response:
            from functions.model import InvalidInput

            try:
                payload = json.loads(await request.body())
                instances = payload.get("instances") if isinstance(payload, dict) else None
                if not isinstance(instances, list) or not instances:
                    raise InvalidInput("'instances' must be a non-empty list")
                batch = [self.inner.validate(x) for x in instances]
            except (ValueError, InvalidInput) as exc:
                return Response(json.dumps({"error": str(exc)}), status_code=400)
            predictions, size = await self.run(batch)
            return Response(
                json.dumps({"predictions": predictions}),
                media_type="application/json",
                headers={"x-batch-size": str(size)},
            )

    return Served.bind()


def _until_signalled() -> None:
    """Sleep until SIGTERM or SIGINT."""
    stop = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not stop:
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))
    if not args.plain:
        # Ray Serve's documented throughput mode: user code and router on the replica's own loop,
        # gRPC between proxy and replicas, direct ingress, buffered request logs
        os.environ.setdefault("RAY_SERVE_THROUGHPUT_OPTIMIZED", "1")

    import ray  # only in the benchmark's own venv
    from ray import serve

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    serve.start(
        http_options={"host": "127.0.0.1", "port": args.port},
        logging_config={"enable_access_log": False, "log_level": "WARNING"},
    )
    serve.run(_deployment(args), name=args.model, route_prefix="/predict")
    print("ready", flush=True)
    _until_signalled()
    serve.shutdown()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
