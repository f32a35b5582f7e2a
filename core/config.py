"""The one YAML file that describes a deployment: platform, functions and apps.

Loaded once with :func:`load_config` into frozen objects. Every error is a :class:`ConfigError`
whose message names the file, the key path and the bad value, e.g.
``experiments/local.yaml: functions.digits.container_concurrency: must be >= 0, got -1``.

Example::

    platform:
      port: 8600
      autoscaler: {stable-window: 60s, scale-to-zero-grace-period: 30s}
    functions:
      digits:
        model: digits
        container_concurrency: 1
        annotations: {autoscaling.knative.dev/target: "1"}
    apps:
      digits: {stages: [digits], slo_ms: 100, percentile: 95}
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from core.scaling import AutoscalerConfig, ScalingConfigError, ScalingSpec, resolve_spec

_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
VARIANTS = ("cpu", "gpu")


class ConfigError(ValueError):
    """A bad configuration value; the message names the file, the key and the value."""


@dataclass(frozen=True, kw_only=True)
class Resources:
    """Kubernetes resource requests and limits for one function container."""

    requests: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class FunctionConfig:
    """One function: which model, how it runs, and its Knative scaling annotations."""

    name: str
    model: str
    variant: str = "cpu"
    threads: int = 1
    max_batch: int = 64
    container_concurrency: int = 1
    timeout_s: int = 300
    cold_start_extra_s: float = 0.0
    annotations: Mapping[str, str] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    image: str | None = None
    slo_ms: float | None = None
    late: str = "serve"
    scaling: ScalingSpec


@dataclass(frozen=True, kw_only=True)
class AppConfig:
    """A chain of functions with one end-to-end latency SLO at a percentile."""

    name: str
    stages: tuple[str, ...]
    slo_ms: float
    percentile: float = 95.0


@dataclass(frozen=True, kw_only=True)
class PlatformConfig:
    """The local platform: where its gateway listens and how the activator buffers."""

    host: str = "127.0.0.1"
    port: int = 0
    queue_depth: int = 1000
    request_timeout_s: float = 60.0
    ready_timeout_s: float = 120.0
    drain_timeout_s: float = 30.0
    autoscaler: AutoscalerConfig = field(default_factory=AutoscalerConfig)


MODES = ("slackwise", "mlproxy")
#: what happens to a request that cannot make its deadline: served anyway, answered with 503
#: once its deadline has passed before dispatch, or (Swayam §3.3) refused at admission when the
#: queue ahead of it predicts it will finish late
LATE = ("serve", "prune", "predict")


@dataclass(frozen=True, kw_only=True)
class AIMDConfig:
    """MLProxy's AIMD on the maximum batch size (Algorithm 2), per function."""

    initial: int = 4
    minimum: int = 1
    add: float = 1.0
    mult: float = 0.8
    period_s: float = 30.0
    miss_threshold: float = 0.01
    p95_fraction: float = 0.8
    timeout_ratio_threshold: float = 0.5


@dataclass(frozen=True, kw_only=True)
class AdvisorSettings:
    """The autoscaling advisor (Swayam): pins each function's minimum replicas ahead of demand.

    Off by default; ``slackwise serve --advisor`` or ``enabled: true`` turns it on. The fields
    map onto :class:`adapter.policies.advisor.AdvisorConfig` (see docs/advisor.md).
    """

    enabled: bool = False
    #: seconds between decisions
    tick_s: float = 1.0
    burst_u: float = 2.0
    history_s: float = 500.0
    min_scale_in_gap_s: float = 60.0
    #: the setup time assumed until cold starts have been measured
    default_setup_s: float = 5.0
    #: keep one replica warm across idle gaps the histogram says are short (hybrid keep-alive)
    keep_alive: bool = True
    #: never forecast below the recent rate (a 500 s regression lags a step in load)
    floor_at_current: bool = True


@dataclass(frozen=True, kw_only=True)
class AdapterConfig:
    """The adapter in front of the functions."""

    host: str = "127.0.0.1"
    port: int = 8700
    mode: str = "slackwise"
    max_queue: int = 10000
    max_body_bytes: int = 16 * 1024 * 1024
    records: str | None = None
    platform_url: str | None = None
    #: where the functions run: the local platform, or Knative Services in ``namespace``
    platform: str = "local"
    namespace: str | None = None
    ingress: str | None = None
    max_wait_ms: float | None = None
    #: slackwise mode waits for company only while the slots could not keep up with smaller
    #: batches at this busy fraction (adapter.policies.batching rule 6)
    wait_utilization: float = 0.7
    #: the part of the path margin nobody in the adapter can time (the client's legs), in ms
    path_margin_ms: float = 1.0
    #: how chains split their SLO over stages and batch (GS, ED-*, EDF-*, FIFO-NB:
    #: adapter.policies.slack)
    stage_policy: str = "GS"
    aimd: AIMDConfig = field(default_factory=AIMDConfig)
    advisor: AdvisorSettings = field(default_factory=AdvisorSettings)


