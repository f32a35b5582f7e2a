"""``functions.X.upstream``: who serves a function and in which protocol (KServe V1 or V2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slackwise_config.model import NAME_PATTERN, FunctionConfig, UpstreamConfig
from slackwise_config.reader import Reader, choice, flag, optional_string

__all__ = ["UPSTREAM_PROTOCOLS", "check_protocols", "upstream_config"]

UPSTREAM_PROTOCOLS = ("v1", "v2")


def upstream_config(r: Reader, raw: Any, path: str) -> UpstreamConfig:
    data = r.mapping(raw, path)
    r.only(data, path, {"protocol", "service", "model", "url", "input", "output", "binary_data"})
    service = optional_string(r, data, "service", path)
    if service is not None and not NAME_PATTERN.match(service):
        raise r.fail(f"{path}.service", f"must be a DNS label, got {service!r}")
    url = optional_string(r, data, "url", path)
    if url is not None and not url.startswith(("http://", "https://")):
        raise r.fail(f"{path}.url", f"must be an http(s) URL, got {url!r}")
    return UpstreamConfig(
        protocol=choice(r, data, "protocol", path, UPSTREAM_PROTOCOLS, "v1"),
        service=service,
        model=optional_string(r, data, "model", path),
        url=url.rstrip("/") if url else None,
        input=r.string(data, "input", path, "input-0"),
        output=optional_string(r, data, "output", path),
        binary_data=flag(r, data, "binary_data", path, False),
    )


def check_protocols(r: Reader, functions: Mapping[str, FunctionConfig], platform: str) -> None:
    """V2 reaches a function only at a fixed URL or on Knative: the local platform relays V1."""
    for name, fn in functions.items():
        if fn.upstream.protocol == "v2" and fn.upstream.url is None and platform != "knative":
            raise r.fail(
                f"functions.{name}.upstream.protocol",
                "v2 needs upstream.url or adapter.platform: knative (the local platform "
                "relays V1 only)",
            )
