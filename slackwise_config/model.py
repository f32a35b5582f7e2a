"""The deployment's typed model: platform, functions, apps, the adapter and an experiment.

Frozen data, built by :mod:`slackwise_config.loader`; live runs and the simulator read it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from slackwise_config.cores import CoreSettings
from slackwise_config.gpu import GpuSettings
from slackwise_config.hpa import HpaSettings
from slackwise_core.knative_scaling import AutoscalerConfig, ScalingSpec
from slackwise_policies.admission import Late
from slackwise_policies.advisor_config import DEFAULT_PERCENTILE
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.batching_settings import BatchingSettings
from slackwise_policies.latency import LatencyModelKind
from slackwise_policies.modes import ModeName

NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
VARIANTS = ("cpu", "gpu")
#: where the functions run: this machine's platform (``slackwise up``) or a Knative cluster
Platform = Literal["local", "knative"]
PLATFORMS: tuple[Platform, ...] = get_args(Platform)


@dataclass(frozen=True, kw_only=True)
class Resources:
    """Kubernetes resource requests and limits for one function container."""

    requests: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class UpstreamConfig:
    """Who serves a function and how it is spoken to (``functions.X.upstream``).

    ``protocol``: ``v1`` (KServe V1, ours) or ``v2`` (Open Inference Protocol); ``service``: the
    platform's name for it (Knative Service; a KServe InferenceService ``m`` is ``m-predictor``),
    default the function's name; ``model``: the model name in the path, default the function's
    name; ``url``: a fixed endpoint (the platform neither starts nor scales it); ``input`` and
    ``output``: the V2 tensor names (no ``output``: every output, a row a record of them when
    there are several); ``binary_data``: V2 batches go out as binary tensor data and ask for
    their outputs so (Triton, KServe; MLServer speaks JSON only).
    """

    protocol: str = "v1"
    service: str | None = None
    model: str | None = None
    url: str | None = None
    input: str = "input-0"
    output: str | None = None
    binary_data: bool = False


#: a function's largest batch unless its config says (the live adapter's and the simulator's)
DEFAULT_MAX_BATCH = 64


@dataclass(frozen=True, kw_only=True)
class FunctionConfig:
    """One function: which model, how it runs, and its Knative scaling annotations."""

    name: str
    #: the built-in model kind; empty for a function another system serves (a KServe
    #: InferenceService, Triton, any V2 server at ``upstream``): its latency is learned online
    model: str
    variant: str = "cpu"
    #: where the model computes: cpu, cuda or cuda:N (functions.device)
    device: str = "cpu"
    threads: int = 1
    max_batch: int = DEFAULT_MAX_BATCH
    container_concurrency: int = 1
    timeout_s: int = 300
    cold_start_extra_s: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    image: str | None = None
    slo_ms: float | None = None
    #: serve | prune | predict; None: the serving mode's own (slackwise: predict, mlproxy: serve)
    late: Late | None = None
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    scaling: ScalingSpec

    @property
    def service(self) -> str:
        """The platform's name for this function (its Knative Service)."""
        return self.upstream.service or self.name

    @property
    def model_name(self) -> str:
        """The model's name in the upstream's paths."""
        return self.upstream.model or self.name


@dataclass(frozen=True, kw_only=True)
class AppConfig:
    """A chain of functions with one end-to-end latency SLO at a percentile."""

    name: str
    stages: tuple[str, ...]
    slo_ms: float
    percentile: float = DEFAULT_PERCENTILE


@dataclass(frozen=True, kw_only=True)
class PlatformConfig:
    """The local platform: where its gateway listens and how the activator buffers."""

    host: str = "127.0.0.1"
    port: int = 0
    queue_depth: int = 1000
    request_timeout_s: float = 60.0
    ready_timeout_s: float = 120.0
    drain_timeout_s: float = 30.0
    #: the CFS period of the CPU quotas ``set_cores`` writes (a request at a fractional quota
    #: can stall for up to ``(1 - cores) x period``; shorter periods cut that stall)
    cpu_period_ms: float = 100.0
    #: how far above the platform's niceness a replica runs until it is ready, so that its start
    #: yields the CPU to the serving ones (knative.local.priority); 0 is off; ``auto``, the
    #: default, yields (10) only when the replica brings no CPU the ready ones do not already
    #: hold, so it can relieve nobody before they idle (docs/advisor.md)
    starting_nice: int | Literal["auto"] = "auto"
    #: how many replicas (of all functions) may load at once; the rest wait their turn, as pods
    #: wait Pending for a node with room. None, the default: no limit (one at a time on two
    #: cores delayed the KPA's second replica at a cold start by its first's load and spared
    #: nothing measurable in the eightfold input step: docs/advisor.md)
    max_starting: int | None = None
    autoscaler: AutoscalerConfig = field(default_factory=AutoscalerConfig)


