"""How a batch reaches a function: in process to an embedded platform, or over HTTP.

- :class:`PlatformUpstream`: the platform runs in this process (``slackwise serve`` without
  ``--platform-url``). A batch goes straight to a ready replica through the platform's own request
  path (its activator counts the slot, its meter feeds the KPA), so the only HTTP hop is
  adapter → replica: no gateway in between, as Knative's activator steps out of the path when a
  revision has enough burst capacity.
- :class:`HttpUpstream`: the function is behind a URL (a remote local platform, a Knative
  Service, a fixed endpoint). Plain ``http://`` origins use the lean pooled client
  (:mod:`slackwise_core.http1`); anything else (TLS) goes through httpx.

:class:`Upstream` is the app's one seam for how batches leave (``create_app(upstream=...)``):
tests of the adapter's own logic inject a fake one, or serve these real ones real sockets.

Both answer with an :class:`slackwise_core.http1.Http1Response` and raise :class:`SendTimeout` or
:class:`SendFailed` when no answer came back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import httpx

from adapter.serving.errors import ServingError
from slackwise_core.http1 import (
    Http1ConnectionError,
    Http1Pool,
    Http1Response,
    Http1Timeout,
    Origin,
)

if TYPE_CHECKING:
    from adapter.serving.platform_view import PlatformView
    from knative.local.platform import LocalPlatform

__all__ = ["HttpUpstream", "PlatformUpstream", "SendFailed", "SendTimeout", "Upstream"]


class SendTimeout(ServingError):
    """No answer within the function's timeout."""


class SendFailed(ServingError):
    """The batch could not be delivered, or the connection broke before the answer."""


class Upstream(Protocol):
    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        """POST ``body`` to ``function``'s predict route and return the answer."""
        ...

    async def aclose(self) -> None: ...


class PlatformUpstream:
    """Batches handed to an in-process :class:`knative.local.platform.LocalPlatform`."""

    def __init__(self, platform: LocalPlatform) -> None:
        self._platform = platform

    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        # the platform applies the function's own timeout (504) and reports a broken replica
        # connection (502) as answers, as its gateway would
        content_type = headers.get("content-type", "application/json")
        answer = await self._platform.forward(function, body, content_type, headers)
        return Http1Response(answer.status, answer.headers, answer.body)

    async def aclose(self) -> None:
        return None


class HttpUpstream:
    """Batches POSTed to ``view.url(function)``; one lean pool per plain-HTTP origin."""

    def __init__(
        self,
        view: PlatformView,
        client: httpx.AsyncClient,
        *,
        paths: Mapping[str, str] | None = None,
    ) -> None:
        self._view = view
        self._client = client
        #: each function's request path (its protocol and model name); V1 with its own name else
        self._paths_of = dict(paths or {})
        self._pools: dict[Origin, Http1Pool] = {}
        self._paths: dict[str, tuple[Http1Pool, str] | None] = {}

    def _route(self, function: str) -> tuple[Http1Pool, str] | None:
        base = self._view.url(function)
        cached = self._paths.get(base + "\0" + function)
        if cached is not None:
            return cached
        try:
            origin, prefix = Origin.parse(base)
        except ValueError:
            return None
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = Http1Pool(origin, max_idle=256)
        route = (pool, f"{prefix}{self._path(function)}")
        self._paths[base + "\0" + function] = route
        return route

    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        route = self._route(function)
        if route is not None:
            pool, path = route
            try:
                return await pool.post(path, body, headers=headers, timeout_s=timeout_s)
            except Http1Timeout as exc:
                raise SendTimeout(str(exc)) from None
            except Http1ConnectionError as exc:
                raise SendFailed(str(exc)) from None
        url = f"{self._view.url(function)}{self._path(function)}"
        try:
            response = await self._client.post(
                url, content=body, headers=dict(headers), timeout=timeout_s
            )
        except httpx.TimeoutException as exc:
            raise SendTimeout(f"{type(exc).__name__}: {exc}") from None
        except httpx.HTTPError as exc:
            raise SendFailed(f"{type(exc).__name__}: {exc}") from None
        return Http1Response(response.status_code, response.headers, response.content)

    def _path(self, function: str) -> str:
        return self._paths_of.get(function) or f"/v1/models/{function}:predict"

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
        self._paths.clear()


class RoutedUpstream:
    """Each function to its own upstream (a fixed endpoint, or a V2 server, over HTTP), the
    rest to ``default``."""

    def __init__(self, default: Upstream, routes: Mapping[str, Upstream]) -> None:
        self._default = default
        self._routes = dict(routes)

    async def post(
        self, function: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> Http1Response:
        upstream = self._routes.get(function, self._default)
        return await upstream.post(function, body, headers, timeout_s)

    async def aclose(self) -> None:
        for upstream in {id(u): u for u in [self._default, *self._routes.values()]}.values():
            await upstream.aclose()
