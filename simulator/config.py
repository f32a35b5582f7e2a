"""The simulator's YAML config: workload (apps as chains of functions), fleet, load, SLA.

Schema (every key optional unless marked)::

    workload: WL1                     # a label for reports
    profile: cpu                      # cpu | gpu | a directory of <function>.json | a JSON map
    seed: 1
    requests: 100000                  # app requests per run
    rate_rps: 400                     # offered load, Poisson, split over apps by weight
    warmup_fraction: 0.05             # the first arrivals are served but not reported
    service: lognormal                # lognormal (measured median and P95) | deterministic
    policies: [FIFO-NB, ..., GS]      # default: every policy of slackwise_policies.slack.POLICIES
    sla: {max_violation_pct: 1.0}     # the SLA holds when at most this share misses the SLO
    search: {requests: 20000, tolerance: 0.02, low_rps: 1, high_rps: 100000}
    trace: {name: nasa, start_s: 0, duration_s: 600, downsample: 1, step_s: null}
                                      # per-second rates (mean of ``downsample`` source seconds
                                      # per step, each step held ``step_s``: null keeps the
                                      # trace's), scaled so that their peak is rate_rps
                                      # (replaces plain Poisson)
    autoscaling:                      # compare autoscalers on one single-stage app (see
      compare: [clair_a1, clair_a2, minimal_a2, kpa, advisor, swayam, slackwise]  # comparison
      policy: GS                      # the stage policy every run uses
      tick_s: 1.0                     # the clairvoyant scalers' window and decision period
      collect_s: 300                  # ClairA2's lazy collection (Swayam Fig. 9: five minutes)
      bootstrap: clair                # ready replicas at t=0 for kpa/advisor: clair (ClairA2's
                                      # initial count, Swayam's pre-provisioning) or an integer
      window: 1000                    # SLA compliance: windows of this many requests ...
      step: 10                        # ... sliding by this many
      advisor: {burst_u: 2.0, history_s: 500, min_scale_in_gap_s: 60, default_setup_s: 5,
                keep_alive: true, floor_at_current: true}   # advisor_settings.AdvisorSettings
    platform:
      scaling: fixed                  # fixed (nodes per function, warm) | kpa (Knative's KPA)
      autoscaler: {stable-window: 60s, ...}   # config-autoscaler keys, strings (kpa only)
    adapter:
      aimd: false                     # MLProxy AIMD on the batch limit (as the live adapter)
      max_wait_ms: null               # cap on how long a batch waits for company
      estimate_alpha: 0.05            # EWMA weight of the batch-size tracker (GS estimates)
      wait_utilization: 0.7           # wait for company only while one replica is this busy
      latency_model: linear           # linear (GrandSLAM Eq. 2) | curve (the measured per-size
                                      # curve, monotone: LatencyModel.estimate_ms)
      etc_by_input: false             # price each request's stages for its input size class
                                      # (GrandSLAM's ETC per input size: simulator.inputs)
    disturbance: {kind: slow, start_s: 1200, duration_s: 300, factor: 3}
                                      # every replica slowed (or, pause, stopped) for a window,
                                      # as the live experiment's (simulator.disturbance)
    functions:                        # required
      imagenet: {nodes: 10, max_batch: 64, container_concurrency: 1, profile: imagenet,
                 cold_start_s: null, annotations: {...},
                 input_cost: {large: 3.0}}    # one instance of a class, against the profile's
    apps:                             # required
      img_query: {stages: [imagenet, ner, qa], weight: 1, slo_factor: 5,   # or slo_ms
                  inputs: {small: 0.6, large: 0.4}}   # its requests' input-size classes

An app's SLO is ``slo_ms``, or ``slo_factor`` × the sum of its stages' batch-1 median latencies in
the chosen profile set (PowerChief-style, as GrandSLAM §5 takes its SLAs). Every error is a
:class:`slackwise_config.ConfigError` naming the file, the key and the bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from simulator.config_sections import (
    SearchConfig as SearchConfig,
)
from simulator.config_sections import (
    TraceConfig as TraceConfig,
)
from simulator.config_sections import (
    read_batching,
    read_disturbance,
    read_search,
    read_trace,
)
from simulator.config_workload import SimApp, SimFunction, read_workload
from slackwise_config import ConfigError, Reader
from slackwise_config.loader import advisor_settings
from slackwise_config.model import Disturbance
from slackwise_config.reader import read_yaml
from slackwise_config.typed import check_value
from slackwise_core.knative_scaling import AutoscalerConfig
from slackwise_core.scaling_values import ScalingConfigError
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.batching_settings import BatchingSettings
from slackwise_policies.latency import LatencyModelKind
from slackwise_policies.slack import POLICIES, stage_policy

__all__ = [
    "SCALERS",
    "AutoscalingConfig",
    "ConfigError",
    "SearchConfig",
    "SimConfig",
    "TraceConfig",
    "load_sim_config",
    "parse_policies",
    "parse_sim_config",
]

Scaling = Literal["fixed", "kpa"]
#: the autoscalers a comparison can run (simulator.swayam_scalers)
SCALERS = (
    "clair_a1",
    "clair_a2",
    "minimal_a1",
    "minimal_a2",
    "kpa",
    "advisor",
    "swayam",
    "slackwise",
)
#: what a comparison runs unless its config says (the minimal ClairA1 adds little to the minimal
#: ClairA2 and costs as many runs)
DEFAULT_COMPARE = ("clair_a1", "clair_a2", "minimal_a2", "kpa", "advisor", "swayam", "slackwise")
Service = Literal["lognormal", "deterministic"]
#: how ClairA1/A2 find each window's count (``autoscaling.clair_needs``)
ClairNeeds = Literal["simulated", "model"]


@dataclass(frozen=True, kw_only=True)
class AutoscalingConfig:
    """An autoscaler comparison (Swayam Fig. 9): which scalers, and their settings."""

    compare: tuple[str, ...] = DEFAULT_COMPARE
    policy: str = "GS"
    tick_s: float = 1.0
    collect_s: float = 300.0
    #: ready replicas at time 0 for kpa and advisor; None: ClairA2's initial count
    bootstrap: int | None = None
    window: int = 1000
    step: int = 10
    #: how ClairA1/A2 find each window's count: ``simulated`` (the simulator itself,
    #: :mod:`simulator.clairvoyance`) or ``model`` (the analytic percentile model)
    clair_needs: ClairNeeds = "simulated"
    #: re-runs over the trace that add a replica where a window still missed the SLA
    clair_rounds: int = 6
    #: then, for ClairA2, at most this many re-runs trimming it to the minimal count
    #: (:mod:`simulator.clair_trim`: one replica fewer where the provisioning stays the same
    #: without a run, the rest in groups of far-apart windows; 0: no trim)
    clair_trim: int = 0
    advisor: AdvisorSettings = field(default_factory=lambda: AdvisorSettings(enabled=True))


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    source: str
    workload: str
    profile: str
    seed: int
    requests: int
    rate_rps: float
    warmup_fraction: float
    service: Service
    policies: tuple[str, ...]
    max_violation_pct: float
    search: SearchConfig
    scaling: Scaling
    autoscaler: AutoscalerConfig
    aimd: bool
    #: the live adapter's batching settings, from the same keys
    #: (slackwise_policies.batching_settings)
    batching: BatchingSettings
    functions: Mapping[str, SimFunction]
    apps: Mapping[str, SimApp]
    trace: TraceConfig | None = None
    autoscaling: AutoscalingConfig | None = None
    latency_model: LatencyModelKind = "linear"
    etc_by_input: bool = False
    #: every replica slowed or stopped for a window (simulator.disturbance)
    disturbance: Disturbance | None = None
    base_dir: Path = field(default_factory=Path.cwd)


class _SimReader(Reader):
    """The adapter config's reader; a top-level key is named without a leading dot."""

    def fail(self, path: str, message: str) -> ConfigError:
        return super().fail(path.lstrip("."), message)


