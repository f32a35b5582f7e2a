"""The adapter's HTTP face: ``create_app(config) -> Starlette``.

Routes:

- ``POST /v1/models/{fn}:predict``: V1 protocol, one or more instances per request. The request
  gets ``deadline = arrival + SLO`` (the function's SLO from the config; an ``X-SLO-Ms`` header
  may tighten it), joins the function's queue and is answered with its share of a batch. The
  response carries ``Server-Timing`` (queue, compute, total), ``X-Batch-Size`` and
  ``X-Cold-Start``.
- ``POST /v1/apps/{app}:predict``: the app's chain of functions (GrandSLAM). The request gets
  the app's end-to-end deadline; at each stage the stage policy (``adapter.stage_policy``:
  :mod:`slackwise_policies.slack`) gives it a stage deadline, it joins that function's queue (shared
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

import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware

from adapter.serving.chains import Chain, share_split
from adapter.serving.input_limits import InputLimits
from adapter.serving.platform_view import PlatformView
from adapter.serving.predict_endpoint import PredictEndpoint, PredictMiddleware
from adapter.serving.routes import routes
from adapter.serving.state import AdapterState
from adapter.serving.upstream import Upstream
from adapter.serving.wiring import latency_prior, running
from functions.signature import Signature, signature
from slackwise_config import Config
from slackwise_core.clock import Clock, MonotonicClock
from slackwise_policies.modes import preset
from slackwise_policies.slack import stage_policy

__all__ = ["create_app", "latency_prior"]


def create_app(
    config: Config,
    *,
    view: PlatformView | None = None,
    clock: Clock | None = None,
    records_path: Path | None = None,
    mode: str | None = None,
    upstream: Upstream | None = None,
    advisor: bool | None = None,
) -> Starlette:
    """The adapter for ``config``.

    ``view`` overrides how the platform is reached; ``upstream`` how batches reach every function
    (the one seam: tests of the adapter's own logic inject a fake
    :class:`adapter.serving.upstream.Upstream`; by default batches go as users' do, in process to
    the embedded platform or over the lean HTTP/1.1 client). ``advisor``
    turns the autoscaling advisor on or off whatever ``adapter.advisor.enabled`` says.
    """
    slos: dict[str, float] = {}
    for name in config.functions:
        slo = config.slo_ms(name)
        if slo is None:
            raise ValueError(
                f"{config.source}: function {name!r} has no SLO: set functions.{name}.slo_ms "
                f"or an app with stages [{name}]"
            )
        slos[name] = slo
    policy = stage_policy(config.adapter.stage_policy)
    state = AdapterState(
        config=config,
        clock=clock or MonotonicClock(),
        preset=preset(mode or config.adapter.mode),
        stage_policy=policy,
        slos=slos,
        chains={name: Chain(app, config.functions, policy) for name, app in config.apps.items()},
        ids=itertools.count(1),
    )
    share_split(state.chains)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with running(
            state, view=view, upstream=upstream, records_path=records_path, advisor=advisor
        ):
            yield

    # function predicts are answered ahead of the router (adapter.serving.predict_endpoint)
    body = config.adapter.max_body_bytes
    limits = {
        name: InputLimits.of(f"function {name}", fn.model, body)
        for name, fn in config.functions.items()
    }
    app_limits = {
        name: InputLimits.of(f"app {name}", config.functions[a.stages[0]].model, body)
        for name, a in config.apps.items()
    }
    endpoint = PredictEndpoint(
        state=state,
        slos=slos,
        ids=state.ids,
        max_body_bytes=body,
        limits=limits,
        app_limits=app_limits,
        signatures=signatures(config),
    )
    app = Starlette(
        routes=routes(),
        lifespan=lifespan,
        middleware=[Middleware(PredictMiddleware, endpoint=endpoint)],
    )
    app.state.predict_endpoint = endpoint
    app.state.adapter = state
    return app


def signatures(config: Config) -> dict[str, Signature]:
    """Each function's and each app's V2 signature where its models are kinds of ours (an
    app's input is its first stage's, its outputs its last stage's)."""
    found = {
        name: known
        for name, fn in config.functions.items()
        if (known := signature(fn.model)) is not None
    }
    for name, app in config.apps.items():
        first = signature(config.functions[app.stages[0]].model)
        last = signature(config.functions[app.stages[-1]].model)
        if first is not None and last is not None and name not in found:
            found[name] = Signature(first.input, last.outputs, first.records)
    return found
