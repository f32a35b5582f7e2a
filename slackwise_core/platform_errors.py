"""Errors a platform raises when asked to set a function's scale, shared by every platform
(the local one, a remote one, Knative) and the adapter's autoscaling loop that handles them."""

from __future__ import annotations

from slackwise_core.errors import CoreError

__all__ = ["PinUnsupported"]


class PinUnsupported(CoreError, RuntimeError):
    """The platform cannot be told the replica count at all (no hook in its version, no
    permission, a fixed endpoint): asking again will not help, so the advisor stops, once, with
    this message. Anything else that goes wrong is transient and retried on the next tick."""
