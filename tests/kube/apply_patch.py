"""Server-side apply, as the in-memory API server does it (a simplification of Kubernetes').

Kubernetes tracks which manager owns each field. Here each manager's last applied configuration
is kept whole: applying a new configuration first removes every field the manager applied last
time and no longer sets (that is how a key removed from the config goes away on the cluster,
which a merge patch cannot do), then merges the new configuration in. Maps merge key by key;
lists and scalars are replaced (Kubernetes merges some lists by key, e.g. containers by name; our
Services carry one container, so replacing it is the same).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["apply_configuration"]


def _drop_released(current: Any, previous: Any, applied: Any) -> Any:
    if not isinstance(current, dict) or not isinstance(previous, dict):
        return current
    out = dict(current)
    applied = applied if isinstance(applied, dict) else {}
    for key, old in previous.items():
        if key not in applied:
            out.pop(key, None)
        elif isinstance(old, dict) and key in out:
            out[key] = _drop_released(out[key], old, applied[key])
    return out


def _merge(current: Any, applied: Any) -> Any:
    if not isinstance(applied, dict) or not isinstance(current, dict):
        return copy.deepcopy(applied)
    out = dict(current)
    for key, value in applied.items():
        out[key] = _merge(current.get(key), value)
    return out


def apply_configuration(current: Any, previous: Any, applied: Any) -> Any:
    """``current`` after a manager that last applied ``previous`` applies ``applied``."""
    return _merge(_drop_released(current, previous or {}, applied), applied)
