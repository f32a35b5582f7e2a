"""The adapter's routes besides function predicts (which :mod:`adapter.serving.predict_endpoint`
answers ahead of the router): app predicts through a chain, status, health and metrics. Each
reads the running adapter from ``request.app.state.adapter``."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapter.serving.dispatcher import Dispatcher
from adapter.serving.errors import AdapterError, UnknownTarget
from adapter.serving.input_limits import InputLimits
from adapter.serving.pending import Answer, Pending
from adapter.serving.predict_endpoint import (
    PredictEndpoint,
    check_reachable,
    parse_body,
    parse_v2_body,
    slo_ms,
    traceparent,
)
from adapter.serving.state import AdapterState
from functions.headers import SLO
from functions.v2_answer import BINARY_HEADER

__all__ = ["function_status", "health", "routes", "version"]

_JSON = (b"content-type", b"application/json")


async def _read_body(request: Request, limits: InputLimits) -> bytes:
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise limits.too_large(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise limits.too_large()
        chunks.append(chunk)
    return b"".join(chunks)


async def _until_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _await_answer(
    dispatchers: dict[str, Dispatcher], request: Request, item: Pending
) -> Answer | None:
    """The request's answer, or None if the client went away first (then it leaves the queue)."""
    watcher: asyncio.Future[Any] = asyncio.ensure_future(_until_disconnect(request))
    answer: asyncio.Future[Any] = item.future
    try:
        await asyncio.wait({answer, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not item.future.done():
        dispatchers[item.function].withdraw(item)
        return None
    return item.future.result()


def _error(exc: AdapterError) -> JSONResponse:
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in exc.headers()[1:]}
    return JSONResponse({"error": exc.reason}, status_code=exc.status, headers=headers)


async def app_predict(request: Request) -> Response:
    state: AdapterState = request.app.state.adapter
    name = request.path_params["name"]
    chain = state.chains.get(name)
    try:
        if chain is None:
            raise UnknownTarget(f"no app named {name!r}")
        endpoint: PredictEndpoint = request.app.state.predict_endpoint
        limits = endpoint.limits_of("POST", request.url.path)
        body = await _read_body(request, limits)
        asked = None  # a V2 infer (/v2/models/{app}/infer): what it asks of its answer
        if request.url.path.endswith("/infer"):
            header_length = request.headers.get(BINARY_HEADER)
            instances, asked = parse_v2_body(body, header_length, endpoint.signatures.get(name))
        else:
            instances = parse_body(body)
        limits.check_count(len(instances))
        slo = slo_ms(request.headers.get(SLO), chain.app.slo_ms)
        if SLO in request.headers and chain.judged(state.dispatchers):
            check_reachable(slo, chain.bare_ms(state.dispatchers), f"app {name}")
        assert state.records is not None
        result = await chain.run(
            instances,
            slo,
            dispatchers=state.dispatchers,
            await_answer=functools.partial(_await_answer, state.dispatchers, request),
            clock=state.clock,
            ids=state.ids,
            records=state.records,
            epoch=state.epoch,
            trace=traceparent(request.headers.get("traceparent")),
            metrics=state.metrics,
            input_bytes=len(body) / max(1, len(instances)),
        )
    except AdapterError as exc:
        return _error(exc)
    if result is None:
        return Response(status_code=499)
    total_ms = (state.clock.now() - result.arrival) * 1000.0
    if asked is None:
        return JSONResponse({"predictions": result.predictions}, headers=result.headers(total_ms))
    status, headers, content = endpoint.v2_answer(name, result.predictions, asked, [_JSON])
    media = dict(headers).pop(b"content-type").decode("latin-1")
    extra = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers[1:]}
    return Response(
        content, status, headers={**result.headers(total_ms), **extra}, media_type=media
    )


async def app_status(request: Request) -> Response:
    state: AdapterState = request.app.state.adapter
    name = request.path_params["name"]
    chain = state.chains.get(name)
    if chain is None:
        return _error(UnknownTarget(f"no app named {name!r}"))
    app = chain.app
    return JSONResponse(
        {
            "name": name,
            "stages": list(app.stages),
            "slo_ms": app.slo_ms,
            "percentile": app.percentile,
            "stage_policy": state.stage_policy.name,
            "estimates_ms": [
                round(e, 2) for e in chain.estimates(state.dispatchers, now=state.clock.now())
            ],
            "stage_budgets_ms": chain.budgets_ms(state.dispatchers, state.clock.now()),
            "in_flight": chain.in_flight,
            "crowd": chain.crowding.status(state.clock.now(), app.slo_ms / 1000.0),
        }
    )


async def model_status(request: Request) -> Response:
    state: AdapterState = request.app.state.adapter
    name = request.path_params["name"]
    if name.endswith(":predict"):  # POSTs to it never reach the router (PredictMiddleware)
        return JSONResponse(
            {"error": f"{request.method} is not allowed here: predicts are POST"},
            status_code=405,
            headers={"allow": "POST"},
        )
    status, doc = function_status(state, name)
    return JSONResponse(doc, status_code=status)