@dataclass(frozen=True, kw_only=True)
class AdapterConfig:
    """The adapter in front of the functions."""

    host: str = "127.0.0.1"
    port: int = 8700
    #: health and function status on a port of their own, served by a thread that never waits
    #: for the loop (adapter.serving.probe_port); None: off, 0: a free port
    probe_port: int | None = None
    mode: ModeName = "slackwise"
    max_queue: int = 10000
    max_body_bytes: int = 16 * 1024 * 1024
    records: str | None = None
    platform_url: str | None = None
    #: where the functions run: the local platform, or Knative Services in ``namespace``
    platform: Platform = "local"
    namespace: str | None = None
    #: Knative Serving's version on the cluster (e.g. ``1.23``): the adapter needs >= 1.21 to
    #: set a revision's scale, and reading it from the cluster is a cluster-scoped read the
    #: adapter's namespaced Role does not grant; unset, the adapter tries and, refused, says so
    serving_version: str | None = None
    #: knative, outside a cluster: the kubeconfig file and context (default: KUBECONFIG or
    #: ~/.kube/config, its current context); the namespace defaults to the context's
    kubeconfig: str | None = None
    kube_context: str | None = None
    ingress: str | None = None
    #: ``max_wait_ms``, ``wait_utilization`` and ``path_margin_ms``, keys of ``adapter`` itself
    #: (slackwise_policies.batching_settings, the one place their defaults are written)
    batching: BatchingSettings = field(default_factory=BatchingSettings)
    #: how chains split their SLO over stages and batch (GS, ED-*, EDF-*, FIFO-NB:
    #: slackwise_policies.slack)
    stage_policy: str = "GS"
    #: how a batch's time is estimated: ``linear`` (GrandSLAM Eq. 2, a + b·n) or ``curve`` (the
    #: measured median per batch size, monotone; slackwise_policies.latency)
    latency_model: LatencyModelKind = "linear"
    #: price a request's stages for its input's size (GrandSLAM's ETC per input size), learnt
    #: per function from its batches (slackwise_policies.input_cost); off: every request as the mix
    etc_by_input: bool = False
    #: the ``adapter.aimd`` keys given, over the mode's own :class:`AIMDSettings`
    #: (:meth:`slackwise_policies.modes.ModePreset.with_aimd`; checked when loaded)
    aimd: Mapping[str, Any] = field(default_factory=dict)
    advisor: AdvisorSettings = field(default_factory=AdvisorSettings)
    #: ROMA's CT controllers over the CPU functions' cores (slackwise_config.cores)
    cores: CoreSettings = field(default_factory=CoreSettings)
    #: ROMA's GPU executable in front of the CPU replicas (slackwise_config.gpu)
    gpu: GpuSettings = field(default_factory=GpuSettings)
    #: on a cluster, the HorizontalPodAutoscaler over the adapter's Deployment
    #: (slackwise_config.hpa)
    hpa: HpaSettings = field(default_factory=HpaSettings)


#: ``slackwise`` is the whole system (batching, and the advisor owning capacity); ``slackwise-kpa``
#: the same batching with the platform's KPA deciding the count (the ablation)
EXPERIMENT_MODES = ("direct", "mlproxy", "slackwise", "slackwise-kpa")
#: the adapter with the advisor as a floor under the KPA (not run unless asked for)
ADVISOR_MODE = "slackwise+advisor"
#: ``slackwise-headroom-X``: the owned count with ``advisor.headroom: X`` (a number >= 0)
HEADROOM_MODE = "slackwise-headroom-"


