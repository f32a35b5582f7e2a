"""The adapter's HTTP face: ``create_app(config) -> Starlette``.

Routes:

- ``POST /v1/models/{fn}:predict``: V1 protocol, one or more instances per request. The request
  gets ``deadline = arrival + SLO`` (the function's SLO from the config; an ``X-SLO-Ms`` header
  may tighten it), joins the function's queue and is answered with its share of a batch. The
  response carries ``Server-Timing`` (queue, compute, total), ``X-Batch-Size`` and
  ``X-Cold-Start``.
- ``POST /v1/apps/{app}:predict``: the app's chain of functions (GrandSLAM). The request gets
  the app's end-to-end deadline; at each stage the stage policy (``adapter.stage_policy``:
  :mod:`adapter.policies.slack`) gives it a stage deadline, it joins that function's queue (shared
  by every
  app that uses the function) and rides a batch; its predictions become the next stage's instances
  through the edge adapter between the two kinds (:mod:`functions.edges`). With GS the stage
  budgets
  are proportional to the stages' estimated latencies at the batch sizes in use, re-split when a
  stage finishes (slack forwarding). ``Server-Timing`` has queue, round trip and compute per
  stage. The walk itself is :class:`adapter.serving.chains.Chain`.
- ``GET /v1/models/{fn}``, ``GET /v1/apps/{app}``, ``GET /healthz``, ``GET /metrics``.

Everything with a lifetime (the HTTP client, the platform, the dispatch loops, the record writer)
is created in the lifespan and torn down there. The platform is the embedded local platform unless
one is passed in (tests, experiments) or ``adapter.platform_url`` names a running one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from adapter.policies.latency import LatencyModel
from adapter.policies.modes import preset
from adapter.policies.slack import stage_policy
from adapter.serving.autoscaling import Autoscaling
from adapter.serving.chains import Chain
from adapter.serving.dispatcher import Dispatcher
from adapter.serving.errors import (
    AdapterError,
    PayloadTooLarge,
    UnknownTarget,
)
from adapter.serving.pending import Answer, Pending
from adapter.serving.platform_view import LocalView, PlatformView, RemoteView
from adapter.serving.predict_endpoint import PredictEndpoint, PredictMiddleware, parse_body, slo_ms
from adapter.serving.records import RecordWriter
from adapter.serving.state import AdapterState
from adapter.serving.upstream import HttpUpstream, PlatformUpstream, Upstream
from core.clock import Clock, MonotonicClock
from core.config import Config
from functions.headers import SLO

logger = logging.getLogger(__name__)

#: the prior when a model has no profile: 5 ms + 1 ms per instance, refined by the first batches
_FALLBACK_PRIOR = (5.0, 1.0)


def latency_prior(kind: str, profiles_dir: Path | None = None) -> LatencyModel:
    """A latency model seeded from the shipped profile of ``kind`` (HTTP batch times, see
    :mod:`functions.profiles`) or ``profiles_dir/KIND.json``, when there is one."""
    from functions.profile_format import ProfileFormatError, load_profile
    from functions.profiles import packaged

    path = packaged(kind) if profiles_dir is None else profiles_dir / f"{kind}.json"
    if path.is_file():
        try:
            profile = load_profile(path)
            fit = profile.linear_fit
            return LatencyModel.from_prior(max(fit.a_ms, 0.1), max(fit.b_ms_per_item, 0.0))
        except ProfileFormatError as exc:
            logger.warning("ignoring profile %s: %s", path, exc)
    return LatencyModel.from_prior(*_FALLBACK_PRIOR)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"body of {declared} bytes exceeds the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"body exceeds the limit of {limit} bytes")
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
    return JSONResponse({"error": exc.reason}, status_code=exc.status)


def create_app(
    config: Config,
    *,
    view: PlatformView | None = None,
    clock: Clock | None = None,
    records_path: Path | None = None,
    mode: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    advisor: bool | None = None,
) -> Starlette:
    """The adapter for ``config``.

    ``view`` overrides how the platform is reached; ``transport`` replaces the upstream HTTP
    transport (tests of the adapter's own logic use :class:`httpx.MockTransport`). ``advisor``
    turns the autoscaling advisor on or off whatever ``adapter.advisor.enabled`` says.
    """
    state = AdapterState(config=config, clock=clock or MonotonicClock())
    chosen = preset(mode or config.adapter.mode)
    slos: dict[str, float] = {}
    for name in config.functions:
        slo = config.slo_ms(name)
        if slo is None:
            raise ValueError(
                f"{config.source}: function {name!r} has no SLO: set functions.{name}.slo_ms "
                f"or an app with stages [{name}]"
            )
        slos[name] = slo
    ids = itertools.count(1)

    policy = stage_policy(config.adapter.stage_policy)
    chains = {name: Chain(app, config.functions, policy) for name, app in config.apps.items()}

    async def app_predict(request: Request) -> Response:
        name = request.path_params["name"]
        chain = chains.get(name)
        try:
            if chain is None:
                raise UnknownTarget(f"no app named {name!r}")
            body = await _read_body(request, config.adapter.max_body_bytes)
            instances = parse_body(body)
            slo = slo_ms(request.headers.get(SLO), chain.app.slo_ms)
            assert state.records is not None
            result = await chain.run(
                instances,
                slo,
                dispatchers=state.dispatchers,
                await_answer=functools.partial(_await_answer, state.dispatchers, request),
                clock=state.clock,
                ids=ids,
                records=state.records,
                epoch=state.epoch,
            )
        except AdapterError as exc:
            return _error(exc)
        if result is None:
            return Response(status_code=499)
        total_ms = (state.clock.now() - result.arrival) * 1000.0
        return JSONResponse({"predictions": result.predictions}, headers=result.headers(total_ms))

    async def app_status(request: Request) -> Response:
        name = request.path_params["name"]
        chain = chains.get(name)
        if chain is None:
            return _error(UnknownTarget(f"no app named {name!r}"))
        app = chain.app
        return JSONResponse(
            {
                "name": name,
                "stages": list(app.stages),
                "slo_ms": app.slo_ms,
                "percentile": app.percentile,
                "stage_policy": policy.name,
                "estimates_ms": [round(e, 2) for e in chain.estimates(state.dispatchers)],
                "stage_budgets_ms": chain.budgets_ms(state.dispatchers, state.clock.now()),
            }
        )

    async def model_status(request: Request) -> Response:
        name = request.path_params["name"]
        if name.endswith(":predict"):  # POSTs to it never reach the router (PredictMiddleware)
            return JSONResponse(
                {"error": f"{request.method} is not allowed here: predicts are POST"},
                status_code=405,
                headers={"allow": "POST"},
            )
        dispatcher = state.dispatchers.get(name)
        if dispatcher is None:
            return _error(UnknownTarget(f"no function named {name!r}"))
        assert state.view is not None
        counts = state.view.replicas(name)
        return JSONResponse(
            {
                "name": name,
                "ready": True,
                "slo_ms": slos[name],
                "queue": len(dispatcher.queue),
                "inflight_batches": dispatcher.inflight,
                "aimd_limit": dispatcher.aimd.limit,
                "replicas": {"ready": counts.ready, "desired": counts.desired},
                "advisor": (
                    state.autoscaling.functions[name].status()
                    if state.autoscaling is not None
                    else None
                ),
            }
        )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "mode": chosen.name})

    async def metrics(request: Request) -> Response:
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(
                httpx.AsyncClient(
                    trust_env=False,
                    transport=transport,
                    limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
                )
            )
            state.view = view
            if state.view is None and config.adapter.platform == "knative":
                state.view = await _knative_view(config, stack)
            if state.view is None:
                if config.adapter.platform_url:
                    remote = RemoteView(config.adapter.platform_url, client)
                    await remote.start()
                    stack.push_async_callback(remote.stop)
                    state.view = remote
                else:
                    from knative.local.platform import LocalPlatform

                    platform = await stack.enter_async_context(LocalPlatform(config))
                    state.view = LocalView(platform)
            upstream: Upstream
            if isinstance(state.view, LocalView) and transport is None:
                upstream = PlatformUpstream(state.view.platform)
            else:
                upstream = HttpUpstream(state.view, client, lean=transport is None)
            stack.push_async_callback(upstream.aclose)
            path = records_path or (
                Path(config.adapter.records) if config.adapter.records else None
            )
            state.records = RecordWriter(path)
            state.records.start()
            stack.push_async_callback(state.records.stop)
            state.epoch = state.clock.now()
            tuned = chosen.with_aimd(config.adapter.aimd.overrides())
            chained = {fn for app in config.apps.values() if len(app.stages) > 1
                       for fn in app.stages}  # fmt: skip
            for name, fn in config.functions.items():
                aimd = tuned.aimd_for(fn.max_batch)
                dispatcher = Dispatcher(
                    function=fn,
                    preset=chosen,
                    aimd=aimd,
                    model=latency_prior(fn.model),
                    view=state.view,
                    upstream=upstream,
                    clock=state.clock,
                    metrics=state.metrics,
                    records=state.records,
                    max_queue=config.adapter.max_queue,
                    epoch=state.epoch,
                    max_wait_s=(
                        None
                        if config.adapter.max_wait_ms is None
                        else config.adapter.max_wait_ms / 1000.0
                    ),
                    stage_policy=policy if name in chained else None,
                    wait_utilization=config.adapter.wait_utilization,
                    path_margin_ms=config.adapter.path_margin_ms,
                )
                state.dispatchers[name] = dispatcher
            if config.adapter.advisor.enabled if advisor is None else advisor:
                state.autoscaling = _autoscaling(config, state, slos)
                for dispatcher in state.dispatchers.values():
                    dispatcher.autoscaling = state.autoscaling
                    dispatcher.frontend_id = state.frontend_id
                state.autoscaling.start()
                stack.push_async_callback(state.autoscaling.stop)
            for dispatcher in state.dispatchers.values():
                dispatcher.start()
            try:
                yield
            finally:
                await asyncio.gather(*(d.stop() for d in state.dispatchers.values()))

    routes = [
        Route("/v1/apps/{name}:predict", app_predict, methods=["POST"]),
        Route("/v1/apps/{name}", app_status, methods=["GET"]),
        Route("/v1/models/{name}", model_status, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    # function predicts are answered ahead of the router (adapter.serving.predict_endpoint)
    endpoint = PredictEndpoint(
        state=state, slos=slos, ids=ids, max_body_bytes=config.adapter.max_body_bytes
    )
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(PredictMiddleware, endpoint=endpoint)],
    )
    app.state.predict_endpoint = endpoint
    app.state.adapter = state
    return app


async def _knative_view(config: Config, stack: contextlib.AsyncExitStack) -> PlatformView:
    """Knative Services in the adapter's namespace, through the pod's service account (or the
    kubeconfig in ``KUBECONFIG`` when the adapter runs outside the cluster)."""
    import os

    from knative.cluster.client import connect, connect_in_cluster
    from knative.cluster.view import KnativeView

    namespace = config.adapter.namespace or _pod_namespace()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        client = await asyncio.to_thread(connect_in_cluster, namespace)
    else:
        client = await asyncio.to_thread(connect, namespace)
    view = KnativeView(client, list(config.functions), ingress=config.adapter.ingress)
    await view.start()
    stack.push_async_callback(view.stop)
    return view


def _pod_namespace() -> str:
    path = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    try:
        return path.read_text(encoding="utf-8").strip() or "default"
    except OSError:
        return "default"


def _autoscaling(config: Config, state: AdapterState, slos: dict[str, float]) -> Autoscaling:
    """The advisor over every function; a function's percentile is its tightest app's."""
    assert state.view is not None
    percentiles: dict[str, float] = {}
    for app in config.apps.values():
        for fn in app.stages:
            percentiles[fn] = max(percentiles.get(fn, 0.0), app.percentile)
    return Autoscaling(
        settings=config.adapter.advisor,
        functions=config.functions,
        slos=slos,
        models={name: d.model for name, d in state.dispatchers.items()},
        limits={name: d.current_limit for name, d in state.dispatchers.items()},
        view=state.view,
        clock=state.clock,
        percentiles=percentiles,
    )
