"""The root of every error the platform package raises, local or on a cluster:

::

    PlatformError
    ├── KnativeError                     the cluster's API refused or failed (its own tree:
    │                                    knative/cluster/errors.py)
    ├── KnLineError (ValueError)         a ``kn service create`` line it cannot translate
    ├── ManifestError (ValueError)       a manifest off the Knative CRD schema
    ├── PlatformStopping                 the local platform is shutting down
    ├── BufferFull, WaitTimeout          the local activator's buffer and its wait
    ├── ReplicaStartError (RuntimeError) a local replica that did not start
    └── UnknownFunction (KeyError)       no function of that name on the local platform

The adapter maps them to statuses where it meets them (``adapter.serving.errors``); the command
line prints one line for them (``slackwise_cli``).
"""

from __future__ import annotations

__all__ = ["PlatformError"]


class PlatformError(Exception):
    """Something the platform (local or Knative) refused or failed at."""
