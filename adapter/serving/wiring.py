"""Everything with a lifetime, started and torn down with the app: the HTTP client, the platform
(the embedded local one, a remote one at ``adapter.platform_url``, or Knative Services), the
upstream, the record writer, one dispatcher per function and the autoscaling advisor."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx

from adapter.serving import routes
from adapter.serving.advisor_loop import Autoscaling
from adapter.serving.cores import CoreControl
from adapter.serving.dispatcher import Dispatcher
from adapter.serving.gpu_route import GpuRoute
from adapter.serving.memory import MemoryTrim
from adapter.serving.platform_view import (
    LocalView,
    PlatformUnreachable,
    PlatformView,
    RemoteView,
    RoutedView,
    StaticView,
)
from adapter.serving.probe_port import ProbePort, Snapshot
from adapter.serving.protocols import codec_for
from adapter.serving.records import RecordWriter
from adapter.serving.state import AdapterState
from adapter.serving.upstream import HttpUpstream, PlatformUpstream, RoutedUpstream, Upstream
from slackwise_config import Config
from slackwise_policies.input_cost import InputCost
from slackwise_policies.latency import LatencyModel

__all__ = ["latency_prior", "running"]

logger = logging.getLogger(__name__)

#: the prior when a model has no profile: 5 ms + 1 ms per instance, refined by the first batches
_FALLBACK_PRIOR = (5.0, 1.0)


@contextlib.asynccontextmanager
async def running(
    state: AdapterState,
    *,
    view: PlatformView | None,
    upstream: Upstream | None,
    records_path: Path | None,
    advisor: bool | None,
) -> AsyncIterator[None]:
    """The adapter's parts for ``state.config``, running until the block exits."""
    config = state.config
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx.AsyncClient(
                trust_env=False,
                limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            )
        )
        state.view = view
        if state.view is None and config.adapter.platform == "knative":
            state.view = await _knative_view(config, stack)
        if state.view is None:
            if config.adapter.platform_url:
                remote = RemoteView(config.adapter.platform_url, client, clock=state.clock)
                await remote.start()
                stack.push_async_callback(remote.stop)
                state.view = remote
            else:
                from knative.local.platform import LocalPlatform

                platform = await stack.enter_async_context(LocalPlatform(config))
                state.view = LocalView(platform)
        _route_fixed(config, state)
        if upstream is None:
            upstream = _upstream(config, state, client)
        stack.push_async_callback(upstream.aclose)
        path = records_path or (Path(config.adapter.records) if config.adapter.records else None)
        state.records = RecordWriter(path)
        state.records.start()
        stack.push_async_callback(state.records.stop)
        state.lag.start()
        stack.push_async_callback(state.lag.stop)
        trim = MemoryTrim()  # a burst's freed heap goes back to the system
        trim.start()
        stack.push_async_callback(trim.stop)
        state.epoch = state.clock.now()
        _dispatchers(state, upstream)
        if config.adapter.probe_port is not None:
            state.probes = _probe_port(state)
            state.probes.start()
            stack.push_async_callback(state.probes.stop)
            logger.info(
                "probes on http://%s:%d (a thread of their own)",
                config.adapter.host,
                state.probes.port,
            )
        if config.adapter.advisor.enabled if advisor is None else advisor:
            state.autoscaling = _autoscaling(config, state, state.slos)
            for dispatcher in state.dispatchers.values():
                dispatcher.advised_by(state.autoscaling, state.frontend_id)
            state.autoscaling.start()
            stack.push_async_callback(state.autoscaling.stop)
        if config.adapter.cores.enabled:
            state.cores = _cores(config, state)
            for name in state.cores.names:
                state.dispatchers[name].observers.append(state.cores)
            state.cores.start()
            stack.push_async_callback(state.cores.stop)
        if config.adapter.gpu.url:
            state.gpu = _gpu_route(config, state, client)
            for name in state.gpu.names:
                state.dispatchers[name].gpu = state.gpu
                state.dispatchers[name].observers.append(state.gpu)
            stack.push_async_callback(state.gpu.stop)
        for dispatcher in state.dispatchers.values():
            dispatcher.start()
        try:
            yield
        finally:
            await asyncio.gather(*(d.stop() for d in state.dispatchers.values()))