_TOP = {
    "workload",
    "profile",
    "seed",
    "requests",
    "rate_rps",
    "warmup_fraction",
    "service",
    "policies",
    "sla",
    "search",
    "trace",
    "platform",
    "adapter",
    "functions",
    "apps",
    "autoscaling",
    "disturbance",
}


def _choice(r: Reader, data: Mapping[str, Any], key: str, path: str, kind: Any) -> Any:
    """``key`` of ``data``, one of the Literal ``kind`` (its first value when absent)."""
    where = f"{path}.{key}" if path else key
    return check_value(r, kind, data.get(key, get_args(kind)[0]), where)


def parse_policies(raw: Any, where: str = "policies") -> tuple[str, ...]:
    """Policy names from a list or a comma-separated string; a ValueError names the bad one."""
    if raw is None:
        return tuple(POLICIES)
    items = [p for p in raw.split(",") if p.strip()] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        raise ValueError(f"{where}: must be a non-empty list of policy names, got {raw!r}")
    names = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ValueError(f"{where}[{i}]: must be a policy name, got {item!r}")
        try:
            names.append(stage_policy(item).name)
        except ValueError as exc:
            raise ValueError(f"{where}[{i}]: {exc}") from None
    return tuple(dict.fromkeys(names))


def _policies(r: Reader, raw: Any) -> tuple[str, ...]:
    try:
        return parse_policies(raw)
    except ValueError as exc:
        raise ConfigError(f"{r.source}: {exc}") from None


