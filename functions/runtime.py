"""Turn a :class:`~functions.model.Model` into a Starlette app speaking KServe V1 and V2.

Routes:

- ``POST /v1/models/{name}:predict`` with ``{"instances": [...]}`` answers
  ``{"predictions": [...]}``; bad input is 400 with a reason, a model failure 500 with a reason.
- ``GET /v1/models/{name}`` answers 200 when the model is loaded and healthy, 503 while loading;
  ``GET /v1/models`` lists the model.
- The Open Inference Protocol (V2, :mod:`functions.v2`): ``POST /v2/models/{name}/infer``,
  ``GET /v2/models/{name}/ready``, ``GET /v2/health/live`` and ``/v2/health/ready``.

Every predict response carries the headers the adapter reads (names in :data:`FUNCTION_ANSWER`): the
batch's compute time, whether this was the first request the process served (cold), the process
start time (epoch seconds) and the model load time. A request that names its adapter
(``x-frontend-id``) also gets ``x-frontends``: how many distinct adapters this process heard from
within the window the request asks for (Swayam's gossip, :mod:`functions.gossip`).

The model loads in a background thread after the server starts, so the readiness endpoint can
say "loading" instead of refusing connections. Batches run one at a time on a single worker
thread: concurrency is the platform's business (``containerConcurrency``). A model whose recent
batches took under :data:`INLINE_BELOW_MS` (digits: a fraction of a millisecond) runs on the
event loop itself when the worker is idle: the hand-off to the thread and back cost more than
the model did.

One process may hold several models (``create_app([m1, m2])``, ROMA's GPU executable: every
model a node serves, on one GPU). Each is served under its own name; they load one after another
and share the one worker thread, so the device runs one batch at a time, whichever model it is
for; ``GET /v1/models`` lists them and ``/v2/health/ready`` is 200 once all have loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from functions.gossip import FrontendTally, parse_window
from functions.headers import (
    BATCH_SIZE,
    COLD_START,
    COMPUTE_MS,
    FRONTEND_ID,
    FRONTEND_WINDOW_S,
    FRONTENDS,
    IN_FLIGHT,
    MODEL_LOAD_MS,
    PROCESS_START,
)
from functions.model import InvalidInput, Model
from functions.signature import signature
from functions.v2 import V2Request, v2_request
from functions.v2_answer import BINARY_HEADER, v2_answer

logger = logging.getLogger(__name__)


#: the largest request body accepted, in bytes
MAX_BODY_BYTES = 64 * 1024 * 1024
#: a batch expected to compute in less than this runs on the event loop, not the worker thread
INLINE_BELOW_MS = 2.0
#: smoothing of the per-instance compute time that predicts the next batch's
_EWMA_ALPHA = 0.2


@dataclass
class _Worker:
    """The one thread batches run on, shared by every model of the process."""

    executor: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="predict")
    )
    #: batches on the thread now
    busy: int = 0


@dataclass
class _State:
    model: Model
    name: str
    process_start: float
    loaded: bool = False
    load_error: str | None = None
    load_ms: float = 0.0
    served: int = 0
    in_flight: int = 0
    #: the recent compute time per instance (ms; None until a batch has run)
    ms_per_instance: float | None = None
    frontends: FrontendTally = field(default_factory=FrontendTally)
    worker: _Worker = field(default_factory=_Worker)


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


def warm_up(model: Model) -> list[int]:
    """On a GPU, one ``predict`` of the model's sample instances at each power-of-two batch size
    up to its limit, before the replica says it is ready; the sizes run. A first call of a size
    there pays CUDA's lazy start and the framework's setup for that shape (embed's first batch
    took 239 ms on an H200, 4-12 ms after), and answered to the adapter those first batches
    read as the function's latency: its latency model and its door's evidence of late
    finishes. Triton's ``model_warmup`` does the same. On the CPU nothing runs: a first call
    there costs little, and a cold start is not made longer for it."""
    if model.device == "cpu":
        return []
    sizes = []
    size = 1
    while size <= model.max_instances:
        model.predict([model.validate(x) for x in model.sample_instances(size)])
        sizes.append(size)
        size *= 2
    return sizes


def _load(state: _State) -> None:
    start = time.perf_counter()
    try:
        state.model.load()
        warmed = warm_up(state.model)
        if warmed:
            logger.info("model %s ran batches of %s once before ready", state.name, warmed)
    except Exception as exc:  # a model that cannot load must say why on the ready endpoint
        logger.exception("model %s failed to load", state.name)
        state.load_error = f"{type(exc).__name__}: {exc}"
        return
    state.load_ms = (time.perf_counter() - start) * 1000.0
    state.loaded = True
    logger.info("model %s loaded in %.0f ms", state.name, state.load_ms)


def v1_instances(body: bytes) -> list[Any]:
    """The non-empty ``instances`` list of a V1 predict body; InvalidInput says what is wrong."""
    if not body:
        raise InvalidInput('empty body: send {"instances": [...]}')
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"body is not JSON: {exc}") from None
    if not isinstance(payload, dict) or "instances" not in payload:
        raise InvalidInput("body must be an object with an 'instances' list")
    instances = payload["instances"]
    if not isinstance(instances, list):
        raise InvalidInput(f"'instances' must be a list, got {type(instances).__name__}")
    if not instances:
        raise InvalidInput("'instances' is empty")
    if _deeper_than(instances, MAX_JSON_DEPTH - 2):
        raise InvalidInput(f"instances nest deeper than {MAX_JSON_DEPTH} levels of JSON")
    return instances


#: how deep a request's JSON may nest (an image as nested lists is 4; orjson writes 254 at most)
MAX_JSON_DEPTH = 32


def _deeper_than(value: Any, depth: int) -> bool:
    """Does ``value`` nest lists or objects more than ``depth`` levels (iterative, no recursion;
    a flat list of numbers costs one pass over its items)?"""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, level = stack.pop()
        if level > depth:
            return True
        if isinstance(node, list):
            stack.extend((child, level + 1) for child in node if isinstance(child, list | dict))
        elif isinstance(node, dict):
            stack.extend((c, level + 1) for c in node.values() if isinstance(c, list | dict))
    return False


def _parse_instances(
    body: bytes, model: Model, *, v2: bool = False, header_length: str | None = None
) -> tuple[list[Any], V2Request | None]:
    """The validated instances of a body, and what a V2 request asks of its answer."""
    if len(body) > MAX_BODY_BYTES:
        raise InvalidInput(f"body of {len(body)} bytes exceeds the limit of {MAX_BODY_BYTES}")
    if not body:
        raise InvalidInput('empty body: send {"instances": [...]}')
    request = v2_request(body, header_length) if v2 else None
    if request is None:
        instances = v1_instances(body)
    elif (known := signature(model.kind)) is not None:
        instances = known.instances(request)
    else:
        instances = request.instances
    if len(instances) > model.max_instances:
        raise InvalidInput(
            f"{len(instances)} instances exceed this model's limit of {model.max_instances}"
        )
    decoded = []
    for i, instance in enumerate(instances):
        try:
            decoded.append(model.validate(instance))
        except InvalidInput as exc:
            raise InvalidInput(f"instances[{i}]: {exc}") from None
    return decoded, request


async def _run_model(state: _State, instances: list[Any]) -> list[Any]:
    """The model on this batch: inline when it is known to be fast and the worker is idle (one
    batch at a time either way), else on the worker thread."""
    recent, worker = state.ms_per_instance, state.worker
    if recent is not None and worker.busy == 0 and recent * len(instances) < INLINE_BELOW_MS:
        return state.model.predict(instances)
    worker.busy += 1
    try:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(worker.executor, state.model.predict, instances)
    finally:
        worker.busy -= 1


class _Handlers:
    """The runtime's routes over the models it holds, by path name."""

    def __init__(self, states: dict[str, _State], max_in_flight: int | None = None) -> None:
        self.states = states
        self.here = ", ".join(repr(n) for n in states)
        #: predicts this process holds at once; one more is bounced with 429 at once (Swayam's
        #: backends, which the frontend's random dispatch retries elsewhere); None: no limit
        self.max_in_flight = max_in_flight

    def _busy(self) -> Response | None:
        if self.max_in_flight is None:
            return None
        held = sum(s.in_flight for s in self.states.values())
        if held < self.max_in_flight:
            return None
        return JSONResponse(
            {
                "error": f"busy: {held} predict(s) in flight, the most this replica holds "
                f"(--max-in-flight {self.max_in_flight})"
            },
            status_code=429,
            headers={"retry-after": "0"},
        )

    def _state(self, request: Request) -> _State | Response:
        requested = request.path_params["name"]
        found = self.states.get(requested)
        if found is None:
            return _error(404, f"no model named {requested!r} here; this serves {self.here}")
        return found

    async def ready(self, request: Request) -> Response:
        state = self._state(request)
        if isinstance(state, Response):
            return state
        if state.load_error is not None:
            return _error(503, f"model failed to load: {state.load_error}")
        if not state.loaded:
            return JSONResponse({"name": state.name, "ready": False}, status_code=503)
        healthy = state.model.healthy()
        return JSONResponse(
            {"name": state.name, "ready": healthy, "load_ms": round(state.load_ms, 1)},
            status_code=200 if healthy else 503,
        )

    async def predict(self, request: Request) -> Response:
        state = self._state(request)
        if isinstance(state, Response):
            return state
        busy = self._busy()
        if busy is not None:
            return busy
        state.in_flight += 1
        try:
            v2 = request.url.path.endswith("/infer")
            return await _predict(state, request, state.in_flight, v2=v2)
        finally:
            state.in_flight -= 1

    async def live(self, request: Request) -> Response:
        return JSONResponse({"live": True})

    async def server_ready(self, request: Request) -> Response:
        ok = all(s.loaded and s.load_error is None for s in self.states.values())
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    async def listing(self, request: Request) -> Response:
        return JSONResponse({"models": list(self.states)})


