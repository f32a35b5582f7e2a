"""What the adapter needs from the platform: where a function is, how many replicas serve it,
and (for the autoscaling advisor) a way to pin its minimum replicas.

:class:`LocalView` reads an in-process :class:`knative.local.platform.LocalPlatform` directly.
:class:`RemoteView` polls a local platform's admin API (``GET /platform/functions``) in the
background and answers from the last poll, so the request path never waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

import httpx

from adapter.serving.errors import ServingError
from knative.local.events import ReplicaCounts
from knative.local.guard import ENV_VAR as TOKEN_ENV
from knative.local.guard import read_token
from knative.local.platform import LocalPlatform
from slackwise_core.clock import Clock, MonotonicClock
from slackwise_core.platform_errors import PinUnsupported

__all__ = [
    "LocalView",
    "PinUnsupported",
    "PlatformUnreachable",
    "PlatformView",
    "RemoteView",
    "RoutedView",
    "StaticView",
]

logger = logging.getLogger(__name__)


class PlatformView(Protocol):
    def url(self, function: str) -> str: ...

    def replicas(self, function: str) -> ReplicaCounts: ...

    def request_headers(self, function: str) -> dict[str, str]:
        """Extra headers for calls to ``function`` (Knative through an ingress: ``Host``)."""
        ...

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        """Pin ``function``'s minimum replicas (None: back to its configured min-scale).
        Raises :class:`PinUnsupported` where the platform cannot be told."""
        ...

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        """Own ``function``'s replica count, as ``owner``'s share (the platform runs the largest
        live share; one not renewed within ``lease_s`` lapses). None withdraws this owner's
        share. Raises :class:`PinUnsupported` where the platform cannot be told."""
        ...

    async def set_cores(self, function: str, cores: float | None) -> None:
        """The CPU cores ``function``'s replicas share from now on (None: no limit; ROMA's
        actuation). Raises :class:`PinUnsupported` where the platform cannot be told."""
        ...


class PlatformUnreachable(ServingError, RuntimeError):
    """The platform the adapter was pointed at does not answer: the adapter cannot start."""


class LocalView:
    def __init__(self, platform: LocalPlatform) -> None:
        self._platform = platform

    @property
    def platform(self) -> LocalPlatform:
        """The in-process platform (the adapter hands it batches directly)."""
        return self._platform

    def url(self, function: str) -> str:
        return self._platform.url(function)

    def replicas(self, function: str) -> ReplicaCounts:
        return self._platform.replicas(function)

    def request_headers(self, function: str) -> dict[str, str]:
        return {}

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        await self._platform.set_min_scale(function, replicas)

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        await self._platform.set_scale(function, replicas, owner=owner, lease_s=lease_s)

    async def set_cores(self, function: str, cores: float | None) -> None:
        """A cgroup quota on the function's replicas (:meth:`LocalPlatform.set_cores`)."""
        self._platform.set_cores(function, cores)


