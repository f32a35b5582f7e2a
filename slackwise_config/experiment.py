"""The ``experiment`` section: what ``slackwise experiment`` replays, and the disturbance it may
add identically to every mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from slackwise_config.model import (
    ADVISOR_MODE,
    APP_EXPERIMENT_MODES,
    DISTURBANCES,
    EXPERIMENT_MODES,
    AppConfig,
    Disturbance,
    ExperimentConfig,
    FunctionConfig,
    headroom_of,
)
from slackwise_config.reader import Reader, choice
from slackwise_policies.slack import STAGE_POLICIES

__all__ = ["disturbance", "experiment_config", "parse_modes", "policy_name"]


def policy_name(name: str) -> str | None:
    """``name`` spelled as the stage policy it names (case-insensitive), or None."""
    wanted = name.strip().lower()
    return next((p for p in STAGE_POLICIES if p.lower() == wanted), None)


def parse_modes(text: Any, where: str = "modes", *, app: bool = False) -> tuple[str, ...]:
    """A list (or comma-separated string) of experiment modes, checked.

    A function's modes are ``direct``, ``mlproxy`` and ``slackwise``. An app's are ``mlproxy``,
    ``slackwise`` and the stage policies of :mod:`slackwise_policies.slack` (``direct`` has no
    orchestrator
    to walk a chain); policy names are case-insensitive and come back spelled as defined.
    """
    known = (
        (*EXPERIMENT_MODES[1:], ADVISOR_MODE, *STAGE_POLICIES)
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
            mode = policy_name(mode) or mode
        if mode not in known and headroom_of(mode) is None:
            raise ValueError(
                f"{where}: unknown mode {mode!r}; expected some of {', '.join(known)} "
                "or slackwise-headroom-X (X >= 0)"
            )
        modes.append(mode)
    return tuple(modes)


def experiment_config(
    r: Reader,
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
        if not functions[function].model:
            raise r.fail(
                f"{path}.function",
                f"{function!r} has no model kind: the replayer's "
                "requests are made from a built-in kind's samples",
            )
    else:
        app = r.string(data, "app", path, None)
        if app not in apps:
            raise r.fail(f"{path}.app", f"no app named {app!r}")
    max_rps = r.positive(data, "max_rps", path, 0.0)
    step_s = r.positive(data, "step_s", path, 1.0)
    duration_s = r.positive(data, "duration_s", path, 120.0)
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
        disturbance=None
        if data.get("disturbance") is None
        else disturbance(r, data["disturbance"], f"{path}.disturbance", duration_s),
    )


def disturbance(r: Reader, raw: Any, path: str, duration_s: float) -> Disturbance:
    """``experiment.disturbance``: ``{kind: cpu|pause|slow|input, start_s, duration_s, cores,
    factor, repeat, every_s}`` (``cores`` for cpu, ``factor`` > 1 for slow, a whole ``factor``
    >= 2 for input; ``repeat`` windows ``every_s`` apart, not for input)."""
    data = r.mapping(raw, path)
    r.only(data, path, {f.name for f in fields(Disturbance)})
    kind = choice(r, data, "kind", path, DISTURBANCES, "cpu")
    start = r.number(data, "start_s", path, 0.0)
    length = r.number(data, "duration_s", path, 0.0)
    repeat = r.integer(data, "repeat", path, 1, low=1)
    every = r.number(data, "every_s", path, 0.0)
    if repeat > 1 and not every > length:
        raise r.fail(
            f"{path}.every_s",
            f"must be above duration_s ({length:g}) for a repeated disturbance, got {every:g}",
        )
    if repeat > 1 and kind == "input":
        raise r.fail(f"{path}.repeat", f"an input step is one window, got {repeat}")
    if start < 0:
        raise r.fail(f"{path}.start_s", f"must be >= 0, got {start:g}")
    last = start + (repeat - 1) * every
    if length <= 0 or last + length > duration_s:
        raise r.fail(
            f"{path}.duration_s",
            f"must be positive and end within the replay's "
            f"{duration_s:g} s, got {length:g} from {last:g}",
        )
    cores = r.integer(data, "cores", path, 1, low=1)
    factor = r.number(data, "factor", path, 2.0 if kind in ("slow", "input") else 1.0)
    if kind == "slow" and not factor > 1.0:
        raise r.fail(
            f"{path}.factor",
            f"must be above 1 (service times this many times as long), got {factor:g}",
        )
    if kind == "input" and not (factor >= 2.0 and factor == int(factor)):
        raise r.fail(
            f"{path}.factor",
            f"must be a whole number >= 2 (inputs this many times the usual size), got {factor:g}",
        )
    return Disturbance(
        kind=kind,
        start_s=start,
        duration_s=length,
        cores=cores,
        factor=factor,
        repeat=repeat,
        every_s=every,
    )
