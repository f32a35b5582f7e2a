"""The root of every error slackwise_core raises:

::

    CoreError
    ├── ConfigError (ValueError)         a config key or value, named, with what is allowed
    ├── ScalingConfigError (ValueError)  a Knative scaling value out of its range
    ├── PinUnsupported (RuntimeError)    a platform that cannot pin a replica count
    └── Http1Error                       the lean HTTP/1.1 client's failures
                                         (slackwise_core/http1.py): a timeout, a broken connection

The command line prints them as one line naming the key and the value.
"""

from __future__ import annotations

__all__ = ["CoreError"]


class CoreError(Exception):
    """A setting, a platform capability or a connection the project cannot work with."""
