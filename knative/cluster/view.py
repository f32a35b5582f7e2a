"""The adapter's view of Knative Services on a cluster: each function's URL and Host header, its
replica counts (followed by watches, :mod:`knative.cluster.watch`, or polled where the Role
grants no watch), and pinning its minimum scale."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import urlsplit

from knative.cluster.client import KnativeClient
from knative.cluster.errors import AccessDeniedError, HookUnavailableError, KnativeError
from knative.cluster.pod_cores import PodCores, ResizeUnavailableError
from knative.cluster.watch import ServingWatch
from knative.local.events import ReplicaCounts
from slackwise_core.platform_errors import PinUnsupported

__all__ = ["KnativeView"]

logger = logging.getLogger(__name__)


class KnativeView:
    """The adapter's view of Knative Services, answered from the last poll.

    With ``ingress`` (an address such as ``192.0.2.10`` or ``192.0.2.10:8080``), :meth:`url`
    is ``http://INGRESS`` for every function and callers send :meth:`host_header` as ``Host``.
    ``functions`` is a list of Service names, or a mapping from each function to its Service
    (a KServe InferenceService ``m`` is served by the Knative Service ``m-predictor``).
    """

    def __init__(
        self,
        client: KnativeClient,
        functions: Sequence[str] | Mapping[str, str],
        *,
        ingress: str | None = None,
        domain: str = "svc.cluster.local",
        poll_s: float = 2.0,
        watch: bool = True,
    ) -> None:
        self._client = client
        self._services = (
            dict(functions) if isinstance(functions, Mapping) else {f: f for f in functions}
        )
        self._functions = list(self._services)
        self._ingress = ingress
        self._domain = domain
        self._poll_s = poll_s
        self._urls: dict[str, str] = {}
        self._counts: dict[str, ReplicaCounts] = {}
        self._task: asyncio.Task[None] | None = None
        self._watch = ServingWatch(client.api_client, client.namespace) if watch else None
        self._watching = False  # the watches have started (until then, and without, read)
        self._cores: PodCores | None = None  # made on the first set_cores

    def refresh(self) -> None:
        """Every function's URL and replicas: from the watches' cache, or read (blocking)."""
        if self._watch is not None and self._watching:
            for name in self._functions:
                service = self._services[name]
                url = self._watch.url(service, cluster_local=self._ingress is None)
                if url:
                    self._urls[name] = url
                counts = self._watch.replicas(service)
                if counts is not None:
                    self._counts[name] = counts
            return
        for name in self._functions:
            try:
                # in the cluster the Service's own address (status.address.url) reaches it
                # without leaving the cluster; through an ingress, its public URL's host is
                # the Host header (see host_header)
                service = self._services[name]
                self._urls[name] = self._client.url(service, cluster_local=self._ingress is None)
                self._counts[name] = self._client.ready_replicas(service)
            except KnativeError as exc:
                logger.warning("knative poll of %s failed: %s", name, exc)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            await asyncio.to_thread(self.refresh)

    async def start(self) -> None:
        """Start the watches (or, where the Role grants no list and watch, poll every
        ``poll_s``); the counts are known when this returns."""
        if self._watch is not None:
            try:
                await asyncio.to_thread(self._watch.start)
                self._watching = True
            except AccessDeniedError as exc:
                logger.warning(
                    "no watch on Knative's objects (%s): polling every %g s instead; "
                    "the Role `slackwise manifests` writes grants list and watch",
                    exc,
                    self._poll_s,
                )
                self._watch = None
            except KnativeError as exc:
                logger.warning("watching Knative's objects failed (%s): polling instead", exc)
                self._watch = None
        await asyncio.to_thread(self.refresh)
        self._task = asyncio.create_task(self._loop(), name="knative-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._watch is not None and self._watching:
            self._watching = False
            await asyncio.to_thread(self._watch.stop)

    def url(self, function: str) -> str:
        if self._ingress is not None:
            return f"http://{self._ingress}"
        if function not in self._urls:
            self._urls[function] = self._client.url(self._service(function))
        return self._urls[function]

    def _service(self, function: str) -> str:
        return self._services.get(function, function)

    def host_header(self, function: str) -> str:
        """``<svc>.<ns>.<domain>``: the Service URL's host, else built from ``domain``."""
        known = self._urls.get(function)
        if known is None:
            with contextlib.suppress(KnativeError):
                known = self._urls[function] = self._client.url(self._service(function))
        host = urlsplit(known).netloc if known else ""
        return host or f"{self._service(function)}.{self._client.namespace}.{self._domain}"

    def replicas(self, function: str) -> ReplicaCounts:
        return self._counts.get(function, ReplicaCounts(0, 0, 0, 0, 0))

    def request_headers(self, function: str) -> dict[str, str]:
        """``Host`` for the ingress when calling by its address (Knative's documented way)."""
        return {"host": self.host_header(function)} if self._ingress is not None else {}

    async def set_min_scale(self, function: str, replicas: int | None) -> None:
        """Pin the function's minimum replicas through the Revision's min-scale (the hook)."""
        with _classified(function):
            await asyncio.to_thread(self._client.set_min_scale, self._service(function), replicas)

    async def set_scale(
        self, function: str, replicas: int | None, *, owner: str = "", lease_s: float | None = None
    ) -> None:
        """Own the function's count: this owner's share recorded on its serving revisions, and
        min- and max-scale set together to the largest live share."""
        with _classified(function):
            await asyncio.to_thread(
                self._client.set_scale,
                self._service(function),
                replicas,
                owner=owner,
                lease_s=lease_s,
            )

    async def set_cores(self, function: str, cores: float | None) -> None:
        """The function's running pods resized in place to share ``cores``
        (:class:`knative.cluster.pod_cores.PodCores`; Kubernetes >= 1.33). None leaves them as
        they are: a pod's CPU is never unset, only resized."""
        if cores is None:
            return
        if self._cores is None:
            self._cores = PodCores(self._client.api_client, self._client.namespace)
        with _classified(function):
            try:
                results = await asyncio.to_thread(
                    self._cores.set_cores, self._service(function), cores
                )
            except ResizeUnavailableError as exc:  # not transient: the loop stops, once
                raise PinUnsupported(f"{function}: {exc}") from None
        for result in results:
            if not result.done:
                logger.info(
                    "%s: pod %s resize to %s pending: %s %s",
                    function,
                    result.pod,
                    result.asked,
                    result.pending,
                    result.message,
                )


@contextlib.contextmanager
def _classified(function: str) -> Iterator[None]:
    """Knative's errors as the autoscaling loop reads them: no hook in this version or no
    permission is :class:`PinUnsupported` (the advisor stops, with one warning naming what to
    do); anything else (a conflict, a 5xx, a revision not ready yet) is a RuntimeError, retried
    on the next tick."""
    try:
        yield
    except HookUnavailableError as exc:
        raise PinUnsupported(f"{function}: {exc}") from None
    except AccessDeniedError as exc:
        raise PinUnsupported(
            f"{function}: {exc}; grant the adapter's service account the Role that "
            "`slackwise manifests` writes (00-rbac.yaml)"
        ) from None
    except KnativeError as exc:
        raise RuntimeError(f"{function}: {exc}") from None