def _probe_port(state: AdapterState) -> ProbePort:
    """Health and every function's status, published from the loop, served by a thread."""
    adapter = state.config.adapter
    assert adapter.probe_port is not None

    def documents() -> Snapshot:
        out: Snapshot = {"/healthz": (200, routes.health(state))}
        for name in state.dispatchers:
            out[f"/v1/models/{name}"] = routes.function_status(state, name)
        return out

    return ProbePort(adapter.host, adapter.probe_port, documents, hosts=[adapter.host])


def _dispatchers(state: AdapterState, upstream: Upstream) -> None:
    """One dispatcher per function, each with its AIMD, latency prior and batching settings; a
    function in a chain of several stages takes the stage policy."""
    config = state.config
    assert state.view is not None and state.records is not None
    tuned = state.preset.with_aimd(config.adapter.aimd)
    chained = {fn for app in config.apps.values() if len(app.stages) > 1 for fn in app.stages}
    batching = config.adapter.batching
    for name, fn in config.functions.items():
        state.dispatchers[name] = Dispatcher(
            function=fn,
            preset=state.preset,
            aimd=tuned.aimd_for(fn.max_batch),
            model=latency_prior(
                fn.model, curve=config.adapter.latency_model == "curve", device=fn.device
            ),
            view=state.view,
            upstream=upstream,
            clock=state.clock,
            metrics=state.metrics,
            records=state.records,
            max_queue=config.adapter.max_queue,
            epoch=state.epoch,
            settings=batching,
            stage_policy=state.stage_policy if name in chained else None,
            lag=state.lag,
        )
        if config.adapter.etc_by_input:
            state.dispatchers[name].controller.input_cost = InputCost()


def latency_prior(
    kind: str, profiles_dir: Path | None = None, *, curve: bool = False, device: str = "cpu"
) -> LatencyModel:
    """A latency model seeded from the shipped profile of ``kind`` on the function's device
    (``cpu``, or the ``gpu`` tree for ``cuda``; see :mod:`functions.profiles`) or
    ``profiles_dir/KIND.json``, when there is one; ``curve`` makes it follow the measured
    per-batch-size curve once it has samples. A GPU function with no GPU profile starts from
    the fallback and learns online: a CPU profile would cap its batches at what a CPU carries."""
    from functions.profile_format import ProfileFormatError, load_profile
    from functions.profiles import Device, packaged

    tree: Device = "cpu" if device == "cpu" else "gpu"
    path = packaged(kind, tree) if profiles_dir is None else profiles_dir / f"{kind}.json"
    if kind and path.is_file():  # no kind: served by another system, learned online
        try:
            profile = load_profile(path)
            fit = profile.linear_fit
            stats = profile.http or profile.inprocess
            return LatencyModel.from_prior(
                max(fit.a_ms, 0.1),
                max(fit.b_ms_per_item, 0.0),
                curve=curve,
                prior_curve={n: s.median for n, s in stats.items()},
            )
        except ProfileFormatError as exc:
            logger.warning("ignoring profile %s: %s", path, exc)
    return LatencyModel.from_prior(*_FALLBACK_PRIOR, curve=curve)


async def _knative_view(config: Config, stack: contextlib.AsyncExitStack) -> PlatformView:
    """Knative Services in the adapter's namespace, through the pod's service account (or the
    kubeconfig in ``KUBECONFIG`` when the adapter runs outside the cluster)."""
    import os

    from kubernetes.config.config_exception import ConfigException

    from knative.cluster.connection import connect, connect_in_cluster
    from knative.cluster.view import KnativeView

    settings = config.adapter
    version = settings.serving_version
    try:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not settings.kubeconfig:
            namespace = settings.namespace or _pod_namespace()
            client = await asyncio.to_thread(connect_in_cluster, namespace, serving_version=version)
        else:
            client = await asyncio.to_thread(
                connect,
                settings.namespace,
                kubeconfig=settings.kubeconfig,
                context=settings.kube_context,
                serving_version=version,
            )
    except (ConfigException, OSError) as exc:
        raise PlatformUnreachable(
            f"platform knative: no usable kubeconfig ({exc}); set KUBECONFIG or --kubeconfig "
            "to a cluster's config, or run the adapter inside the cluster"
        ) from None
    services = {name: fn.service for name, fn in config.functions.items() if not fn.upstream.url}
    view = KnativeView(client, services, ingress=config.adapter.ingress)
    await view.start()
    stack.push_async_callback(view.stop)
    return view