def headroom_of(mode: str) -> float | None:
    """The headroom a ``slackwise-headroom-X`` mode names, or None for any other mode."""
    if not mode.startswith(HEADROOM_MODE):
        return None
    try:
        value = float(mode[len(HEADROOM_MODE) :])
    except ValueError:
        return None
    return value if 0.0 <= value < float("inf") else None


#: an app experiment compares stage policies by default (GrandSLAM Figs. 11-12)
APP_EXPERIMENT_MODES = ("FIFO-NB", "ED-DYN", "EDF-DYN", "GS")


#: what an experiment can do to the machine, identically in every mode (docs/advisor.md)
DISTURBANCES = ("cpu", "pause", "slow", "input")


@dataclass(frozen=True, kw_only=True)
class Disturbance:
    """A named disturbance during a window of the replay, from ``start_s`` for ``duration_s``:
    ``cpu`` runs ``cores`` busy processes beside everything (a noisy neighbour), ``pause``
    stops the function's ready replicas (SIGSTOP, then SIGCONT: a stalled node), ``slow``
    throttles every replica of the function to ``1 / factor`` of the CPU time it would take (a
    container's CPU limit, a slower node: its service times ``factor`` times as long), ``input``
    sends requests whose inputs are ``factor`` times the usual size (a step change of input
    size: the model's own larger instances, so the service time grows as the model makes it).
    ``repeat`` windows, one every ``every_s`` (a service that swings again and again)."""

    kind: str
    start_s: float
    duration_s: float
    cores: int = 1
    factor: float = 1.0
    repeat: int = 1
    every_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind == "slow" and not self.factor > 1.0:
            raise ValueError(f"a slow disturbance needs a factor above 1, got {self.factor:g}")
        if self.kind == "input" and not (self.factor >= 2.0 and self.factor == int(self.factor)):
            raise ValueError(
                f"an input disturbance needs a whole factor of at least 2, got {self.factor:g}"
            )
        if self.repeat < 1 or (self.repeat > 1 and not self.every_s > self.duration_s):
            raise ValueError(
                f"a repeated disturbance needs repeat >= 1 and every_s above duration_s, got "
                f"repeat {self.repeat}, every_s {self.every_s:g}"
            )

    @property
    def end_s(self) -> float:
        """The end of the last window."""
        return self.windows()[-1][1]

    def windows(self) -> list[tuple[float, float]]:
        """Each window's (start, end) in seconds of the replay, in order."""
        starts = [self.start_s + k * self.every_s for k in range(self.repeat)]
        return [(start, start + self.duration_s) for start in starts]

    def inside(self, t: float) -> bool:
        """Whether ``t`` falls in one of the windows."""
        return any(start <= t < end for start, end in self.windows())


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """One trace replayed through each mode (``slackwise experiment``), against one function
    or, with ``app``, one chain; an app's modes may be stage policies (``GS``, ``EDF-DYN``...)."""

    function: str | None = None
    app: str | None = None
    trace: str
    max_rps: float
    start_s: float = 0.0
    duration_s: float = 120.0
    step_s: float = 1.0
    seed: int = 1
    modes: tuple[str, ...] = EXPERIMENT_MODES
    settle_s: float = 5.0
    disturbance: Disturbance | None = None


@dataclass(frozen=True, kw_only=True)
class Config:
    """The whole file."""

    source: str
    platform: PlatformConfig
    functions: Mapping[str, FunctionConfig]
    apps: Mapping[str, AppConfig]
    adapter: AdapterConfig = field(default_factory=AdapterConfig)
    experiment: ExperimentConfig | None = None

    def slo_ms(self, function: str) -> float | None:
        """The function's own SLO, else the tightest SLO of a one-stage app that is it, else the
        tightest SLO of any app it is a stage of (a request sent to it alone then gets the
        whole of that chain's budget)."""
        fn = self.functions[function]
        if fn.slo_ms is not None:
            return fn.slo_ms
        own = [a.slo_ms for a in self.apps.values() if a.stages == (function,)]
        if own:
            return min(own)
        chains = [a.slo_ms for a in self.apps.values() if function in a.stages]
        return min(chains) if chains else None


#: who decides a function's replica count when the advisor is on (AdvisorSettings.capacity)