def _autoscaling(r: Reader, raw: Any, apps: Mapping[str, SimApp]) -> AutoscalingConfig:
    path = "autoscaling"
    data = r.mapping(raw, path)
    r.only(
        data,
        path,
        {
            "compare",
            "policy",
            "tick_s",
            "collect_s",
            "bootstrap",
            "window",
            "step",
            "clair_needs",
            "clair_rounds",
            "clair_trim",
            "advisor",
        },
    )
    if len(apps) != 1 or len(next(iter(apps.values())).stages) != 1:
        raise r.fail(
            "apps",
            "an autoscaling comparison needs exactly one app with one stage "
            f"(the clairvoyant scalers read its arrivals), got {len(apps)} app(s)",
        )
    compare = data.get("compare", list(DEFAULT_COMPARE))
    if not isinstance(compare, list) or not compare:
        raise r.fail(f"{path}.compare", f"must be a non-empty list of scalers, got {compare!r}")
    for i, name in enumerate(compare):
        if name not in SCALERS:
            raise r.fail(
                f"{path}.compare[{i}]", f"must be one of {', '.join(SCALERS)}, got {name!r}"
            )
    policy = r.string(data, "policy", path, "GS")
    try:
        policy = stage_policy(policy).name
    except ValueError as exc:
        raise r.fail(f"{path}.policy", str(exc)) from None
    bootstrap_raw = data.get("bootstrap", "clair")
    bootstrap = None
    if bootstrap_raw != "clair":
        bootstrap = r.integer(data, "bootstrap", path, 0, low=0)
    adv = r.mapping(data.get("advisor"), f"{path}.advisor")
    advisor = advisor_settings(r, adv, f"{path}.advisor", enabled=True)
    return AutoscalingConfig(
        compare=tuple(dict.fromkeys(compare)),
        policy=policy,
        tick_s=r.number(data, "tick_s", path, 1.0, low=1e-3),
        collect_s=r.number(data, "collect_s", path, 300.0),
        bootstrap=bootstrap,
        window=r.integer(data, "window", path, 1000, low=1),
        step=r.integer(data, "step", path, 10, low=1),
        clair_needs=_choice(r, data, "clair_needs", path, ClairNeeds),
        clair_rounds=r.integer(data, "clair_rounds", path, 6, low=0),
        clair_trim=r.integer(data, "clair_trim", path, 0, low=0),
        advisor=advisor,
    )