def _route_fixed(config: Config, state: AdapterState) -> None:
    """A function at a fixed URL (``upstream.url``) is asked of no platform: its replicas are
    the URL's."""
    fixed = {n: fn.upstream.url for n, fn in config.functions.items() if fn.upstream.url}
    if fixed:
        assert state.view is not None
        state.view = RoutedView(state.view, StaticView(fixed), set(fixed))


def _upstream(config: Config, state: AdapterState, client: httpx.AsyncClient) -> Upstream:
    """How batches reach each function: in process to the embedded local platform, over HTTP
    otherwise; a function at a fixed URL (``upstream.url``) or spoken to in V2 over HTTP always,
    at its own path."""
    view = state.view
    assert view is not None
    paths = {
        name: codec_for(fn.upstream.protocol, fn.model_name).path
        for name, fn in config.functions.items()
    }
    http = HttpUpstream(view, client, paths=paths)
    base = view.base if isinstance(view, RoutedView) else view
    if not isinstance(base, LocalView):
        return http
    special = {
        n for n, fn in config.functions.items() if fn.upstream.url or fn.upstream.protocol != "v1"
    }
    return RoutedUpstream(PlatformUpstream(base.platform), {n: http for n in special})


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
    d = state.dispatchers

    def overdue(name: str, now: float) -> int:
        """Queued past the deadline, not waiting for a cold start: evidence of a stall."""
        return sum(
            1
            for p in d[name].queue.items
            if not p.cancelled and not p.arrived_cold and p.deadline < now
        )

    return Autoscaling(
        settings=config.adapter.advisor,
        functions=config.functions,
        slos=slos,
        models={name: d.model for name, d in state.dispatchers.items()},
        limits={name: d.current_limit for name, d in state.dispatchers.items()},
        view=state.view,
        clock=state.clock,
        percentiles=percentiles,
        owner=state.frontend_id,
        overdue=overdue,
    )


def _cores(config: Config, state: AdapterState) -> CoreControl:
    """ROMA's CT controllers over the CPU functions; each reads its dispatcher's oldest queued
    request and its latency model's one-request time."""
    assert state.view is not None
    d = state.dispatchers

    def oldest(name: str) -> Callable[[], float | None]:
        return lambda: min(
            (p.arrival for p in d[name].queue.items if not p.cancelled), default=None
        )

    def work_s(name: str) -> Callable[[], float]:
        return lambda: d[name].model.estimate_ms(1) / 1000.0

    names = list(config.functions)
    return CoreControl(
        settings=config.adapter.cores,
        functions=config.functions,
        slos_ms=state.slos,
        oldest={n: oldest(n) for n in names},
        work_s={n: work_s(n) for n in names},
        view=state.view,
        clock=state.clock,
    )


def _gpu_route(config: Config, state: AdapterState, client: httpx.AsyncClient) -> GpuRoute:
    """ROMA's GPU executable at ``adapter.gpu.url``, each function at its model's path there."""
    settings = config.adapter.gpu
    assert settings.url is not None
    names = settings.functions
    paths = {n: f"/v1/models/{config.functions[n].model}:predict" for n in names}
    upstream = HttpUpstream(StaticView(dict.fromkeys(names, settings.url)), client, paths=paths)
    return GpuRoute(
        settings=settings,
        upstream=upstream,
        dispatchers=state.dispatchers,
        slos_ms=state.slos,
        clock=state.clock,
    )