async def _predict(state: _State, request: Request, in_flight: int, *, v2: bool) -> Response:
    """One batch through ``state``'s model: its predictions, or a 4xx/5xx with the reason."""
    if not state.loaded:
        reason = state.load_error or "model is still loading"
        return _error(503, reason)
    body = await request.body()
    try:
        header_length = request.headers.get(BINARY_HEADER)
        instances, asked = _parse_instances(body, state.model, v2=v2, header_length=header_length)
    except InvalidInput as exc:
        return _error(400, str(exc))
    start = time.perf_counter()
    try:
        predictions = await _run_model(state, instances)
    except InvalidInput as exc:
        return _error(400, str(exc))
    except Exception as exc:  # the process keeps serving after a model error
        logger.exception("model %s failed on a batch of %d", state.name, len(instances))
        return _error(500, f"model error: {type(exc).__name__}: {exc}")
    compute_ms = (time.perf_counter() - start) * 1000.0
    per = compute_ms / len(instances)
    previous = state.ms_per_instance
    state.ms_per_instance = per if previous is None else previous + _EWMA_ALPHA * (per - previous)
    if len(predictions) != len(instances):
        return _error(
            500, f"model returned {len(predictions)} predictions for {len(instances)} inputs"
        )
    headers = _answer_headers(state, request, compute_ms, len(instances), in_flight)
    if not v2:
        content = orjson.dumps({"predictions": predictions}, option=orjson.OPT_SERIALIZE_NUMPY)
        return Response(content, headers=headers, media_type="application/json")
    try:
        content, head = v2_answer(state.name, predictions, asked, state.model.outputs)
    except ValueError as exc:  # predictions that do not fit the model's declared outputs
        return _error(500, f"model error: {exc}")
    if head is None:
        return Response(content, headers=headers, media_type="application/json")
    headers[BINARY_HEADER] = str(head)
    return Response(content, headers=headers, media_type="application/octet-stream")