def parse_sim_config(raw: Any, source: str = "<config>", base_dir: Path | None = None) -> SimConfig:
    """Check and freeze a parsed YAML document (see the module docstring)."""
    r = _SimReader(source)
    data = r.mapping(raw, "config")
    r.only(data, "", _TOP)
    platform, autoscaler = _platform(r, data)
    adapter, aimd, by_input = _adapter(r, data)
    batching = read_batching(r, adapter)
    functions, apps = read_workload(r, data, autoscaler)
    max_violation = _max_violation(r, data)
    search = read_search(r, r.mapping(data.get("search"), "search"))
    trace = None if data.get("trace") is None else read_trace(r, r.mapping(data["trace"], "trace"))
    warmup = r.number(data, "warmup_fraction", "", 0.0)
    if warmup >= 1:
        raise r.fail("warmup_fraction", f"must be below 1, got {warmup:g}")
    seed = data.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise r.fail("seed", f"must be an integer, got {seed!r}")
    auto_raw = data.get("autoscaling")
    autoscaling = None if auto_raw is None else _autoscaling(r, auto_raw, apps)
    rate = r.positive(data, "rate_rps", "", 100.0)
    return SimConfig(
        source=source,
        workload=str(data.get("workload", Path(source).stem)),
        profile=r.string(data, "profile", "", "cpu"),
        seed=seed,
        requests=r.integer(data, "requests", "", 100000, low=1),
        rate_rps=rate,
        warmup_fraction=warmup,
        service=_choice(r, data, "service", "", Service),
        policies=_policies(r, data.get("policies")),
        max_violation_pct=max_violation,
        search=search,
        scaling=_choice(r, platform, "scaling", "platform", Scaling),
        autoscaler=autoscaler,
        aimd=aimd,
        batching=batching,
        functions=functions,
        apps=apps,
        trace=trace,
        autoscaling=autoscaling,
        latency_model=_choice(r, adapter, "latency_model", "adapter", LatencyModelKind),
        etc_by_input=by_input,
        disturbance=read_disturbance(r, data.get("disturbance"), trace),
        base_dir=base_dir or Path.cwd(),
    )


def _platform(r: Reader, data: Mapping[str, Any]) -> tuple[Mapping[str, Any], AutoscalerConfig]:
    """``platform``: the section (its ``scaling`` is read with the rest) and Knative's
    autoscaler settings from its ``autoscaler`` keys."""
    platform = r.mapping(data.get("platform"), "platform")
    r.only(platform, "platform", {"scaling", "autoscaler"})
    try:
        autoscaler = AutoscalerConfig.from_config_map(
            r.strings(platform.get("autoscaler"), "platform.autoscaler")
        )
    except ScalingConfigError as exc:
        raise r.fail("platform.autoscaler", str(exc)) from None
    return platform, autoscaler


def _adapter(r: Reader, data: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool, bool]:
    """``adapter``: the section (its batching settings and latency model are read from it),
    and its ``aimd`` and ``etc_by_input`` flags."""
    adapter = r.mapping(data.get("adapter"), "adapter")
    keys = {
        "aimd",
        "max_wait_ms",
        "estimate_alpha",
        "wait_utilization",
        "latency_model",
        "etc_by_input",
    }
    r.only(adapter, "adapter", keys)
    aimd, by_input = adapter.get("aimd", False), adapter.get("etc_by_input", False)
    for key, flag in (("aimd", aimd), ("etc_by_input", by_input)):
        if not isinstance(flag, bool):
            raise r.fail(f"adapter.{key}", f"must be true or false, got {flag!r}")
    return adapter, aimd, by_input


def _max_violation(r: Reader, data: Mapping[str, Any]) -> float:
    """``sla.max_violation_pct``: the share of requests that may miss their SLO, below 100."""
    sla = r.mapping(data.get("sla"), "sla")
    r.only(sla, "sla", {"max_violation_pct"})
    max_violation = r.number(sla, "max_violation_pct", "sla", 1.0)
    if max_violation >= 100:
        raise r.fail("sla.max_violation_pct", f"must be below 100, got {max_violation:g}")
    return max_violation


def load_sim_config(path: str | Path) -> SimConfig:
    """Read and check a simulator config file; every error is a ConfigError naming the file."""
    return parse_sim_config(read_yaml(path), str(path), Path(path).resolve().parent)