def function_status(state: AdapterState, name: str) -> tuple[int, dict[str, Any]]:
    """``GET /v1/models/{name}``: status and JSON document (sync: the adapter's own server
    answers it from the parser's callback, ahead of everything the loop has queued)."""
    dispatcher = state.dispatchers.get(name)
    if dispatcher is None:
        return 404, {"error": f"no function named {name!r}"}
    assert state.view is not None
    counts = state.view.replicas(name)
    return 200, {
        "name": name,
        "ready": True,
        "slo_ms": state.slos[name],
        "queue": len(dispatcher.queue),
        "inflight_batches": dispatcher.inflight,
        "aimd_limit": dispatcher.aimd.limit,
        "replicas": {"ready": counts.ready, "desired": counts.desired},
        "advisor": (
            state.autoscaling.functions[name].status() if state.autoscaling is not None else None
        ),
        # the CPU cores ROMA's controller set for it (None: not controlled, or not yet)
        "cores": state.cores.cores.get(name) if state.cores is not None else None,
        # requests served on ROMA's GPU executable (None: it does not serve this function)
        "gpu_served": state.gpu.served.get(name) if state.gpu is not None else None,
        # what an input's size costs it, learnt (None: adapter.etc_by_input is off)
        "input_cost": None if (cost := dispatcher.controller.input_cost) is None else cost.status(),
        # what the door judges by: its refusals, how much later than expected its admitted
        # requests have been finishing (the allowance it adds), the queue's measured pace
        "door": dispatcher.controller.door_status(state.clock.now())
        | {"refused": dispatcher.door.refused},
    }


def health(state: AdapterState) -> dict[str, Any]:
    """``GET /healthz`` (and V2's ready): the adapter answers, in this mode."""
    return {"ok": True, "mode": state.preset.name}


async def healthz(request: Request) -> Response:
    return JSONResponse(health(request.app.state.adapter))


async def model_list(request: Request) -> Response:
    """KServe V1's list of models: every function this adapter fronts."""
    state: AdapterState = request.app.state.adapter
    return JSONResponse({"models": sorted(state.config.functions)})


async def live(request: Request) -> Response:
    """V2 liveness: the adapter answers."""
    return JSONResponse({"live": True})


def version() -> str:
    """The installed project's version (``(not installed)`` when run from a bare checkout)."""
    from importlib import metadata

    try:
        return metadata.version("slackwise")
    except metadata.PackageNotFoundError:
        return "(not installed)"


#: the V2 extensions the adapter speaks (Triton's and KServe's names)
V2_EXTENSIONS = ["binary_tensor_data"]


async def v2_server(request: Request) -> Response:
    """V2 server metadata."""
    return JSONResponse({"name": "slackwise", "version": version(), "extensions": V2_EXTENSIONS})


async def v2_model(request: Request) -> Response:
    """V2 model metadata (``GET /v2/models/{name}``) and readiness (``.../ready``) of a function
    or an app this adapter fronts: ready to take requests (a cold one starts a replica for
    them); an app's input is its first stage's, its outputs its last stage's."""
    state: AdapterState = request.app.state.adapter
    endpoint: PredictEndpoint = request.app.state.predict_endpoint
    name = request.path_params["name"]
    if name not in state.dispatchers and name not in state.chains:
        return _error(UnknownTarget(f"no function or app named {name!r}"))
    if request.url.path.endswith("/ready"):
        return JSONResponse({"name": name, "ready": True})
    if name in state.dispatchers:
        platform = f"slackwise/{state.config.functions[name].model}"
    else:
        platform = "slackwise/app:" + ">".join(state.chains[name].app.stages)
    known = endpoint.signatures.get(name)
    if known is None:  # another system's model: its outputs as its last answer gave them
        outputs = [spec.metadata() for spec in endpoint.outputs_of(name)]
        return JSONResponse(
            {"name": name, "versions": [], "platform": platform, "inputs": [], "outputs": outputs}
        )
    return JSONResponse(known.metadata(name, platform))


async def metrics(request: Request) -> Response:
    state: AdapterState = request.app.state.adapter
    scaling = state.autoscaling
    if state.view is not None:  # the replica counts, as they are when scraped
        gauge = state.metrics.replicas
        for name in state.dispatchers:
            counts = state.view.replicas(name)
            gauge.labels(function=name, count="ready").set(counts.ready)
            gauge.labels(function=name, count="desired").set(counts.desired)
            auto = scaling.functions.get(name) if scaling is not None else None
            if scaling is not None and auto is not None and auto.pinned is not None:
                kind = "owned" if scaling.owns else "floor"
                gauge.labels(function=name, count=kind).set(auto.pinned)
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")


def routes() -> list[Route]:
    return [
        Route("/v1/apps/{name}:predict", app_predict, methods=["POST"]),
        Route("/v1/apps/{name}", app_status, methods=["GET"]),
        Route("/v1/models/{name}", model_status, methods=["GET"]),
        Route("/v1/models", model_list, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/v2/health/live", live, methods=["GET"]),
        Route("/v2/health/ready", healthz, methods=["GET"]),
        Route("/v2", v2_server, methods=["GET"]),
        Route("/v2/models/{name}", v2_model, methods=["GET"]),
        Route("/v2/models/{name}/ready", v2_model, methods=["GET"]),
        Route("/v2/models/{name}/infer", app_predict, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