def _answer_headers(
    state: _State, request: Request, compute_ms: float, size: int, in_flight: int
) -> dict[str, str]:
    """The answer's wire headers (functions.headers): compute time, cold start, the process's
    start and load time, batch size, in flight, and the frontends seen lately when asked."""
    cold = state.served == 0
    state.served += 1
    headers: dict[str, str] = {
        COMPUTE_MS: f"{compute_ms:.3f}",
        COLD_START: "1" if cold else "0",
        PROCESS_START: f"{state.process_start:.6f}",
        MODEL_LOAD_MS: f"{state.load_ms:.1f}",
        BATCH_SIZE: str(size),
        IN_FLIGHT: str(in_flight),
    }
    frontend = request.headers.get(FRONTEND_ID)
    if frontend:
        now = time.monotonic()
        state.frontends.seen(frontend[:128], now)
        window = parse_window(request.headers.get(FRONTEND_WINDOW_S))
        headers[FRONTENDS] = str(state.frontends.count(now, window))
    return headers


def create_app(
    models: Model | Sequence[Model], *, name: str | None = None, max_in_flight: int | None = None
) -> Starlette:
    """Build the V1 and V2 app for one model or several; ``name`` is the path name of a single
    model (default: its kind; several models are served under their kinds, which must differ).
    ``max_in_flight``: predicts held at once, past which one is answered 429 at once (None: any
    number wait their turn on the worker thread)."""
    if max_in_flight is not None and (isinstance(max_in_flight, bool) or max_in_flight < 1):
        raise ValueError(f"max_in_flight must be an integer >= 1 or None, got {max_in_flight!r}")
    held = [models] if isinstance(models, Model) else list(models)
    if not held:
        raise ValueError("create_app needs at least one model")
    if name is not None and len(held) > 1:
        raise ValueError("name= applies to a single model; several are served under their kinds")
    worker, started = _Worker(), time.time()
    states: dict[str, _State] = {}
    for model in held:
        key = name or model.kind
        if key in states:
            raise ValueError(f"model {key!r} given twice")
        states[key] = _State(model=model, name=key, process_start=started, worker=worker)
    h = _Handlers(states, max_in_flight)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        loaders = [loop.run_in_executor(worker.executor, _load, s) for s in states.values()]
        try:
            yield
        finally:
            for loader in loaders:
                loader.cancel()
            worker.executor.shutdown(wait=False, cancel_futures=True)

    routes = [
        Route("/v1/models/{name}:predict", h.predict, methods=["POST"]),
        Route("/v1/models/{name}", h.ready, methods=["GET"]),
        Route("/v1/models", h.listing, methods=["GET"]),
        # the Open Inference Protocol (V2), for KServe V2, Triton and MLServer clients
        Route("/v2/models/{name}/infer", h.predict, methods=["POST"]),
        Route("/v2/models/{name}/ready", h.ready, methods=["GET"]),
        Route("/v2/health/live", h.live, methods=["GET"]),
        Route("/v2/health/ready", h.server_ready, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
