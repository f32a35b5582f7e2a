"""Loading the one YAML file that describes a deployment: platform, functions and apps.

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

import os
from collections.abc import Mapping
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any, Literal

from slackwise_config.cores import check_cores, core_settings
from slackwise_config.device import device_setting
from slackwise_config.experiment import experiment_config, parse_modes, policy_name
from slackwise_config.gpu import check_gpu, gpu_settings
from slackwise_config.hpa import hpa_settings
from slackwise_config.model import (
    NAME_PATTERN,
    VARIANTS,
    AdapterConfig,
    AppConfig,
    Config,
    FunctionConfig,
    Platform,
    PlatformConfig,
    Resources,
)
from slackwise_config.reader import (
    Reader,
    field_defaults,
    flag,
    optional_string,
    read_yaml,
    stage_list,
)
from slackwise_config.typed import check_value, overrides_from, settings_from
from slackwise_config.upstream import upstream_config
from slackwise_core.knative_scaling import AutoscalerConfig, resolve_spec
from slackwise_core.scaling_values import ScalingConfigError
from slackwise_policies.admission import Late
from slackwise_policies.advisor_settings import AdvisorSettings
from slackwise_policies.aimd import AIMDSettings
from slackwise_policies.batching_settings import LIVE_KEYS, BatchingSettings
from slackwise_policies.latency import LatencyModelKind
from slackwise_policies.modes import ModeName, aimd_settings
from slackwise_policies.slack import STAGE_POLICIES

__all__ = ["advisor_settings", "load_config", "parse_config", "parse_modes"]


def _platform(r: Reader, raw: Any) -> PlatformConfig:
    data = r.mapping(raw, "platform")
    keys = {
        "host",
        "port",
        "queue_depth",
        "request_timeout_s",
        "ready_timeout_s",
        "drain_timeout_s",
        "cpu_period_ms",
        "starting_nice",
        "max_starting",
        "autoscaler",
    }
    r.only(data, "platform", keys)
    d = PlatformConfig()
    port = r.integer(data, "port", "platform", d.port)
    if port > 65535:
        raise r.fail("platform.port", f"must be a TCP port (0 picks a free one), got {port}")
    autoscaler_raw = r.strings(data.get("autoscaler"), "platform.autoscaler")
    try:
        autoscaler = AutoscalerConfig.from_config_map(autoscaler_raw)
    except ScalingConfigError as exc:
        raise r.fail("platform.autoscaler", str(exc)) from None
    return PlatformConfig(
        host=r.string(data, "host", "platform", d.host),
        port=port,
        queue_depth=r.integer(data, "queue_depth", "platform", d.queue_depth, low=1),
        request_timeout_s=r.number(
            data, "request_timeout_s", "platform", d.request_timeout_s, low=0.001
        ),
        ready_timeout_s=r.number(data, "ready_timeout_s", "platform", d.ready_timeout_s, low=0.001),
        drain_timeout_s=r.number(data, "drain_timeout_s", "platform", d.drain_timeout_s),
        cpu_period_ms=r.number(
            data, "cpu_period_ms", "platform", d.cpu_period_ms, low=1.0, high=1000.0
        ),
        starting_nice=_starting_nice(r, data),
        max_starting=_max_starting(r, data),
        autoscaler=autoscaler,
    )


def _starting_nice(r: Reader, data: Mapping[str, Any]) -> int | Literal["auto"]:
    """``platform.starting_nice``: ``auto`` (the default) or a step of 0..19 (0: off)."""
    value = data.get("starting_nice", "auto")
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 19:
        raise r.fail("platform.starting_nice", f"must be auto or 0..19, got {value!r}")
    return value


def _max_starting(r: Reader, data: Mapping[str, Any]) -> int | None:
    """``platform.max_starting``: ``none`` (or absent) for no limit, ``auto`` for one per two
    of the machine's cores, else a count >= 1."""
    value = data.get("max_starting", "none")
    if value in ("none", None):
        return None
    if value == "auto":  # a model load is seconds of CPU: one at a time per two cores
        return max(1, (os.cpu_count() or 1) // 2)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise r.fail("platform.max_starting", f"must be none, auto or a count >= 1, got {value!r}")
    return value


#: the function model's defaults (written once, in the dataclass)
_FUNCTION_DEFAULTS = field_defaults(FunctionConfig)


def _function(r: Reader, name: str, raw: Any, autoscaler: AutoscalerConfig) -> FunctionConfig:
    path = f"functions.{name}"
    if not NAME_PATTERN.match(name):
        raise r.fail(path, "function names must be DNS labels (a-z, 0-9, '-'; at most 63)")
    data = r.mapping(raw, path)
    # every field of the model but the two made here
    keys = {f.name for f in fields(FunctionConfig)} - {"name", "scaling"}
    r.only(data, path, keys)
    model = r.string(data, "model", path, None) if "model" in data else ""
    from functions.registry import KINDS

    if model == "" and "upstream" not in data:
        raise r.fail(
            f"{path}.model",
            "a function needs a built-in model kind (one of "
            f"{', '.join(sorted(KINDS))}), or an upstream another system serves "
            "(upstream: {url: ...}, or {protocol: v2, service: ...} for a KServe "
            "InferenceService)",
        )
    if model and model not in KINDS:
        raise r.fail(f"{path}.model", f"unknown model {model!r}; known: {', '.join(sorted(KINDS))}")
    d = _FUNCTION_DEFAULTS
    variant = r.string(data, "variant", path, d["variant"])
    if variant not in VARIANTS:
        raise r.fail(f"{path}.variant", f"must be one of {', '.join(VARIANTS)}, got {variant!r}")
    concurrency = r.integer(data, "container_concurrency", path, d["container_concurrency"])
    if concurrency > 1000:
        raise r.fail(f"{path}.container_concurrency", f"must be at most 1000, got {concurrency}")
    timeout = r.integer(data, "timeout_s", path, d["timeout_s"], low=1)
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
        slo_ms = r.positive(data, "slo_ms", path, 0.0)
    late = None if data.get("late") is None else check_value(r, Late, data["late"], f"{path}.late")
    return FunctionConfig(
        upstream=upstream_config(r, data.get("upstream"), f"{path}.upstream"),
        name=name,
        model=model,
        variant=variant,
        device=device_setting(r, data, path, variant),
        threads=r.integer(data, "threads", path, d["threads"], low=1),
        max_batch=r.integer(data, "max_batch", path, d["max_batch"], low=1),
        container_concurrency=concurrency,
        timeout_s=timeout,
        cold_start_extra_s=r.number(data, "cold_start_extra_s", path, d["cold_start_extra_s"]),
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


def _app(r: Reader, name: str, raw: Any, functions: Mapping[str, FunctionConfig]) -> AppConfig:
    path = f"apps.{name}"
    if not NAME_PATTERN.match(name):
        raise r.fail(path, "app names must be DNS labels (a-z, 0-9, '-'; at most 63)")
    data = r.mapping(raw, path)
    r.only(data, path, {"stages", "slo_ms", "percentile"})
    stages = stage_list(r, data, path, functions)
    kinds = [functions[stage].model for stage in stages]
    from functions.edges import NoEdge, check_chain

    try:
        check_chain(kinds)
    except NoEdge as exc:
        raise r.fail(f"{path}.stages", f"{' -> '.join(stages)}: {exc}") from None
    slo = r.positive(data, "slo_ms", path, 0.0)
    percentile = r.number(
        data, "percentile", path, AppConfig(name=name, stages=(), slo_ms=slo).percentile
    )
    if not 0 < percentile <= 100:
        raise r.fail(f"{path}.percentile", f"must be within (0, 100], got {percentile:g}")
    return AppConfig(name=name, stages=tuple(stages), slo_ms=slo, percentile=percentile)


def _aimd(r: Reader, raw: Any) -> Mapping[str, Any]:
    """Only the keys given (fields of :class:`AIMDSettings`, each checked as the type checks
    it); the rest are the mode's own (:meth:`ModePreset.with_aimd`)."""
    return overrides_from(
        r, AIMDSettings, raw, "adapter.aimd", partial(aimd_settings, AIMDSettings())
    )


def _adapter(r: Reader, raw: Any) -> AdapterConfig:
    path = "adapter"
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(AdapterConfig)} - {"batching"} | set(LIVE_KEYS))
    d = AdapterConfig()
    mode: ModeName = check_value(r, ModeName, data.get("mode", d.mode), f"{path}.mode")
    port = r.integer(data, "port", path, d.port)
    if port > 65535:
        raise r.fail(f"{path}.port", f"must be a TCP port (0 picks a free one), got {port}")
    probe_port = None if data.get("probe_port") is None else r.integer(data, "probe_port", path, 0)
    if probe_port is not None and probe_port > 65535:
        raise r.fail(
            f"{path}.probe_port", f"must be a TCP port (0 picks a free one), got {probe_port}"
        )
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
        probe_port=probe_port,
        mode=mode,
        max_queue=r.integer(data, "max_queue", path, d.max_queue, low=1),
        max_body_bytes=r.integer(data, "max_body_bytes", path, d.max_body_bytes, low=1),
        records=records,
        platform_url=platform_url,
        platform=check_value(r, Platform, data.get("platform", d.platform), f"{path}.platform"),
        namespace=optional_string(r, data, "namespace", path),
        serving_version=optional_string(r, data, "serving_version", path),
        kubeconfig=optional_string(r, data, "kubeconfig", path),
        kube_context=optional_string(r, data, "kube_context", path),
        ingress=optional_string(r, data, "ingress", path),
        batching=settings_from(
            r,
            BatchingSettings,
            {k: data[k] for k in LIVE_KEYS if data.get(k) is not None},
            path,
        ),
        stage_policy=_stage_policy(r, data, path, d.stage_policy),
        latency_model=check_value(
            r, LatencyModelKind, data.get("latency_model", d.latency_model), f"{path}.latency_model"
        ),
        etc_by_input=flag(r, data, "etc_by_input", path, d.etc_by_input),
        aimd=_aimd(r, data.get("aimd")),
        advisor=advisor_settings(r, data.get("advisor")),
        cores=core_settings(r, data.get("cores")),
        gpu=gpu_settings(r, data.get("gpu")),
        hpa=hpa_settings(r, data.get("hpa")),
    )


