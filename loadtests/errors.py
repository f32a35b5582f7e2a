"""The root of the load generators' errors:

::

    LoadError
    ├── UsageError                       a replay asked for with bad arguments (a CLI line)
    └── DispatchError (RuntimeError)     the random dispatcher's failures
"""

from __future__ import annotations

__all__ = ["LoadError"]


class LoadError(Exception):
    """The load generators refused or failed."""
