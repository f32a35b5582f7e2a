"""The workload of a simulator config: its functions and its apps, each a chain of them.

The ``functions:`` and ``apps:`` sections (schema in :mod:`simulator.config`, which reads the
rest of the file): a function's profile, fleet, batch limit, scaling annotations and input costs;
an app's stages, weight, SLO (``slo_ms`` or ``slo_factor``) and mix of input sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator.config_sections import read_classes
from slackwise_config import Reader
from slackwise_config.model import DEFAULT_MAX_BATCH
from slackwise_config.reader import stage_list
from slackwise_core.knative_scaling import AutoscalerConfig, ScalingSpec, require_kpa, resolve_spec
from slackwise_core.scaling_values import ScalingConfigError

__all__ = ["SimApp", "SimFunction", "read_workload"]


@dataclass(frozen=True, kw_only=True)
class SimFunction:
    name: str
    profile: str
    nodes: int
    max_batch: int
    container_concurrency: int
    cold_start_s: float | None
    scaling: ScalingSpec
    #: the service cost of one instance of an input-size class, against the profile's inputs
    input_cost: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SimApp:
    name: str
    stages: tuple[str, ...]
    weight: float
    slo_ms: float | None
    slo_factor: float
    #: the input-size classes of its requests, by weight (empty: one class, the profile's)
    inputs: Mapping[str, float] = field(default_factory=dict)


def read_workload(
    r: Reader, data: Mapping[str, Any], autoscaler: AutoscalerConfig
) -> tuple[dict[str, SimFunction], dict[str, SimApp]]:
    """The config's functions (at least one, scaled under ``autoscaler``) and its apps (at
    least one, every stage a function of them)."""
    fn_raw = r.mapping(data.get("functions"), "functions")
    if not fn_raw:
        raise r.fail("functions", "at least one function is required")
    functions = {n: _function(r, n, v, autoscaler) for n, v in fn_raw.items()}
    app_raw = r.mapping(data.get("apps"), "apps")
    if not app_raw:
        raise r.fail("apps", "at least one app is required")
    apps = {n: _app(r, n, v, functions) for n, v in app_raw.items()}
    return functions, apps


def _function(r: Reader, name: str, raw: Any, autoscaler: AutoscalerConfig) -> SimFunction:
    path = f"functions.{name}"
    data = r.mapping(raw, path)
    r.only(
        data,
        path,
        {
            "profile",
            "nodes",
            "max_batch",
            "container_concurrency",
            "cold_start_s",
            "annotations",
            "input_cost",
        },
    )
    concurrency = r.integer(data, "container_concurrency", path, 1, low=1)
    annotations = r.strings(data.get("annotations"), f"{path}.annotations")
    try:
        spec = resolve_spec(annotations, container_concurrency=concurrency, config=autoscaler)
        require_kpa(spec, f"{path}.annotations")
    except ScalingConfigError as exc:
        raise r.fail(f"{path}.annotations", str(exc)) from None
    cold = None
    if data.get("cold_start_s") is not None:
        cold = r.number(data, "cold_start_s", path, 0.0)
    return SimFunction(
        name=name,
        profile=r.string(data, "profile", path, name),
        nodes=r.integer(data, "nodes", path, 1, low=1),
        max_batch=r.integer(data, "max_batch", path, DEFAULT_MAX_BATCH, low=1),
        container_concurrency=concurrency,
        cold_start_s=cold,
        scaling=spec,
        input_cost=read_classes(r, data, "input_cost", path),
    )


def _app(r: Reader, name: str, raw: Any, functions: Mapping[str, SimFunction]) -> SimApp:
    path = f"apps.{name}"
    data = r.mapping(raw, path)
    r.only(data, path, {"stages", "weight", "slo_ms", "slo_factor", "inputs"})
    stages = stage_list(r, data, path, functions)
    weight = r.positive(data, "weight", path, 1.0)
    slo_ms = None
    if "slo_ms" in data:
        if "slo_factor" in data:
            raise r.fail(f"{path}.slo_ms", "give slo_ms or slo_factor, not both")
        slo_ms = r.positive(data, "slo_ms", path, 0.0)
    factor = r.positive(data, "slo_factor", path, 5.0)
    return SimApp(
        name=name,
        stages=tuple(stages),
        weight=weight,
        slo_ms=slo_ms,
        slo_factor=factor,
        inputs=read_classes(r, data, "inputs", path),
    )
