"""What can go wrong talking to Knative on a cluster, each with the resource and the reason the
API server gave."""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

from knative.errors import PlatformError

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

#: the first Knative Serving release whose autoscaler honours a pinned min-scale at once
HOOK_SINCE = (1, 21)

__all__ = [
    "API_ERRORS",
    "HOOK_SINCE",
    "AccessDeniedError",
    "HookUnavailableError",
    "InvalidResourceError",
    "KnativeError",
    "KubernetesApiError",
    "ReadyTimeoutError",
    "ResourceConflictError",
    "ResourceNotFoundError",
    "ServiceNotReadyError",
    "api_error",
]


class KnativeError(PlatformError):
    """Base of every error this module raises."""


class KubernetesApiError(KnativeError):
    def __init__(self, status: int, resource: str, reason: str, message: str) -> None:
        self.status = status
        self.resource = resource
        self.reason = reason
        self.message = message
        super().__init__(f"{resource}: {status} {reason}: {message}")


class AccessDeniedError(KubernetesApiError):
    pass


class ResourceNotFoundError(KubernetesApiError):
    pass


class ResourceConflictError(KubernetesApiError):
    pass


class InvalidResourceError(KubernetesApiError):
    pass


API_ERRORS: dict[int, type[KubernetesApiError]] = {
    403: AccessDeniedError,
    404: ResourceNotFoundError,
    409: ResourceConflictError,
    422: InvalidResourceError,
}


class ServiceNotReadyError(KnativeError):
    def __init__(self, service: str, reason: str, message: str) -> None:
        self.service = service
        self.reason = reason
        self.message = message
        super().__init__(f"service {service} is not ready: {reason or 'no reason'}: {message}")


class ReadyTimeoutError(ServiceNotReadyError):
    def __init__(self, service: str, timeout_s: float, reason: str, message: str) -> None:
        super().__init__(service, reason, message)
        self.timeout_s = timeout_s
        self.args = (
            f"service {service} not ready after {timeout_s:g} s: "
            f"{reason or 'no reason'}: {message or 'no message'}",
        )


class HookUnavailableError(KnativeError):
    def __init__(self, version: str, detail: str = "") -> None:
        self.version = version
        need = ".".join(map(str, HOOK_SINCE))
        text = f"min-scale hook unavailable on Knative {version} (needs >= {need})"
        super().__init__(f"{text}: {detail}" if detail else text)


def api_error(exc: ApiException, resource: str) -> KubernetesApiError:
    """The client error for an ``ApiException``: its class by status, reason and message from
    the ``Status`` body."""
    status = int(exc.status or 0)
    reason, message = str(exc.reason or ""), str(exc.body or "")
    with contextlib.suppress(ValueError, TypeError):
        body = json.loads(exc.body or "")
        if isinstance(body, dict):
            reason = str(body.get("reason") or reason)
            message = str(body.get("message") or message)
    return API_ERRORS.get(status, KubernetesApiError)(status, resource, reason, message)
