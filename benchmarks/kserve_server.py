"""One of our model classes served by KServe's own ModelServer (V1 protocol, no batching).

Run by ``benchmarks/peers.py`` with the throwaway venv's Python, where ``kserve`` is installed (it
is not a dependency of this project): ``python benchmarks/kserve_server.py --model digits --port
8080 --workers 2``. Configured for throughput as KServe documents it: uvicorn workers
(``--workers``, one process each, the model loaded before they fork), per-request latency logging
off, gRPC off (only HTTP is measured). KServe's batching lives in a Kubernetes sidecar (the agent's
batcher), not in the ModelServer, so there is none here. The model is the very class our functions
serve (``functions.registry``), loaded once, validated and run per request exactly as our runtime
does; only the server around it is KServe's.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import kserve  # only in the benchmark's own venv

from functions.model import InvalidInput
from functions.registry import create_model


class Served(kserve.Model):  # type: ignore[misc]
    """The model class behind KServe's V1 predict. Pickled by value for the workers KServe spawns:
    the loaded model is left out and loaded again in each worker."""

    def __init__(self, name: str, kind: str, threads: int) -> None:
        super().__init__(name)
        self.kind, self.threads = kind, threads
        self.inner = create_model(kind, threads=threads)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("inner", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.inner = create_model(self.kind, threads=self.threads)
        self.inner.load()

    def load(self) -> bool:
        self.inner.load()
        self.ready = True
        return True

    def predict(
        self, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        instances = payload.get("instances")
        if not isinstance(instances, list) or not instances:
            raise kserve.errors.InvalidInput("'instances' must be a non-empty list")
        try:
            batch = [self.inner.validate(x) for x in instances]
        except InvalidInput as exc:
            raise kserve.errors.InvalidInput(str(exc)) from None
        return {"predictions": self.inner.predict(batch)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    model = Served(args.model, args.model, args.threads)
    model.load()
    kserve.ModelServer(
        http_port=args.port,
        workers=args.workers,
        enable_grpc=False,
        enable_latency_logging=False,
    ).start([model])
    return 0


if __name__ == "__main__":
    sys.exit(main())