class RemoteView:
    """A platform reached over HTTP; :meth:`start` polls every ``poll_s``."""

    def __init__(
        self,
        base_url: str,
        client: httpx.AsyncClient,
        *,
        poll_s: float = 0.2,
        clock: Clock | None = None,
        token: str | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        #: the platform's bearer token (SLACKWISE_PLATFORM_TOKEN, or the file `slackwise up`
        #: wrote for its port): sent with every call, predicts included
        token = token or read_token(self._base)
        self._auth = {"authorization": f"Bearer {token}"} if token else {}
        self._clock: Clock = clock or MonotonicClock()
        self._client = client
        self._poll_s = poll_s
        self._counts: dict[str, ReplicaCounts] = {}
        self._urls: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    async def refresh(self) -> None:
        response = await self._client.get(
            f"{self._base}/platform/functions", headers=self._auth, timeout=5.0
        )
        if response.status_code in (401, 403):
            raise PlatformUnreachable(
                f"the platform at {self._base} refused the adapter ({response.status_code}: "
                f"{response.text[:200]}); set {TOKEN_ENV} to its token, or run the adapter as "
                "the user whose `slackwise up` wrote it"
            )
        response.raise_for_status()
        for item in response.json()["functions"]:
            self._counts[item["name"]] = ReplicaCounts(**item["replicas"])
            self._urls[item["name"]] = item["url"]

    async def _loop(self) -> None:
        while True:
            await self._clock.sleep(self._poll_s)
            try:
                await self.refresh()
            except (httpx.HTTPError, KeyError, ValueError, PlatformUnreachable) as exc:
                logger.warning("platform poll failed: %s", exc)

    async def start(self) -> None:
        try:
            await self.refresh()
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise PlatformUnreachable(
                f"the platform at {self._base} did not list its functions "
                f"(GET /platform/functions: {exc or type(exc).__name__}); start it with "
                "`slackwise up -c CONFIG` or point --platform-url at a running one"
            ) from None
        self._task = asyncio.create_task(self._loop(), name="platform-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def url(self, function: str) -> str:
        return self._urls.get(function, self._base)

    def replicas(self, function: str) -> ReplicaCounts:
        return self._counts.get(function, ReplicaCounts(0, 0, 0, 0, 0))

    def request_headers(self, function: str) -> dict[str, str]:
        return dict(self._auth)

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        """``PUT /platform/functions/{function}/min-scale`` on the platform's admin API."""
        await self._put(function, "min-scale", {"min_scale": replicas})

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        """``PUT /platform/functions/{function}/scale`` on the platform's admin API."""
        await self._put(
            function, "scale", {"replicas": replicas, "frontend": owner, "lease_s": lease_s}
        )

    async def set_cores(self, function: str, cores: float | None) -> None:
        """``PUT /platform/functions/{function}/cores`` on the platform's admin API."""
        await self._put(function, "cores", {"cores": cores})

    async def _put(self, function: str, what: str, body: dict[str, object]) -> None:
        response = await self._client.put(
            f"{self._base}/platform/functions/{function}/{what}",
            json=body,
            headers=self._auth,
            timeout=5.0,
        )
        if response.status_code != 200:
            raise RuntimeError(
                f"setting {what} of {function} to {body}: the platform answered "
                f"{response.status_code}: {response.text[:200]}"
            )


class StaticView:
    """Fixed endpoints, e.g. a KServe or TF Serving model already running, or a bare process.

    Every function is taken as served by ``replicas`` ready replicas at its URL.
    """

    def __init__(self, urls: dict[str, str], *, replicas: int = 1) -> None:
        self._urls = dict(urls)
        self._counts = ReplicaCounts(replicas, 0, 0, replicas, replicas)

    def url(self, function: str) -> str:
        return self._urls[function]

    def replicas(self, function: str) -> ReplicaCounts:
        return self._counts

    def request_headers(self, function: str) -> dict[str, str]:
        return {}

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        raise PinUnsupported(f"{function} runs at a fixed endpoint: there is no scale to pin")

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        raise PinUnsupported(f"{function} runs at a fixed endpoint: there is no scale to set")

    async def set_cores(self, function: str, cores: float | None) -> None:
        raise PinUnsupported(f"{function} runs at a fixed endpoint: its cores are not ours to set")


class RoutedView:
    """Some functions at fixed endpoints (``functions.X.upstream.url``), the rest on the
    platform behind ``base``."""

    def __init__(self, base: PlatformView, fixed: StaticView, names: set[str]) -> None:
        self._base = base
        self._fixed = fixed
        self._names = set(names)

    @property
    def base(self) -> PlatformView:
        """The platform behind the functions that are not at fixed endpoints."""
        return self._base

    def _for(self, function: str) -> PlatformView:
        return self._fixed if function in self._names else self._base

    def url(self, function: str) -> str:
        return self._for(function).url(function)

    def replicas(self, function: str) -> ReplicaCounts:
        return self._for(function).replicas(function)

    def request_headers(self, function: str) -> dict[str, str]:
        return self._for(function).request_headers(function)

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        await self._for(function).set_min_scale(function, replicas)

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        await self._for(function).set_scale(function, replicas, owner=owner, lease_s=lease_s)

    async def set_cores(self, function: str, cores: float | None) -> None:
        await self._for(function).set_cores(function, cores)