EXPERIMENT_MODES = ("direct", "mlproxy", "slackwise")
#: the full adapter with the autoscaling advisor on (not run unless asked for)
ADVISOR_MODE = "slackwise+advisor"
#: an app experiment compares stage policies by default (GrandSLAM Figs. 11-12)
APP_EXPERIMENT_MODES = ("FIFO-NB", "ED-DYN", "EDF-DYN", "GS")


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


class _Reader:
    """Reads typed values out of nested mappings, naming the file and key path in errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {path}: {message}")

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping, got {value!r}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(path, f"keys must be strings, got {key!r}")
        return value

    def only(self, data: Mapping[str, Any], path: str, allowed: set[str]) -> None:
        unknown = sorted(set(data) - allowed)
        if unknown:
            where = f"{path}.{unknown[0]}" if path else unknown[0]
            raise self.fail(where, f"unknown key; expected one of {', '.join(sorted(allowed))}")

    def integer(
        self, data: Mapping[str, Any], key: str, path: str, default: int, *, low: int = 0
    ) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{path}.{key}", f"must be an integer, got {value!r}")
        if value < low:
            raise self.fail(f"{path}.{key}", f"must be >= {low}, got {value}")
        return value

    def number(
        self, data: Mapping[str, Any], key: str, path: str, default: float, *, low: float = 0.0
    ) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{path}.{key}", f"must be a number, got {value!r}")
        if value < low:
            raise self.fail(f"{path}.{key}", f"must be >= {low:g}, got {value}")
        return float(value)

    def string(self, data: Mapping[str, Any], key: str, path: str, default: str | None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or not value:
            raise self.fail(f"{path}.{key}", f"must be a non-empty string, got {value!r}")
        return value

    def strings(self, value: Any, path: str) -> dict[str, str]:
        data = self.mapping(value, path)
        out: dict[str, str] = {}
        for key, item in data.items():
            if not isinstance(item, str):
                raise self.fail(f"{path}.{key}", f"must be a string (quote it), got {item!r}")
            out[key] = item
        return out


def _platform(r: _Reader, raw: Any) -> PlatformConfig:
    data = r.mapping(raw, "platform")
    keys = {
        "host",
        "port",
        "queue_depth",
        "request_timeout_s",
        "ready_timeout_s",
        "drain_timeout_s",
        "autoscaler",
    }
    r.only(data, "platform", keys)
    port = r.integer(data, "port", "platform", 0)
    if port > 65535:
        raise r.fail("platform.port", f"must be a TCP port (0 picks a free one), got {port}")
    autoscaler_raw = r.strings(data.get("autoscaler"), "platform.autoscaler")
    try:
        autoscaler = AutoscalerConfig.from_config_map(autoscaler_raw)
    except ScalingConfigError as exc:
        raise r.fail("platform.autoscaler", str(exc)) from None
    return PlatformConfig(
        host=r.string(data, "host", "platform", "127.0.0.1"),
        port=port,
        queue_depth=r.integer(data, "queue_depth", "platform", 1000, low=1),
        request_timeout_s=r.number(data, "request_timeout_s", "platform", 60.0, low=0.001),
        ready_timeout_s=r.number(data, "ready_timeout_s", "platform", 120.0, low=0.001),
        drain_timeout_s=r.number(data, "drain_timeout_s", "platform", 30.0),
        autoscaler=autoscaler,
    )


def _function(r: _Reader, name: str, raw: Any, autoscaler: AutoscalerConfig) -> FunctionConfig:
    path = f"functions.{name}"
    if not _NAME.match(name):
        raise r.fail(path, "function names must be DNS labels (a-z, 0-9, '-'; at most 63)")
    data = r.mapping(raw, path)
    keys = {
        "model",
        "variant",
        "threads",
        "max_batch",
        "container_concurrency",
        "timeout_s",
        "cold_start_extra_s",
        "annotations",
        "resources",
        "image",
        "slo_ms",
        "late",
    }
    r.only(data, path, keys)
    model = r.string(data, "model", path, None)
    from functions.registry import KINDS

    if model not in KINDS:
        raise r.fail(f"{path}.model", f"unknown model {model!r}; known: {', '.join(sorted(KINDS))}")
    variant = r.string(data, "variant", path, "cpu")
    if variant not in VARIANTS:
        raise r.fail(f"{path}.variant", f"must be one of {', '.join(VARIANTS)}, got {variant!r}")
    concurrency = r.integer(data, "container_concurrency", path, 1)
    if concurrency > 1000:
        raise r.fail(f"{path}.container_concurrency", f"must be at most 1000, got {concurrency}")
    timeout = r.integer(data, "timeout_s", path, 300, low=1)
    if timeout > 600:
        raise r.fail(f"{path}.timeout_s", f"must be at most 600 (Knative's max), got {timeout}")
    annotations = r.strings(data.get("annotations"), f"{path}.annotations")
    try:
        scaling = resolve_spec(annotations, container_concurrency=concurrency, config=autoscaler)
    except ScalingConfigError as exc:
        raise r.fail(f"{path}.annotations", str(exc)) from None
    res = r.mapping(data.get("resources"), f"{path}.resources")
    r.only(res, f"{path}.resources", {"requests", "limits"})
    image = data.get("image")
    if image is not None and not isinstance(image, str):
        raise r.fail(f"{path}.image", f"must be a string, got {image!r}")
    slo_ms = None
    if "slo_ms" in data:
        slo_ms = r.number(data, "slo_ms", path, 0.0)
        if slo_ms <= 0:
            raise r.fail(f"{path}.slo_ms", f"must be positive, got {slo_ms:g}")
    late = r.string(data, "late", path, "serve")
    if late not in LATE:
        raise r.fail(f"{path}.late", f"must be one of {', '.join(LATE)}, got {late!r}")
    return FunctionConfig(
        name=name,
        model=model,
        variant=variant,
        threads=r.integer(data, "threads", path, 1, low=1),
        max_batch=r.integer(data, "max_batch", path, 64, low=1),
        container_concurrency=concurrency,
        timeout_s=timeout,
        cold_start_extra_s=r.number(data, "cold_start_extra_s", path, 0.0),
        annotations=annotations,
        resources=Resources(
            requests=r.strings(res.get("requests"), f"{path}.resources.requests"),
            limits=r.strings(res.get("limits"), f"{path}.resources.limits"),
        ),
        image=image,
        slo_ms=slo_ms,
        late=late,
        scaling=scaling,
    )


def _app(r: _Reader, name: str, raw: Any, functions: Mapping[str, FunctionConfig]) -> AppConfig:
    path = f"apps.{name}"
    if not _NAME.match(name):
        raise r.fail(path, "app names must be DNS labels (a-z, 0-9, '-'; at most 63)")
    data = r.mapping(raw, path)
    r.only(data, path, {"stages", "slo_ms", "percentile"})
    stages = data.get("stages")
    if not isinstance(stages, list) or not stages:
        raise r.fail(f"{path}.stages", f"must be a non-empty list of functions, got {stages!r}")
    for i, stage in enumerate(stages):
        if stage not in functions:
            raise r.fail(f"{path}.stages[{i}]", f"no function named {stage!r}")
    kinds = [functions[stage].model for stage in stages]
    from adapter.serving.edges import NoEdge, check_chain

    try:
        check_chain(kinds)
    except NoEdge as exc:
        raise r.fail(f"{path}.stages", f"{' -> '.join(stages)}: {exc}") from None
    slo = r.number(data, "slo_ms", path, 0.0)
    if slo <= 0:
        raise r.fail(f"{path}.slo_ms", f"must be positive, got {slo:g}")
    percentile = r.number(data, "percentile", path, 95.0)
    if not 0 < percentile <= 100:
        raise r.fail(f"{path}.percentile", f"must be within (0, 100], got {percentile:g}")
    return AppConfig(name=name, stages=tuple(stages), slo_ms=slo, percentile=percentile)


def _aimd(r: _Reader, raw: Any) -> AIMDConfig:
    path = "adapter.aimd"
    data = r.mapping(raw, path)
    d = AIMDConfig()
    r.only(data, path, {f.name for f in fields(AIMDConfig)})
    mult = r.number(data, "mult", path, d.mult)
    if not 0 < mult < 1:
        raise r.fail(f"{path}.mult", f"must be within (0, 1), got {mult:g}")
    fraction = r.number(data, "p95_fraction", path, d.p95_fraction)
    if not 0 < fraction <= 1:
        raise r.fail(f"{path}.p95_fraction", f"must be within (0, 1], got {fraction:g}")
    return AIMDConfig(
        initial=r.integer(data, "initial", path, d.initial, low=1),
        minimum=r.integer(data, "minimum", path, d.minimum, low=1),
        add=r.number(data, "add", path, d.add, low=0.001),
        mult=mult,
        period_s=r.number(data, "period_s", path, d.period_s, low=0.1),
        miss_threshold=r.number(data, "miss_threshold", path, d.miss_threshold),
        p95_fraction=fraction,
        timeout_ratio_threshold=r.number(
            data, "timeout_ratio_threshold", path, d.timeout_ratio_threshold
        ),
    )


PLATFORMS = ("local", "knative")


def _choice(
    r: _Reader, data: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...], default: str
) -> str:
    value = r.string(data, key, path, default)
    if value not in allowed:
        raise r.fail(f"{path}.{key}", f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _optional_string(r: _Reader, data: Mapping[str, Any], key: str, path: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise r.fail(f"{path}.{key}", f"must be a non-empty string, got {value!r}")
    return value


def _adapter(r: _Reader, raw: Any) -> AdapterConfig:
    path = "adapter"
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(AdapterConfig)})
    d = AdapterConfig()
    mode = r.string(data, "mode", path, d.mode)
    if mode not in MODES:
        raise r.fail(f"{path}.mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    port = r.integer(data, "port", path, d.port)
    if port > 65535:
        raise r.fail(f"{path}.port", f"must be a TCP port (0 picks a free one), got {port}")
    records = data.get("records")
    if records is not None and not isinstance(records, str):
        raise r.fail(f"{path}.records", f"must be a file path, got {records!r}")
    platform_url = data.get("platform_url")
    if platform_url is not None and (
        not isinstance(platform_url, str) or not platform_url.startswith(("http://", "https://"))
    ):
        raise r.fail(f"{path}.platform_url", f"must be an http(s) URL, got {platform_url!r}")
    return AdapterConfig(
        host=r.string(data, "host", path, d.host),
        port=port,
        mode=mode,
        max_queue=r.integer(data, "max_queue", path, d.max_queue, low=1),
        max_body_bytes=r.integer(data, "max_body_bytes", path, d.max_body_bytes, low=1),
        records=records,
        platform_url=platform_url,
        platform=_choice(r, data, "platform", path, PLATFORMS, d.platform),
        namespace=_optional_string(r, data, "namespace", path),
        ingress=_optional_string(r, data, "ingress", path),
        max_wait_ms=None
        if data.get("max_wait_ms") is None
        else r.number(data, "max_wait_ms", path, 0.0),
        wait_utilization=_fraction(r, data, "wait_utilization", path, d.wait_utilization),
        path_margin_ms=r.number(data, "path_margin_ms", path, d.path_margin_ms),
        stage_policy=_stage_policy(r, data, path, d.stage_policy),
        aimd=_aimd(r, data.get("aimd")),
        advisor=_advisor(r, data.get("advisor")),
    )


def _fraction(r: _Reader, data: Mapping[str, Any], key: str, path: str, default: float) -> float:
    value = r.number(data, key, path, default)
    if not 0.0 < value <= 1.0:
        raise r.fail(f"{path}.{key}", f"must be in (0, 1], got {value:g}")
    return value


def _flag(r: _Reader, data: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise r.fail(f"{path}.{key}", f"must be true or false, got {value!r}")
    return value


def _advisor(r: _Reader, raw: Any) -> AdvisorSettings:
    path = "adapter.advisor"
    data = r.mapping(raw, path)
    d = AdvisorSettings()
    r.only(data, path, {f.name for f in fields(AdvisorSettings)})
    burst_u = r.number(data, "burst_u", path, d.burst_u)
    if burst_u < 1:
        raise r.fail(f"{path}.burst_u", f"must be >= 1 (a headroom factor), got {burst_u:g}")
    return AdvisorSettings(
        enabled=_flag(r, data, "enabled", path, d.enabled),
        tick_s=r.number(data, "tick_s", path, d.tick_s, low=0.05),
        burst_u=burst_u,
        history_s=r.number(data, "history_s", path, d.history_s, low=1.0),
        min_scale_in_gap_s=r.number(data, "min_scale_in_gap_s", path, d.min_scale_in_gap_s),
        default_setup_s=r.number(data, "default_setup_s", path, d.default_setup_s, low=0.001),
        keep_alive=_flag(r, data, "keep_alive", path, d.keep_alive),
        floor_at_current=_flag(r, data, "floor_at_current", path, d.floor_at_current),
    )


def _stage_policy(r: _Reader, data: Mapping[str, Any], path: str, default: str) -> str:
    from adapter.policies.slack import stage_policy

    raw = r.string(data, "stage_policy", path, default)
    try:
        return stage_policy(raw).name
    except ValueError as exc:
        raise r.fail(f"{path}.stage_policy", str(exc)) from None


def parse_modes(text: Any, where: str = "modes", *, app: bool = False) -> tuple[str, ...]:
    """A list (or comma-separated string) of experiment modes, checked.

    A function's modes are ``direct``, ``mlproxy`` and ``slackwise``. An app's are ``mlproxy``,
    ``slackwise`` and the stage policies of :mod:`adapter.policies.slack` (``direct`` has no
    orchestrator
    to walk a chain); policy names are case-insensitive and come back spelled as defined.
    """
    from adapter.policies.slack import POLICIES, stage_policy

    known = (
        (*EXPERIMENT_MODES[1:], ADVISOR_MODE, *POLICIES)
        if app
        else (*EXPERIMENT_MODES, ADVISOR_MODE)
    )
    items = text.split(",") if isinstance(text, str) else text
    if not isinstance(items, list | tuple) or not items:
        raise ValueError(f"{where}: must list some of {', '.join(known)}, got {text!r}")
    modes: list[str] = []
    for raw in items:
        mode = str(raw).strip()
        if mode not in known and app:
            with contextlib.suppress(ValueError):
                mode = stage_policy(mode).name
        if mode not in known:
            raise ValueError(f"{where}: unknown mode {mode!r}; expected some of {', '.join(known)}")
        modes.append(mode)
    return tuple(modes)


def _experiment(
    r: _Reader,
    raw: Any,
    functions: Mapping[str, FunctionConfig],
    apps: Mapping[str, AppConfig],
) -> ExperimentConfig:
    path = "experiment"
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(ExperimentConfig)})
    function: str | None = None
    app: str | None = None
    if ("function" in data) == ("app" in data):
        raise r.fail(path, "name exactly one target: 'function' or 'app'")
    if "function" in data:
        function = r.string(data, "function", path, None)
        if function not in functions:
            raise r.fail(f"{path}.function", f"no function named {function!r}")
    else:
        app = r.string(data, "app", path, None)
        if app not in apps:
            raise r.fail(f"{path}.app", f"no app named {app!r}")
    max_rps = r.number(data, "max_rps", path, 0.0)
    if max_rps <= 0:
        raise r.fail(f"{path}.max_rps", f"must be positive, got {max_rps:g}")
    step_s = r.number(data, "step_s", path, 1.0)
    if step_s <= 0:
        raise r.fail(f"{path}.step_s", f"must be positive, got {step_s:g}")
    duration_s = r.number(data, "duration_s", path, 120.0)
    if duration_s <= 0:
        raise r.fail(f"{path}.duration_s", f"must be positive, got {duration_s:g}")
    default = APP_EXPERIMENT_MODES if app else EXPERIMENT_MODES
    try:
        modes = parse_modes(data.get("modes", list(default)), app=app is not None)
    except ValueError as exc:
        raise r.fail(f"{path}.modes", str(exc).partition(": ")[2]) from None
    return ExperimentConfig(
        function=function,
        app=app,
        trace=r.string(data, "trace", path, None),
        max_rps=max_rps,
        start_s=r.number(data, "start_s", path, 0.0),
        duration_s=duration_s,
        step_s=step_s,
        seed=r.integer(data, "seed", path, 1),
        modes=modes,
        settle_s=r.number(data, "settle_s", path, 5.0),
    )


def parse_config(raw: Any, source: str = "<config>") -> Config:
    """Validate an already-parsed YAML document."""
    r = _Reader(source)
    data = r.mapping(raw, "(top level)")
    r.only(data, "", {"platform", "functions", "apps", "adapter", "experiment"})
    platform = _platform(r, data.get("platform"))
    fn_raw = r.mapping(data.get("functions"), "functions")
    if not fn_raw:
        raise r.fail("functions", "at least one function is needed")
    functions = {
        name: _function(r, name, spec, platform.autoscaler) for name, spec in fn_raw.items()
    }
    app_raw = r.mapping(data.get("apps"), "apps")
    apps = {name: _app(r, name, spec, functions) for name, spec in app_raw.items()}
    adapter = _adapter(r, data.get("adapter"))
    experiment = None
    if data.get("experiment") is not None:
        experiment = _experiment(r, data["experiment"], functions, apps)
    return Config(
        source=source,
        platform=platform,
        functions=functions,
        apps=apps,
        adapter=adapter,
        experiment=experiment,
    )


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    return parse_config(raw, source)
