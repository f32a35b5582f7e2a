"""Which profile file models each simulated function: ``cpu``, ``gpu`` or a user's set.

* ``cpu``: ``functions/profiles/cpu/<profile>.json`` measured on this machine.
* ``gpu``: ``functions/profiles/gpu/<profile>.json``, derived from H100 batch-latency curves
  (:mod:`simulator.gpu_profiles` says which model stands for which stage).
* a directory: ``<dir>/<profile>.json``; a JSON file: a map from profile name to a file path
  (relative to the map's directory).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path

from functions.profile_format import ProfileFormatError
from functions.profiles import DEVICES, packaged
from simulator.service import ServiceCurve

__all__ = ["ProfileSetError", "resolve_curves"]


class ProfileSetError(ValueError):
    """A profile set that does not give every function a readable profile."""


def _candidates(profile_set: str, name: str, base_dir: Path) -> list[Path | Traversable]:
    if profile_set in DEVICES:
        return [packaged(name, "cpu" if profile_set == "cpu" else "gpu")]
    where = Path(profile_set)
    if not where.is_absolute() and not where.exists():
        where = base_dir / where
    if where.is_dir():
        return [where / f"{name}.json"]
    if where.is_file():
        try:
            mapping = json.loads(where.read_text())
        except (OSError, ValueError) as exc:
            raise ProfileSetError(f"{where}: not a JSON map of profile files: {exc}") from None
        if not isinstance(mapping, dict) or name not in mapping:
            raise ProfileSetError(f"{where}: no entry for profile {name!r}")
        return [where.parent / str(mapping[name])]
    raise ProfileSetError(
        f"profile must be cpu, gpu, a directory or a JSON map file, got {profile_set!r}"
    )


def resolve_curves(
    profile_set: str, profiles: Mapping[str, str], base_dir: Path
) -> dict[str, ServiceCurve]:
    """A :class:`ServiceCurve` per function (``profiles`` maps function to profile name)."""
    curves: dict[str, ServiceCurve] = {}
    for function, name in profiles.items():
        paths = _candidates(profile_set, name, base_dir)
        path = next((p for p in paths if p.is_file()), None)
        if path is None:
            tried = ", ".join(str(p) for p in paths)
            raise ProfileSetError(f"function {function}: no profile {name!r} (looked in {tried})")
        try:
            curves[function] = ServiceCurve.load(path, name=function)
        except (ProfileFormatError, ValueError, OSError) as exc:
            raise ProfileSetError(f"{path}: {exc}") from None
    return curves
