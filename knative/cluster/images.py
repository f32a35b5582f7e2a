"""The images the manifests name, and how their containers run: tag, registry, user, hardening.

Every image is ``slackwise/<name>:<VERSION>`` unless :class:`Images` moves it to a registry and
tag of your own; each runs as the image's non-root ``slackwise`` user with no privileges to gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slackwise_config import FunctionConfig

__all__ = ["RUN_AS_USER", "VERSION", "Images", "container_security", "function_image"]

VERSION = "0.1.0"
#: the uid of the ``slackwise`` user in adapter/Dockerfile and functions/Dockerfile.base
RUN_AS_USER = 10001


@dataclass(frozen=True)
class Images:
    """Where the images the manifests name live: ``registry`` replaces the ``slackwise``
    repository prefix (``ghcr.io/me`` -> ``ghcr.io/me/embed:TAG``), ``tag`` the version."""

    registry: str = "slackwise"
    tag: str = VERSION

    def name(self, image: str) -> str:
        return f"{self.registry.rstrip('/')}/{image}:{self.tag}"


def function_image(fn: FunctionConfig, images: Images | None = None) -> str:
    """The configured image, else ``slackwise/<model>:<version>``, or for a function computing
    on a GPU ``slackwise/<model>-gpu:<version>`` (``functions/<model>/Dockerfile.gpu``: the
    CUDA builds; the plain images carry the CPU builds); ``images`` moves the default ones."""
    if fn.image:
        return fn.image
    suffix = "" if fn.device == "cpu" else "-gpu"
    return (images or Images()).name(f"{fn.model}{suffix}")


def container_security() -> dict[str, Any]:
    """A container's securityContext: non-root, no escalation, no capabilities, seccomp on."""
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