def advisor_settings(
    r: Reader, raw: Any, path: str = "adapter.advisor", *, enabled: bool = False
) -> AdvisorSettings:
    """The advisor's settings under ``path`` (the simulator reads its own with this too)."""
    return settings_from(r, AdvisorSettings, raw, path, enabled=enabled)


def _stage_policy(r: Reader, data: Mapping[str, Any], path: str, default: str) -> str:
    raw = r.string(data, "stage_policy", path, default)
    name = policy_name(raw)
    if name is None:
        raise r.fail(
            f"{path}.stage_policy",
            f"stage policy must be one of {', '.join(STAGE_POLICIES)}, got {raw!r}",
        )
    return name


def parse_config(raw: Any, source: str = "<config>") -> Config:
    """Validate an already-parsed YAML document."""
    r = Reader(source)
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
    for name, fn in functions.items():
        if (
            fn.upstream.protocol == "v2"
            and fn.upstream.url is None
            and adapter.platform != "knative"
        ):
            raise r.fail(
                f"functions.{name}.upstream.protocol",
                "v2 needs upstream.url or adapter.platform: knative (the local platform "
                "relays V1 only)",
            )
        if not fn.model and fn.upstream.url is None and adapter.platform != "knative":
            raise r.fail(
                f"functions.{name}.model",
                "a function without a model kind is served by another system: give "
                "upstream.url, or adapter.platform: knative (the local platform starts "
                "built-in kinds only)",
            )
    check_cores(r, adapter.cores, functions)
    check_gpu(r, adapter.gpu, functions)
    experiment = None
    if data.get("experiment") is not None:
        experiment = experiment_config(r, data["experiment"], functions, apps)
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
    return parse_config(read_yaml(path), str(path))
