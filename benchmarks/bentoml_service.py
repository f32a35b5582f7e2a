"""One of our model classes served by BentoML with adaptive batching (``batchable=True``).

Started by ``benchmarks/peers.py`` as ``bentoml serve benchmarks.bentoml_service:Peer --port N``
with the throwaway venv's BentoML (it is not a dependency of this project). BentoML builds a service
from a decorated class when the module is imported, so the settings come from the environment the
harness sets: ``PEER_MODEL`` (model kind), ``PEER_WORKERS`` (processes), ``PEER_MAX_BATCH`` and
``PEER_MAX_LATENCY_MS`` (the adaptive batcher's cap and its latency target), ``PEER_THREADS`` (model
threads per worker). Configured as BentoML's docs recommend for throughput: one batchable API over a
list input, ``max_batch_size`` and ``max_latency_ms`` set, one or two workers, access logs off. The
adaptive batcher answers 503 ("process is overloaded") when it predicts a request would wait past
``max_latency_ms``: that is BentoML's own admission control, and it counts as an error here as it
would for a client. The model is the very class our functions serve (``functions.registry``). The
route is ``POST /predict`` with the body ``{"instances": [...]}``, the same bytes every peer gets;
the answer is the list of predictions.
"""

from __future__ import annotations

import os
from typing import Any

import bentoml  # only in the benchmark's own venv

from functions.model import InvalidInput
from functions.registry import create_model

MODEL = os.environ.get("PEER_MODEL", "digits")
THREADS = int(os.environ.get("PEER_THREADS", "1"))


@bentoml.service(  # type: ignore[misc]
    workers=int(os.environ.get("PEER_WORKERS", "1")),
    traffic={"timeout": 30, "max_concurrency": 1000},
    logging={"access": {"enabled": False}},
)
class Peer:
    def __init__(self) -> None:
        self.inner = create_model(MODEL, threads=THREADS)
        self.inner.load()

    @bentoml.api(  # type: ignore[misc]
        batchable=True,
        batch_dim=0,
        max_batch_size=int(os.environ.get("PEER_MAX_BATCH", "32")),
        max_latency_ms=int(float(os.environ.get("PEER_MAX_LATENCY_MS", "50"))),
    )
    def predict(self, instances: list[Any]) -> list[Any]:
        try:
            batch = [self.inner.validate(x) for x in instances]
        except InvalidInput as exc:  # BentoML fails the whole batch: a 400, not a 500
            raise bentoml.exceptions.InvalidArgument(str(exc)) from None
        return list(self.inner.predict(batch))
